"""Evaluates an operation on constant operands, with exactly the semantics the compiled
code has (NumPy scalar semantics: wrapping integers, IEEE floats, floor division).
Shared by the frontend (which folds as it builds) and the simplify pass."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .types import IRType, ScalarType, TupleType

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": np.left_shift, "shr": np.right_shift,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_UNARY = {"neg": np.negative, "not": np.logical_not, "invert": np.invert, "abs": np.abs}

# The math functions that fold: those IEEE 754 defines exactly (correctly rounded, or
# exact), so NumPy, the C library and libdevice agree on every argument. The others
# (exp, sin, pow ...) differ by an ulp between NumPy, the host's libm and libdevice, so
# they are left to run time: a kernel gives the same answer whether its argument is a
# constant or not.
def _fmin(first, second):
    """The first argument unless the second is smaller or the first is NaN: NumPy's
    rule, with +0.0 and -0.0 settled as the kernels compute it (NumPy's own choice
    between them differs from one dtype to another)."""
    return first if first <= second or np.isnan(second) else second


def _fmax(first, second):
    return first if first >= second or np.isnan(second) else second


EXACT_MATH_UFUNCS = {
    "sqrt": np.sqrt, "fabs": np.fabs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "rint": np.rint, "fmod": np.fmod, "copysign": np.copysign, "fmin": _fmin,
    "fmax": _fmax, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
}


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


def fold(opcode: str, attrs: dict, operands: list, operand_types: list[IRType],
         result_type: IRType):
    """The constant result, or None when the operation must be left to run time."""
    if not all(isinstance(t, ScalarType) for t in operand_types):
        return None
    args = [np.array(v, dtype=t.numpy_dtype)[()] for v, t in zip(operands, operand_types)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            if opcode in _BINARY:
                a, b = args
                if opcode in ("and", "or", "xor") and operand_types[0].is_bool:
                    result = {"and": a and b, "or": a or b, "xor": a != b}[opcode]
                elif opcode == "pow" and operand_types[1].is_integer and b < 0:
                    return None
                elif opcode == "pow" and operand_types[0].is_float:
                    return None   # a math library's pow: not exactly rounded
                elif opcode in ("shl", "shr") and not 0 <= int(b) < operand_types[0].bits:
                    return None
                else:
                    result = _BINARY[opcode](a, b)
            elif opcode in ("min", "max"):
                a, b = args
                result = (b if b < a else a) if opcode == "min" else (b if b > a else a)
            elif opcode in _UNARY:
                (a,) = args
                if opcode == "invert" and operand_types[0].is_bool:
                    result = not a
                else:
                    result = _UNARY[opcode](a)
            elif opcode == "cast":
                result = args[0]
                if result_type.is_integer and operand_types[0].is_float and not np.isfinite(result):
                    return None
            elif opcode == "select":
                result = args[1] if args[0] else args[2]
            elif opcode == "math" and attrs["name"] in EXACT_MATH_UFUNCS:
                result = EXACT_MATH_UFUNCS[attrs["name"]](*args)
            else:
                return None
        except (ArithmeticError, ValueError, TypeError):
            return None
    if isinstance(result_type, TupleType):
        return None
    return to_python(result, result_type)
