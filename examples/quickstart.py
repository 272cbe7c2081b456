"""Quickstart: a 1-D kernel (saxpy) and a 2-D kernel (outer product), checked against numpy.

    python examples/quickstart.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line, report


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def outer(out, u: kk.Const, v: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)  # j, the last dimension, varies fastest
    out[i, j] = u[i] * v[j]


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("kernelkit quickstart")
    _, backend = parse_command_line(parser, argv)

    n = 1000
    x = kk.to_backend(backend, np.arange(n, dtype=np.float32))
    y = kk.zeros(backend, np.float32, n)
    saxpy(backend, 256)(y, 2.0, x, ndrange=n)  # asynchronous launch
    kk.synchronize(backend)
    saxpy_error = np.max(np.abs(kk.to_numpy(y) - 2.0 * np.arange(n, dtype=np.float32)))

    rows, cols = 48, 80
    u_host = np.linspace(-1.0, 1.0, rows, dtype=np.float32)
    v_host = np.linspace(0.0, 3.0, cols, dtype=np.float32)
    out = kk.allocate(backend, np.float32, (rows, cols))
    outer(backend, (16, 16))(out, kk.to_backend(backend, u_host), kk.to_backend(backend, v_host),
                             ndrange=(rows, cols))
    kk.synchronize(backend)
    outer_error = np.max(np.abs(kk.to_numpy(out) - np.outer(u_host, v_host)))

    return (report("saxpy", float(saxpy_error), 0.0)
            | report("outer product", float(outer_error), 0.0))


if __name__ == "__main__":
    sys.exit(main())
