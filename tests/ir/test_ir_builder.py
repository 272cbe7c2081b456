"""The typed builder: what a pass builds gets the types and the folding the frontend
gives the same expression (NumPy's rules, NEP 50: a Python number is weak)."""
import numpy as np
import pytest

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder, TypingError
from kernelkit.ir.function import Function
from kernelkit.ir.printer import print_function


def builder_with(*param_types):
    function = Function("f", [f"p{i}" for i in range(len(param_types))])
    builder = Builder(function)
    builder.position_at_end(builder.new_block(param_types))
    return builder, function.params


@pytest.mark.parametrize("left, right, result", [
    (T.float32, T.weak_float, T.float32),     # x * 2.0 stays float32
    (T.int8, T.weak_int, T.int8),             # a Python int takes the int8's type
    (T.int8, T.uint8, T.int16),               # NumPy's promotion
    (T.int32, T.float32, T.float64),
    (T.bool_, T.int8, T.int8),                # a bool with a number takes its type
    (T.weak_int, T.weak_float, T.weak_float),
])
def test_arithmetic_promotes_as_numpy_does(left, right, result):
    builder, (a, b) = builder_with(left, right)
    product = builder.binary("mul", a, b)
    assert product.type == result
    assert [v.type for v in product.operands] == [result, result]


def test_true_division_of_integers_gives_float64():
    builder, (a, b) = builder_with(T.int32, T.int32)
    assert builder.binary("truediv", a, b).type == T.float64


def test_operations_on_constants_fold_with_the_compiled_semantics():
    builder, _ = builder_with()
    total = builder.binary("add", builder.constant(127, T.int8), builder.constant(1, T.int8))
    assert total.opcode == "const" and total.attrs["value"] == -128
    root = builder.math("sqrt", builder.constant(2.0, T.float32))
    assert root.opcode == "const" and root.attrs["value"] == float(np.sqrt(np.float32(2)))
    sine = builder.math("sin", builder.constant(2.0, T.float32))
    assert sine.opcode == "math.sin"   # not exactly defined: left to run time


def test_bool_arithmetic_follows_numpy():
    builder, (a, b) = builder_with(T.bool_, T.bool_)
    assert builder.binary("add", a, b).opcode == "or"
    assert builder.binary("mul", a, b).opcode == "and"
    with pytest.raises(TypingError, match="bools cannot be subtracted") as info:
        builder.binary("sub", a, b)
    assert "use ^ or !=" in info.value.hint


def test_a_float_in_a_bitwise_operation_is_a_typing_error():
    builder, (a, b) = builder_with(T.float32, T.int32)
    with pytest.raises(TypingError, match="bitwise operators need integers or bools"):
        builder.binary("xor", a, b)


def test_comparisons_with_python_ints_outside_the_range_are_decided_at_compile_time():
    builder, (small,) = builder_with(T.uint8)
    always = builder.compare("lt", small, builder.constant(300, T.weak_int))
    assert always.opcode == "const" and always.attrs["value"] is True


def test_int64_against_uint64_compares_values_not_float64_roundings():
    builder, (signed, unsigned) = builder_with(T.int64, T.uint64)
    builder.compare("lt", signed, unsigned)
    text = print_function(builder.function)
    assert "cast %0 : u64" in text and "f64" not in text


def test_insertion_before_an_operation():
    builder, (a,) = builder_with(T.int32)
    last = builder.ret()
    builder.position_before(last)
    doubled = builder.binary("add", a, a)
    assert builder.function.entry.ops == [doubled, last]
