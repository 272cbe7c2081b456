"""The kernelkit benchmark suite: each case timed with kernelkit and with its peers, side by side.

    python benchmarks/run.py [--quick] [--backend cpu|cuda] [--threads N] [--case NAME ...]
                             [--json FILE] [--plot [PATH]]

Every case is one function taking the run's `Context` (the backend, its peers, the sizes)
and returning a `Measurement`. Kernel cases compile and check the result first (a wrong
result is reported as WRONG, never timed as if it were right), then time `repeats` runs
(in the full suite, as many more as fill a quarter of a second) with
`time.perf_counter`; a kernelkit run ends with `kk.synchronize(backend)`, so the time
covers the work, not only the asynchronous launch. Kernel cases alternate kernelkit and
its peers for a few rounds and pool the samples (a shared machine's load bursts then hit
both sides alike). The table, the ratios and the targets use the median of the samples:
on a shared machine the best of 30 runs of a memory-bound kernel swings by a third from
one run of the suite to the next, the median by a few percent; --json also records the
best. Process cases (cold compile, import, the compile time of a 400- and a
1500-statement kernel) run a fresh interpreter per sample and report the time measured
inside it, so interpreter start-up is not counted.

The peers are per backend kind (`peers.PEERS`): numpy and numba on the CPU, CuPy and
PyTorch on the GPU. Memory-bound cases are also measured against the copy bandwidth of
the same run (on a GPU the driver's device-to-device memcpy of a buffer the size of
saxpy's arrays, on the CPU the `copy` kernel), counting bytes read and written.

The automatic-differentiation cases (`enzyme_ext`): `<case>_reverse` times
`autodiff(Reverse, k(backend, wg), ...)` (one combined kernel, or the augmented forward
and reverse) next to the primal launch, in a column "primal" (kk/primal is reverse /
primal), after checking the derivatives against analytic ones, and against its byte
floor (`byte_floor`: the bytes its kernels must move, at the run's copy bandwidth);
`grad_sin_x` times the gradient of sum(sin(x) * x) next to the optional gradient peers
(`peers.GRADIENT_PEERS`: JAX, Warp, Taichi; `pip install -e '.[bench-ad]'`), and
`heat_program_gradient` the gradient of a 100-step heat loop next to the same loop on
Warp's and Taichi's tapes (`peers.HEAT_GRADIENT_PEERS`, on the CPU);
`ad_cold_compile` and `ad_warm_start` time the first autodiff call in a fresh
interpreter, with an empty and with a filled cache.

The `_debug` cases run a case again on a backend with bounds checks (`debug=True`, as
KERNELKIT_DEBUG=1 gives), so the table shows what leaving them on costs.

--plot draws the table as a bar chart (`plot_rows`): each case's median times, kernelkit's
and its peers' side by side, on a log scale where they span more than a factor of 20. It
needs matplotlib (`pip install kernelkit[examples]`), checked before anything is timed.

Targets are printed next to the results and marked PASS or FAIL; they are goals for the
implementation, not assertions. The exit status is 1 only when a case fails to run or
computes a wrong result.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import kernelkit as kk
import kernels
from peers import PEERS, PRIMARY_PEER, NumpyPeer


@dataclass(frozen=True, slots=True)
class Sizes:
    saxpy: int            # elements
    stencil: int          # edge of the square grid
    matmul: int           # edge of the square matrices; a multiple of kernels.TILE
    reduction: int        # elements
    launches: int         # back-to-back launches per launch-overhead sample
    repeats: int          # timed runs per kernel case, at least
    process_repeats: int  # fresh interpreters per process case
    calls: int = 1        # launches per timed run of a memory-bound case, then one wait
                          # (on a GPU a wait costs a few percent of a launch)
    seconds: float = 0.0  # and as many more as fill this time, up to `MOST_REPEATS`


FULL = Sizes(saxpy=10_000_000, stencil=4096, matmul=1024, reduction=10_000_000,
             launches=10_000, repeats=10, process_repeats=5, seconds=0.25)
QUICK = Sizes(saxpy=1_000_000, stencil=1024, matmul=256, reduction=1_000_000,
              launches=1_000, repeats=3, process_repeats=2)
# On a GPU the arrays are larger than its last-level cache (50 MB on an H100), so that
# memory-bound cases measure memory, not the cache.
GPU_FULL = Sizes(saxpy=1 << 27, stencil=4096, matmul=2048, reduction=1 << 26,
                 launches=10_000, repeats=10, process_repeats=3, calls=10, seconds=0.25)
GPU_QUICK = Sizes(saxpy=1 << 22, stencil=1024, matmul=512, reduction=1 << 22,
                  launches=1_000, repeats=3, process_repeats=2, calls=10)


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds per run (per call, for cases that time many calls in one run)."""

    best: float
    median: float
    samples: tuple[float, ...] = ()

    @classmethod
    def from_samples(cls, samples: list[float]) -> Timing:
        return cls(best=min(samples), median=statistics.median(samples),
                   samples=tuple(samples))

    @classmethod
    def pooled(cls, timings: list[Timing]) -> Timing:
        return cls.from_samples([s for timing in timings for s in timing.samples])


@dataclass(frozen=True, slots=True)
class Measurement:
    size: str
    kernelkit: Timing | None
    peers: dict[str, Timing | None]
    correct: bool | None = None  # None where the case has no result to check
    error: str | None = None     # why kernelkit could not run the case
    bytes_moved: int | None = None  # per run, read + written, for memory-bound cases
    floor_bytes: int | None = None  # reverse mode: the bytes its kernels must move, per call


@dataclass(frozen=True, slots=True)
class Context:
    backend_name: str
    backend: object
    peers: tuple  # peer objects from peers.PEERS, in column order
    sizes: Sizes
    reference: dict  # measured once per run: "copy_bandwidth" (bytes per second)


@dataclass(frozen=True, slots=True)
class RatioTarget:
    """kernelkit's median time may be at most `limit` times the primary peer's (or, with
    `peer`, that column's: "primal" for the reverse-mode cases)."""

    limit: float
    peer: str | None = None

    def describe(self, primary: str | None) -> str:
        against = self.peer or primary
        return f"kk/{against} <= {self.limit:g}" if against else f"ratio <= {self.limit:g}"

    def verdict(self, measurement: Measurement, primary: str | None,
                reference: float | None = None) -> str:
        against = self.peer or primary
        peer = measurement.peers.get(against) if against else None
        if measurement.kernelkit is None or peer is None:
            return "n/a"
        return "PASS" if measurement.kernelkit.median <= self.limit * peer.median else "FAIL"


@dataclass(frozen=True, slots=True)
class AbsoluteTarget:
    """kernelkit's median time may be at most `limit` seconds."""

    limit: float
    unit: str

    def describe(self, primary: str | None) -> str:
        return f"<= {format_time(self.limit, self.unit)}"

    def verdict(self, measurement: Measurement, primary: str | None,
                reference: float | None = None) -> str:
        if measurement.kernelkit is None:
            return "n/a"
        return "PASS" if measurement.kernelkit.median <= self.limit else "FAIL"


@dataclass(frozen=True, slots=True)
class BandwidthTarget:
    """kernelkit's bandwidth (bytes read and written per second, median) must be at least
    `fraction` of the device-to-device copy bandwidth measured in the same run."""

    fraction: float

    def describe(self, primary: str | None) -> str:
        return f">= {self.fraction:.0%} of D2D copy"

    def verdict(self, measurement: Measurement, primary: str | None,
                reference: float | None = None) -> str:
        if measurement.kernelkit is None or not measurement.bytes_moved or not reference:
            return "n/a"
        achieved = measurement.bytes_moved / measurement.kernelkit.median
        return "PASS" if achieved >= self.fraction * reference else "FAIL"


@dataclass(frozen=True, slots=True)
class FasterThanPeersTarget:
    """kernelkit's median time must be below that of each of `peers` that ran (n/a when
    none did)."""

    peers: tuple[str, ...]

    def describe(self, primary: str | None) -> str:
        return f"kk < {', '.join(self.peers)}"

    def verdict(self, measurement: Measurement, primary: str | None,
                reference: float | None = None) -> str:
        ran = [measurement.peers[name] for name in self.peers if measurement.peers.get(name)]
        if measurement.kernelkit is None or not ran:
            return "n/a"
        return "PASS" if all(measurement.kernelkit.median < peer.median for peer in ran) \
            else "FAIL"


@dataclass(frozen=True, slots=True)
class AllTargets:
    """Every one of `targets` must hold: FAIL if one fails, PASS if the others pass or
    do not apply (n/a: a peer that is not installed), n/a if none applies."""

    targets: tuple

    def describe(self, primary: str | None) -> str:
        return "; ".join(target.describe(primary) for target in self.targets)

    def verdict(self, measurement: Measurement, primary: str | None,
                reference: float | None = None) -> str:
        verdicts = {target.verdict(measurement, primary, reference) for target in self.targets}
        return "FAIL" if "FAIL" in verdicts else "PASS" if "PASS" in verdicts else "n/a"


# ---------------------------------------------------------------------------------------
# Timing helpers


def measure(run: Callable[[], object], sizes: Sizes, calls: int = 1) -> Timing:
    """Time `sizes.repeats` runs of `run` after one untimed warm-up run (compilation,
    first-touch page faults), or more: as many as the warm-up's time says fill
    `sizes.seconds`, up to `MOST_REPEATS`. Each run makes `calls` calls, and the timing
    is per call. A short pause first lets threads of the previous measurement go idle
    (OpenMP workers spin for a while after their last parallel loop)."""
    start = time.perf_counter()
    run()
    warm_up = time.perf_counter() - start
    repeats = max(sizes.repeats, min(MOST_REPEATS, int(sizes.seconds / max(warm_up, 1e-9))))
    time.sleep(0.05)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) / calls)
    return Timing.from_samples(samples)


MOST_REPEATS = 200
"""Timed runs of one side in one round, at most (`Sizes.seconds`). On a shared machine
the median of ten runs of a few milliseconds is that of a burst of load: the full
suite's 10M-element saxpy measured 0.86-1.27x of Numba in six runs of ten runs a round,
0.99-1.05x in four of a hundred."""


ROUNDS = 3
"""Kernel cases alternate the kernelkit side and the peers this many times and pool each
side's samples, so that a burst of load on a shared machine falls on both sides."""


def measure_case(size: str, kernelkit_side: Callable[[], tuple[Timing, bool | None]],
                 peers: dict[str, Timing | None] | Callable[[], dict[str, Timing | None]]
                 ) -> Measurement:
    """Run a case's kernelkit side, which returns its timing and whether its result was
    right, and combine it with the peers' timings (or, given a function that measures
    them, alternate the two sides for `ROUNDS` rounds). A kernelkit failure is recorded,
    not raised, so the other cases and the peers still get timed."""
    rounds = ROUNDS if callable(peers) else 1
    timings, peer_rounds, correct = [], [], True
    for _ in range(rounds):
        try:
            timing, right = kernelkit_side()
        except Exception as exc:  # noqa: BLE001 - any failure is a result worth reporting
            print(traceback.format_exc(), file=sys.stderr)
            measured = peers() if callable(peers) else peers
            return Measurement(size, None, measured, error=describe_error(exc))
        timings.append(timing)
        correct = None if right is None else bool(correct and right)
        peer_rounds.append(peers() if callable(peers) else peers)
    pooled_peers = {name: (None if peer_rounds[0][name] is None else
                           Timing.pooled([r[name] for r in peer_rounds]))
                    for name in peer_rounds[0]}
    return Measurement(size, Timing.pooled(timings), pooled_peers, correct=correct)


def describe_error(exc: Exception) -> str:
    """One line for the table; the traceback goes to stderr."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def renewed(values: tuple) -> tuple:
    """`values` with each number a new object of the same value, as a user's loop passes
    a time step or a coefficient it computed each time (a launch path that knew a scalar
    by its object would be faster here than users find it). Both sides of a case pass
    their arguments through it alike."""
    return tuple(type(value)(value) if isinstance(value, np.generic) else
                 value * 1.0 if type(value) is float else value for value in values)


def renewed_activities(activities: tuple) -> tuple:
    """`activities` (enzyme_ext's) as new objects of the same classes around the same
    arrays, each scalar a new object of its value (`renewed`)."""
    from enzyme_ext import Duplicated
    from enzyme_ext.activities import Activity
    fresh = []
    for activity in activities:
        if isinstance(activity, Duplicated):
            fresh.append(type(activity)(activity.value, activity.shadow))
        elif isinstance(activity, Activity):
            fresh.append(type(activity)(*renewed((activity.value,))))
        else:
            fresh.extend(renewed((activity,)))
    return tuple(fresh)


def measure_peers(ctx: Context, operation: str, host_inputs: tuple, calls: int = 1
                  ) -> dict[str, Timing | None]:
    """Time `peer.<operation>(*inputs)` for every peer, each on its own copy of the inputs."""
    timings: dict[str, Timing | None] = {}
    for peer in ctx.peers:
        reason = peer.unavailable_reason()
        if reason:
            print(f"  {peer.name}: skipped ({reason})", file=sys.stderr)
            timings[peer.name] = None
            continue
        function = getattr(peer, operation, None)
        if function is None:   # (a library call only some peers have)
            timings[peer.name] = None
            continue
        inputs = [peer.from_numpy(value) if isinstance(value, np.ndarray) else value
                  for value in host_inputs]

        def run() -> None:
            for _ in range(calls):
                function(*renewed(inputs))
            peer.synchronize()

        timings[peer.name] = measure(run, ctx.sizes, calls)
    return timings


def timed_gradient(peer, state, sizes: Sizes) -> Timing:
    """`peer.gradient(state)` timed; a peer in a process of its own (`peers.OwnProcess`)
    is timed there."""
    timed = getattr(peer, "timed", None)
    if timed is not None:
        return timed(state, measure, sizes)
    return measure(lambda: peer.gradient(state), sizes)


def close_peers(peers: list) -> None:
    """End the processes of the peers that have one."""
    for peer in peers:
        close = getattr(peer, "close", None)
        if close is not None:
            close()


def agrees(actual: np.ndarray, expected: np.ndarray, rtol: float) -> bool:
    """Equal up to `rtol` relative to the largest expected magnitude."""
    scale = float(np.max(np.abs(expected))) or 1.0
    return bool(np.max(np.abs(actual.astype(np.float64) - expected)) <= rtol * scale)


def fresh_python(arguments: list[str], cache_directory: str | None = None,
                 field: int = -1) -> float:
    """Run a new interpreter with `arguments`; return the seconds it prints (the last
    number, or the one at `field`). Its kernelkit cache is `cache_directory` (a fresh,
    empty one by default)."""
    environment = dict(os.environ)
    # The child must import the same kernelkit as this process, installed or not.
    package_root = str(Path(kk.__file__).resolve().parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in [environment.get("PYTHONPATH")] if p])
    # Bytecode is written and read as in a user's interpreter (some environments turn
    # that off, which would time the compilation of every module's source instead).
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as empty_cache:
        environment["KERNELKIT_CACHE_DIR"] = cache_directory or empty_cache
        completed = subprocess.run([sys.executable, *arguments], capture_output=True,
                                   text=True, env=environment, check=False)
    if completed.returncode != 0:
        print(completed.stderr, file=sys.stderr)
        last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"fresh interpreter failed: {last_line}")
    return float(completed.stdout.split()[field])


def fresh_python_script(source: str, directory: str | None = None, field: int = -1) -> float:
    """Like `fresh_python`, for a script read from a file: kernelkit reads a kernel's
    source from its file, so a kernel cannot be defined in `python -c` code. With a
    `directory`, the script and the kernelkit cache live there, and stay for the next
    process."""
    if directory is not None:
        path = Path(directory) / "fresh_process.py"
        path.write_text(source)
        return fresh_python([str(path)], cache_directory=str(Path(directory) / "cache"),
                            field=field)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "fresh_process.py"
        path.write_text(source)
        return fresh_python([str(path)], field=field)


# ---------------------------------------------------------------------------------------
# Cases


def _memory_bound_case(ctx: Context, size: str, operation: str, launch, outputs_and_inputs,
                       check, peer_inputs: tuple, bytes_moved: int) -> Measurement:
    """Time `launch(*outputs_and_inputs)` (after `check()` of its first result), `calls`
    launches per run and one wait, each with new scalars (`renewed`); the peers do
    `peer.<operation>(*peer_inputs)` likewise."""
    calls = calls_per_run(ctx, bytes_moved)

    def kernelkit_side() -> tuple[Timing, bool]:
        arguments, ndrange = outputs_and_inputs()
        launch(*arguments, ndrange=ndrange)
        correct = check(arguments)

        def run() -> None:
            for _ in range(calls):
                launch(*renewed(arguments), ndrange=ndrange)
            kk.synchronize(ctx.backend)

        return measure(run, ctx.sizes, calls), correct

    measurement = measure_case(size, kernelkit_side, peers=lambda: measure_peers(
        ctx, operation, peer_inputs, calls=calls))
    return dataclasses.replace(measurement, bytes_moved=bytes_moved)


def bench_saxpy(ctx: Context) -> Measurement:
    n = ctx.sizes.saxpy
    rng = np.random.default_rng(0)
    x_host = rng.random(n, dtype=np.float32)
    y_host = rng.random(n, dtype=np.float32)
    a = np.float32(2.0)

    def arguments():
        return (kk.to_backend(ctx.backend, y_host.copy()), a,
                kk.to_backend(ctx.backend, x_host)), n

    def check(args) -> bool:
        return agrees(kk.to_numpy(args[0]), a * x_host + y_host, rtol=1e-6)

    return _memory_bound_case(ctx, f"{n:,}", "saxpy",
                              kernels.saxpy(ctx.backend, kernels.SAXPY_GROUP), arguments, check,
                              (y_host, a, x_host), bytes_moved=3 * 4 * n)


def bench_copy(ctx: Context) -> Measurement:
    n = ctx.sizes.saxpy
    x_host = np.random.default_rng(0).random(n, dtype=np.float32)

    def arguments():
        return (kk.zeros(ctx.backend, np.float32, n), kk.to_backend(ctx.backend, x_host)), n

    def check(args) -> bool:
        return bool(np.array_equal(kk.to_numpy(args[0]), x_host))

    return _memory_bound_case(ctx, f"{n:,}", "copy",
                              kernels.copy(ctx.backend, kernels.SAXPY_GROUP), arguments, check,
                              (np.zeros(n, np.float32), x_host), bytes_moved=2 * 4 * n)


def bench_stencil(ctx: Context) -> Measurement:
    edge = ctx.sizes.stencil
    u_host = np.random.default_rng(0).random((edge, edge), dtype=np.float32)
    alpha = np.float32(0.2)
    expected = u_host.copy()
    NumpyPeer().stencil5(expected, u_host, alpha)  # numpy's step is the reference

    def arguments():
        # the boundary of `out` is copied from u, never written
        return (kk.to_backend(ctx.backend, u_host.copy()), kk.to_backend(ctx.backend, u_host),
                alpha), (edge - 2, edge - 2)

    def check(args) -> bool:
        return agrees(kk.to_numpy(args[0]), expected, rtol=1e-5)

    # Each point of u is read from memory once (its neighbours come from the cache) and
    # each interior point of out written once.
    interior = (edge - 2) ** 2
    return _memory_bound_case(ctx, f"{edge}x{edge}", "stencil5",
                              kernels.stencil5(ctx.backend, kernels.STENCIL_GROUP), arguments,
                              check, (u_host.copy(), u_host, alpha),
                              bytes_moved=4 * (edge * edge + interior))


def bench_stencil_user_group(ctx: Context) -> Measurement:
    """The stencil as a GPU user launches it: (16, 16) work-groups over the whole array,
    the boundary skipped by a test in the kernel."""
    edge = ctx.sizes.stencil
    u_host = np.random.default_rng(0).random((edge, edge), dtype=np.float32)
    alpha = np.float32(0.2)
    expected = u_host.copy()
    NumpyPeer().stencil5(expected, u_host, alpha)

    def arguments():
        return (kk.to_backend(ctx.backend, u_host.copy()), kk.to_backend(ctx.backend, u_host),
                alpha), (edge, edge)

    def check(args) -> bool:
        return agrees(kk.to_numpy(args[0]), expected, rtol=1e-5)

    interior = (edge - 2) ** 2
    return _memory_bound_case(ctx, f"{edge}x{edge}", "stencil5",
                              kernels.stencil5_guarded(ctx.backend, kernels.USER_STENCIL_GROUP),
                              arguments, check, (u_host.copy(), u_host, alpha),
                              bytes_moved=4 * (edge * edge + interior))


def with_bounds_checks(bench: Callable[[Context], Measurement]) -> Callable[[Context], Measurement]:
    """`bench` on a backend of the same kind with every array access checked
    (`debug=True`, as KERNELKIT_DEBUG=1 gives): next to the plain case, what leaving the
    checks on costs."""
    def run(ctx: Context) -> Measurement:
        backend = ctx.backend
        if isinstance(backend, kk.CPU):
            checked = kk.CPU(threads=backend.threads, debug=True)
        else:
            checked = type(backend)(device=backend.device, debug=True)
        return bench(dataclasses.replace(ctx, backend=checked))
    return run


def calls_per_run(ctx: Context, bytes_moved: int) -> int:
    """The calls each timed run of a memory-bound case makes: `ctx.sizes.calls`, times as
    many as it takes to move the bytes of that many device copies (`device_copy_bandwidth`),
    so that the one wait that ends a run weighs no more in a case than in the copy it is
    compared with. (On an H100, ten copies of saxpy's arrays take 3.6 ms and ten
    4096x4096 stencil steps 0.5 ms: a wait of some microseconds weighs seven times as
    much in the stencil's run.)"""
    copy_bytes = 2 * 4 * ctx.sizes.saxpy
    return ctx.sizes.calls * max(1, -(-copy_bytes // bytes_moved))


def device_copy_bandwidth(ctx: Context) -> float:
    """Bytes read and written per second by a copy between two contiguous arrays of
    saxpy's size, median over the run's repeats: the driver's device-to-device copy
    (`kk.copyto`) on a GPU, the `copy` kernel on the CPU (on all its threads)."""
    n = ctx.sizes.saxpy
    source = kk.zeros(ctx.backend, np.float32, n)
    destination = kk.zeros(ctx.backend, np.float32, n)
    calls = ctx.sizes.calls
    copy = kernels.copy(ctx.backend, kernels.SAXPY_GROUP)

    def run() -> None:
        for _ in range(calls):
            if ctx.backend_name == "cuda":
                kk.copyto(destination, source)
            else:
                copy(destination, source, ndrange=n)
        kk.synchronize(ctx.backend)

    return 2 * 4 * n / measure(run, ctx.sizes, calls).median


def _bench_matmul(ctx: Context, kernel) -> Measurement:
    edge = ctx.sizes.matmul
    assert edge % kernels.TILE == 0, "the benchmark kernels assume whole tiles"
    rng = np.random.default_rng(0)
    a_host = rng.random((edge, edge), dtype=np.float32)
    b_host = rng.random((edge, edge), dtype=np.float32)
    expected = a_host.astype(np.float64) @ b_host.astype(np.float64)

    def kernelkit_side() -> tuple[Timing, bool]:
        a = kk.to_backend(ctx.backend, a_host)
        b = kk.to_backend(ctx.backend, b_host)
        c = kk.zeros(ctx.backend, np.float32, (edge, edge))
        launch = kernel(ctx.backend, kernels.MATMUL_GROUP)

        def run() -> None:
            launch(c, a, b, edge, ndrange=(edge, edge))
            kk.synchronize(ctx.backend)

        run()
        return measure(run, ctx.sizes), agrees(kk.to_numpy(c), expected, rtol=1e-4)

    c_host = np.zeros((edge, edge), dtype=np.float32)
    return measure_case(f"{edge}x{edge}", kernelkit_side,
                        peers=lambda: measure_peers(ctx, "matmul", (c_host, a_host, b_host)))


def bench_matmul_naive(ctx: Context) -> Measurement:
    return _bench_matmul(ctx, kernels.matmul_naive)


def bench_matmul_tiled(ctx: Context) -> Measurement:
    return _bench_matmul(ctx, kernels.matmul_tiled)


def _sum_case(ctx: Context, runner) -> Measurement:
    """The sum of n float32 next to the peers' sums: `runner(x, n)` makes the function
    that sums the backend array x and returns the result."""
    n = ctx.sizes.reduction
    x_host = np.random.default_rng(0).random(n, dtype=np.float32)
    expected = np.sum(x_host, dtype=np.float64)

    def kernelkit_side() -> tuple[Timing, bool]:
        run = runner(kk.to_backend(ctx.backend, x_host), n)
        correct = abs(run() - expected) <= 1e-4 * expected
        return measure(run, ctx.sizes), correct

    return measure_case(f"{n:,}", kernelkit_side,
                        peers=lambda: measure_peers(ctx, "total", (x_host,)))


def bench_sum(ctx: Context) -> Measurement:
    """REDUCTION_GROUPS groups whose work-items each add up a strided share, then one
    group over the groups' sums."""
    group, groups = kernels.REDUCTION_GROUP, kernels.REDUCTION_GROUPS

    def runner(x, n):
        partial = kk.allocate(ctx.backend, np.float32, groups)
        result = kk.allocate(ctx.backend, np.float32, 1)
        launch = kernels.group_sums(ctx.backend, group)

        def run() -> float:
            launch(partial, x, n, ndrange=groups * group)
            launch(result, partial, groups, ndrange=group)
            kk.synchronize(ctx.backend)
            return float(kk.to_numpy(result)[0])
        return run

    return _sum_case(ctx, runner)


def bench_sum_tree(ctx: Context) -> Measurement:
    """One element per work-item: group trees, then launches over the groups' sums until
    one is left (as KernelAbstractions users write it)."""
    group = kernels.REDUCTION_GROUP

    def runner(x, n):
        launch = kernels.tree_sums(ctx.backend, group)
        sizes = [n]
        while sizes[-1] > 1:
            sizes.append(-(-sizes[-1] // group))
        partials = [x] + [kk.allocate(ctx.backend, np.float32, size) for size in sizes[1:]]

        def run() -> float:
            for size, source, partial in zip(sizes, partials, partials[1:]):
                launch(partial, source, size, ndrange=-(-size // group) * group)
            kk.synchronize(ctx.backend)
            return float(kk.to_numpy(partials[-1])[0])
        return run

    return _sum_case(ctx, runner)


def bench_algorithms_sum(ctx: Context) -> Measurement:
    """`kernelkit.algorithms.sum`: the library's sum, as a user calls it."""
    import kernelkit.algorithms as ka

    def runner(x, n):
        def run() -> float:
            return float(kk.to_numpy(ka.sum(x)))
        return run

    return _sum_case(ctx, runner)


def bench_algorithms_cumsum(ctx: Context) -> Measurement:
    """`kernelkit.algorithms.cumsum` of n float32, next to the peers' `cumsum`."""
    import kernelkit.algorithms as ka
    n = ctx.sizes.reduction
    x_host = np.random.default_rng(0).random(n, dtype=np.float32)
    expected = np.cumsum(x_host, dtype=np.float64)

    def kernelkit_side() -> tuple[Timing, bool]:
        x = kk.to_backend(ctx.backend, x_host)
        result = {}

        def run() -> None:
            result["last"] = ka.cumsum(x)
            kk.synchronize(ctx.backend)

        run()
        correct = agrees(kk.to_numpy(result["last"]), expected, rtol=1e-5)
        return measure(run, ctx.sizes), correct

    return measure_case(f"{n:,}", kernelkit_side, peers=lambda: measure_peers(
        ctx, "cumsum", (np.zeros(n, np.float32), x_host)))


def sort_of(dtype) -> Callable[[Context], Measurement]:
    """`kernelkit.algorithms.sort` of n random numbers of `dtype`, next to the peers'."""
    def bench(ctx: Context) -> Measurement:
        import kernelkit.algorithms as ka
        n = ctx.sizes.reduction
        rng = np.random.default_rng(0)
        x_host = rng.random(n, dtype=np.float32) if dtype == np.float32 else \
            rng.integers(0, 2**32, n, dtype=np.uint32)
        expected = np.sort(x_host)

        def kernelkit_side() -> tuple[Timing, bool]:
            x = kk.to_backend(ctx.backend, x_host)
            result = {}

            def run() -> None:
                result["last"] = ka.sort(x)
                kk.synchronize(ctx.backend)

            run()
            correct = bool(np.array_equal(kk.to_numpy(result["last"]), expected))
            return measure(run, ctx.sizes), correct

        return measure_case(f"{n:,} {np.dtype(dtype).name}", kernelkit_side,
                            peers=lambda: measure_peers(ctx, "sort", (x_host,)))
    return bench


def bench_sum_atomic(ctx: Context) -> Measurement:
    """One element per work-item: group trees, each group's sum atomically added into the
    result."""
    group = kernels.REDUCTION_GROUP

    def runner(x, n):
        launch = kernels.atomic_sum(ctx.backend, group)
        result = kk.zeros(ctx.backend, np.float32, 1)
        zero = np.zeros(1, np.float32)

        def run() -> float:
            kk.copyto(result, zero)
            launch(result, x, n, ndrange=-(-n // group) * group)
            kk.synchronize(ctx.backend)
            return float(kk.to_numpy(result)[0])
        return run

    return _sum_case(ctx, runner)


def saxpy_of_size(n: int) -> Callable[[Context], Measurement]:
    """saxpy on n elements, each call a launch (with a new `a`: `renewed`) and a
    synchronize (what a small or mid-size launch costs, where the arrays are in the
    cache), next to the peers' calls."""
    def bench(ctx: Context) -> Measurement:
        rng = np.random.default_rng(0)
        x_host = rng.random(n, dtype=np.float32)
        y_host = rng.random(n, dtype=np.float32)
        a = np.float32(2.0)
        calls = min(2000, max(10, 10_000_000 // n))

        def kernelkit_side() -> tuple[Timing, bool]:
            y = kk.to_backend(ctx.backend, y_host.copy())
            x = kk.to_backend(ctx.backend, x_host)
            launch = kernels.saxpy(ctx.backend, kernels.SAXPY_GROUP)
            launch(y, a, x, ndrange=n)
            correct = agrees(kk.to_numpy(y), a * x_host + y_host, rtol=1e-6)

            def run() -> None:
                arguments = (y, a, x)
                for _ in range(calls):
                    launch(*renewed(arguments), ndrange=n)
                    kk.synchronize(ctx.backend)

            return measure(run, ctx.sizes, calls), correct

        return measure_case(f"{n:,}", kernelkit_side, peers=lambda: measure_peers(
            ctx, "saxpy", (y_host.copy(), a, x_host), calls=calls))
    return bench


def bench_launch_overhead(ctx: Context) -> Measurement:
    launches = ctx.sizes.launches

    def kernelkit_side() -> tuple[Timing, bool]:
        a = kk.zeros(ctx.backend, np.float32, 1)
        launch = kernels.increment(ctx.backend, kernels.LAUNCH_GROUP)

        def run() -> None:
            for _ in range(launches):
                launch(a, ndrange=1)
            kk.synchronize(ctx.backend)

        run()
        correct = float(kk.to_numpy(a)[0]) == launches
        return measure(run, ctx.sizes, calls=launches), correct

    peers = measure_peers(ctx, "increment", (np.zeros(1, np.float32),), calls=launches)
    return measure_case(f"{launches:,} launches", kernelkit_side, peers=peers)


KERNELKIT_COLD_COMPILE = """
import time
import numpy as np
import kernelkit as kk

@kk.kernel
def saxpy_{token}(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]

setup = time.perf_counter()
backend = {backend}
x = kk.ones(backend, np.float32, 1024)
y = kk.zeros(backend, np.float32, 1024)
start = time.perf_counter()
saxpy_{token}(backend, 256)(y, 2.0, x, ndrange=1024)
kk.synchronize(backend)
end = time.perf_counter()
print(end - start, end - setup)  # the first launch; with the backend's set-up
"""

BACKEND_EXPRESSIONS = {"cpu": "kk.CPU()", "cuda": "kk.CUDABackend()"}


def bench_cold_compile(ctx: Context) -> Measurement:
    """Creating the backend and the first launch of saxpy in a fresh interpreter (after
    `import kernelkit`, timed by the import case); on a GPU the first launch alone. Every
    sample names the kernel afresh and starts with an empty cache, so it is compiled."""
    # On a GPU, creating the backend is mostly the driver creating its context (the same
    # for every CUDA library): the GPU's figure is the first launch alone.
    gpu = ctx.backend_name == "cuda"

    def kernelkit_side() -> tuple[Timing, None]:
        backend = BACKEND_EXPRESSIONS[ctx.backend_name]
        samples = [fresh_python_script(KERNELKIT_COLD_COMPILE.format(
                       token=uuid.uuid4().hex[:12], backend=backend), field=-2 if gpu else -1)
                   for _ in range(ctx.sizes.process_repeats)]
        return Timing.from_samples(samples), None

    peers: dict[str, Timing | None] = {}
    for peer in ctx.peers:
        if peer.unavailable_reason() or peer.cold_compile_script is None:
            peers[peer.name] = None
            continue
        peers[peer.name] = Timing.from_samples(
            [fresh_python_script(peer.cold_compile_script)
             for _ in range(ctx.sizes.process_repeats)])
    return measure_case("saxpy, first launch" if gpu else "saxpy, set-up + launch",
                        kernelkit_side, peers=peers)


def bench_warm_start(ctx: Context) -> Measurement:
    """The first launch of saxpy in a fresh interpreter when an earlier process compiled
    it: a disk cache hit (Numba: `cache=True`). The backend is created before the clock
    starts (the cold compile case counts its set-up)."""
    def warm(script: str, field: int) -> Timing:
        with tempfile.TemporaryDirectory() as directory:
            fresh_python_script(script, directory)          # compiles and fills the cache
            return Timing.from_samples([fresh_python_script(script, directory, field)
                                        for _ in range(ctx.sizes.process_repeats)])

    def kernelkit_side() -> tuple[Timing, None]:
        backend = BACKEND_EXPRESSIONS[ctx.backend_name]
        return warm(KERNELKIT_COLD_COMPILE.format(token="warm", backend=backend), -2), None

    peers = {peer.name: None if peer.unavailable_reason() or peer.cold_compile_script is None
             else warm(peer.cold_compile_script.replace("parallel=True", "parallel=True, "
                                                        "cache=True"), -1)
             for peer in ctx.peers}
    return measure_case("saxpy, cache hit", kernelkit_side, peers=peers)


def _import_time(statement: str, repeats: int) -> Timing:
    code = ("import time; start = time.perf_counter(); "
            f"{statement}; print(time.perf_counter() - start)")
    return Timing.from_samples([fresh_python(["-c", code]) for _ in range(repeats)])


def bench_import(ctx: Context) -> Measurement:
    repeats = ctx.sizes.process_repeats
    peers = {peer.name: None if peer.unavailable_reason()
             else _import_time(peer.import_statement, repeats)
             for peer in ctx.peers}
    return measure_case("import kernelkit",
                        lambda: (_import_time("import kernelkit", repeats), None), peers=peers)


# ---------------------------------------------------------------------------------------
# Automatic differentiation (enzyme_ext): reverse mode next to the primal, a gradient
# next to JAX, Warp and Taichi, and the derivative kernels' compile time.


def sin_size(ctx: Context) -> int:
    """n of the sin(x) * x cases: 1M on the CPU; on a GPU saxpy's (larger than its cache)."""
    return ctx.sizes.saxpy if ctx.backend_name == "cuda" else kernels.SIN_SIZE


def bench_sin_x(ctx: Context) -> Measurement:
    """The primal of the AD cases' y = sin(x) * x, float32."""
    n = sin_size(ctx)
    x_host = np.random.default_rng(0).random(n, dtype=np.float32) * np.float32(4.0)
    expected = np.sin(x_host.astype(np.float64)) * x_host

    def arguments():
        return (kk.zeros(ctx.backend, np.float32, n), kk.to_backend(ctx.backend, x_host)), n

    def check(args) -> bool:
        return agrees(kk.to_numpy(args[0]), expected, rtol=1e-6)

    return _memory_bound_case(ctx, f"{n:,}", "sin_times_x",
                              kernels.sin_times_x(ctx.backend, kernels.SIN_GROUP), arguments,
                              check, (np.zeros(n, np.float32), x_host), bytes_moved=2 * 4 * n)


def byte_floor(n: int, itemsize: int = 4, **accesses: str) -> int:
    """The bytes a launch must move over `n` elements of `itemsize` bytes: for each array,
    "r" (read), "w" (written) or "rw". For reverse mode, from the activities, as one kernel
    does it: a Const array is read; a Duplicated array's primal is read and written as the
    primal does, and its shadow read and written where the reverse changes it (an output's
    shadow is read and zeroed, an input's is added to), an untouched one read."""
    return n * itemsize * sum(len(access) for access in accesses.values())


def _reverse_case(ctx: Context, size: str, launch, setup, check, calls: int = 1,
                  floor_bytes: int | None = None) -> Measurement:
    """Reverse mode of one launch next to the primal launch, timed alike, both on the
    run's backend: `setup()` gives (primal arguments, activities, ndrange), the
    activities wrapping the same arrays, with fresh shadows; `check(activities,
    derivatives)` judges the first `autodiff(Reverse, launch, *activities)`. A timed
    reverse run is `calls` such calls (augmented forward, reverse, and the sums of the
    Active scalars' derivatives) and one wait. The timed calls reuse the shadows as the
    first call left them: what the kernels do does not depend on the adjoints' values.
    Each call wraps the arguments in new activities around new scalar objects
    (`renewed_activities`), as a user's training loop does, and each primal launch
    passes new scalars (`renewed`). The ratio column kk/primal is reverse / primal."""
    from enzyme_ext import Reverse, autodiff

    primal_state = {}

    def kernelkit_side() -> tuple[Timing, bool]:
        arguments, activities, ndrange = setup()
        derivatives = autodiff(Reverse, launch, *activities, ndrange=ndrange)
        kk.synchronize(ctx.backend)
        correct = check(activities, derivatives)
        primal_state["arguments"], primal_state["ndrange"] = arguments, ndrange

        def run() -> None:
            for _ in range(calls):
                autodiff(Reverse, launch, *renewed_activities(activities), ndrange=ndrange)
            kk.synchronize(ctx.backend)

        return measure(run, ctx.sizes, calls), correct

    def primal() -> dict[str, Timing | None]:
        arguments, ndrange = primal_state["arguments"], primal_state["ndrange"]

        def run() -> None:
            for _ in range(calls):
                launch(*renewed(arguments), ndrange=ndrange)
            kk.synchronize(ctx.backend)

        return {"primal": measure(run, ctx.sizes, calls)}

    return dataclasses.replace(measure_case(size, kernelkit_side, peers=primal),
                               floor_bytes=floor_bytes)


def _close(actual, expected, rtol: float) -> bool:
    return abs(actual - expected) <= rtol * max(abs(expected), 1e-30)


def bench_saxpy_reverse(ctx: Context) -> Measurement:
    """y = a * x + y with y, x Duplicated and a Active: dx += a * dy, da = sum(x * dy),
    and dy (the adjoint of y's initial contents) stays dy."""
    from enzyme_ext import Active, Duplicated
    n = ctx.sizes.saxpy
    rng = np.random.default_rng(0)
    x_host = rng.random(n, dtype=np.float32)
    y_host = rng.random(n, dtype=np.float32)
    seed = rng.random(n, dtype=np.float32)
    a = np.float32(2.0)

    def setup():
        y, x = kk.to_backend(ctx.backend, y_host.copy()), kk.to_backend(ctx.backend, x_host)
        dy = kk.to_backend(ctx.backend, seed.copy())
        dx = kk.zeros(ctx.backend, np.float32, n)
        return (y, a, x), (Duplicated(y, dy), Active(a), Duplicated(x, dx)), n

    def check(activities, derivatives) -> bool:
        dy, dx = kk.to_numpy(activities[0].shadow), kk.to_numpy(activities[2].shadow)
        da = float(np.dot(x_host.astype(np.float64), seed))
        return (agrees(dx, float(a) * seed.astype(np.float64), rtol=1e-6)
                and agrees(dy, seed, rtol=0.0) and _close(derivatives[1], da, 1e-5))

    return _reverse_case(ctx, f"{n:,}", kernels.saxpy(ctx.backend, kernels.SAXPY_GROUP),
                         setup, check, calls=calls_per_run(ctx, 3 * 4 * n),
                         floor_bytes=byte_floor(n, y="rw", x="r", dy="r", dx="rw"))


def bench_stencil_reverse(ctx: Context) -> Measurement:
    """One heat step with out and u Duplicated and alpha Active (as in
    examples/ad_kernel.py): each interior point's adjoint goes back to u's five points."""
    from enzyme_ext import Active, Duplicated
    edge = ctx.sizes.stencil
    rng = np.random.default_rng(0)
    u_host = rng.random((edge, edge), dtype=np.float32)
    seed = rng.random((edge, edge), dtype=np.float32)
    alpha = np.float32(0.2)
    inner = seed.astype(np.float64)[1:-1, 1:-1]
    u64 = u_host.astype(np.float64)
    expected_du = np.zeros((edge, edge))
    expected_du[1:-1, 1:-1] += (1.0 - 4.0 * float(alpha)) * inner
    for rows, cols in ((slice(None, -2), slice(1, -1)), (slice(2, None), slice(1, -1)),
                       (slice(1, -1), slice(None, -2)), (slice(1, -1), slice(2, None))):
        expected_du[rows, cols] += float(alpha) * inner
    laplacian = (u64[:-2, 1:-1] + u64[2:, 1:-1] + u64[1:-1, :-2] + u64[1:-1, 2:]
                 - 4.0 * u64[1:-1, 1:-1])
    expected_dalpha = float(np.sum(inner * laplacian))

    def setup():
        out, u = kk.to_backend(ctx.backend, u_host.copy()), kk.to_backend(ctx.backend, u_host)
        dout = kk.to_backend(ctx.backend, seed.copy())
        du = kk.zeros(ctx.backend, np.float32, (edge, edge))
        return ((out, u, alpha), (Duplicated(out, dout), Duplicated(u, du), Active(alpha)),
                (edge - 2, edge - 2))

    def check(activities, derivatives) -> bool:
        du = kk.to_numpy(activities[1].shadow)
        return agrees(du, expected_du, rtol=1e-5) and _close(derivatives[2], expected_dalpha,
                                                             1e-4)

    interior = (edge - 2) ** 2
    return _reverse_case(ctx, f"{edge}x{edge}",
                         kernels.stencil5(ctx.backend, kernels.STENCIL_GROUP), setup, check,
                         calls=calls_per_run(ctx, 4 * (edge * edge + interior)),
                         floor_bytes=byte_floor(interior, out="w", dout="rw") +
                         byte_floor(edge * edge, u="r", du="rw"))


def bench_sin_x_reverse(ctx: Context) -> Measurement:
    """y = sin(x) * x with y and x Duplicated: dx += dy * (cos(x) * x + sin(x)), and dy
    (the adjoint of y's overwritten contents) becomes 0."""
    from enzyme_ext import Duplicated
    n = sin_size(ctx)
    rng = np.random.default_rng(0)
    x_host = rng.random(n, dtype=np.float32) * np.float32(4.0)
    seed = rng.random(n, dtype=np.float32)
    x64 = x_host.astype(np.float64)
    expected = seed * (np.cos(x64) * x64 + np.sin(x64))

    def setup():
        y, x = kk.zeros(ctx.backend, np.float32, n), kk.to_backend(ctx.backend, x_host)
        dy = kk.to_backend(ctx.backend, seed.copy())
        dx = kk.zeros(ctx.backend, np.float32, n)
        return (y, x), (Duplicated(y, dy), Duplicated(x, dx)), n

    def check(activities, derivatives) -> bool:
        return (agrees(kk.to_numpy(activities[1].shadow), expected, rtol=1e-6)
                and not np.any(kk.to_numpy(activities[0].shadow)))

    return _reverse_case(ctx, f"{n:,}", kernels.sin_times_x(ctx.backend, kernels.SIN_GROUP),
                         setup, check, calls=calls_per_run(ctx, 2 * 4 * n),
                         floor_bytes=byte_floor(n, y="w", x="r", dy="rw", dx="rw"))


HEAT_PROGRAM_STEPS = 100


def bench_heat_program_gradient(ctx: Context) -> Measurement:
    """The gradient of a Python program: 100 explicit heat steps on the stencil case's
    grid, at most 1024 x 1024 (two buffers swapped each step, the whole array's ndrange in
    the (16, 16) groups a GPU user picks, the boundary copied on one side of an `if`),
    then the final field copied out; `autodiff(Reverse, program, ...)` with the initial
    field and the result Duplicated, seeded with ones. The kk/program column is gradient
    / the same program run plainly. The peers (`peers.HEAT_GRADIENT_PEERS`, each optional,
    CPU only): the same loop recorded on a Warp `wp.Tape` and under Taichi's `ti.ad.Tape`,
    every step kept (101 arrays; a field with a time dimension), and the gradient of the
    last step's sum, timed from the first launch to the end of the backward pass, as the
    whole `autodiff` call is, each peer in a process of its own (`peers.OwnProcess`).
    Every gradient is checked against the adjoint step written in NumPy, applied 100
    times to the seed, before it is timed (a wrong peer is left out)."""
    from enzyme_ext import Duplicated, Reverse, autodiff
    from peers import HEAT_GRADIENT_PEERS
    edge = min(ctx.sizes.stencil, 1024)
    u0 = np.random.default_rng(0).random((edge, edge), dtype=np.float32)
    alpha = np.float32(0.2)
    expected = np.ones((edge, edge))
    for _ in range(HEAT_PROGRAM_STEPS):
        expected = _heat_adjoint_step(expected, float(alpha))

    def right(gradient: np.ndarray) -> bool:
        return bool(np.allclose(gradient, expected, rtol=1e-4, atol=1e-5))

    def program(initial, final):
        backend = kk.get_backend(initial)
        current, following = kk.zeros_like(initial), kk.zeros_like(initial)
        kk.copyto(current, initial)
        step = kernels.heat_step(backend, kernels.USER_STENCIL_GROUP)
        for _ in range(HEAT_PROGRAM_STEPS):
            step(following, current, alpha, ndrange=(edge, edge))
            current, following = following, current
        kk.copyto(final, current)

    initial = kk.to_backend(ctx.backend, u0)
    final = kk.zeros(ctx.backend, np.float32, (edge, edge))
    d_initial = kk.zeros(ctx.backend, np.float32, (edge, edge))

    def gradient() -> None:
        autodiff(Reverse, program, Duplicated(initial, d_initial),
                 Duplicated(final, kk.to_backend(ctx.backend, np.ones_like(u0))))
        kk.synchronize(ctx.backend)

    def kernelkit_side() -> tuple[Timing, bool]:
        kk.copyto(d_initial, np.zeros_like(u0))
        gradient()
        correct = right(kk.to_numpy(d_initial))
        return measure(gradient, ctx.sizes), correct

    peers = [] if ctx.backend_name != "cpu" else [peer() for peer in HEAT_GRADIENT_PEERS]
    states = {}
    for peer in peers:
        reason = peer.unavailable_reason()
        if reason:
            print(f"  {peer.name}: skipped ({reason})", file=sys.stderr)
            continue
        try:
            state = peer.prepare(u0, alpha, HEAT_PROGRAM_STEPS)
            result = peer.to_numpy(peer.gradient(state))
        except Exception:  # noqa: BLE001 - a failing optional peer is left out
            print(traceback.format_exc(), file=sys.stderr)
            continue
        if right(result):
            states[peer.name] = state
        else:
            print(f"  {peer.name}: left out (wrong gradient)", file=sys.stderr)

    def plain_and_peers() -> dict[str, Timing | None]:
        def run() -> None:
            program(initial, final)
            kk.synchronize(ctx.backend)
        return {"program": measure(run, ctx.sizes),
                **{peer.name: (timed_gradient(peer, states[peer.name], ctx.sizes)
                               if peer.name in states else None) for peer in peers}}

    try:
        return measure_case(f"{edge}^2 x {HEAT_PROGRAM_STEPS}", kernelkit_side,
                            peers=plain_and_peers)
    finally:
        close_peers(peers)


HEAT_CHECKPOINT_BUDGET = 10    # sqrt(HEAT_PROGRAM_STEPS) saved states


def bench_heat_checkpoint_gradient(ctx: Context) -> Measurement:
    """The heat loop of `heat_program_gradient`, its step updating the field in place
    (into a temporary, copied back), differentiated through `checkpoint(step, 100,
    budget=10)`: at most 10 saved states, the rest recomputed. The kk/taped column is
    that gradient / the same loop's gradient with every step taped."""
    from enzyme_ext import Duplicated, Reverse, autodiff, checkpoint
    edge = min(ctx.sizes.stencil, 1024)
    u0 = np.random.default_rng(0).random((edge, edge), dtype=np.float32)
    alpha = np.float32(0.2)

    def step(field):
        following = kk.empty_like(field)
        kernels.heat_step(kk.get_backend(field), kernels.USER_STENCIL_GROUP)(
            following, field, alpha, ndrange=(edge, edge))
        kk.copyto(field, following)

    def program_of(loop):
        def program(initial, final):
            field = kk.zeros_like(initial)
            kk.copyto(field, initial)
            loop(field)
            kk.copyto(final, field)
        return program

    def taped_loop(field):
        for _ in range(HEAT_PROGRAM_STEPS):
            step(field)

    checkpointed = program_of(checkpoint(step, HEAT_PROGRAM_STEPS,
                                         budget=HEAT_CHECKPOINT_BUDGET))
    taped = program_of(taped_loop)
    initial = kk.to_backend(ctx.backend, u0)
    final = kk.zeros(ctx.backend, np.float32, (edge, edge))
    d_initial = kk.zeros(ctx.backend, np.float32, (edge, edge))

    def gradient_of(program) -> Callable[[], None]:
        def gradient() -> None:
            autodiff(Reverse, program, Duplicated(initial, d_initial),
                     Duplicated(final, kk.to_backend(ctx.backend, np.ones_like(u0))))
            kk.synchronize(ctx.backend)
        return gradient

    def kernelkit_side() -> tuple[Timing, bool]:
        kk.copyto(d_initial, np.zeros_like(u0))
        gradient_of(checkpointed)()
        expected = np.ones((edge, edge))
        for _ in range(HEAT_PROGRAM_STEPS):
            expected = _heat_adjoint_step(expected, float(alpha))
        correct = bool(np.allclose(kk.to_numpy(d_initial), expected, rtol=1e-4, atol=1e-5))
        return measure(gradient_of(checkpointed), ctx.sizes), correct

    def every_step_taped() -> dict[str, Timing | None]:
        return {"taped": measure(gradient_of(taped), ctx.sizes)}

    return measure_case(f"{edge}^2 x {HEAT_PROGRAM_STEPS}, budget {HEAT_CHECKPOINT_BUDGET}",
                        kernelkit_side, peers=every_step_taped)


def _heat_adjoint_step(adjoint: np.ndarray, alpha: float) -> np.ndarray:
    """The adjoint of `kernels.heat_step`: the boundary's adjoint passes through; each
    interior element's goes (1 - 4 alpha) to itself and alpha to each neighbour."""
    inner = np.zeros_like(adjoint)
    inner[1:-1, 1:-1] = adjoint[1:-1, 1:-1]
    result = adjoint - inner + (1.0 - 4.0 * alpha) * inner
    result[:-1, :] += alpha * inner[1:, :]
    result[1:, :] += alpha * inner[:-1, :]
    result[:, :-1] += alpha * inner[:, 1:]
    result[:, 1:] += alpha * inner[:, :-1]
    return result


def bench_matmul_tiled_reverse(ctx: Context) -> Measurement:
    """C = A @ B (the local-memory kernel) with C, A, B Duplicated: dA = dC @ B.T,
    dB = A.T @ dC, in one launch without a tape. The edge is at most
    kernels.MATMUL_REVERSE_EDGE's for the backend."""
    from enzyme_ext import Duplicated
    edge = min(ctx.sizes.matmul, kernels.MATMUL_REVERSE_EDGE.get(ctx.backend_name, 512))
    rng = np.random.default_rng(0)
    a_host = rng.random((edge, edge), dtype=np.float32)
    b_host = rng.random((edge, edge), dtype=np.float32)
    seed = rng.random((edge, edge), dtype=np.float32)
    expected_da = seed.astype(np.float64) @ b_host.T.astype(np.float64)
    expected_db = a_host.T.astype(np.float64) @ seed.astype(np.float64)

    def setup():
        a, b = kk.to_backend(ctx.backend, a_host), kk.to_backend(ctx.backend, b_host)
        c = kk.zeros(ctx.backend, np.float32, (edge, edge))
        dc = kk.to_backend(ctx.backend, seed.copy())
        da = kk.zeros(ctx.backend, np.float32, (edge, edge))
        db = kk.zeros(ctx.backend, np.float32, (edge, edge))
        return ((c, a, b, edge), (Duplicated(c, dc), Duplicated(a, da), Duplicated(b, db), edge),
                (edge, edge))

    def check(activities, derivatives) -> bool:
        return (agrees(kk.to_numpy(activities[1].shadow), expected_da, rtol=1e-4)
                and agrees(kk.to_numpy(activities[2].shadow), expected_db, rtol=1e-4))

    return _reverse_case(ctx, f"{edge}x{edge}",
                         kernels.matmul_tiled(ctx.backend, kernels.MATMUL_GROUP), setup, check)


def bench_grad_sin_x(ctx: Context) -> Measurement:
    """The gradient of loss(x) = sum(sin(x) * x), float32, as a user of each library
    writes it. kernelkit: the elementwise kernel y = sin(x) * x (kernels.sin_times_x,
    no atomics), differentiated with `autodiff(Reverse, ...)` seeded with dy = ones, the
    gradient of a sum; each gradient allocates its y, dy = ones and dx = zeros, as JAX's
    returns a new array. The peers (`peers.GRADIENT_PEERS`, each optional): jax.jit of
    jax.grad; a Warp kernel adding into a loss with wp.Tape; a Taichi kernel adding into
    a loss field with ti.ad.Tape; on the GPU backend, each on its GPU; each in a process
    of its own (`peers.OwnProcess`). Each gradient is
    checked against cos(x) * x + sin(x) before it is timed (a wrong peer is left out).
    --threads does not reach the gradient peers (JAX and Taichi use every core, Warp's
    CPU kernels run on one thread)."""
    from enzyme_ext import Duplicated, Reverse, autodiff
    from peers import GRADIENT_PEERS
    n = sin_size(ctx)
    x_host = np.random.default_rng(0).random(n, dtype=np.float32) * np.float32(4.0)
    x64 = x_host.astype(np.float64)
    expected = np.cos(x64) * x64 + np.sin(x64)
    gpu = ctx.backend_name == "cuda"
    launch = kernels.sin_times_x(ctx.backend, kernels.SIN_GROUP)

    def kernelkit_side() -> tuple[Timing, bool]:
        x = kk.to_backend(ctx.backend, x_host)

        def gradient():
            y = kk.allocate(ctx.backend, np.float32, n)
            dy = kk.ones(ctx.backend, np.float32, n)
            dx = kk.zeros(ctx.backend, np.float32, n)
            autodiff(Reverse, launch, Duplicated(y, dy), Duplicated(x, dx), ndrange=n)
            kk.synchronize(ctx.backend)
            return dx

        correct = agrees(kk.to_numpy(gradient()), expected, rtol=1e-6)
        return measure(gradient, ctx.sizes), correct

    peers, states = [peer_class(gpu=gpu) for peer_class in GRADIENT_PEERS], {}
    for peer in peers:
        reason = peer.unavailable_reason()
        if reason:
            print(f"  {peer.name}: skipped ({reason})", file=sys.stderr)
            continue
        try:
            state = peer.prepare(x_host)
            result = peer.to_numpy(peer.gradient(state))
        except Exception:  # noqa: BLE001 - a failing optional peer is left out
            print(traceback.format_exc(), file=sys.stderr)
            continue
        if agrees(result, expected, rtol=1e-5):
            states[peer.name] = state
        else:
            print(f"  {peer.name}: left out (wrong gradient)", file=sys.stderr)

    def measure_peers_ad() -> dict[str, Timing | None]:
        return {peer.name: (timed_gradient(peer, states[peer.name], ctx.sizes)
                            if peer.name in states else None) for peer in peers}

    try:
        return measure_case(f"{n:,}", kernelkit_side, peers=measure_peers_ad)
    finally:
        close_peers(peers)


AD_COMPILE_SCRIPT = """
import time
import numpy as np
import kernelkit as kk
from enzyme_ext import Duplicated, Reverse, autodiff

@kk.kernel
def sin_times_x_{token}(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * x[i]

backend = {backend}
n = 1024
x = kk.ones(backend, np.float32, n)
y = kk.zeros(backend, np.float32, n)
launch = sin_times_x_{token}(backend, 256)
launch(y, x, ndrange=n)  # the primal is compiled and run first
kk.synchronize(backend)

def gradient():
    dy = kk.ones(backend, np.float32, n)
    dx = kk.zeros(backend, np.float32, n)
    kk.synchronize(backend)
    start = time.perf_counter()
    autodiff(Reverse, launch, Duplicated(y, dy), Duplicated(x, dx), ndrange=n)
    kk.synchronize(backend)
    return time.perf_counter() - start

first = gradient()
again = gradient()
print(first, first - again)  # the first autodiff call; less a second one's launches
"""


LONG_KERNEL_SCRIPT = """
import time
import numpy as np
import kernelkit as kk

@kk.kernel
def long_kernel_{token}(y, x: kk.Const, c, d):
    i = kk.index(kk.Global)
    a = x[i]
{statements}
    y[i] = a

backend = {backend}
x = kk.ones(backend, np.float32, 1024)
y = kk.zeros(backend, np.float32, 1024)
start = time.perf_counter()
long_kernel_{token}(backend, 256)(y, x, np.float32(0.5), np.float32(0.25), ndrange=1024)
kk.synchronize(backend)
print(time.perf_counter() - start)
"""


def long_kernel_compile(statements: int):
    """Compiling (and running once) a straight-line kernel of `statements` statements
    `a = kk.sin(a) * c + d` in a fresh interpreter with an empty cache: compile time
    should grow linearly with a kernel's length."""
    def bench(ctx: Context) -> Measurement:
        backend = BACKEND_EXPRESSIONS[ctx.backend_name]
        body = "\n".join("    a = kk.sin(a) * c + d" for _ in range(statements))

        def kernelkit_side() -> tuple[Timing, None]:
            samples = [fresh_python_script(LONG_KERNEL_SCRIPT.format(
                           token=uuid.uuid4().hex[:12], backend=backend, statements=body))
                       for _ in range(ctx.sizes.process_repeats)]
            return Timing.from_samples(samples), None

        return measure_case(f"{statements} statements", kernelkit_side, peers={})
    return bench


def bench_ad_cold_compile(ctx: Context) -> Measurement:
    """Compiling both derivative kernels of y = sin(x) * x (augmented forward and
    reverse) in a fresh interpreter with an empty cache, after the primal was compiled
    and run: the first `autodiff(Reverse, ...)` call less a second one (its launches,
    n = 1024). Every sample names the kernel afresh."""
    backend = BACKEND_EXPRESSIONS[ctx.backend_name]

    def kernelkit_side() -> tuple[Timing, None]:
        samples = [fresh_python_script(AD_COMPILE_SCRIPT.format(
                       token=uuid.uuid4().hex[:12], backend=backend))
                   for _ in range(ctx.sizes.process_repeats)]
        return Timing.from_samples(samples), None

    return measure_case("sin(x)*x, both kernels", kernelkit_side, peers={})


def bench_ad_warm_start(ctx: Context) -> Measurement:
    """The same first `autodiff(Reverse, ...)` call (less a second one) in a fresh
    interpreter when an earlier process compiled the derivative kernels: disk cache hits."""
    backend = BACKEND_EXPRESSIONS[ctx.backend_name]

    def kernelkit_side() -> tuple[Timing, None]:
        script = AD_COMPILE_SCRIPT.format(token="warm", backend=backend)
        with tempfile.TemporaryDirectory() as directory:
            fresh_python_script(script, directory)          # compiles and fills the cache
            return Timing.from_samples([fresh_python_script(script, directory)
                                        for _ in range(ctx.sizes.process_repeats)]), None

    return measure_case("sin(x)*x, cache hit", kernelkit_side, peers={})


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    unit: str  # how its times are shown: "s", "ms" or "us"
    targets: dict  # per backend kind: a RatioTarget, AbsoluteTarget, BandwidthTarget,
                   # FasterThanPeersTarget, or AllTargets of several
    run: Callable[[Context], Measurement]


CASES = (
    Case("saxpy", "ms", {"cpu": RatioTarget(1.1), "cuda": BandwidthTarget(0.9)}, bench_saxpy),
    Case("copy", "ms", {"cuda": BandwidthTarget(0.9)}, bench_copy),
    Case("stencil", "ms", {"cpu": RatioTarget(1.1), "cuda": BandwidthTarget(0.85)},
         bench_stencil),
    Case("saxpy_debug", "ms", {}, with_bounds_checks(bench_saxpy)),
    Case("stencil_debug", "ms", {}, with_bounds_checks(bench_stencil)),
    Case("matmul_naive", "ms", {"cpu": RatioTarget(1.5)}, bench_matmul_naive),
    Case("matmul_tiled", "ms", {"cpu": RatioTarget(1.5)}, bench_matmul_tiled),
    Case("stencil_16x16", "ms", {"cpu": RatioTarget(1.1)}, bench_stencil_user_group),
    Case("sum", "ms", {"cpu": RatioTarget(1.0)}, bench_sum),
    Case("sum_tree", "ms", {"cpu": RatioTarget(1.0)}, bench_sum_tree),
    Case("sum_atomic", "ms", {"cpu": RatioTarget(1.0)}, bench_sum_atomic),
    # The library (`kernelkit.algorithms`) next to NumPy's and CuPy's calls.
    Case("algorithms_sum", "ms", {"cpu": RatioTarget(1.0, "numpy"),
                                  "cuda": RatioTarget(1.1, "cupy")}, bench_algorithms_sum),
    Case("algorithms_cumsum", "ms", {"cpu": RatioTarget(1.0, "numpy"),
                                     "cuda": RatioTarget(1.3, "cupy")}, bench_algorithms_cumsum),
    Case("algorithms_sort_float32", "ms", {"cpu": RatioTarget(1.0, "numpy"),
                                           "cuda": RatioTarget(1.5, "cupy")}, sort_of(np.float32)),
    Case("algorithms_sort_uint32", "ms", {"cpu": RatioTarget(1.0, "numpy"),
                                          "cuda": RatioTarget(1.5, "cupy")}, sort_of(np.uint32)),
    *(Case(f"saxpy_{n:.0e}".replace("+0", ""), "us", {"cpu": RatioTarget(1.2)},
           saxpy_of_size(n)) for n in (1000, 10_000, 100_000, 1_000_000)),
    Case("launch_overhead", "us", {"cpu": AbsoluteTarget(20e-6, "us"),
                                   "cuda": AbsoluteTarget(5e-6, "us")}, bench_launch_overhead),
    Case("cold_compile", "s", {"cpu": AbsoluteTarget(0.3, "s"),
                               "cuda": AbsoluteTarget(0.3, "s")}, bench_cold_compile),
    Case("warm_start", "ms", {"cpu": AbsoluteTarget(0.03, "ms"),
                              "cuda": AbsoluteTarget(0.03, "ms")}, bench_warm_start),
    Case("import", "s", {"cpu": AbsoluteTarget(0.3, "s"), "cuda": AbsoluteTarget(0.3, "s")},
         bench_import),
    Case("compile_400_statements", "s", {"cpu": AbsoluteTarget(1.5, "s")},
         long_kernel_compile(400)),
    Case("compile_1500_statements", "s", {"cpu": AbsoluteTarget(6.0, "s")},
         long_kernel_compile(1500)),
    # Automatic differentiation: reverse mode (kk) next to the primal (kk/primal =
    # reverse / primal), the gradient next to JAX, Warp and Taichi, compile times.
    Case("sin_x", "ms", {}, bench_sin_x),
    Case("saxpy_reverse", "ms", {"cpu": RatioTarget(2.5, "primal"),
                                 "cuda": RatioTarget(3.0, "primal")}, bench_saxpy_reverse),
    Case("stencil_reverse", "ms", {"cpu": RatioTarget(2.5, "primal"),
                                   "cuda": RatioTarget(3.0, "primal")}, bench_stencil_reverse),
    Case("sin_x_reverse", "ms", {"cpu": RatioTarget(2.5, "primal"),
                                 "cuda": RatioTarget(3.0, "primal")}, bench_sin_x_reverse),
    Case("matmul_tiled_reverse", "ms", {"cpu": RatioTarget(4.0, "primal"),
                                        "cuda": RatioTarget(4.0, "primal")},
         bench_matmul_tiled_reverse),
    Case("heat_program_gradient", "ms",
         {"cpu": AllTargets((RatioTarget(3.0, "program"),
                             FasterThanPeersTarget(("warp", "taichi"))))},
         bench_heat_program_gradient),
    Case("heat_checkpoint_gradient", "ms", {"cpu": RatioTarget(2.0, "taped")},
         bench_heat_checkpoint_gradient),
    Case("grad_sin_x", "ms", {"cpu": FasterThanPeersTarget(("jax", "warp", "taichi"))},
         bench_grad_sin_x),
    Case("ad_cold_compile", "s", {"cpu": AbsoluteTarget(0.3, "s"),
                                  "cuda": AbsoluteTarget(0.3, "s")}, bench_ad_cold_compile),
    Case("ad_warm_start", "ms", {"cpu": AbsoluteTarget(0.03, "ms"),
                                 "cuda": AbsoluteTarget(0.03, "ms")}, bench_ad_warm_start),
)


# ---------------------------------------------------------------------------------------
# Report

UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6}


def format_time(seconds: float, unit: str) -> str:
    value = seconds * UNIT_SCALE[unit]
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"


def format_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "n/a"
    return f"{ratio:.3g}x" if ratio < 1000 else f"{ratio:.0f}x"


def status_of(case: Case, measurement: Measurement, ctx: Context, primary: str | None) -> str:
    if measurement.error is not None:
        return "ERROR"
    if measurement.correct is False:
        return "WRONG"
    target = case.targets.get(ctx.backend_name)
    return target.verdict(measurement, primary, ctx.reference.get("copy_bandwidth")) \
        if target else ""


def ratio_columns(peer_names: list[str], primary: str | None) -> list[str]:
    """Ratios against the primary peer first, then the others."""
    return sorted(peer_names, key=lambda name: name != primary)


def timing_record(timing: Timing | None) -> dict | None:
    return None if timing is None else {"best": timing.best, "median": timing.median}


def result_rows(results: list[tuple[Case, Measurement]], peer_names: list[str],
                ctx: Context, primary: str | None) -> list[dict]:
    """One JSON-ready record per case; times in seconds."""
    rows = []
    for case, measurement in results:
        kernelkit = measurement.kernelkit
        ratios = {}
        for name in peer_names:
            peer = measurement.peers.get(name)
            ratios[name] = (kernelkit.median / peer.median
                            if kernelkit is not None and peer is not None else None)
        target = case.targets.get(ctx.backend_name)
        bandwidth = (measurement.bytes_moved / kernelkit.median
                     if measurement.bytes_moved and kernelkit is not None else None)
        rows.append({
            "case": case.name,
            "size": measurement.size,
            "unit": case.unit,
            "kernelkit": timing_record(kernelkit),
            "peers": {name: timing_record(measurement.peers.get(name)) for name in peer_names},
            "ratios": ratios,
            "target": target.describe(primary) if target else None,
            "status": status_of(case, measurement, ctx, primary),
            "bandwidth": bandwidth,
            "peer_bandwidths": {name: (measurement.bytes_moved / peer["median"]
                                       if measurement.bytes_moved and peer else None)
                                for name, peer in ((n, timing_record(measurement.peers.get(n)))
                                                   for n in peer_names)},
            "error": measurement.error,
            "floor_bytes": measurement.floor_bytes,
            "floor_ratio": (kernelkit.median * ctx.reference["copy_bandwidth"] /
                            measurement.floor_bytes
                            if measurement.floor_bytes and kernelkit is not None and
                            ctx.reference.get("copy_bandwidth") else None),
        })
    return rows


def print_floors(rows: list[dict]) -> None:
    """Reverse-mode cases against their byte floor: the time a copy of that many bytes
    takes at the run's copy bandwidth."""
    measured = [row for row in rows if row.get("floor_ratio")]
    if not measured:
        return
    print("\nreverse mode against its byte floor (the bytes its kernels must move, at the "
          "copy's bandwidth)")
    for row in measured:
        print(f"  {row['case']}: {row['floor_bytes'] / 2 ** 20:.0f} MiB a call, "
              f"{row['floor_ratio']:.2f}x the floor")


def print_table(rows: list[dict], peer_names: list[str], primary: str | None) -> None:
    ratio_names = ratio_columns(peer_names, primary)
    header = (["case", "size", "kernelkit"] + peer_names
              + [f"kk/{name}" for name in ratio_names] + ["target", "status"])
    lines = [header]
    for row in rows:
        def cell(timing: dict | None) -> str:
            return "n/a" if timing is None else format_time(timing["median"], row["unit"])
        ratios = [format_ratio(row["ratios"][name]) for name in ratio_names]
        kernelkit = "error" if row["error"] else cell(row["kernelkit"])
        lines.append([row["case"], row["size"], kernelkit]
                     + [cell(row["peers"][name]) for name in peer_names]
                     + ratios + [row["target"] or "-", row["status"]])
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for index, line in enumerate(lines):
        print(" | ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
        if index == 0:
            print("-+-".join("-" * width for width in widths))
    for row in rows:
        if row["error"]:
            print(f"{row['case']}: {row['error']}")


def print_bandwidths(rows: list[dict], reference: float | None) -> None:
    """Memory-bound cases in GB/s (bytes read and written), against the copy bandwidth."""
    measured = [row for row in rows if row.get("bandwidth")]
    if not measured:
        return
    print(f"\nbandwidth (read + written), GB/s; copy: "
          f"{reference / 1e9:.0f} GB/s" if reference else "\nbandwidth (read + written), GB/s")
    for row in measured:
        share = f" ({row['bandwidth'] / reference:.0%} of copy)" if reference else ""
        peers = ", ".join(f"{name} {value / 1e9:.0f}" for name, value in
                          row["peer_bandwidths"].items() if value)
        print(f"  {row['case']}: kernelkit {row['bandwidth'] / 1e9:.0f}{share}"
              f"{'; ' + peers if peers else ''}")


def plot_rows(rows: list[dict], path: str, title: str) -> None:
    """Draw `result_rows`' records as a bar chart in a PNG at `path`: for each case, its
    median times side by side (kernelkit first, then each peer that ran it), one colour
    per column across the cases. A case that went wrong shows its status under its name."""
    from matplotlib.figure import Figure

    figure = Figure(layout="constrained")
    ax = figure.subplots()
    colours: dict[str, str] = {}
    ticks, labels, times = [], [], []
    position = 0.0
    for row in rows:
        bars = [(name, timing["median"]) for name, timing
                in [("kernelkit", row["kernelkit"]), *row["peers"].items()] if timing]
        for offset, (name, seconds) in enumerate(bars):
            first_bar_of_column = name not in colours
            colours.setdefault(name, f"C{len(colours)}")
            ax.bar(position + offset, seconds, width=0.9, color=colours[name],
                   label=name if first_bar_of_column else "_nolegend_")
            times.append(seconds)
        ticks.append(position + (len(bars) - 1) / 2 if bars else position)
        status = row["status"] if row["status"] in ("ERROR", "WRONG") else ""
        labels.append(f"{row['case']}\n{status}" if status else row["case"])
        position += max(len(bars), 1) + 1.0
    figure.set_size_inches(max(6.0, 0.2 * position + 2.0), 4.5)
    ax.set_xticks(ticks, labels, rotation=45, ha="right")
    if times and max(times) > 20 * min(times):
        ax.set_yscale("log")
    ax.set_ylabel("median time (s)")
    ax.set_title(title)
    if colours:
        ax.legend()
    figure.savefig(path, dpi=100)


def matplotlib_missing() -> str | None:
    """Why --plot cannot draw here, or None."""
    try:
        import matplotlib.figure  # noqa: F401 - only whether it imports
    except ImportError:
        return "--plot needs matplotlib: pip install kernelkit[examples]"
    return None


def environment(args: argparse.Namespace) -> dict:
    def version(module: str) -> str | None:
        try:
            return __import__(module).__version__
        except ImportError:
            return None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "kernelkit": getattr(kk, "__version__", None),
        "numpy": np.__version__,
        "numba": version("numba"),
    }


# ---------------------------------------------------------------------------------------
# Command line


def make_backend(name: str, threads: int | None):
    if name == "cuda":
        return kk.CUDABackend()
    return kk.CPU(threads=threads) if threads else kk.CPU()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kernelkit benchmark suite")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--backend", choices=tuple(BACKEND_EXPRESSIONS), default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="worker threads for kernelkit and the peers (default: theirs)")
    parser.add_argument("--case", action="append", choices=[case.name for case in CASES],
                        help="run only this case (repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--plot", metavar="PATH", nargs="?", const="",
                        help="also draw the table as a bar chart in a PNG "
                             "(default: benchmarks-BACKEND.png)")
    args = parser.parse_args(argv)
    if args.plot is not None and (reason := matplotlib_missing()):
        parser.error(reason)

    peers = tuple(peer_class() for peer_class in PEERS.get(args.backend, ()))
    if args.threads:
        for peer in peers:
            if not peer.unavailable_reason():
                peer.set_threads(args.threads)
    gpu = args.backend == "cuda"
    sizes = (GPU_QUICK if args.quick else GPU_FULL) if gpu else (QUICK if args.quick else FULL)
    ctx = Context(backend_name=args.backend, backend=make_backend(args.backend, args.threads),
                  peers=peers, sizes=sizes, reference={})
    ctx.reference["copy_bandwidth"] = device_copy_bandwidth(ctx)
    primary = PRIMARY_PEER.get(args.backend)

    results = []
    for case in CASES:
        if args.case and case.name not in args.case:
            continue
        print(f"running {case.name} ...", file=sys.stderr, flush=True)
        try:
            measurement = case.run(ctx)
        except Exception as exc:  # noqa: BLE001 - a peer that fails must not stop the suite
            print(traceback.format_exc(), file=sys.stderr)
            measurement = Measurement("", None, {}, error=describe_error(exc))
        results.append((case, measurement))

    # The backend's peers, then the columns only some cases have (the primal of the
    # reverse-mode cases, the gradient peers), in the order they first appear.
    peer_names = [peer.name for peer in peers]
    for _, measurement in results:
        peer_names += [name for name in measurement.peers if name not in peer_names]
    rows = result_rows(results, peer_names, ctx, primary)
    print(f"\nkernelkit benchmarks, backend {args.backend}"
          f"{' (quick sizes)' if args.quick else ''}; medians of the pooled runs\n")
    print_table(rows, peer_names, primary)
    print_bandwidths(rows, ctx.reference.get("copy_bandwidth"))
    print_floors(rows)
    if args.json:
        report = {"backend": args.backend, "quick": args.quick, "primary_peer": primary,
                  "copy_bandwidth": ctx.reference.get("copy_bandwidth"),
                  "environment": environment(args), "cases": rows}
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.plot is not None:
        path = args.plot or f"benchmarks-{args.backend}.png"
        plot_rows(rows, path, f"kernelkit benchmarks, backend {args.backend}"
                              f"{' (quick sizes)' if args.quick else ''}")
        print(f"\nwrote {path}")
    return 1 if any(row["status"] in ("ERROR", "WRONG") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
