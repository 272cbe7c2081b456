"""Building IR with `Builder` and its exact text form from `print_function`."""
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function, Module
from kernelkit.ir.ops import Location
from kernelkit.ir.printer import print_function, print_module


def build_axpy():
    function = Function("axpy", ["a", "x"], return_type=T.float32, source_file="axpy.py")
    builder = Builder(function)
    entry = builder.new_block((T.float32, T.float32))
    builder.position_at_end(entry)
    a, x = entry.params
    two = builder.const(2.0, T.float32)
    scaled = builder.op("mul", [a, two], T.float32)
    total = builder.op("add", [scaled, x], T.float32)
    builder.ret(total)
    return function


def test_straight_line_function_prints_one_numbered_op_per_line():
    assert print_function(build_axpy()) == (
        'func @axpy(a, x) -> f32 file "axpy.py" {\n'
        "^bb0(%0: f32, %1: f32):\n"
        "  %2 = const 2.0 : f32\n"
        "  %3 = mul %0, %2 : f32\n"
        "  %4 = add %3, %1 : f32\n"
        "  ret %4\n"
        "}\n")


def test_branches_print_successor_blocks_with_their_arguments():
    function = Function("choose", ["flag"], return_type=T.int32, is_kernel=False)
    builder = Builder(function)
    entry = builder.new_block((T.bool_,))
    then_block = builder.new_block()
    join = builder.new_block((T.int32,))
    builder.position_at_end(entry)
    one = builder.const(1, T.int32)
    builder.cbr(entry.params[0], then_block, [], join, [one])
    builder.position_at_end(then_block)
    seven = builder.const(7, T.int32)
    builder.br(join, [seven])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    assert print_function(function) == (
        'func @choose(flag) -> i32 file "" {\n'
        "^bb0(%0: bool):\n"
        "  %1 = const 1 : i32\n"
        "  cbr %0, ^bb1(), ^bb2(%1)\n"
        "^bb1():\n"
        "  %2 = const 7 : i32\n"
        "  br ^bb2(%2)\n"
        "^bb2(%3: i32):\n"
        "  ret %3\n"
        "}\n")


def test_kernel_prints_sorted_attributes_special_floats_and_source_locations():
    function = Function("k", ["a"], is_kernel=True, source_file="k.py")
    builder = Builder(function)
    entry = builder.new_block((T.ArrayType(T.float64, 1, "C"),))
    builder.position_at_end(entry)
    builder.loc = Location(3, 4, "k.py")
    index = builder.op("local_id", [], T.int64, {"axis": 0})
    builder.loc = Location(9, 2, "helper.py")
    values = [builder.const(v, T.float64) for v in (-0.0, float("inf"), float("nan"))]
    flag = builder.const(True, T.bool_)
    builder.loc = None
    builder.op("print", [values[0], flag], T.void, {"format": "{} {}\n", "end": "\n"})
    builder.op("store", [entry.params[0], index, values[1]])
    builder.ret()
    assert print_function(function) == (
        'kernel @k(a) -> void file "k.py" {\n'
        "^bb0(%0: array<f64, 1, C>):\n"
        "  %1 = local_id {axis = 0} : i64 @3:4\n"
        '  %2 = const -0.0 : f64 @"helper.py":9:2\n'
        '  %3 = const "inf" : f64 @"helper.py":9:2\n'
        '  %4 = const "nan" : f64 @"helper.py":9:2\n'
        '  %5 = const true : bool @"helper.py":9:2\n'
        '  print %2, %5 {end = "\\n", format = "{} {}\\n"}\n'
        "  store %0, %1, %3\n"
        "  ret\n"
        "}\n")


def test_print_module_prints_every_function_in_order():
    module = Module()
    kernel = module.add(Function("main", [], is_kernel=True))
    builder = Builder(kernel)
    builder.position_at_end(builder.new_block())
    builder.ret()
    module.add(build_axpy())
    text = print_module(module)
    assert text.startswith('kernel @main() -> void file "" {\n^bb0():\n  ret\n}\n')
    assert text.endswith(print_function(module.functions["axpy"]))
