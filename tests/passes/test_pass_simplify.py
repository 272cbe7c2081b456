"""Simplify: folds constants, forwards casts to the same type, turns constant branches
into jumps, drops unreachable blocks, forwards block parameters that always receive the
same value, and merges a block into its only predecessor."""
import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function, Module
from kernelkit.ir.printer import print_function
from kernelkit.passes import run_passes

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def simplified(function):
    module = Module()
    module.add(function)
    run_passes(module, ["simplify"], verify=True)
    return print_function(function)


def test_constant_operations_fold_and_same_type_casts_disappear():
    function = Function("f", ["x"], return_type=T.int32)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((T.int32,)))
    six = builder.op("mul", [builder.const(2, T.int32), builder.const(3, T.int32)], T.int32)
    same = builder.op("cast", [function.params[0]], T.int32)
    builder.ret(builder.op("add", [same, six], T.int32))
    assert simplified(function) == (
        'func @f(x) -> i32 file "" {\n'
        "^bb0(%0: i32):\n"
        "  %1 = const 2 : i32\n"
        "  %2 = const 3 : i32\n"
        "  %3 = const 6 : i32\n"
        "  %4 = add %0, %3 : i32\n"
        "  ret %4\n"
        "}\n")


def test_folding_wraps_like_the_compiled_code():
    function = Function("f", [], return_type=T.int8)
    builder = Builder(function)
    builder.position_at_end(builder.new_block())
    builder.ret(builder.op("add", [builder.const(100, T.int8), builder.const(100, T.int8)], T.int8))
    assert "  %2 = const -56 : i8\n  ret %2\n" in simplified(function)


def test_constant_branch_keeps_one_arm_and_merges_the_blocks():
    function = Function("g", ["x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.int32,))
    then_block, else_block, join = builder.new_block(), builder.new_block(), builder.new_block((T.int32,))
    builder.position_at_end(entry)
    one, zero = builder.const(1, T.int32), builder.const(0, T.int32)
    builder.cbr(builder.op("lt", [zero, one], T.bool_), then_block, [], else_block, [])
    builder.position_at_end(then_block)
    builder.br(join, [builder.op("add", [entry.params[0], one], T.int32)])
    builder.position_at_end(else_block)
    builder.br(join, [builder.op("sub", [entry.params[0], one], T.int32)])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert simplified(function) == (
        'func @g(x) -> i32 file "" {\n'
        "^bb0(%0: i32):\n"
        "  %1 = const 1 : i32\n"
        "  %2 = const 0 : i32\n"
        "  %3 = const true : bool\n"
        "  %4 = add %0, %1 : i32\n"
        "  ret %4\n"
        "}\n")


def test_block_parameter_receiving_the_same_value_on_every_edge_is_forwarded():
    function = Function("h", ["c", "x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.bool_, T.int32))
    then_block, join = builder.new_block(), builder.new_block((T.int32, T.int32))
    flag, x = entry.params
    builder.position_at_end(entry)
    one = builder.const(1, T.int32)
    builder.cbr(flag, then_block, [], join, [x, one])
    builder.position_at_end(then_block)
    # A power: too costly to compute on both paths, so the branch stays.
    builder.br(join, [x, builder.op("pow", [x, x], T.int32)])
    builder.position_at_end(join)
    builder.ret(builder.op("mul", [join.params[0], join.params[1]], T.int32))
    assert simplified(function) == (
        'func @h(c, x) -> i32 file "" {\n'
        "^bb0(%0: bool, %1: i32):\n"
        "  %2 = const 1 : i32\n"
        "  cbr %0, ^bb1(), ^bb2(%2)\n"
        "^bb1():\n"
        "  %3 = pow %1, %1 : i32\n"
        "  br ^bb2(%3)\n"
        "^bb2(%4: i32):\n"
        "  %5 = mul %1, %4 : i32\n"
        "  ret %5\n"
        "}\n")


def test_conditional_branch_to_one_block_with_equal_arguments_becomes_a_jump():
    function = Function("same", ["c", "x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.bool_, T.int32))
    join = builder.new_block((T.int32,))
    builder.position_at_end(entry)
    builder.cbr(entry.params[0], join, [entry.params[1]], join, [entry.params[1]])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert simplified(function) == (
        'func @same(c, x) -> i32 file "" {\n'
        "^bb0(%0: bool, %1: i32):\n"
        "  ret %1\n"
        "}\n")


def exceeds_ten(n):
    return n > 10


def pick_by_device_function(a):
    i = kk.index(kk.Global)
    if exceeds_ten(20):
        a[i] = 1.0
    else:
        a[i] = 2.0


def test_branch_on_an_inlined_constant_result_is_folded_away(ir_text):
    module = translate_kernel(pick_by_device_function, (F32_ARRAY,), (64,))
    assert "cbr" in ir_text(module)
    run_passes(module, ["inline", "simplify", "dce"], verify=True)
    assert ir_text(module) == (
        'kernel @pick_by_device_function(a) -> void file "FILE" {\n'
        "^bb0(%0: array<f32, 1, C>):\n"
        "  %1 = group_id {axis = 0} : i64\n"
        "  %2 = const 64 : i64\n"
        "  %3 = mul %1, %2 : i64\n"
        "  %4 = local_id {axis = 0} : i64\n"
        "  %5 = add %3, %4 : i64\n"
        "  %6 = const 1.0 : f32\n"
        "  store %0, %5, %6\n"
        "  ret\n"
        "}\n")


def test_short_branch_of_cheap_pure_operations_becomes_a_select():
    function = Function("both", ["a", "b"], return_type=T.bool_)
    builder = Builder(function)
    entry = builder.new_block((T.int64, T.int64))
    right, join = builder.new_block(), builder.new_block((T.bool_,))
    a, b = entry.params
    builder.position_at_end(entry)
    left = builder.op("lt", [a, b], T.bool_)
    builder.cbr(left, right, [], join, [left])          # `a < b and b < 10`
    builder.position_at_end(right)
    builder.br(join, [builder.op("lt", [b, builder.const(10, T.int64)], T.bool_)])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert simplified(function) == (
        'func @both(a, b) -> bool file "" {\n'
        "^bb0(%0: i64, %1: i64):\n"
        "  %2 = lt %0, %1 : bool\n"
        "  %3 = const 10 : i64\n"
        "  %4 = lt %1, %3 : bool\n"
        "  %5 = select %2, %4, %2 : bool\n"
        "  ret %5\n"
        "}\n")


def test_a_branch_with_side_effects_is_not_speculated():
    function = Function("keeps", ["c", "a"], return_type=T.void)
    builder = Builder(function)
    entry = builder.new_block((T.bool_, T.ArrayType(T.int32, 1, "C")))
    then_block, join = builder.new_block(), builder.new_block()
    flag, array = entry.params
    builder.position_at_end(entry)
    zero = builder.const(0, T.int64)
    builder.cbr(flag, then_block, [], join, [])
    builder.position_at_end(then_block)
    builder.op("store", [array, zero, builder.const(1, T.int32)])
    builder.br(join, [])
    builder.position_at_end(join)
    builder.ret()
    assert "cbr %0" in simplified(function)


def test_a_chain_of_short_branches_becomes_selects_in_one_run_of_each_step():
    """`a < b and b < 10 and b < 20 ...`: each short branch is speculated, and the blocks
    left behind merge, without one sweep of the whole function per branch."""
    from kernelkit.passes.simplify import merge_blocks, speculate_short_branches
    function = Function("all_below", ["a", "b"], return_type=T.bool_)
    builder = Builder(function)
    entry = builder.new_block((T.int64, T.int64))
    a, b = entry.params
    builder.position_at_end(entry)
    condition = builder.op("lt", [a, b], T.bool_)
    for limit in (10, 20, 30):
        right, join = builder.new_block(), builder.new_block((T.bool_,))
        builder.cbr(condition, right, [], join, [condition])
        builder.position_at_end(right)
        builder.br(join, [builder.op("lt", [b, builder.const(limit, T.int64)], T.bool_)])
        builder.position_at_end(join)
        condition = join.params[0]
    builder.ret(condition)
    assert speculate_short_branches(function, limit=2)
    assert not any(op.opcode == "cbr" for op in function.ops())
    assert merge_blocks(function)
    assert len(function.blocks) == 1
    text = simplified(function)
    assert text.count("select") == 3 and "cbr" not in text and "br " not in text
