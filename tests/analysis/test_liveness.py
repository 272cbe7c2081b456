"""Liveness: which values are live into and out of each block (around a loop, on small IR
written as text), and which are live across a work-group barrier (defined before it and
used after it), which a target running work-items one after another must keep per item."""
import numpy as np

import kernelkit as kk
from kernelkit.analysis.liveness import live_across_barriers, live_out, live_sets
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.function import Function
from kernelkit.ir.parser import parse_module
from kernelkit.passes import run_passes

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def test_value_defined_before_a_barrier_and_used_after_it_is_live_across():
    function = Function("k", ["a", "i"], is_kernel=True)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((F32_ARRAY, T.int64)))
    a, i = function.params
    before = builder.op("load", [a, i], T.float32)
    used_only_before = builder.op("mul", [before, before], T.float32)
    builder.op("store", [a, i, used_only_before])
    builder.op("barrier", [])
    after = builder.op("add", [before, builder.const(1.0, T.float32)], T.float32)
    builder.op("store", [a, i, after])
    builder.ret()
    assert live_across_barriers(function) == {a, i, before}


def test_function_without_barriers_has_nothing_live_across_one():
    function = Function("k", ["a", "i"], is_kernel=True)
    builder = Builder(function)
    builder.position_at_end(builder.new_block((F32_ARRAY, T.int64)))
    a, i = function.params
    builder.op("store", [a, i, builder.op("load", [a, i], T.float32)])
    builder.ret()
    assert live_across_barriers(function) == set()


def test_live_out_includes_values_passed_to_successors_and_used_there():
    function = Function("f", ["x"], return_type=T.int32)
    builder = Builder(function)
    entry = builder.new_block((T.int32,))
    join = builder.new_block((T.int32,))
    builder.position_at_end(entry)
    doubled = builder.op("add", [entry.params[0], entry.params[0]], T.int32)
    builder.br(join, [doubled])
    builder.position_at_end(join)
    builder.ret(builder.op("mul", [join.params[0], entry.params[0]], T.int32))
    outs = live_out(function)
    assert outs[entry] == {doubled, entry.params[0]}
    assert outs[join] == set()


def scan_with_barrier_in_a_loop(a, n):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, 64)
    scale = a[i] * 2.0
    total = np.float32(0)
    for step in range(n):
        scratch[local] = total
        kk.synchronize()
        total += scratch[0] * scale
    a[i] = total


def test_loop_carried_values_and_values_from_before_the_loop_are_live_across_its_barrier():
    module = translate_kernel(scan_with_barrier_in_a_loop, (F32_ARRAY, T.weak_int), (64,))
    run_passes(module, ["inline", "simplify", "dce", "cse"], verify=True)
    kernel = module.kernel
    live = live_across_barriers(kernel)
    a, n = kernel.params
    (header,) = [b for b in kernel.blocks if [p.hint for p in b.params][:1] == ["total"]]
    total, counter = header.params
    (barrier_block,) = [b for b in kernel.blocks if any(op.opcode == "barrier" for op in b.ops)]
    barrier = next(op for op in barrier_block.ops if op.opcode == "barrier")
    after_barrier = barrier_block.ops[barrier_block.ops.index(barrier) + 1:]
    (allocation,) = [op for op in kernel.ops() if op.opcode == "localmem"]
    (local,) = [op for op in kernel.ops() if op.opcode == "local_id"]
    (scale,) = [op for op in kernel.entry.ops if op.opcode == "mul" and op.type == T.float32]
    (final_store,) = [op for op in kernel.ops() if op.opcode == "store" and op.operands[0] is a]
    global_index = final_store.operands[1]
    # Defined before the loop and used after the barrier (scale), in the next iteration
    # (local, allocation, the carried total and counter) or after the loop (a, i).
    assert {a, n, total, counter, allocation, local, scale, global_index} <= live
    # Defined after the barrier, or used only before it.
    assert not live & set(after_barrier)
    assert not live & set(header.ops)
    assert kernel.entry.ops[0] not in live          # group_id: used only to compute i


SUM = '''func @sum(n) -> i64 file "f.py" {
^bb0(%0: i64):
  %1 = const 0 : i64
  %2 = const 1 : i64
  br ^bb1(%1, %1)
^bb1(%3: i64, %4: i64):
  %5 = lt %3, %0 : bool
  cbr %5, ^bb2(), ^bb3()
^bb2():
  %6 = add %4, %3 : i64
  %7 = add %3, %2 : i64
  br ^bb1(%7, %6)
^bb3():
  ret %4
}
'''


def test_values_from_before_a_loop_that_it_reads_are_live_all_around_it():
    function = parse_module(SUM).kernel
    entry, header, body, exit_block = function.blocks
    n = entry.params[0]
    zero, one = entry.ops[:2]
    counter, total = header.params
    following, added = body.ops[1], body.ops[0]
    live_in, outs = live_sets(function)
    # n and the step are read in every iteration, so they are live into the header, the
    # body and on the back edge; the start value only on the way in.
    assert live_in[header] == {n, one}
    assert outs[entry] == {n, zero, one}
    # The carried values are the header's parameters: live from there into the body and,
    # for the total, out of the loop.
    assert live_in[body] == {n, one, counter, total}
    assert outs[header] == {n, one, counter, total}
    assert outs[body] == {n, one, following, added}
    assert live_in[exit_block] == {total} and outs[exit_block] == set()
