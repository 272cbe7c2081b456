"""Sum of an array by work-group tree reduction in local memory.

Each work-group loads GROUP values into local memory and halves the number of active
work-items each round (a barrier between rounds) until one value, the group's sum, is
left; work-item 0 writes it out. The same kernel is then launched on the partial sums,
and again, until a single value remains: 100_003 -> 391 -> 2 -> 1.

    python examples/reduction.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line

GROUP = 256  # work-group size; a power of two, so the halving rounds come out even


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


def device_sum(backend, x, n: int) -> float:
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


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("tree reduction with kernelkit")
    _, backend = parse_command_line(parser, argv)

    n = 100_003
    x_host = np.random.default_rng(0).random(n, dtype=np.float32)
    total = device_sum(backend, kk.to_backend(backend, x_host), n)

    expected = float(np.sum(x_host, dtype=np.float64))
    relative_error = abs(total - expected) / abs(expected)
    # A tree of float32 additions loses about log2(n) * eps relative to the float64 sum.
    ok = relative_error <= 1e-5
    print(f"reduction: {'OK' if ok else 'MISMATCH'} "
          f"(sum {total:.6g}, relative error {relative_error:.3g} vs float64 np.sum)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
