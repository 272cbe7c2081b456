"""The scalar types the fuzzer's expressions have, and NumPy's rules for them.

A type is a string: a NumPy dtype name ('int8', 'float32', 'bool') for a strong scalar,
'int' and 'float' for Python's weak int and float, and 'pybool' for a Python bool
(what a comparison of two Python numbers gives). Result types are asked of NumPy
itself, by applying the operation to sample values, so the generator follows NEP 50
exactly as the reference will run it. This module knows nothing of kernels."""
from __future__ import annotations

import functools
import operator
import warnings

import numpy as np

SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGERS = SIGNED + UNSIGNED
FLOATS = ("float32", "float64")
FLOAT16 = "float16"
WEAK_INT, WEAK_FLOAT, PY_BOOL = "int", "float", "pybool"

BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}

INT64_RANGE = (-2**63, 2**63 - 1)


def numpy_semantics_check() -> None:
    """The reference needs NumPy 2's scalar rules (NEP 50)."""
    major = int(np.__version__.split(".")[0])
    if major < 2:
        setter = getattr(np, "_set_promotion_state", None)
        if setter is None:
            raise RuntimeError(f"the fuzzer needs NumPy >= 2 (NEP 50), found {np.__version__}")
        setter("weak")


def is_weak(t: str) -> bool:
    return t in (WEAK_INT, WEAK_FLOAT, PY_BOOL)


def is_integer(t: str) -> bool:
    return t in INTEGERS or t == WEAK_INT


def is_float(t: str) -> bool:
    return t in FLOATS or t in (FLOAT16, WEAK_FLOAT)


def is_bool(t: str) -> bool:
    return t in ("bool", PY_BOOL)


def integer_range(t: str) -> tuple[int, int]:
    if t == WEAK_INT:
        return INT64_RANGE
    if t == "bool":
        return (0, 1)
    info = np.iinfo(t)
    return int(info.min), int(info.max)


def bits(t: str) -> int:
    return 64 if is_weak(t) else np.dtype(t).itemsize * 8


def sample(t: str):
    """A value of type `t` that makes every operator defined (1, or True)."""
    if t == WEAK_INT:
        return 1
    if t == WEAK_FLOAT:
        return 1.0
    if t == PY_BOOL:
        return True
    return np.dtype(t).type(1)


def type_of(value) -> str:
    if isinstance(value, np.generic):
        return value.dtype.name
    if isinstance(value, bool):
        return PY_BOOL
    if isinstance(value, int):
        return WEAK_INT
    if isinstance(value, float):
        return WEAK_FLOAT
    raise TypeError(f"not a scalar: {value!r}")


@functools.lru_cache(maxsize=None)
def binary_result(op: str, left: str, right: str) -> str | None:
    """The type NumPy gives `left op right`, or None where it raises."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return type_of(BINARY_OPERATORS[op](sample(left), sample(right)))
    except Exception:   # NumPy refuses the combination (TypeError, UFuncTypeError)
        return None


@functools.lru_cache(maxsize=None)
def comparison_result(left: str, right: str) -> str | None:
    try:
        return type_of(sample(left) < sample(right))
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def unary_result(op: str, t: str) -> str | None:
    functions = {"-": operator.neg, "~": operator.invert, "abs": abs}
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return type_of(functions[op](sample(t)))
    except Exception:
        return None
