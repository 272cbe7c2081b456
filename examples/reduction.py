"""The sum of an array, three ways, with their times:

1. a tree in local memory (as KernelAbstractions users write it): each work-group loads
   GROUP values, halves the number of active work-items each round (a barrier between
   rounds) until one value, the group's sum, is left, and work-item 0 writes it out; the
   same kernel then sums the partial sums, and again: 1_000_003 -> 3907 -> 16 -> 1;
2. subgroup operations: each work-item adds up a strided share of the array, each
   subgroup of 32 work-items sums its shares with `kk.subgroup_sum` (no local memory,
   no barrier of one's own), and its first lane adds that into the result atomically;
3. the library: `kernelkit.algorithms.sum`.

    python examples/reduction.py [--backend cpu|cuda] [--n N]
"""
import sys
import time

import numpy as np

import kernelkit as kk
import kernelkit.algorithms as ka
from _common import example_parser, parse_command_line

GROUP = 256  # work-group size; a power of two, so the halving rounds come out even
GROUPS = 64  # work-groups of the subgroup sum; each work-item adds up a strided share


@kk.kernel
def group_sums(partial, x: kk.Const, n):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local, kk.NTuple)[0]
    group = kk.index(kk.Group, kk.NTuple)[0]
    scratch = kk.localmem(np.float32, (GROUP,))
    if i < n:
        scratch[local] = x[i]
    else:
        scratch[local] = 0.0
    kk.synchronize()
    active = GROUP // 2
    while active > 0:
        if local < active:
            scratch[local] += scratch[local + active]
        kk.synchronize()
        active //= 2
    if local == 0:
        partial[group] = scratch[0]


@kk.kernel
def subgroup_sums(total, x: kk.Const, n):
    i = kk.index(kk.Global)
    stride = kk.ndrange()[0]
    share = np.float32(0.0)
    for p in range(i, n, stride):
        share += x[p]
    subgroup_total = kk.subgroup_sum(share)
    if kk.subgroup_index() == 0:
        kk.atomic_add(total, 0, subgroup_total)


def tree_sum(backend, x, n: int) -> float:
    """Reduce `x` (n values on `backend`) to one value with repeated launches of group_sums."""
    launch = group_sums(backend, GROUP)
    while n > 1:
        groups = (n + GROUP - 1) // GROUP
        partial = kk.allocate(backend, np.float32, groups)
        # Every work-item of every group must reach the barriers, so the ndrange is
        # whole groups; the kernel pads past n with zeros.
        launch(partial, x, n, ndrange=groups * GROUP)
        x, n = partial, groups
    kk.synchronize(backend)
    return float(kk.to_numpy(x)[0])


def subgroup_sum(backend, x, n: int) -> float:
    total = kk.zeros(backend, np.float32, 1)
    subgroup_sums(backend, GROUP)(total, x, n, ndrange=GROUPS * GROUP)
    kk.synchronize(backend)
    return float(kk.to_numpy(total)[0])


def library_sum(backend, x, n: int) -> float:
    return float(kk.to_numpy(ka.sum(x)))


def timed(function, *args, repeats: int = 20) -> tuple[float, float]:
    """The result and the median time of `function(*args)` (after one run)."""
    result = function(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return result, float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("three ways to sum an array with kernelkit")
    parser.add_argument("--n", type=int, default=1_000_003, help="values to sum")
    arguments, backend = parse_command_line(parser, argv)

    n = arguments.n
    x_host = np.random.default_rng(0).random(n, dtype=np.float32)
    x = kk.to_backend(backend, x_host)
    expected = float(np.sum(x_host, dtype=np.float64))
    _, numpy_time = timed(np.sum, x_host)
    ok = True
    for name, way in (("tree in local memory", tree_sum), ("subgroup_sum", subgroup_sum),
                      ("kernelkit.algorithms.sum", library_sum)):
        total, seconds = timed(way, backend, x, n)
        relative_error = abs(total - expected) / abs(expected)
        # float32 additions in a tree (or strided shares, then a tree) lose about
        # log2(n) * eps relative to the float64 sum.
        ok = ok and relative_error <= 1e-5
        print(f"  {name:26} {total:.7g}  {seconds * 1e3:8.3f} ms "
              f"(relative error {relative_error:.1e})")
    print(f"  {'numpy.sum':26} {expected:.7g}  {numpy_time * 1e3:8.3f} ms")
    print(f"reduction: {'OK' if ok else 'MISMATCH'} ({n:,} float32 on {backend})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
