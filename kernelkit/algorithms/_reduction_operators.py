"""The operators reductions and scans combine elements with, and the types they do it in.

An operator is what `reduce(op, x)` and `accumulate(op, x)` are given: a device function
of two arguments (a plain Python function a kernel can call), or one of Python's and
NumPy's spellings of a common operation (`operator.add`, `min`, `np.maximum` ...), which
become kernelkit's own device functions with NumPy's identity and NaN rules. This module
also owns the accumulator's dtype: the type a reduction combines in, by NumPy's rules
(NEP 50) for the known operations, and by what the functions give on the host for a
user's own.

It knows no backend and launches nothing."""
from __future__ import annotations

import builtins
import inspect
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np


# -- the device functions of the known operations ----------------------------------------

def add(a, b):
    return a + b


def multiply(a, b):
    return a * b


def minimum(a, b):
    """NumPy's `np.minimum`: NaN if either is NaN (Python's `min` keeps its first argument
    when the second is NaN); on a tie, `a`."""
    return a if a != a or a <= b else b


def maximum(a, b):
    """NumPy's `np.maximum`: NaN if either is NaN; on a tie, `a`."""
    return a if a != a or a >= b else b


def bitwise_and(a, b):
    return a & b


def bitwise_or(a, b):
    return a | b


def bitwise_xor(a, b):
    return a ^ b


def same(value):
    """The mapping of a plain reduction: each element as it is."""
    return value


def is_nonzero(value):
    """The mapping of `any` and `all`: NumPy's truth of a number (NaN is true)."""
    return value != 0


def smaller_for_argmin(candidate, value):
    """Whether `candidate` replaces `value`, which comes before it, as argmin's choice:
    the first NaN wins (NumPy's argmin returns it), else the first of the smallest."""
    return candidate < value or (candidate != candidate and value == value)


def larger_for_argmax(candidate, value):
    """Whether `candidate` replaces `value`, which comes before it, as argmax's choice:
    the first NaN wins, else the first of the largest."""
    return candidate > value or (candidate != candidate and value == value)


# -- operators ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Operator:
    """A binary operation as reductions and scans use it.

    `function` is the device function kernels call. `identity(dtype)` is the value `e`
    with `function(e, v) == v` for every `v` of that dtype, or None where there is none;
    `reduces_empty` says whether NumPy's ufunc has an identity, so that reducing nothing
    gives it (`np.sum([])` is 0, `np.min([])` raises even though +inf would do for
    floats: exclusive scans start from it). `widens_integers`: NumPy's `add.reduce` and
    `multiply.reduce` compute small integers and bools in the platform's integer.
    `integers_only`: bitwise operations, for bools and integers."""
    name: str
    function: Callable
    identity: Callable[[np.dtype], object] | None = None
    reduces_empty: bool = False
    widens_integers: bool = False
    integers_only: bool = False


def _zero(dtype: np.dtype):
    return dtype.type(0)


def _one(dtype: np.dtype):
    return dtype.type(1)


def _all_bits(dtype: np.dtype):
    if dtype.kind == "b":
        return np.True_
    return dtype.type(-1) if dtype.kind == "i" else np.iinfo(dtype).max


def _largest(dtype: np.dtype):
    if dtype.kind == "b":
        return np.True_
    if dtype.kind == "f":
        return dtype.type(np.inf)
    return np.iinfo(dtype).max


def _smallest(dtype: np.dtype):
    if dtype.kind == "b":
        return np.False_
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    return np.iinfo(dtype).min


ADD = Operator("add", add, _zero, reduces_empty=True, widens_integers=True)
MULTIPLY = Operator("multiply", multiply, _one, reduces_empty=True, widens_integers=True)
MINIMUM = Operator("minimum", minimum, _largest)
MAXIMUM = Operator("maximum", maximum, _smallest)
BITWISE_AND = Operator("bitwise_and", bitwise_and, _all_bits, reduces_empty=True,
                       integers_only=True)
BITWISE_OR = Operator("bitwise_or", bitwise_or, _zero, reduces_empty=True, integers_only=True)
BITWISE_XOR = Operator("bitwise_xor", bitwise_xor, _zero, reduces_empty=True,
                       integers_only=True)

KNOWN_OPERATORS: dict[object, Operator] = {
    operator.add: ADD, np.add: ADD, add: ADD,
    operator.mul: MULTIPLY, np.multiply: MULTIPLY, multiply: MULTIPLY,
    builtins.min: MINIMUM, np.minimum: MINIMUM, minimum: MINIMUM,
    builtins.max: MAXIMUM, np.maximum: MAXIMUM, maximum: MAXIMUM,
    operator.and_: BITWISE_AND, np.bitwise_and: BITWISE_AND, bitwise_and: BITWISE_AND,
    operator.or_: BITWISE_OR, np.bitwise_or: BITWISE_OR, bitwise_or: BITWISE_OR,
    operator.xor: BITWISE_XOR, np.bitwise_xor: BITWISE_XOR, bitwise_xor: BITWISE_XOR,
}
"""Python's and NumPy's spellings of the operations kernelkit has a device function for.
`min` and `max` propagate NaN as NumPy's `minimum` and `maximum` do."""


def operator_for(op, caller: str) -> Operator:
    """The `Operator` for what the user passed as `op`: a known operation, or a plain
    Python function of two arguments (a device function) with no identity."""
    try:
        known = KNOWN_OPERATORS.get(op)
    except TypeError:   # unhashable
        known = None
    if known is not None:
        return known
    _check_device_function(op, 2, "op", caller)
    return Operator(getattr(op, "__name__", "op"), op)


def mapping_for(f, caller: str) -> Callable:
    """`f` of `mapreduce(f, op, x)`, checked: a plain Python function of one argument."""
    _check_device_function(f, 1, "f", caller)
    return f


def _check_device_function(function, arguments: int, role: str, caller: str) -> None:
    example = "def add(a, b): return a + b" if arguments == 2 else \
        "def square(v): return v * v"
    if not inspect.isfunction(function):
        more = ", or one of operator.add, operator.mul, min, max, operator.and_, " \
            "operator.or_, operator.xor" if arguments == 2 else \
            "; wrap another callable in one (`def f(v): return abs(v)`)"
        raise TypeError(f"ka.{caller}: {role} must be a plain Python function of {arguments} "
                        f"argument{'s' if arguments > 1 else ''} that kernels can call "
                        f"(such as `{example}`){more}; got {type(function).__name__} "
                        f"{function!r}")
    if function.__name__ == "<lambda>":
        raise TypeError(f"ka.{caller}: {role} is a lambda, which kernels cannot compile; "
                        f"define it with def (such as `{example}`)")
    try:
        inspect.signature(function).bind(*range(arguments))
    except TypeError:
        raise TypeError(f"ka.{caller}: {role} must take {arguments} positional "
                        f"argument{'s' if arguments > 1 else ''} (such as `{example}`); "
                        f"{function.__name__} takes "
                        f"{inspect.signature(function)}") from None


# -- dtypes ------------------------------------------------------------------------------------

def widened(dtype: np.dtype) -> np.dtype:
    """The dtype NumPy's `sum`, `prod` and `cumsum` give for `dtype`: bools and signed
    integers narrower than the platform's integer become it (int64), unsigned ones
    uint64; other dtypes stay."""
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < np.dtype(np.int_).itemsize):
        return np.dtype(np.int_)
    if dtype.kind == "u" and dtype.itemsize < np.dtype(np.uint).itemsize:
        return np.dtype(np.uint)
    return dtype


def accumulator(result: np.dtype) -> np.dtype:
    """The dtype a reduction or scan giving `result` combines elements in: float16 in
    float32, as NumPy's own float16 loops compute (and as accurate sums need: float16
    holds integers exactly only up to 2048); every other dtype in itself."""
    return np.dtype(np.float32) if result == np.float16 else result


def probed_dtype(f: Callable, op: Operator, element: np.dtype, caller: str) -> np.dtype:
    """The dtype of `op(f(v), f(v))` for a value `v` of dtype `element`, found by calling
    the two functions on the host with NumPy scalars, whose promotion (NEP 50) is the
    kernels' own. Known operations that widen (add, multiply) give NumPy's wider integer."""
    sample = element.type(1)
    try:
        with np.errstate(all="ignore"):
            mapped = f(sample)
            combined = op.function(mapped, mapped)
        dtype = np.result_type(combined)
    except Exception as error:
        raise TypeError(f"ka.{caller}: could not find the type {op.name}(f(v), f(v)) gives "
                        f"for a {element} value v by calling them on the host "
                        f"({type(error).__name__}: {error}); pass init as a NumPy scalar "
                        f"of the type to accumulate in, such as init=np.float32(0)") from None
    if op.widens_integers:
        dtype = widened(dtype)
    return dtype


def result_dtype(f: Callable, op: Operator, element: np.dtype, init, caller: str) -> np.dtype:
    """The dtype of a reduction or scan of `f(x)` by `op` with no dtype asked for: that of
    `op(f(v), f(v))` (`probed_dtype`), promoted with `init`'s as NumPy promotes (a Python
    number's type is weak, a NumPy scalar's is not). Where the functions cannot run on
    the host, a NumPy scalar `init` gives the dtype."""
    try:
        probed = probed_dtype(f, op, element, caller)
    except TypeError:
        if getattr(init, "dtype", None) is None:
            raise
        return np.dtype(init.dtype)
    return probed if init is None else np.result_type(probed, init)
