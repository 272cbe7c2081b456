"""The verifier accepts well-formed IR and names every broken invariant it finds."""
import pytest

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Block, Function
from kernelkit.ir.ops import Op
from kernelkit.ir.verifier import IRVerificationError, verify_function, verify_module


def new_function(param_types=(T.int32,), return_type=T.int32):
    function = Function("f", [f"p{i}" for i in range(len(param_types))], return_type=return_type)
    builder = Builder(function)
    builder.position_at_end(builder.new_block(tuple(param_types)))
    return function, builder


def test_well_formed_function_passes():
    function, builder = new_function()
    join = builder.new_block((T.int32,))
    builder.br(join, [function.params[0]])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert verify_function(function) is None


def test_block_without_terminator_is_rejected():
    function, builder = new_function()
    builder.op("add", [function.params[0], function.params[0]], T.int32)
    with pytest.raises(IRVerificationError, match=r"\^bb0 does not end with a terminator"):
        verify_function(function)


def test_empty_block_is_rejected():
    function, builder = new_function()
    builder.ret(function.params[0])
    function.add_block(Block())
    with pytest.raises(IRVerificationError, match=r"\^bb1 does not end with a terminator"):
        verify_function(function)


def test_branch_passing_arguments_of_the_wrong_types_is_rejected():
    function, builder = new_function()
    join = builder.new_block((T.int32,))
    wide = builder.op("cast", [function.params[0]], T.int64)
    builder.br(join, [wide])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    with pytest.raises(IRVerificationError,
                       match=r"br passes \(i64\) to a block expecting \(i32\)"):
        verify_function(function)


def test_branch_passing_too_few_arguments_is_rejected():
    function, builder = new_function()
    join = builder.new_block((T.int32,))
    builder.br(join, [])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    with pytest.raises(IRVerificationError, match=r"br passes \(\) to a block expecting \(i32\)"):
        verify_function(function)


def test_use_of_a_value_defined_in_another_function_is_rejected():
    other, other_builder = new_function()
    foreign = other_builder.const(1, T.int32)
    function, builder = new_function()
    total = builder.op("add", [function.params[0], foreign], T.int32)
    builder.ret(total)
    with pytest.raises(IRVerificationError, match="add uses a value not defined in @f"):
        verify_function(function)


def test_use_of_an_op_removed_from_its_block_is_rejected():
    function, builder = new_function()
    doubled = builder.op("add", [function.params[0], function.params[0]], T.int32)
    builder.ret(doubled)
    function.entry.ops.remove(doubled)
    with pytest.raises(IRVerificationError, match="ret uses a value not defined in @f"):
        verify_function(function)


def test_terminator_in_the_middle_of_a_block_is_rejected():
    function, builder = new_function()
    builder.ret(function.params[0])
    function.entry.append(Op("ret", [function.params[0]]))
    with pytest.raises(IRVerificationError, match="terminator ret in the middle of the block"):
        verify_function(function)


def test_binary_op_on_mismatched_types_and_wrong_return_type_are_both_reported():
    function, builder = new_function((T.int32, T.int64), return_type=T.int32)
    a, b = function.params
    total = builder.op("add", [a, b], T.int64)
    builder.ret(total)
    with pytest.raises(IRVerificationError) as info:
        verify_function(function)
    message = str(info.value)
    assert "add of i32 and i64" in message
    assert "ret of i64 in a function returning i32" in message
    # The printed function is attached for the reader.
    assert "%2 = add %0, %1 : i64" in message


def test_conditional_branch_on_a_non_bool_is_rejected():
    function, builder = new_function()
    then_block = builder.new_block()
    builder.cbr(function.params[0], then_block, [], then_block, [])
    builder.position_at_end(then_block)
    builder.ret(function.params[0])
    with pytest.raises(IRVerificationError, match="cbr on a i32"):
        verify_function(function)


def test_a_use_its_definition_does_not_dominate_is_reported():
    from kernelkit.ir.parser import parse_module
    text = ('func @f(c) -> i64 file "" {\n'
            "^bb0(%0: bool):\n"
            "  cbr %0, ^bb1(), ^bb2()\n"
            "^bb1():\n"
            "  %1 = const 1 : i64\n"
            "  br ^bb2()\n"
            "^bb2():\n"
            "  ret %1\n"
            "}\n")
    with pytest.raises(IRVerificationError, match=r"\^bb2: ret uses a value from \^bb1, "
                                                  "which does not dominate it"):
        verify_module(parse_module(text))


def test_a_use_before_its_definition_in_a_block_is_reported():
    from kernelkit.ir.parser import parse_module
    text = ('func @g() -> i64 file "" {\n'
            "^bb0():\n"
            "  %1 = add %2, %2 : i64\n"
            "  %2 = const 1 : i64\n"
            "  ret %1\n"
            "}\n")
    with pytest.raises(IRVerificationError, match="uses a value defined later in its block"):
        verify_module(parse_module(text))
