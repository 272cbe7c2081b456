"""`fold` evaluates an op on constants with the semantics of the compiled code: NumPy
scalar semantics (wrapping integers, IEEE floats, Python's floor division and modulo),
and leaves undefined cases (out-of-range shifts, negative integer powers, casting
infinity to an integer) to run time."""
import math

import numpy as np
import pytest

from kernelkit.ir import types as T
from kernelkit.ir.definitions import DEFINITIONS, MATH
from kernelkit.ir.fold import fold


def fold2(opcode, a, b, type_, result_type=None):
    return fold(DEFINITIONS[opcode], [a, b], [type_, type_], result_type or type_)


def fold1(opcode, a, type_, result_type=None):
    return fold(DEFINITIONS[opcode], [a], [type_], result_type or type_)


def same_float(a, b):
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


@pytest.mark.parametrize("opcode, a, b, type_, expected", [
    ("add", 127, 1, T.int8, -128),
    ("sub", -128, 1, T.int8, 127),
    ("mul", 16, 16, T.uint8, 0),
    ("add", 250, 10, T.uint8, 4),
    ("sub", 0, 1, T.uint32, 2**32 - 1),
    ("add", 2**63 - 1, 1, T.int64, -2**63),
    ("pow", 2, 10, T.int8, 0),
])
def test_integer_arithmetic_wraps_around(opcode, a, b, type_, expected):
    assert fold2(opcode, a, b, type_) == expected


def test_negating_and_taking_abs_of_the_smallest_int8_wraps_to_itself():
    assert fold1("neg", -128, T.int8) == -128
    assert fold1("abs", -128, T.int8) == -128


@pytest.mark.parametrize("a, b", [(-7, 2), (7, -2), (-7, -2), (7, 2), (-1, 3), (6, -3)])
def test_integer_floordiv_and_mod_round_towards_negative_infinity(a, b):
    assert fold2("floordiv", a, b, T.int32) == a // b
    assert fold2("mod", a, b, T.int32) == a % b


@pytest.mark.parametrize("a, b", [(-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (1.0, -2.0), (5.0, 0.5)])
def test_float_floordiv_and_mod_follow_python(a, b):
    assert fold2("floordiv", a, b, T.float64) == a // b
    assert fold2("mod", a, b, T.float64) == a % b


def test_integer_division_by_zero_folds_to_zero_like_numpy():
    with np.errstate(all="ignore"):
        expected = int(np.floor_divide(np.int32(5), np.int32(0)))
    assert fold2("floordiv", 5, 0, T.int32) == expected == 0
    assert fold2("mod", 5, 0, T.int32) == 0
    assert fold2("floordiv", 5, 0, T.uint8) == 0


def test_smallest_int8_floordiv_minus_one_wraps_like_numpy():
    assert fold2("floordiv", -128, -1, T.int8) == -128
    assert fold2("mod", -128, -1, T.int8) == 0


def test_float_division_by_zero_gives_ieee_results():
    assert fold2("truediv", 1.0, 0.0, T.float64) == math.inf
    assert fold2("truediv", 1.0, -0.0, T.float64) == -math.inf
    assert math.isnan(fold2("truediv", 0.0, 0.0, T.float64))
    assert fold2("floordiv", -1.0, 0.0, T.float64) == -math.inf
    assert math.isnan(fold2("mod", 1.0, 0.0, T.float64))


def test_float16_overflow_gives_infinity():
    assert fold2("add", 60000.0, 60000.0, T.float16) == math.inf


@pytest.mark.parametrize("opcode, operands, expected", [
    ("neg", [0.0], -0.0),
    ("mul", [-1.0, 0.0], -0.0),
    ("mod", [-0.0, 2.0], 0.0),        # the remainder takes the divisor's sign
    ("mod", [0.0, -2.0], -0.0),
    ("floordiv", [-0.0, 2.0], -0.0),
    ("add", [-0.0, -0.0], -0.0),
    ("add", [-0.0, 0.0], 0.0),
    ("min", [-0.0, 0.0], -0.0),       # like Python's min: the first of two equal values
    ("min", [0.0, -0.0], 0.0),
])
def test_signed_zeros_are_kept(opcode, operands, expected):
    result = fold(DEFINITIONS[opcode], operands, [T.float64] * len(operands), T.float64)
    assert same_float(result, expected), result


def test_comparisons_fold_to_python_bools_with_ieee_semantics():
    assert fold2("eq", -0.0, 0.0, T.float64, T.bool_) is True
    assert fold2("ne", math.nan, math.nan, T.float64, T.bool_) is True
    assert fold2("lt", math.nan, 1.0, T.float64, T.bool_) is False


def test_casts_truncate_towards_zero_and_wrap():
    assert fold1("cast", 3.7, T.float64, T.int32) == 3
    assert fold1("cast", -3.7, T.float64, T.int32) == -3
    assert fold1("cast", 300, T.int32, T.uint8) == 44
    assert fold1("cast", -1, T.int8, T.uint64) == 2**64 - 1
    assert fold1("cast", 0.1, T.float64, T.float32) == float(np.float32(0.1))


@pytest.mark.parametrize("opcode, operands, types, result_type", [
    ("shl", [1, 8], [T.int8, T.int8], T.int8),
    ("shr", [1, -1], [T.int32, T.int32], T.int32),
    ("pow", [2, -1], [T.int32, T.int32], T.int32),
    ("cast", [math.inf], [T.float64], T.int32),
    ("cast", [math.nan], [T.float32], T.int64),
    ("load", [1], [T.int32], T.int32),
], ids=["shl-by-width", "shr-by-negative", "int-pow-negative", "inf-to-int", "nan-to-int", "load"])
def test_undefined_or_runtime_only_operations_are_not_folded(opcode, operands, types, result_type):
    assert fold(DEFINITIONS[opcode], operands, types, result_type) is None


def test_math_function_folds_with_the_result_precision():
    result = fold(MATH["sqrt"], [2.0], [T.float32], T.float32)
    assert result == float(np.sqrt(np.float32(2.0)))
    assert result != math.sqrt(2.0)


def test_bool_operations_stay_logical():
    assert fold2("and", True, False, T.bool_) is False
    assert fold2("xor", True, True, T.bool_) is False
    assert fold1("invert", True, T.bool_) is False
    assert fold1("invert", 0, T.uint8) == 255


@pytest.mark.parametrize("name, operands", [
    ("exp", [10.0]), ("sin", [1.0]), ("log", [3.0]), ("tanh", [0.5]), ("erf", [0.5]),
    ("pow", [2.0, 0.5]), ("atan2", [1.0, 2.0]), ("hypot", [3.0, 4.0]),
])
@pytest.mark.parametrize("type_", [T.float32, T.float64], ids=["f32", "f64"])
def test_math_functions_the_targets_round_differently_are_left_to_run_time(name, operands, type_):
    # NumPy, the host's C library and libdevice may differ in the last bit: kk.exp of
    # float32 10.0 is 22026.467 in NumPy and 22026.465 in the C library.
    assert fold(MATH[name], operands, [type_] * len(operands), type_) is None


def test_float_powers_are_left_to_run_time_and_integer_powers_fold():
    assert fold2("pow", 2.0, 0.5, T.float32) is None
    assert fold2("pow", 3, 4, T.int32) == 81


@pytest.mark.parametrize("name, operands, expected", [
    ("fabs", [-2.5], 2.5), ("floor", [-2.5], -3.0), ("ceil", [-2.5], -2.0),
    ("trunc", [-2.5], -2.0), ("rint", [2.5], 2.0), ("fmod", [7.5, 2.0], 1.5),
    ("copysign", [2.0, -0.0], -2.0), ("fmin", [1.0, math.nan], 1.0), ("fmax", [1.0, 2.0], 2.0),
])
def test_exactly_rounded_math_functions_fold(name, operands, expected):
    assert fold(MATH[name], operands, [T.float32] * len(operands), T.float32) == expected


def test_fmin_and_fmax_of_zeros_of_both_signs_fold_to_the_first_as_they_compute():
    for name in ("fmin", "fmax"):
        for first, second in ((0.0, -0.0), (-0.0, 0.0)):
            folded = fold(MATH[name], [first, second], [T.float64] * 2, T.float64)
            assert math.copysign(1.0, folded) == math.copysign(1.0, first)
