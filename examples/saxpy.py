"""saxpy, y = a * x + y: one work-item per element, checked against numpy.

The length is deliberately not a multiple of the work-group size: work-items of the last,
partial work-group that fall outside the ndrange do not run, so the kernel needs no guard.

    python examples/saxpy.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line, report


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("saxpy with kernelkit")
    _, backend = parse_command_line(parser, argv)

    n = 100_003
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(n, dtype=np.float32)
    y_host = rng.standard_normal(n, dtype=np.float32)
    a = np.float32(2.5)

    x = kk.to_backend(backend, x_host)
    # On the CPU, to_backend shares memory with its argument: copy what the kernel writes.
    y = kk.to_backend(backend, y_host.copy())
    saxpy(backend, 256)(y, a, x, ndrange=n)
    kk.synchronize(backend)

    expected = a * x_host + y_host
    # The compiler may fuse a * x + y into one FMA, which rounds once instead of twice.
    tolerance = 4 * np.finfo(np.float32).eps * float(np.max(np.abs(expected)))
    return report("saxpy", float(np.max(np.abs(kk.to_numpy(y) - expected))), tolerance)


if __name__ == "__main__":
    sys.exit(main())
