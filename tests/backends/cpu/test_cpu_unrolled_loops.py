"""A loop of a small constant trip count inside a work-item is unrolled whole, however
long its body, so that the work-item loop around it is the innermost loop and
vectorizes (`group.py`'s `unrolled_loops`)."""
import re

import numpy as np

import kernelkit as kk


@kk.kernel
def weighted_sums(out, x: kk.Const, w: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    total = 0.0
    for p in range(16):
        v = x[p, j]
        total += w[i, p] * v + abs(v - w[p, i]) * 0.5 - min(v, w[i, p]) * max(v, 0.25)
    out[i, j] = total


def reference(x, w):
    total = np.zeros(x.shape, np.float32)
    for p in range(16):
        v = x[p][None, :]
        column, row = w[:, p][:, None], w[p, :][:, None]
        total += column * v + np.abs(v - row) * np.float32(0.5) - \
            np.minimum(v, column) * np.maximum(v, np.float32(0.25))
    return total


def test_a_sixteen_trip_loop_of_a_long_body_leaves_the_work_item_loop_vectorized():
    x = np.zeros((64, 64), np.float32)
    llvm_ir = kk.code_llvm(weighted_sums, kk.CPU(), x, x, x, ndrange=(64, 64),
                           workgroupsize=(16, 16))
    # The vector loop is `vector.body`, or only its epilogue's `vec.epilog.vector.body`
    # where one vector of 16 lanes (AVX-512) covers a group's row and the main loop is gone.
    assert re.search(r"^(vec\.epilog\.)?vector\.body\S*:", llvm_ir, re.M)


def test_the_unrolled_loop_computes_what_the_loop_does():
    rng = np.random.default_rng(0)
    x, w = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    backend = kk.CPU()
    weighted_sums(backend, (16, 16))(out, x, w, ndrange=(64, 64))
    kk.synchronize(backend)
    np.testing.assert_allclose(out, reference(x, w), rtol=1e-5)
