"""The rewriter edits a function in place: insertion before or after an operation and
at a block's end, replacing and erasing operations, finding a value's uses, splitting
blocks; and functions are cloned with their types mapped and parameters added."""
import pytest

from kernelkit.ir import types as T
from kernelkit.ir.definitions import ADD, MUL
from kernelkit.ir.ops import Op
from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_function
from kernelkit.ir.rewriter import Rewriter, clone_function
from kernelkit.ir.verifier import verify_function

SQUARE_PLUS_ONE = '''func @f(x) -> i32 file "" {
^bb0(%0: i32):
  %1 = mul %0, %0 : i32
  %2 = const 1 : i32
  %3 = add %1, %2 : i32
  ret %3
}
'''


def parsed(text: str = SQUARE_PLUS_ONE):
    return parse_module(text).functions["f"]


def ops_of(function):
    return {op.opcode: op for op in function.ops()}


def test_insertion_before_and_after_an_operation_and_at_the_end_of_a_block():
    function = parsed()
    ops, x = ops_of(function), function.params[0]
    rewriter = Rewriter(function)
    rewriter.position_before(ops["mul"])
    first = rewriter.op("neg", [x], T.int32)
    rewriter.position_after(ops["add"])
    last = rewriter.op("abs", [x], T.int32)
    block = function.entry
    assert block.ops.index(first) == 0 and block.ops.index(last) == 4
    assert block.ops[-1].opcode == "ret" and first.block is block and last.block is block
    end = rewriter.new_block()
    rewriter.position_at_end(end)
    rewriter.ret(x)
    assert end.ops[0].block is end and end.function is function


def test_uses_are_found_and_follow_each_edit():
    function = parsed()
    ops, x = ops_of(function), function.params[0]
    rewriter = Rewriter(function)
    assert rewriter.uses(x) == [ops["mul"]]
    assert rewriter.uses(ops["add"]) == [ops["ret"]]
    rewriter.position_before(ops["ret"])
    double = rewriter.op(ADD, [ops["add"], ops["add"]], T.int32)
    assert rewriter.uses(ops["add"]) == [ops["ret"], double]
    rewriter.replace_all_uses(ops["mul"], x)
    assert rewriter.uses(ops["mul"]) == [] and rewriter.uses(x) == [ops["mul"], ops["add"]]
    rewriter.erase(ops["mul"])
    assert rewriter.uses(x) == [ops["add"]]
    verify_function(function)


def test_replace_op_puts_the_new_operation_in_its_place_and_redirects_its_uses():
    function = parsed()
    ops, x = ops_of(function), function.params[0]
    rewriter = Rewriter(function)
    doubled = Op("add", [x, x], T.int32)
    rewriter.replace_op(ops["mul"], doubled)
    verify_function(function)
    assert print_function(function) == SQUARE_PLUS_ONE.replace("mul %0, %0", "add %0, %0")
    assert rewriter.uses(doubled) == [ops["add"]] and ops["mul"].block is None


def test_erasing_an_operation_still_used_is_refused():
    function = parsed()
    rewriter = Rewriter(function)
    rewriter.uses(function.params[0])   # index the uses
    with pytest.raises(AssertionError, match="still used"):
        rewriter.erase(ops_of(function)["mul"])


def test_splitting_a_block_moves_what_follows_into_a_new_block_after_it():
    function = parsed()
    ops = ops_of(function)
    rewriter = Rewriter(function)
    after = rewriter.split_block_after(ops["const"])
    rewriter.position_at_end(function.entry)
    rewriter.br(after)
    verify_function(function)
    assert function.blocks == [function.entry, after]
    assert [op.opcode for op in after.ops] == ["add", "ret"]
    assert all(op.block is after for op in after.ops)


def test_a_clone_maps_types_and_takes_added_parameters():
    function = parsed('''func @f(x) -> i32 file "" {
^bb0(%0: i32):
  %1 = mul %0, %0 : i32
  ret %1
}
''')
    values = {}
    clone = clone_function(function, "f64", values, types={T.int32: T.int64},
                           added_params=[("scale", T.int64)])
    scale = clone.params[1]
    rewriter = Rewriter(clone)
    product = values[next(iter(function.ops()))]
    rewriter.position_after(product)
    scaled = rewriter.op(MUL, [product, scale], T.int64)
    rewriter.replace_all_uses(product, scaled)
    scaled.operands[0] = product
    rewriter.reindex()
    verify_function(clone)
    assert print_function(clone) == '''func @f64(x, scale) -> i64 file "" {
^bb0(%0: i64, %1: i64):
  %2 = mul %0, %0 : i64
  %3 = mul %2, %1 : i64
  ret %3
}
'''
    assert print_function(function).startswith('func @f(x) -> i32')   # the original stays
