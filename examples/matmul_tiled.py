"""Tiled matrix multiply, C = A @ B, staging 16x16 tiles of A and B in work-group local memory.

Each work-group computes one 16x16 tile of C. In every round its work-items load one tile
of A and one of B into local memory, wait at a barrier until the whole tile is there,
accumulate the tile product, and wait again before the tiles are overwritten.

The matrix sizes are not multiples of 16. The ndrange is rounded up to whole tiles and
every work-item takes part in every round, so all of them reach every barrier; loads
outside the matrices store zeros in the tile, and only work-items inside C write.

    python examples/matmul_tiled.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line, report

TILE = 16


@kk.kernel
def matmul_tiled(c, a: kk.Const, b: kk.Const, m, n, k):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    a_tile = kk.localmem(np.float32, (TILE, TILE))
    b_tile = kk.localmem(np.float32, (TILE, TILE))
    acc = 0.0
    for start in range(0, k, TILE):
        if i < m and start + lj < k:
            a_tile[li, lj] = a[i, start + lj]
        else:
            a_tile[li, lj] = 0.0
        if start + li < k and j < n:
            b_tile[li, lj] = b[start + li, j]
        else:
            b_tile[li, lj] = 0.0
        kk.synchronize()
        for p in range(TILE):
            acc += a_tile[li, p] * b_tile[p, lj]
        kk.synchronize()
    if i < m and j < n:
        c[i, j] = acc


def round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("tiled matrix multiply with kernelkit")
    _, backend = parse_command_line(parser, argv)

    m, k, n = 100, 75, 53
    rng = np.random.default_rng(0)
    a_host = rng.standard_normal((m, k), dtype=np.float32)
    b_host = rng.standard_normal((k, n), dtype=np.float32)

    c = kk.zeros(backend, np.float32, (m, n))
    launch = matmul_tiled(backend, (TILE, TILE))
    launch(c, kk.to_backend(backend, a_host), kk.to_backend(backend, b_host), m, n, k,
           ndrange=(round_up(m, TILE), round_up(n, TILE)))
    kk.synchronize(backend)

    expected = a_host.astype(np.float64) @ b_host.astype(np.float64)
    # float32 accumulation over k terms of size ~1: error grows like k * eps.
    tolerance = 4 * k * np.finfo(np.float32).eps * float(np.max(np.abs(expected)))
    return report("tiled matmul", float(np.max(np.abs(kk.to_numpy(c) - expected))), tolerance)


if __name__ == "__main__":
    sys.exit(main())
