"""Evaluates an operation on constant operands, with exactly the semantics the compiled
code has (NumPy scalar semantics: wrapping integers, IEEE floats, floor division).
Shared by the frontend (which folds as it builds), the typed builder and the simplify
pass. The evaluators here are the fold hooks of the operation definitions
(`definitions.py`); `fold` runs an operation's hook."""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

from .math_functions import EXACT_EVALUATION
from .types import IRType, ScalarType, TupleType

if TYPE_CHECKING:
    from .definitions import OpDefinition

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": np.left_shift, "shr": np.right_shift,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_UNARY = {"neg": np.negative, "not": np.logical_not, "invert": np.invert, "abs": np.abs}


def binary(name: str):
    def evaluate(args, types, result_type):
        a, b = args
        if name in ("and", "or", "xor") and types[0].is_bool:
            return {"and": a and b, "or": a or b, "xor": a != b}[name]
        if name == "pow" and (types[1].is_integer and b < 0 or types[0].is_float):
            return None   # undefined; or a math library's pow, not exactly rounded
        if name in ("shl", "shr") and not 0 <= int(b) < types[0].bits:
            return None
        if name == "min":
            return b if b < a else a
        if name == "max":
            return b if b > a else a
        return _BINARY[name](a, b)
    return evaluate


def unary(name: str):
    def evaluate(args, types, result_type):
        (a,) = args
        if name == "invert" and types[0].is_bool:
            return not a
        return _UNARY[name](a)
    return evaluate


def cast(args, types, result_type):
    (value,) = args
    if result_type.is_integer and types[0].is_float and not np.isfinite(value):
        return None
    return value


def bitcast(args, types, result_type):
    (value,) = args
    result = np.array(value, dtype=types[0].numpy_dtype).view(result_type.numpy_dtype)[()]
    # A NaN's payload does not survive a constant's text: left to run time.
    return None if result_type.is_float and np.isnan(result) else result


def select(args, types, result_type):
    return args[1] if args[0] else args[2]


def math_function(name: str):
    def evaluate(args, types, result_type):
        return EXACT_EVALUATION[name](*args)
    return evaluate


def to_python(value, type: IRType):
    """A constant as stored in an op's attributes: a Python bool, int or float holding
    exactly the value of `type`."""
    assert isinstance(type, ScalarType)
    if type.is_bool:
        return bool(value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if type.is_integer:
            if isinstance(value, float) and not math.isfinite(value):
                return 0
            return int(np.array(value).astype(type.numpy_dtype))
        return float(np.array(value).astype(type.numpy_dtype))


def fold(definition: OpDefinition, operands: list, operand_types: list[IRType],
         result_type: IRType):
    """The constant result of an operation of kind `definition` on the constants
    `operands`, or None when the operation must be left to run time."""
    if definition.fold is None or isinstance(result_type, TupleType) \
            or not all(isinstance(t, ScalarType) for t in operand_types):
        return None
    args = [np.array(v, dtype=t.numpy_dtype)[()] for v, t in zip(operands, operand_types)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            result = definition.fold(args, operand_types, result_type)
        except (ArithmeticError, ValueError, TypeError):
            return None
    return None if result is None else to_python(result, result_type)
