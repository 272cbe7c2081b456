"""Inline: every device-function call is replaced by the callee's body, and the module is
left with the kernel alone."""
import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function, Module
from kernelkit.ir.printer import print_function
from kernelkit.ir.verifier import verify_module
from kernelkit.passes import run_passes

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def build_module_calling_double():
    module = Module()
    kernel = module.add(Function("k", ["a", "i"], is_kernel=True))
    double = module.add(Function("double", ["x"], return_type=T.float32))
    builder = Builder(double)
    builder.position_at_end(builder.new_block((T.float32,)))
    two = builder.const(2.0, T.float32)
    builder.ret(builder.op("mul", [double.params[0], two], T.float32))
    builder = Builder(kernel)
    builder.position_at_end(builder.new_block((F32_ARRAY, T.int64)))
    a, i = kernel.params
    value = builder.op("load", [a, i], T.float32)
    doubled = builder.op("call", [value], T.float32, {"callee": "double"})
    builder.op("store", [a, i, doubled])
    builder.ret()
    return module


def test_inlined_call_becomes_branches_into_the_callee_body_and_a_continuation():
    module = build_module_calling_double()
    run_passes(module, ["inline"], verify=True)
    assert list(module.functions) == ["k"]
    assert print_function(module.kernel) == (
        'kernel @k(a, i) -> void file "" {\n'
        "^bb0(%0: array<f32, 1, C>, %1: i64):\n"
        "  %2 = load %0, %1 : f32\n"
        "  br ^bb1()\n"
        "^bb1():\n"
        "  %3 = const 2.0 : f32\n"
        "  %4 = mul %2, %3 : f32\n"
        "  br ^bb2(%4)\n"
        "^bb2(%5: f32):\n"
        "  store %0, %1, %5\n"
        "  ret\n"
        "}\n")


def test_inlining_clones_the_callee_body_instead_of_moving_it():
    module = build_module_calling_double()
    double = module.functions["double"]
    before = print_function(double)
    run_passes(module, ["inline"])
    assert print_function(double) == before


def square(x):
    return x * x


def clamp_below(x, low):
    if x < low:
        return low
    return x


def sum_of_squares(x):
    return square(x) + square(clamp_below(x, 0.0))


def nested_calls(a):
    i = kk.index(kk.Global)
    a[i] = sum_of_squares(a[i])


def test_nested_and_repeated_calls_are_all_inlined_into_one_valid_function(ir_text):
    module = translate_kernel(nested_calls, (F32_ARRAY,), (64,))
    assert len(module.functions) == 4
    run_passes(module, ["inline"], verify=True)
    assert list(module.functions) == ["nested_calls"]
    text = ir_text(module)
    assert " call " not in text
    # square is inlined twice; clamp_below's two returns meet in a block parameter.
    assert text.count(" = mul %") == 3  # the global index, then two squares
    assert "^bb7(%14: f32):\n  br ^bb8()\n^bb8():\n  %15 = mul %14, %14 : f32" in text


def test_inlined_kernel_simplifies_to_one_diamond(ir_text):
    module = translate_kernel(nested_calls, (F32_ARRAY,), (64,))
    run_passes(module, ["inline", "simplify", "dce"], verify=True)
    assert ir_text(module) == (
        'kernel @nested_calls(a) -> void file "FILE" {\n'
        "^bb0(%0: array<f32, 1, C>):\n"
        "  %1 = group_id {axis = 0} : i64\n"
        "  %2 = const 64 : i64\n"
        "  %3 = mul %1, %2 : i64\n"
        "  %4 = local_id {axis = 0} : i64\n"
        "  %5 = add %3, %4 : i64\n"
        "  %6 = load %0, %5 : f32\n"
        "  %7 = mul %6, %6 : f32\n"
        "  %8 = const 0.0 : f32\n"
        "  %9 = lt %6, %8 : bool\n"
        "  cbr %9, ^bb1(), ^bb2()\n"
        "^bb1():\n"
        "  %10 = const 0.0 : f32\n"
        "  br ^bb3(%10)\n"
        "^bb2():\n"
        "  br ^bb3(%6)\n"
        "^bb3(%11: f32):\n"
        "  %12 = mul %11, %11 : f32\n"
        "  %13 = add %7, %12 : f32\n"
        "  store %0, %5, %13\n"
        "  ret\n"
        "}\n")
    verify_module(module)
