"""Common subexpressions: a pure op equal to one that dominates it is replaced by it.
Loads, allocations and other ops with effects are never merged, nor are ops in blocks
that do not dominate each other."""
import numpy as np

import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function, Module
from kernelkit.ir.printer import print_function
from kernelkit.passes import run_passes

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def after_cse(function):
    module = Module()
    module.add(function)
    run_passes(module, ["cse"], verify=True)
    return print_function(function)


def test_equal_pure_ops_merge_and_their_uses_follow():
    function = Function("f", ["x"], return_type=T.float64)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((T.float64,)))
    x = function.params[0]
    first = builder.op("add", [x, builder.const(1.0, T.float64)], T.float64)
    second = builder.op("add", [x, builder.const(1.0, T.float64)], T.float64)
    builder.ret(builder.op("mul", [first, second], T.float64))
    assert after_cse(function) == (
        'func @f(x) -> f64 file "" {\n'
        "^bb0(%0: f64):\n"
        "  %1 = const 1.0 : f64\n"
        "  %2 = add %0, %1 : f64\n"
        "  %3 = mul %2, %2 : f64\n"
        "  ret %3\n"
        "}\n")


def test_constants_differing_in_sign_of_zero_or_in_type_are_not_merged():
    function = Function("f", [], return_type=T.float64)
    builder = Builder(function)
    builder.position_at_end(builder.new_block())
    positive, negative = builder.const(0.0, T.float64), builder.const(-0.0, T.float64)
    narrow, wide = builder.const(1, T.int32), builder.const(1, T.int64)
    total = builder.op("add", [positive, negative], T.float64)
    builder.op("add", [narrow, narrow], T.int32)
    builder.op("add", [wide, wide], T.int64)
    builder.ret(total)
    assert after_cse(function) == (
        'func @f() -> f64 file "" {\n'
        "^bb0():\n"
        "  %0 = const 0.0 : f64\n"
        "  %1 = const -0.0 : f64\n"
        "  %2 = const 1 : i32\n"
        "  %3 = const 1 : i64\n"
        "  %4 = add %0, %1 : f64\n"
        "  %5 = add %2, %2 : i32\n"
        "  %6 = add %3, %3 : i64\n"
        "  ret %4\n"
        "}\n")


def test_op_in_a_dominating_block_replaces_its_copy_in_a_branch_but_siblings_stay_apart():
    function = Function("f", ["c", "x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.bool_, T.int32))
    then_block, else_block = builder.new_block(), builder.new_block()
    join = builder.new_block((T.int32,))
    flag, x = entry.params
    builder.position_at_end(entry)
    doubled = builder.op("add", [x, x], T.int32)
    builder.cbr(flag, then_block, [], else_block, [])
    builder.position_at_end(then_block)
    again = builder.op("add", [x, x], T.int32)
    squared_then = builder.op("mul", [x, x], T.int32)
    builder.br(join, [builder.op("sub", [again, squared_then], T.int32)])
    builder.position_at_end(else_block)
    squared_else = builder.op("mul", [x, x], T.int32)
    builder.br(join, [builder.op("sub", [doubled, squared_else], T.int32)])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert after_cse(function) == (
        'func @f(c, x) -> i32 file "" {\n'
        "^bb0(%0: bool, %1: i32):\n"
        "  %2 = add %1, %1 : i32\n"
        "  cbr %0, ^bb1(), ^bb2()\n"
        "^bb1():\n"
        "  %3 = mul %1, %1 : i32\n"
        "  %4 = sub %2, %3 : i32\n"
        "  br ^bb3(%4)\n"
        "^bb2():\n"
        "  %5 = mul %1, %1 : i32\n"
        "  %6 = sub %2, %5 : i32\n"
        "  br ^bb3(%6)\n"
        "^bb3(%7: i32):\n"
        "  ret %7\n"
        "}\n")


def reload_after_store(a, b):
    i = kk.index(kk.Global)
    x = a[i]
    a[i] = x + 1.0
    y = a[i]
    b[i] = x + y + (x + 1.0)


def test_loads_of_the_same_element_are_not_merged_across_a_store(ir_text):
    module = translate_kernel(reload_after_store, (F32_ARRAY, F32_ARRAY), (64,))
    run_passes(module, ["inline", "simplify", "dce", "cse"], verify=True)
    assert ir_text(module) == (
        'kernel @reload_after_store(a, b) -> void file "FILE" {\n'
        "^bb0(%0: array<f32, 1, C>, %1: array<f32, 1, C>):\n"
        "  %2 = group_id {axis = 0} : i64\n"
        "  %3 = const 64 : i64\n"
        "  %4 = mul %2, %3 : i64\n"
        "  %5 = local_id {axis = 0} : i64\n"
        "  %6 = add %4, %5 : i64\n"
        "  %7 = load %0, %6 : f32\n"
        "  %8 = const 1.0 : f32\n"
        "  %9 = add %7, %8 : f32\n"
        "  store %0, %6, %9\n"
        "  %10 = load %0, %6 : f32\n"
        "  %11 = add %7, %10 : f32\n"
        "  %12 = add %11, %9 : f32\n"
        "  store %1, %6, %12\n"
        "  ret\n"
        "}\n")


def two_tiles(a):
    i = kk.index(kk.Local)
    first = kk.localmem(np.float32, 64)
    second = kk.localmem(np.float32, 64)
    first[i] = a[i]
    second[i] = a[i]
    kk.synchronize()
    a[i] = first[63 - i] + second[i]


def test_equal_local_memory_allocations_are_not_merged(ir_text):
    module = translate_kernel(two_tiles, (F32_ARRAY,), (64,))
    run_passes(module, ["inline", "simplify", "dce", "cse"], verify=True)
    text = ir_text(module)
    assert text.count(" = localmem : ") == 2
    assert text.count(" = load %0, ") == 2
