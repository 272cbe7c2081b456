"""The layering that ARCHITECTURE.md and the README state, checked on the source (parsed,
never imported, so a rule broken inside a function that no test calls is still seen):

- `backends` and `enzyme_ext` import `kernelkit`; `kernelkit` imports neither;
- `enzyme_ext` never imports a backend (it reaches them through
  `compiler_job_from_backend`);
- the IR is the bottom of the compiler: `kernelkit.ir` imports, of kernelkit, only
  itself and `kernelkit.errors`; `kernelkit.analysis` only the IR and itself;
- a command-line module (`__main__`) is imported by no module outside its package;
- an operation's opcode is text for the printer, the parser and messages: code asks the
  operation's definition (`is_op(op, ADD)`, `op.definition is LOAD`), so outside
  `ir/printer.py` and `ir/parser.py` an `.opcode` is read only inside an f-string.

Imports under `if TYPE_CHECKING:` never run and are left out."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("kernelkit", "backends", "enzyme_ext")
TEXT_MODULES = {"kernelkit.ir.printer", "kernelkit.ir.parser"}   # may read `.opcode` freely


@dataclass(frozen=True)
class Import:
    importer: str      # the importing module, as `a.b.c`
    imported: str      # the module (or the module's member) imported, absolute
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = (path, ast.parse(path.read_text(), str(path)))
    return found


SOURCES = _sources()


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk_run_time(node: ast.AST):
    """The nodes under `node`, except the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk_run_time(other)
            continue
        yield child
        yield from _walk_run_time(child)


def _imports(module: str, path: Path, tree: ast.Module) -> list[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in _walk_run_time(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            # `from a import b` may name a submodule a.b: record a.b, which a rule on a
            # package a matches too.
            found += [Import(module, f"{base}.{alias.name}", node.lineno)
                      for alias in node.names]
    return found


IMPORTS = [found for module, (path, tree) in SOURCES.items()
           for found in _imports(module, path, tree)]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _breaking(importers: str, forbidden) -> str:
    """The imports by modules of `importers` of a module that is `forbidden`, a line each."""
    return "\n".join(str(found) for found in IMPORTS
                     if _within(found.importer, importers) and forbidden(found.imported))


def test_the_parser_reads_every_module_and_its_relative_imports():
    assert {"kernelkit.ir.verifier", "backends.cpu", "enzyme_ext.fuzz"} <= set(SOURCES)
    assert Import("kernelkit.ir.builder", "kernelkit.ir.types", 16) in IMPORTS


@pytest.mark.parametrize("extension", ["backends", "enzyme_ext"])
def test_kernelkit_imports_neither_backends_nor_enzyme_ext(extension):
    broken = _breaking("kernelkit", lambda name: _within(name, extension))
    assert not broken, broken


def test_enzyme_ext_imports_no_backend():
    broken = _breaking("enzyme_ext", lambda name: _within(name, "backends"))
    assert not broken, broken


@pytest.mark.parametrize("layer, allowed", [
    ("kernelkit.ir", ("kernelkit.ir", "kernelkit.errors")),
    ("kernelkit.analysis", ("kernelkit.ir", "kernelkit.analysis", "kernelkit.errors")),
])
def test_a_lower_layer_imports_no_layer_above_it(layer, allowed):
    broken = _breaking(layer, lambda name: _within(name, "kernelkit") and
                       not any(_within(name, other) for other in allowed))
    assert not broken, broken


def test_no_module_imports_another_package_s_command_line():
    def breaks(found: Import) -> bool:
        parts = found.imported.split(".")
        if "__main__" not in parts:
            return False
        package = ".".join(parts[:parts.index("__main__")])
        return not _within(found.importer, package)
    broken = [str(found) for found in IMPORTS if breaks(found)]
    assert not broken, "\n".join(broken)


def _opcode_reads(tree: ast.Module) -> list[int]:
    """Lines that read an `.opcode` outside an f-string."""
    in_text = {id(node) for joined in ast.walk(tree) if isinstance(joined, ast.JoinedStr)
               for node in ast.walk(joined)}
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == "opcode"
                  and id(node) not in in_text)


def test_no_code_compares_opcode_strings():
    found = [f"{module}:{line}" for module, (_, tree) in SOURCES.items()
             if module not in TEXT_MODULES for line in _opcode_reads(tree)]
    assert not found, "\n".join(found)


def test_the_opcode_rule_sees_a_comparison_and_lets_a_message_pass():
    tree = ast.parse('if op.opcode in ("eq", "ne"):\n'
                     '    raise ValueError(f"{op.opcode} of two arrays")\n')
    assert _opcode_reads(tree) == [1]
