"""Dead code: unused operations without side effects go (loads included), chains of them
too; stores, atomics, barriers, prints and allocations stay; block parameters that only
feed themselves go."""
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function, Module
from kernelkit.ir.printer import print_function
from kernelkit.passes import run_passes

I32_ARRAY = T.ArrayType(T.int32, 1, "C")


def without_dead_code(function):
    module = Module()
    module.add(function)
    run_passes(module, ["dce"], verify=True)
    return print_function(function)


def test_unused_pure_ops_and_loads_go_but_side_effects_stay():
    function = Function("k", ["a", "i"], is_kernel=True)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((I32_ARRAY, T.int64)))
    a, i = function.params
    one = builder.const(1, T.int32)
    unused_sum = builder.op("add", [one, one], T.int32)
    builder.op("mul", [unused_sum, unused_sum], T.int32)          # unused chain
    builder.op("load", [a, i], T.int32)                           # unused load
    builder.op("local_id", [], T.int64, {"axis": 0})              # unused geometry
    builder.op("localmem", [], T.ArrayType(T.int32, 1, "C", space="local", shape=(8,)))
    builder.op("atomic.add", [a, i, one], T.int32)                # result unused
    builder.op("barrier", [])
    builder.op("print", [], T.void, {"format": "hi\n"})
    builder.op("store", [a, i, one])
    builder.ret()
    assert without_dead_code(function) == (
        'kernel @k(a, i) -> void file "" {\n'
        "^bb0(%0: array<i32, 1, C>, %1: i64):\n"
        "  %2 = const 1 : i32\n"
        "  %3 = localmem : local<i32, 8>\n"
        "  %4 = atomic.add %0, %1, %2 : i32\n"
        "  barrier\n"
        '  print {format = "hi\\n"}\n'
        "  store %0, %1, %2\n"
        "  ret\n"
        "}\n")


def test_value_used_only_by_a_terminator_is_kept():
    function = Function("f", ["x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.int32,))
    join = builder.new_block((T.int32,))
    builder.position_at_end(entry)
    builder.br(join, [builder.op("add", [entry.params[0], entry.params[0]], T.int32)])
    builder.position_at_end(join)
    builder.ret(join.params[0])
    before = print_function(function)
    assert without_dead_code(function) == before


def test_loop_parameter_that_only_feeds_itself_is_removed():
    function = Function("loop", ["n", "x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.int32, T.int32))
    header, body, exit_block = builder.new_block((T.int32, T.int32)), builder.new_block(), builder.new_block()
    n, x = entry.params
    counter, unused = header.params
    builder.position_at_end(entry)
    zero = builder.const(0, T.int32)
    builder.br(header, [zero, x])
    builder.position_at_end(header)
    builder.cbr(builder.op("lt", [counter, n], T.bool_), body, [], exit_block, [])
    builder.position_at_end(body)
    builder.br(header, [builder.op("add", [counter, builder.const(1, T.int32)], T.int32), unused])
    builder.position_at_end(exit_block)
    builder.ret(counter)
    assert without_dead_code(function) == (
        'func @loop(n, x) -> i32 file "" {\n'
        "^bb0(%0: i32, %1: i32):\n"
        "  %2 = const 0 : i32\n"
        "  br ^bb1(%2)\n"
        "^bb1(%3: i32):\n"
        "  %4 = lt %3, %0 : bool\n"
        "  cbr %4, ^bb2(), ^bb3()\n"
        "^bb2():\n"
        "  %5 = const 1 : i32\n"
        "  %6 = add %3, %5 : i32\n"
        "  br ^bb1(%6)\n"
        "^bb3():\n"
        "  ret %3\n"
        "}\n")


def test_function_arguments_are_never_removed():
    function = Function("f", ["unused", "x"], return_type=T.int32)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((T.float64, T.int32)))
    builder.ret(function.params[1])
    assert without_dead_code(function).startswith(
        'func @f(unused, x) -> i32 file "" {\n^bb0(%0: f64, %1: i32):\n')


def test_a_loop_counter_nothing_reads_but_its_own_increment_goes():
    function = Function("spin", ["n"], return_type=T.int64)
    builder = Builder(function)
    entry = builder.new_block((T.int64,))
    header, body, done = (builder.new_block((T.int64, T.int64)), builder.new_block(),
                          builder.new_block())
    (n,) = entry.params
    builder.position_at_end(entry)
    zero = builder.const(0, T.int64)
    builder.br(header, [zero, zero])
    builder.position_at_end(header)
    count, unused = header.params
    builder.cbr(builder.op("lt", [count, n], T.bool_), body, [], done, [])
    builder.position_at_end(body)
    one = builder.const(1, T.int64)
    builder.br(header, [builder.op("add", [count, one], T.int64),
                        builder.op("mul", [unused, one], T.int64)])   # feeds only itself
    builder.position_at_end(done)
    builder.ret(count)
    text = without_dead_code(function)
    assert "mul" not in text
    assert "^bb1(%2: i64):" in text
