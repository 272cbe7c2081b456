"""Reading a kernel's Python source: the parsed function with its file and lines, the
values its closure captured, and how a piece of the syntax tree is named in an error.

A function's source is found, in this order:

1. where Python keeps it: the function's file, or `linecache` (which holds Jupyter and
   IPython cells, Python 3.13's prompt, and the text a program registers there);
2. in a text given to kernelkit, `kk.kernel(fn, source=text)`: every function the text
   defines (the kernel, and the device functions it calls) is found there by its code
   object, so the text that was given to `exec()` serves them all;
3. in the command of `python -c`, which `sys.orig_argv` still holds.

A given text is registered in `linecache` under a name of its own (`<string#1a2b3c4d>`),
so that `inspect`, error messages and the runtime's error reports read it as a file.

This module knows Python's `inspect`, `ast` and `linecache`; it knows nothing of the IR or
of how the tree is translated."""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import sys
import textwrap
import threading
import types
import weakref
from dataclasses import dataclass

from ..errors import CompileError, KernelkitError


@dataclass(frozen=True)
class ParsedSource:
    tree: ast.FunctionDef
    file: str
    first_line: int
    lines: tuple[str, ...]


@functools.lru_cache(maxsize=512)
def parse_function(pyfunc) -> ParsedSource:
    lines, first_line, file, all_lines = _source_lines(pyfunc)
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{pyfunc.__qualname__} is not a plain function definition",
                           function=pyfunc.__name__, file=file, line=first_line,
                           source_line=lines[0],
                           hint="lambdas and async functions cannot be compiled; use a def")
    ast.increment_lineno(tree, first_line - 1)
    return ParsedSource(tree, file, first_line, tuple(all_lines))


def _source_lines(pyfunc) -> tuple[list[str], int, str, list[str]]:
    """The lines of `pyfunc`'s definition, its first line's number, its file, and all
    lines of that file."""
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError) as error:
        reason = str(error)
    else:
        file = inspect.getsourcefile(pyfunc) or "<unknown>"
        return lines, first_line, file, linecache.getlines(file)
    given = _given_source(pyfunc.__code__)
    if given is None:
        raise _unreadable(pyfunc, reason)
    first_line = pyfunc.__code__.co_firstlineno
    return (inspect.getblock(list(given.lines[first_line - 1:])), first_line, given.file,
            list(given.lines))


# -- source that Python did not keep --------------------------------------------------------

@dataclass(frozen=True, eq=False)
class GivenSource:
    """A text given to kernelkit as the source of functions it defines."""

    file: str                    # its name in linecache and in error messages
    lines: tuple[str, ...]
    tree: ast.Module


_GIVEN_TEXTS: dict[tuple[str, str], GivenSource] = {}   # (file compiled as, text) -> it
_GIVEN_CODE: dict[types.CodeType, GivenSource] = {}     # each function a text defines
_KERNELS: weakref.WeakSet = weakref.WeakSet()           # the Python functions of kernels
_COMMAND_READ = False
_COMMAND_LOCK = threading.Lock()   # the command is read and registered once, whole


def kernel_function(function, source: str | None = None):
    """The Python function to compile for the kernel `@kk.kernel` makes of `function`:
    `function` itself, or, where `source` is given, a copy whose code is read from
    `source` (registered as a file of its own). `source` may be the whole text that
    defined `function` (as given to `exec`) or its definition alone."""
    if source is not None:
        function = _with_source(function, source)
    _KERNELS.add(function)
    return function


def _with_source(function, text: str):
    name = function.__qualname__
    if not isinstance(text, str):
        raise KernelkitError(f"kk.kernel({name}, source=...) takes the text of the source as a "
                             f"str, got {type(text).__name__}")
    code = function.__code__
    given = register_source(text, code.co_filename, name)
    first_line = code.co_firstlineno if _GIVEN_CODE.get(code) is given else \
        _definition_line(given, function)
    copy = types.FunctionType(code.replace(co_filename=given.file, co_firstlineno=first_line),
                              function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__, copy.__module__ = function.__qualname__, function.__module__
    copy.__doc__, copy.__annotations__ = function.__doc__, function.__annotations__
    copy.__dict__.update(function.__dict__)
    _GIVEN_CODE[copy.__code__] = given
    return copy


def register_source(text: str, compiled_as: str, kernel: str | None = None) -> GivenSource:
    """Make `text`, which Python compiled under the file name `compiled_as`, the source of
    every function it defines."""
    given = _GIVEN_TEXTS.get((compiled_as, text))
    if given is not None:
        return given
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    file = f"{compiled_as[:-1]}#{digest}>" if compiled_as.startswith("<") and \
        compiled_as.endswith(">") else f"<{compiled_as}#{digest}>"
    try:
        code = compile(text, file, "exec", dont_inherit=True)
        tree = ast.parse(text)
    except SyntaxError:
        try:   # the definition of a nested function, still indented
            code = compile(textwrap.dedent(text), file, "exec", dont_inherit=True)
            tree = ast.parse(textwrap.dedent(text))
        except SyntaxError as error:
            raise CompileError(f"the source given for kernel '{kernel}' is not valid "
                               f"Python: {error.msg}", kernel=kernel, file=file, line=error.lineno,
                               source_line=error.text) from None
    lines = tuple(text.splitlines(keepends=True))
    given = GivenSource(file, lines, tree)
    _GIVEN_TEXTS[(compiled_as, text)] = given
    for function_code in _function_code(code):
        _GIVEN_CODE[function_code] = given
    linecache.cache[file] = (len(text), None, list(lines), file)
    return given


def _function_code(code: types.CodeType):
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield constant
            yield from _function_code(constant)


def _definition_line(given: GivenSource, function) -> int:
    """The first line (its first decorator's) of the one definition of `function` in a
    text that was not the text Python compiled it from."""
    name = function.__name__
    definitions = [node for node in ast.walk(given.tree)
                   if isinstance(node, ast.FunctionDef) and node.name == name]
    first_lines = [node.decorator_list[0].lineno if node.decorator_list else node.lineno
                   for node in definitions]
    if function.__code__.co_firstlineno in first_lines:
        return function.__code__.co_firstlineno
    if len(first_lines) == 1:
        return first_lines[0]
    what = "no definition" if not first_lines else f"{len(first_lines)} definitions"
    raise CompileError(f"the source given for kernel '{name}' has {what} of {name}()",
                       kernel=name, hint="pass the text that defines the kernel: the one "
                                         "given to exec() or compile(), or its def alone")


def _given_source(code: types.CodeType) -> GivenSource | None:
    global _COMMAND_READ
    given = _GIVEN_CODE.get(code)
    if given is None and code.co_filename == "<string>":
        with _COMMAND_LOCK:
            if not _COMMAND_READ:
                command = _command_line_source()
                if command is not None:
                    register_source(command, "<string>")
                _COMMAND_READ = True
        given = _GIVEN_CODE.get(code)
    if given is not None and given.file not in linecache.cache:  # linecache was cleared
        linecache.cache[given.file] = (sum(map(len, given.lines)), None, list(given.lines),
                                       given.file)
    return given


def _command_line_source() -> str | None:
    """The command of `python -c command`, or None where Python was not run so."""
    arguments = getattr(sys, "orig_argv", [])
    position = 1
    while position < len(arguments):
        argument = arguments[position]
        if argument in ("-", "--") or not argument.startswith("-"):
            return None   # a script, a module or standard input
        if argument.startswith("--"):
            position += 2 if argument == "--check-hash-based-pycs" else 1
            continue
        for offset, option in enumerate(argument[1:], start=2):
            if option == "c":
                rest = argument[offset:]
                return rest if rest else (arguments[position + 1]
                                          if position + 1 < len(arguments) else None)
            if option == "m":
                return None
            if option in "WX":   # -W and -X take a value: the rest, or the next argument
                position += 0 if argument[offset:] else 1
                break
        position += 1
    return None


def _unreadable(pyfunc, reason: str) -> CompileError:
    kernel = pyfunc in _KERNELS
    what = "kernel" if kernel else "device function"
    origin = {"<string>": "it was defined by exec() or python -c",
              "<stdin>": "it was typed at the interactive prompt or read from standard input"
              }.get(pyfunc.__code__.co_filename, reason)
    where = "in a file, a Jupyter or IPython cell, or at the prompt of Python 3.13 or later"
    if kernel:
        hint = (f"define it {where}; or pass its source text: "
                f"kk.kernel({pyfunc.__name__}, source=text)")
    else:
        hint = (f"define it {where}; or in the text given as the source of the kernel that "
                f"calls it: kk.kernel(kernel, source=text)")
    return CompileError(f"cannot read the source of {what} '{pyfunc.__qualname__}': Python "
                        f"did not keep it ({origin})", kernel=pyfunc.__name__ if kernel else None,
                        function=None if kernel else pyfunc.__name__, hint=hint)


# -- closures and names in errors -----------------------------------------------------------

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
