"""Reading a kernel's Python source: the parsed function with its file and lines, the
values its closure captured, and how a piece of the syntax tree is named in an error.

This module knows Python's `inspect`, `ast` and `linecache`; it knows nothing of the IR or
of how the tree is translated."""
from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import CompileError


@dataclass(frozen=True)
class ParsedSource:
    tree: ast.FunctionDef
    file: str
    first_line: int
    lines: tuple[str, ...]


@functools.lru_cache(maxsize=512)
def parse_function(pyfunc) -> ParsedSource:
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError) as error:
        raise CompileError(f"cannot read the source of {pyfunc.__qualname__}: {error}",
                           function=pyfunc.__name__,
                           hint="kernels and device functions must be defined in a file, "
                                "not typed at an interactive prompt") from None
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{pyfunc.__qualname__} is not a plain function definition",
                           function=pyfunc.__name__, file=inspect.getsourcefile(pyfunc),
                           line=first_line, source_line=lines[0],
                           hint="lambdas and async functions cannot be compiled; use a def")
    ast.increment_lineno(tree, first_line - 1)
    file = inspect.getsourcefile(pyfunc) or "<unknown>"
    all_lines = tuple(_read_lines(file))
    return ParsedSource(tree, file, first_line, all_lines)


def _read_lines(file: str) -> list[str]:
    return linecache.getlines(file)


def closure_values(pyfunc) -> dict:
    """The values of the variables `pyfunc` captured from enclosing functions, by name
    (a cell not yet assigned is left out)."""
    if not pyfunc.__closure__:
        return {}
    values = {}
    for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            pass
    return values


def last_line(tree: ast.FunctionDef) -> int:
    """The last source line of a function's body."""
    return getattr(tree.body[-1], "end_lineno", tree.body[-1].lineno)


def describe(node) -> str:
    """A syntax node as the source text it came from, for error messages."""
    try:
        return ast.unparse(node)
    except Exception:
        return type(node).__name__
