"""Specialization: a kernel or device function is translated for the types of its
arguments, so every expression is typed as it is translated.

A variable that takes values of several types is given their unified type (NumPy
promotion); when a loop or a later return reveals this only after code was translated, the
translator raises `Retype` with the wider type recorded in `TypeHints`, and the function is
translated again from the start with that hint; the same way, a loop over a constant range
whose variable turns out to index a tuple is recorded to be unrolled. This module owns that
loop, the state shared by the translation of a kernel and every function it calls, and the
driver's entry points (`translate_kernel`, then `resolve_deferred`). How one function is
translated is `translate.FunctionTranslator`'s."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CompileError
from ..ir import types as T
from ..ir.function import Function, Module


class Retype(Exception):
    """Raised when a variable turned out to need a wider type than it was given, or a loop
    to be unrolled."""


@dataclass
class TypeHints:
    variables: dict[str, T.IRType] = field(default_factory=dict)
    return_type: T.IRType | None = None
    unrolled_loops: set[tuple[int, int]] = field(default_factory=set)   # (line, column)


@dataclass
class TranslationContext:
    """State shared by the translation of a kernel and every device function it calls."""

    module: Module
    kernel_name: str
    workgroupsize: tuple[int, ...]
    specializations: dict = field(default_factory=dict)
    stack: list = field(default_factory=list)
    debug: bool = False       # a debug build: `assert` statements are checked
    # The dataclass each device function returning one returns (by function name): its IR
    # result is the tuple of the dataclass's leaves.
    struct_results: dict = field(default_factory=dict)


# Each retype widens one variable's type, and a type widens only a few times (bool, int,
# float32, float64): the translation settles within this many tries per variable.
RETYPES_PER_VARIABLE = 4


def translate_kernel(pyfunc, argtypes: tuple[T.IRType, ...],
                     workgroupsize: tuple[int, ...], debug: bool = False) -> Module:
    module = Module()
    context = TranslationContext(module, pyfunc.__name__, workgroupsize, debug=debug)
    translate_function(context, pyfunc, list(argtypes), is_kernel=True, name=pyfunc.__name__)
    # The kernel must come first in the module.
    kernel = module.functions.pop(pyfunc.__name__)
    module.functions = {kernel.name: kernel, **module.functions}
    return module


def resolve_deferred(module: Module, workgroupsize: tuple[int, ...],
                     debug: bool = False) -> None:
    """The worklist of `kk.deferred` requests: translate each requested function into the
    module (a translated function may ask for more)."""
    context = TranslationContext(module, module.kernel.name, workgroupsize, debug=debug)
    while True:
        pending = [(name, request) for name, request in module.deferred.items()
                   if name not in module.functions]
        if not pending:
            return
        for name, (pyfunc, argtypes) in pending:
            # On the stack, as when `Calls.defer` first translated it for its type.
            context.stack = [pyfunc]
            translate_function(context, pyfunc, list(argtypes), is_kernel=False, name=name)


def translate_function(context: TranslationContext, pyfunc, args: list, *, is_kernel: bool,
                       name: str) -> Function:
    hints = TypeHints()
    tries = 0
    while tries <= RETYPES_PER_VARIABLE * (len(hints.variables) + 1) + len(hints.unrolled_loops):
        tries += 1
        translator = translate.FunctionTranslator(context, pyfunc, args, is_kernel, name, hints)
        try:
            function = translator.translate()
        except Retype:
            continue
        context.module.add(function)
        return function
    raise CompileError("the types of the variables do not settle", kernel=context.kernel_name,
                       function=pyfunc.__name__)


# Last: the translator calls back into this module (for every device function it
# specializes), so it is imported once the names above exist, whichever module a
# program imports first.
from . import translate  # noqa: E402
