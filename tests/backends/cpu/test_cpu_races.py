"""The CPU's race detector (`CPU(debug="races")`, KERNELKIT_DEBUG=races): racy kernels
raise a RaceError naming the kernel, the array and index, both work-items and both
source lines, with a hint; correct kernels (barriers, atomics, local and private memory,
grid-stride loops, votes, the benchmark suite's kernels) run as on a normal backend."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu.target import build_level
from kernelkit.errors import BackendError, RaceError
from tests.examples.test_examples import EXAMPLES, RUNS, load_module
from tests.source_lines import assert_points_at, line_starting_with

HERE = __file__
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def races():
    return kk.CPU(debug="races")


def race_of(backend, launch) -> RaceError:
    """The RaceError `launch()` raises, at the launch or at the synchronize after it."""
    with pytest.raises(RaceError) as info:
        launch()
        kk.synchronize(backend)
    return info.value


def assert_names_the_race(error: RaceError, kernel: str, array: str, index: tuple,
                          work_items: tuple, lines: tuple, hint: str) -> None:
    """The message names the kernel, the array, the index as a tuple, both work-items'
    global indices (`work_items`: the earlier access's first), both source lines (file:line
    and text; `lines` starts the earlier and the later access's lines) and the hint."""
    message = str(error)
    assert_points_at(error, kernel, lines[1], HERE)
    assert f"{Path(HERE).name}:{line_starting_with(HERE, lines[0])}" in message
    assert lines[0] in message
    assert f"'{array}'" in message
    assert f"element {index}" in message
    for item in work_items:
        assert f"work-item {item}" in message
    assert hint in message
    assert (error.array.split("'")[1], error.index, error.work_items) == (array, index, work_items)


# -- a histogram with plain increments ----------------------------------------------------


@kk.kernel
def histogram_plain(bins, samples: kk.Const):
    i = kk.index(kk.Global)
    bins[samples[i]] += 1


@kk.kernel
def histogram_atomic(bins, samples: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(bins, samples[i], 1)


def test_a_histogram_with_plain_increments_is_a_race_naming_both_work_items(races):
    samples = np.array([0, 1, 2, 3, 1, 5, 6, 7], np.int64)
    bins = np.zeros(8, np.int32)
    error = race_of(races, lambda: histogram_plain(races, 4)(bins, samples, ndrange=8))
    # Work-item 1 wrote bins[1]; work-item 4, of the next group, reads it.
    assert_names_the_race(error, "histogram_plain", "bins", (1,), ((1,), (4,)),
                          ("bins[samples[i]] += 1", "bins[samples[i]] += 1"),
                          "kk.atomic_add")
    assert "different work-groups" in str(error)


def test_two_work_items_of_one_group_writing_one_bin_is_a_race(races):
    samples = np.array([0, 3, 3, 1], np.int64)
    error = race_of(races, lambda: histogram_plain(races, 4)(np.zeros(4, np.int32), samples,
                                                             ndrange=4))
    assert (error.index, error.work_items) == ((3,), ((1,), (2,)))
    assert "one work-group" in str(error)


def test_the_histogram_with_atomic_add_is_not_a_race(races):
    samples = np.random.default_rng(1).integers(0, 5, 300)
    bins = np.zeros(5, np.int32)
    histogram_atomic(races, 64)(bins, samples, ndrange=len(samples))
    kk.synchronize(races)
    np.testing.assert_array_equal(bins, np.bincount(samples, minlength=5))


# -- a tree reduction in local memory -----------------------------------------------------

GROUP = 16


@kk.kernel
def tree_sum(sums, x: kk.Const):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, GROUP)
    scratch[local] = x[i]
    kk.synchronize()
    step = GROUP // 2
    while step > 0:
        if local < step:
            scratch[local] += scratch[local + step]
        kk.synchronize()
        step //= 2
    if local == 0:
        sums[kk.index(kk.Group)] = scratch[0]


@kk.kernel
def tree_sum_missing_a_barrier(sums, x: kk.Const):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    partial = kk.localmem(np.float32, GROUP)
    partial[local] = x[i]
    kk.synchronize()
    step = GROUP // 2
    while step > 0:
        if local < step:
            partial[local] += partial[local + step]
        step //= 2
    kk.synchronize()
    if local == 0:
        sums[kk.index(kk.Group)] = partial[0]


def test_a_tree_reduction_missing_its_barrier_is_a_race_in_local_memory(races):
    x = np.arange(64, dtype=np.float32)
    sums = np.zeros(4, np.float32)
    error = race_of(races, lambda: tree_sum_missing_a_barrier(races, GROUP)(sums, x,
                                                                          ndrange=64))
    # Without barriers between its steps, work-item 0 runs all of them first (reading
    # partial[1] at the last); work-item 1 then writes partial[1] at its first step.
    assert_names_the_race(error, "tree_sum_missing_a_barrier", "partial", (1,), ((0,), (1,)),
                          ("partial[local] += partial[local + step]",
                           "partial[local] += partial[local + step]"),
                          "kk.synchronize()")
    assert "local array 'partial'" in str(error)
    assert "one work-group" in str(error)


def test_the_tree_reduction_with_its_barriers_is_not_a_race(races):
    x = np.arange(64, dtype=np.float32)
    sums = np.zeros(4, np.float32)
    tree_sum(races, GROUP)(sums, x, ndrange=64)
    kk.synchronize(races)
    np.testing.assert_array_equal(sums, x.reshape(4, GROUP).sum(axis=1))


# -- transposed read-modify-writes in two dimensions --------------------------------------


@kk.kernel
def add_transposed(d, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    d[j, i] += x[i, j]
    d[i, j] += x[j, i]


def test_plain_updates_of_an_element_and_its_transpose_are_a_race(races):
    d = np.zeros((8, 8), np.float32)
    x = np.ones((8, 8), np.float32)
    error = race_of(races, lambda: add_transposed(races, (4, 4))(d, x, ndrange=(8, 8)))
    # Work-item (0, 1) updated d[0, 1] (d[i, j]); work-item (1, 0) then reads it as its
    # d[j, i].
    assert_names_the_race(error, "add_transposed", "d", (0, 1), ((0, 1), (1, 0)),
                          ("d[i, j] += x[j, i]", "d[j, i] += x[i, j]"), "kk.atomic_add")


# -- work-items of different groups -------------------------------------------------------


@kk.kernel
def write_then_read_the_next_group(y, x):
    i = kk.index(kk.Global)
    x[i] = 1.0
    kk.synchronize()
    y[i] = x[(i + 4) % 16]


@kk.kernel
def write_then_read_within_the_group(y, x):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    group_start = i - local
    x[i] = 2.0
    kk.synchronize()
    y[i] = x[group_start + (local + 1) % 4]


def test_a_write_and_a_read_by_work_items_of_different_groups_is_a_race_despite_a_barrier(races):
    x, y = np.zeros(16, np.float32), np.zeros(16, np.float32)
    error = race_of(races, lambda: write_then_read_the_next_group(races, 4)(y, x, ndrange=16))
    # Work-item 0 read x[4] before work-item 4, of the next group, wrote it.
    assert_names_the_race(error, "write_then_read_the_next_group", "x", (4,), ((0,), (4,)),
                          ("y[i] = x[(i + 4) % 16]", "x[i] = 1.0"), "two launches")
    assert "different work-groups" in str(error)


def test_a_barrier_orders_a_write_and_a_read_by_work_items_of_one_group(races):
    x, y = np.zeros(16, np.float32), np.zeros(16, np.float32)
    write_then_read_within_the_group(races, 4)(y, x, ndrange=16)
    kk.synchronize(races)
    np.testing.assert_array_equal(y, np.full(16, 2.0, np.float32))


# -- what orders accesses, and what does not ----------------------------------------------


@kk.kernel
def shift_in_local_memory(out, x: kk.Const, rounds):
    """Each round every work-item passes its value to its left neighbour."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    ring = kk.localmem(np.float32, GROUP)
    value = x[i]
    for _ in range(rounds):
        ring[local] = value
        kk.synchronize()
        value = ring[(local + 1) % GROUP]
        kk.synchronize()
    out[i] = value


@kk.kernel
def shift_missing_the_second_barrier(out, x: kk.Const, rounds):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    passed = kk.localmem(np.float32, GROUP)
    value = x[i]
    for _ in range(rounds):
        passed[local] = value
        kk.synchronize()
        value = passed[(local + 1) % GROUP]
    out[i] = value


def test_a_barrier_in_a_loop_orders_each_trip_after_the_one_before(races):
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    shift_in_local_memory(races, GROUP)(out, x, 3, ndrange=32)
    kk.synchronize(races)
    np.testing.assert_array_equal(out, np.roll(x.reshape(2, GROUP), -3, axis=1).ravel())


def test_a_loop_whose_next_trip_writes_what_others_read_without_a_barrier_is_a_race(races):
    x = np.arange(32, dtype=np.float32)
    error = race_of(races, lambda: shift_missing_the_second_barrier(races, GROUP)(
        np.zeros(32, np.float32), x, 3, ndrange=32))
    # Work-item 1's write of passed[1] in the second trip follows work-item 0's read of
    # it after the first trip's barrier, with no barrier between.
    assert_names_the_race(error, "shift_missing_the_second_barrier", "passed", (1,),
                          ((0,), (1,)), ("value = passed[(local + 1) % GROUP]",
                                         "passed[local] = value"), "kk.synchronize()")


@kk.kernel
def read_first_then_one_writes(a):
    i = kk.index(kk.Global)
    value = a[0]
    if i == 1:
        a[0] = value + 1.0


@kk.kernel
def read_first_then_the_fifth_writes(a):
    i = kk.index(kk.Global)
    value = a[0]
    if i == 4:
        a[0] = value + 1.0


def test_a_write_after_reads_by_several_work_items_conflicts_with_another_readers_read(races):
    error = race_of(races, lambda: read_first_then_one_writes(races, 2)(np.zeros(2), ndrange=2))
    assert (error.index, error.work_items) == ((0,), ((0,), (1,)))


def test_a_write_after_a_read_by_a_work_item_of_an_earlier_group_is_a_race(races):
    error = race_of(races, lambda: read_first_then_the_fifth_writes(races, 4)(np.zeros(8),
                                                                            ndrange=8))
    assert error.index == (0,) and error.work_items[1] == (4,)
    assert error.work_items[0] in {(0,), (1,), (2,), (3,)}


@kk.kernel
def count_then_read(counts, seen):
    i = kk.index(kk.Global)
    kk.atomic_add(counts, 0, 1)
    seen[i] = counts[0]


@kk.kernel
def count_twice_atomically(counts):
    i = kk.index(kk.Global)
    kk.atomic_add(counts, 0, 1)
    kk.atomic_max(counts, 1, i)


def test_an_atomic_and_a_plain_read_of_one_element_are_a_race(races):
    error = race_of(races, lambda: count_then_read(races, 4)(np.zeros(2, np.int32),
                                                              np.zeros(4, np.int32), ndrange=4))
    assert (error.index, error.work_items) == ((0,), ((0,), (1,)))
    assert "atomically" in str(error) and "only one of the two is atomic" in str(error)


def test_atomics_of_many_work_items_on_one_element_are_not_a_race(races):
    counts = np.zeros(2, np.int32)
    count_twice_atomically(races, 8)(counts, ndrange=32)
    kk.synchronize(races)
    np.testing.assert_array_equal(counts, [32, 31])


@kk.kernel
def local_histogram(bins, samples: kk.Const):
    """Counts in local memory with atomics, then added to the global counts atomically."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    counts = kk.localmem(np.int32, 4)
    if local < 4:
        counts[local] = 0
    kk.synchronize()
    kk.atomic_add(counts, samples[i], 1)
    kk.synchronize()
    if local < 4:
        kk.atomic_add(bins, local, counts[local])


@kk.kernel
def private_prefix(out, x: kk.Const):
    i = kk.index(kk.Global)
    scratch = kk.private(np.float32, 4)
    for k in range(4):
        scratch[k] = x[i] * k
    out[i] = scratch[0] + scratch[1] + scratch[2] + scratch[3]


@kk.kernel
def scale_grid_stride(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    for p in range(i, n, kk.ndrange()[0]):
        y[p] = 2.0 * x[p]


@kk.kernel
def mark_groups_with_a_large_value(flags, x: kk.Const):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    neighbours = kk.localmem(np.float32, 8)
    neighbours[local] = x[i]
    if kk.synchronize_any(x[i] > 20.0):
        flags[i] = neighbours[(local + 1) % 8]


def test_correct_kernels_with_local_memory_atomics_private_arrays_and_votes_are_not_races(races):
    samples = np.random.default_rng(2).integers(0, 4, 64)
    bins = np.zeros(4, np.int32)
    local_histogram(races, 16)(bins, samples, ndrange=64)
    x = np.arange(32, dtype=np.float32)
    prefix = np.zeros(32, np.float32)
    private_prefix(races, 8)(prefix, x, ndrange=32)
    strided = np.zeros(100, np.float32)
    scale_grid_stride(races, 8)(strided, np.ones(100, np.float32), 100, ndrange=24)
    flags = np.zeros(32, np.float32)
    mark_groups_with_a_large_value(races, 8)(flags, x, ndrange=32)
    kk.synchronize(races)
    np.testing.assert_array_equal(bins, np.bincount(samples, minlength=4))
    np.testing.assert_array_equal(prefix, 6 * x)
    np.testing.assert_array_equal(strided, np.full(100, 2.0, np.float32))
    expected = np.roll(x.reshape(4, 8), -1, axis=1).ravel()
    expected[:16] = 0   # only the last two groups have values above 20
    np.testing.assert_array_equal(flags, expected)


@kk.kernel
def shift_left(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i + 1]


def test_arrays_that_overlap_share_their_elements(races):
    buffer = np.zeros(9, np.float32)
    error = race_of(races, lambda: shift_left(races, 4)(buffer[:-1], buffer[1:], ndrange=7))
    # Work-item 0 read buffer[2] as x[1]; work-item 2 writes it as y[2].
    assert (error.index, error.work_items) == ((2,), ((0,), (2,)))
    assert "argument 'y'" in str(error) and "(as argument 'x')" in str(error)


# -- the benchmark suite and the examples -------------------------------------------------

# The benchmark suite's cases that time kernels in this process (the others start fresh
# interpreters, time compilation, or launch the same saxpy thousands of times).
BENCHMARK_CASES = ["saxpy", "copy", "stencil", "stencil_16x16", "matmul_naive", "matmul_tiled",
                   "sum", "sum_tree", "sum_atomic", "launch_overhead", "sin_x",
                   "saxpy_reverse", "stencil_reverse", "sin_x_reverse", "matmul_tiled_reverse"]


@pytest.fixture
def benchmark_suite(monkeypatch):
    """benchmarks/run.py as a module (as tests/examples loads it), at sizes small enough
    for race detection: each case's kernels run a few times and check their results."""
    suite = load_module(ROOT / "benchmarks" / "run.py", monkeypatch)
    monkeypatch.setattr(suite, "ROUNDS", 1)
    monkeypatch.setattr(suite.kernels, "SIN_SIZE", 3000)
    yield suite
    for name in ("kernels", "peers"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("case", BENCHMARK_CASES)
def test_the_benchmark_kernels_are_not_races(benchmark_suite, races, case):
    sizes = benchmark_suite.Sizes(saxpy=3000, stencil=48, matmul=32, reduction=5000,
                                  launches=3, repeats=1, process_repeats=1)
    context = benchmark_suite.Context("cpu", races, (), sizes, {})
    (bench,) = [known.run for known in benchmark_suite.CASES if known.name == case]
    measurement = bench(context)
    assert measurement.error is None
    assert measurement.correct is True


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_examples_are_not_races(name, monkeypatch, capsys, tmp_path):
    """Each example as users run it, with KERNELKIT_DEBUG=races (its `kk.CPU()` then
    detects races), checking its own result."""
    monkeypatch.setenv("KERNELKIT_DEBUG", "races")
    monkeypatch.chdir(tmp_path)
    example = load_module(EXAMPLES / f"{name}.py", monkeypatch)
    arguments, expected_line = RUNS[name]
    if name == "heat_diffusion":
        arguments = ["--steps", "4"]
    assert example.main(["--backend", "cpu", *arguments]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(expected_line) for line in lines), lines


# -- configuration ------------------------------------------------------------------------


@kk.kernel
def read_next(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i + 1]


def test_kernelkit_debug_races_makes_cpu_backends_detect_races_and_check_bounds(monkeypatch):
    monkeypatch.setenv("KERNELKIT_DEBUG", "races")
    backend = kk.CPU()
    assert backend.races and backend.debug and backend.threads == 1
    assert "debug='races'" in repr(backend)
    with pytest.raises(IndexError, match="read_next"):
        read_next(backend, 4)(np.zeros(8), np.zeros(8), ndrange=8)
        kk.synchronize(backend)
    error = race_of(backend, lambda: histogram_plain(backend, 4)(
        np.zeros(2, np.int32), np.zeros(4, np.int64), ndrange=4))
    assert error.work_items == ((0,), (1,))


def test_kernelkit_debug_one_checks_bounds_without_detecting_races(monkeypatch):
    monkeypatch.setenv("KERNELKIT_DEBUG", "1")
    backend = kk.CPU(threads=2)
    assert backend.debug and not backend.races and backend.threads == 2
    bins = np.zeros(2, np.int32)
    histogram_plain(backend, 4)(bins, np.zeros(4, np.int64), ndrange=4)
    kk.synchronize(backend)
    assert 1 <= bins[0] <= 4


def test_a_debug_value_the_cpu_does_not_know_is_refused():
    with pytest.raises(BackendError, match="'races'"):
        kk.CPU(debug="race")


def test_race_detection_changes_the_job_and_only_race_mode_code_records_accesses():
    x = np.ones(1024, np.float32)
    normal, bounds, races = kk.CPU(), kk.CPU(debug=True), kk.CPU(debug="races")
    jobs = [backend.compiler_job(shift_left.function, (), workgroupsize=(256,))
            for backend in (normal, bounds, races)]
    assert len({job.config for job in jobs}) == 3
    code = {backend: kk.code_llvm(histogram_atomic, backend, x.astype(np.int32),
                                  x.astype(np.int64), ndrange=1024, workgroupsize=256)
            for backend in (normal, bounds, races)}
    assert "kernelkit_race_access" not in code[normal] + code[bounds]
    assert "kernelkit_race_access" in code[races]
    saxpy_code = {backend: kk.code_llvm(shift_left, backend, x, x, ndrange=1023,
                                        workgroupsize=256) for backend in (normal, races)}
    # The work-item loop is vectorized normally, and runs one work-item at a time in race
    # mode (each access recorded before it happens).
    assert re.search(r"<\d+ x float>", saxpy_code[normal])
    assert not re.search(r"<\d+ x float>", saxpy_code[races])
    # Race mode builds at level 0 (the detector's calls take the time); the others at
    # their job's level.
    assert [build_level(backend.target(), job) for backend, job in
            zip((normal, bounds, races), jobs)] == [3, 3, 0]


RACY_PROGRAM = """
import numpy as np
import kernelkit as kk

@kk.kernel
def count(counts, samples: kk.Const):
    i = kk.index(kk.Global)
    counts[samples[i]] += 1

backend = kk.CPU()
try:
    count(backend, 4)(np.zeros(2, np.int32), np.zeros(8, np.int64), ndrange=8)
    kk.synchronize(backend)
except kk.RaceError as error:
    print(error.work_items, error.lines[1][1], error.array)
"""


def test_a_kernel_loaded_from_the_disk_cache_names_its_race_in_a_new_process(tmp_path):
    program = tmp_path / "racy.py"
    program.write_text(RACY_PROGRAM)
    environment = dict(os.environ, KERNELKIT_DEBUG="races", KERNELKIT_LOG="debug",
                       KERNELKIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    runs = [subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                           env=environment, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.stdout.strip() == "((0,), (1,)) 8 argument 'counts'", run.stderr
    assert "disk cache hit" in runs[1].stderr and "disk cache hit" not in runs[0].stderr


def test_a_backend_still_runs_kernels_after_a_race(races):
    race_of(races, lambda: histogram_plain(races, 4)(np.zeros(2, np.int32),
                                                     np.zeros(8, np.int64), ndrange=8))
    bins = np.zeros(2, np.int32)
    histogram_atomic(races, 4)(bins, np.zeros(8, np.int64), ndrange=8)
    kk.synchronize(races)
    np.testing.assert_array_equal(bins, [8, 0])
