"""trip-counts: a range loop with a run-time step (the grid-stride loop) gets its trip
count before the loop and counts the trips left down to 0; the count is Python's
len(range(...)) for every start, stop and step of the counter's type, the extremes
included; loops with a constant step are left alone; and a kernel compiled with the pass
runs the trips Python's range runs."""
from dataclasses import dataclass

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu.target import CPUTarget
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.function import Function
from kernelkit.ir.ops import constant_value
from kernelkit.ir.rewriter import Rewriter
from kernelkit.passes import run_passes
from kernelkit.passes.trip_counts import trip_count

F32 = T.ArrayType(T.float32, 1, "C")
GENERIC = ["inline", "simplify", "dce", "cse", "simplify", "dce"]


def grid_stride(a, n):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(i, n, kk.ndrange()[0]):
        acc += a[p]
    a[i] = acc


def constant_stride(a, n):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(i, n, 16):
        acc += a[p]
    a[i] = acc


def compiled(kernel, passes):
    module = translate_kernel(kernel, (F32, T.weak_int), (16,))
    run_passes(module, GENERIC + passes, verify=True)
    return module


def test_a_grid_stride_loop_counts_its_trips_down_from_len_range(ir_text):
    assert ir_text(compiled(grid_stride, ["trip-counts"])) == (
        'kernel @grid_stride(a, n) -> void file "FILE" {\n'
        "^bb0(%0: array<f32, 1, C>, %1: int):\n"
        "  %2 = group_id {axis = 0} : i64\n"
        "  %3 = const 16 : i64\n"
        "  %4 = mul %2, %3 : i64\n"
        "  %5 = local_id {axis = 0} : i64\n"
        "  %6 = add %4, %5 : i64\n"
        "  %7 = const 0.0 : f32\n"
        "  %8 = ndrange {axis = 0} : i64\n"
        "  %9 = cast %1 : i64\n"
        "  %10 = const 0 : i64\n"
        "  %11 = gt %8, %10 : bool\n"
        "  %12 = cast %6 : u64\n"
        "  %13 = cast %1 : u64\n"
        "  %14 = cast %8 : u64\n"
        "  %15 = const 0 : u64\n"
        "  %16 = const 1 : u64\n"
        "  %17 = sub %13, %12 : u64\n"
        "  %18 = sub %12, %13 : u64\n"
        "  %19 = select %11, %17, %18 : u64\n"
        "  %20 = sub %15, %14 : u64\n"
        "  %21 = select %11, %14, %20 : u64\n"
        "  %22 = lt %6, %9 : bool\n"
        "  %23 = gt %6, %9 : bool\n"
        "  %24 = select %11, %22, %23 : bool\n"
        "  %25 = sub %19, %16 : u64\n"
        "  %26 = floordiv %25, %21 : u64\n"
        "  %27 = add %26, %16 : u64\n"
        "  %28 = select %24, %27, %15 : u64\n"
        "  br ^bb1(%7, %6, %28)\n"
        "^bb1(%29: f32, %30: i64, %31: u64):\n"
        "  %32 = const 0 : u64\n"
        "  %33 = gt %31, %32 : bool\n"
        "  cbr %33, ^bb2(), ^bb3()\n"
        "^bb2():\n"
        "  %34 = load %0, %30 : f32\n"
        "  %35 = add %29, %34 : f32\n"
        "  %36 = add %30, %8 : i64\n"
        "  %37 = const 1 : u64\n"
        "  %38 = sub %31, %37 : u64\n"
        "  br ^bb1(%35, %36, %38)\n"
        "^bb3():\n"
        "  store %0, %6, %29\n"
        "  ret\n"
        "}\n")


def test_a_loop_with_a_constant_step_is_left_alone(ir_text):
    assert ir_text(compiled(constant_stride, ["trip-counts"])) == \
        ir_text(compiled(constant_stride, []))


def range_length(start: int, stop: int, step: int) -> int:
    """len(range(start, stop, step)), also where it is more than a C ssize_t holds."""
    return max(0, (stop - start + step - (1 if step > 0 else -1)) // step)


def folded_count(start: int, stop: int, step: int, counter: T.ScalarType) -> int:
    """trip_count of constants, which the builder folds as the compiled code computes."""
    function = Function("f", [])
    rewriter = Rewriter(function)
    rewriter.position_at_end(rewriter.new_block())
    start, stop, step = (rewriter.constant(v, counter) for v in (start, stop, step))
    upward = rewriter.constant(constant_value(step) > 0, T.bool_)
    return constant_value(trip_count(rewriter, start, stop, step, upward))


@pytest.mark.parametrize("counter, low, high", [
    (T.int64, -2**63, 2**63 - 1), (T.int8, -128, 127), (T.uint64, 0, 2**64 - 1)])
def test_the_trip_count_is_len_range_up_to_the_counter_type_s_extremes(counter, low, high):
    rng = np.random.default_rng(7)
    edges = {low, low + 1, low + 2, -1, 0, 1, 2, high - 2, high - 1, high}
    random = rng.integers(low, high, 4, endpoint=True, dtype=np.int64 if low < 0 else np.uint64)
    values = sorted({v for v in edges if low <= v <= high} | {int(v) for v in random})
    steps = [1, 2, 3, high // 3, high] + ([-1, -2, -3, low // 3, low] if low < 0 else [])
    for start in values:
        for stop in values:
            for step in steps:
                assert folded_count(start, stop, step, counter) == \
                    range_length(start, stop, step), (start, stop, step)


@dataclass(frozen=True, slots=True)
class TripCountingCPU(CPUTarget):
    """The host CPU target, with trip-counts before its own passes."""

    def passes(self) -> tuple[str, ...]:
        return ("trip-counts",) + CPUTarget.passes(self)


@kk.kernel
def count_trips(trips, last, starts: kk.Const, stops: kk.Const, steps: kk.Const):
    i = kk.index(kk.Global)
    count = 0
    final = -1
    for p in range(starts[i], stops[i], steps[i]):
        count += 1
        final = p
    trips[i] = count
    last[i] = final


def test_a_kernel_compiled_with_the_pass_runs_the_trips_of_python_s_range(monkeypatch):
    top, bottom = 2**63 - 1, -2**63
    ranges = [(0, 10, 3), (10, 0, -3), (0, 0, 1), (5, 0, 2), (0, 5, -2), (-5, 5, 1),
              (3, 4, 100), (bottom, bottom + 10, 4),
              # Where p + step passes the largest int64: Python's range stops.
              (top - 5, top, 4), (bottom + 5, bottom, -4), (0, top, 2**62), (-1, bottom, -2**62)]
    backend = kk.CPU(threads=1)
    monkeypatch.setattr(backend, "_target", TripCountingCPU.host())
    starts, stops, steps = (np.array(column, np.int64) for column in zip(*ranges))
    trips, last = np.zeros(len(ranges), np.int64), np.zeros(len(ranges), np.int64)
    count_trips(backend, 4)(trips, last, starts, stops, steps, ndrange=len(ranges))
    kk.synchronize(backend)
    assert trips.tolist() == [len(range(*r)) for r in ranges]
    assert last.tolist() == [range(*r)[-1] if len(range(*r)) else -1 for r in ranges]
    ir = kk.code_ir(count_trips, backend, trips, last, starts, stops, steps, ndrange=4)
    assert "floordiv" in ir, "the kernel was not compiled with trip-counts"
