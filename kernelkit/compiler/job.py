"""What to compile: a `CompilerJob(source, config)`, frozen, hashable and cheap.

`source` names the function by content (qualified name, source hash, argument types,
captured constants), never by object identity; `config` holds every flag that changes
the output. Everything that changes the artifact is in the job, so the job is the key
of the in-memory cache."""
from __future__ import annotations

import hashlib
import inspect
import marshal
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.types import IRType
from .target import Target


@dataclass(frozen=True, slots=True)
class FunctionSource:
    qualname: str
    module: str
    source_hash: str
    argtypes: tuple[IRType, ...]
    constants: tuple[tuple[str, Any], ...] = ()
    # The Python function itself, to translate; not part of the identity.
    function: Any = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True, slots=True)
class CompilerConfig:
    target: Target
    kernel: bool = True
    workgroupsize: tuple[int, ...] = ()
    opt_level: int = 3
    debug: bool = False
    params: tuple[tuple[str, Any], ...] = ()
    # Markers the job puts at the start of its kernel, each (name, ((attribute, value),
    # ...)): how a job asks a compiler plugin to transform the kernel it compiles (AD's
    # derivative kernels are the primal's job with a transform). They are in the IR
    # text from the frontend's dump on, so an offline replay sees them.
    transforms: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class CompilerJob:
    source: FunctionSource
    config: CompilerConfig


_source_hashes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def source_hash(pyfunc) -> str:
    """A digest of a function's source text (read once per function object)."""
    digest = _source_hashes.get(pyfunc)
    if digest is None:
        try:
            text = inspect.getsource(pyfunc).encode()
        except (OSError, TypeError):
            # No source to read (a function exec'd from a string the frontend was given
            # the text of): its code object, constants and names included.
            text = marshal.dumps(pyfunc.__code__)
        digest = _source_hashes[pyfunc] = hashlib.sha256(text).hexdigest()[:16]
    return digest


def captured_constants(pyfunc, _seen: frozenset = frozenset()) -> tuple[tuple[str, Any], ...]:
    """The values a function reads from its closure and module globals that are compiled
    into it: numbers (as constants) and the functions it may call (by content), so they
    belong to its identity."""
    seen = _seen | {pyfunc}
    code = pyfunc.__code__
    values = []
    if pyfunc.__closure__:
        for name, cell in zip(code.co_freevars, pyfunc.__closure__):
            try:
                values.append((name, _captured_key(cell.cell_contents, code, seen)))
            except ValueError:  # an empty cell
                continue
    for name in code.co_names:
        if name in pyfunc.__globals__:
            values.append((name, _captured_key(pyfunc.__globals__[name], code, seen)))
    return tuple((n, v) for n, v in values if v is not None)


def _captured_key(value, code, seen: frozenset):
    """A module counts by the attributes the code names that it has (`module.function`,
    `module.CONSTANT`); kernelkit's own modules are the language, not the kernel's."""
    if inspect.ismodule(value):
        if value.__name__.split(".")[0] == "kernelkit":
            return None
        attributes = tuple((attribute, _constant_key(vars(value)[attribute], seen))
                           for attribute in code.co_names if attribute in vars(value))
        return ("module", value.__name__, tuple(a for a in attributes if a[1] is not None))
    return _constant_key(value, seen)


def _constant_key(value, seen: frozenset):
    if isinstance(value, float):
        return ("float", repr(value))  # 0.0 and -0.0 compile differently
    if isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return (value.dtype.str, repr(value.item()))
    if isinstance(value, tuple):
        keys = tuple(_constant_key(v, seen) for v in value)
        return None if None in keys else keys
    if inspect.isfunction(value):
        if value in seen:
            return ("function", value.__module__, value.__qualname__)
        return ("function", value.__module__, value.__qualname__, source_hash(value),
                captured_constants(value, seen), _defaults_key(value, seen))
    if isinstance(value, np.ufunc):
        return ("ufunc", value.__name__)
    if inspect.isbuiltin(value) or inspect.isclass(value):
        # A function of Python or NumPy the language compiles (math.sqrt, abs), or a
        # type used as a cast (np.float32, int): by name, as the frontend finds it.
        return ("builtin", getattr(value, "__module__", None), value.__qualname__)
    return None


def _defaults_key(function, seen: frozenset) -> tuple:
    """A device function's default argument values, which calls that leave them out
    compile in (`def f(x, s=scale)` made by a factory differs from call to call)."""
    def key(value):
        return ("None",) if value is None else _constant_key(value, seen) or repr(value)
    keywords = sorted((function.__kwdefaults__ or {}).items())
    return (tuple(key(value) for value in function.__defaults__ or ()),
            tuple((name, key(value)) for name, value in keywords))


def function_source(pyfunc, argtypes: tuple[IRType, ...], source_digest: str | None = None
                    ) -> FunctionSource:
    return FunctionSource(pyfunc.__qualname__, pyfunc.__module__,
                          source_digest or source_hash(pyfunc), tuple(argtypes),
                          captured_constants(pyfunc), pyfunc)
