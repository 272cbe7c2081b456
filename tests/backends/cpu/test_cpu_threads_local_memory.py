"""Kernels with local memory and barriers on several threads: a work-group zeroes and
fills its own local tiles whichever thread runs it and wherever the range of groups it
is run in starts, so a launch split in any ranges, run in any order by threads at once,
gives the one-thread result, as does every launch the runtime spreads over its threads
(the first ones included); and so does the reverse of the tiled matrix multiply, whose
local tiles hold the adjoints of the tiles (zeroed by the group, updated with atomics).

Launches are asynchronous: a result is read after `kk.synchronize(backend)` or through
`kk.to_numpy`, which waits. Read before, a launch still queued shows the rows of its
groups not run yet as wrong, whole blocks of them: that is no lost update."""
import collections
import random
import threading

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu import runtime
from enzyme_ext import Const, Duplicated, ReverseSplit, autodiff_thunk

TILE = 16
EDGE = 64           # 16 work-groups of TILE x TILE
LAUNCHES = 12


@kk.kernel
def tile_sums(out, x: kk.Const, k):
    """out[i, c] += TILE * x[i, c] for every column c, by each group of row i: for each
    block of TILE columns, the group zeroes a local tile, each work-item adds its row's
    block into the tile with atomics, and each adds one element of the tile into `out`
    with an atomic. Over a k x k ndrange, out = k * x."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    tile = kk.localmem(np.float32, (TILE, TILE))
    for start in range(0, k, TILE):
        tile[li, lj] = 0.0
        kk.synchronize()
        for p in range(TILE):
            kk.atomic_add(tile, (li, p), x[i, start + p])
        kk.synchronize()
        kk.atomic_add(out, (i, start + lj), tile[li, lj])
        kk.synchronize()


@kk.kernel
def matmul_tiled(c, a: kk.Const, b: kk.Const, k):
    """C = A @ B through TILE x TILE tiles in local memory (the benchmark suite's)."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    a_tile = kk.localmem(np.float32, (TILE, TILE))
    b_tile = kk.localmem(np.float32, (TILE, TILE))
    acc = 0.0
    for start in range(0, k, TILE):
        a_tile[li, lj] = a[i, start + lj]
        b_tile[li, lj] = b[start + li, j]
        kk.synchronize()
        for p in range(TILE):
            acc += a_tile[li, p] * b_tile[p, lj]
        kk.synchronize()
    c[i, j] = acc


def scrambled(threads: int = 2, seed: int = 0) -> kk.CPU:
    """A CPU backend that runs each launch's groups in ranges of one to three groups,
    shuffled, taken by `threads` threads that start together (each call of the group
    function releases the GIL): nearly every range starts in the middle of the launch,
    the last groups often first, on a thread that ran others before."""
    backend = kk.CPU(threads=threads)
    shuffle = random.Random(seed).shuffle

    def run_groups(prepared, packed, total, items, args, error_record=None, races=None):
        assert error_record is None and races is None
        ranges, first = [], 0
        while first < total:
            end = min(total, first + 1 + len(ranges) % 3)
            ranges.append((first, end))
            first = end
        shuffle(ranges)
        left = collections.deque(ranges)
        together = threading.Barrier(threads)

        def take() -> None:
            together.wait()
            while left:
                try:
                    first, end = left.popleft()
                except IndexError:
                    return
                runtime._device.mailbox.calls().run(prepared.key, packed, first, end,
                                                    prepared.state_address)
        helpers = [threading.Thread(target=take) for _ in range(threads - 1)]
        for helper in helpers:
            helper.start()
        take()
        for helper in helpers:
            helper.join()
    backend.run_groups = run_groups
    return backend


@pytest.fixture
def queued_in_chunks_of_one_group(monkeypatch):
    """Every launch is queued (none runs on the launching thread alone or is led by it)
    and handed out a work-group at a time."""
    for policy in ("led_ns", "joined_ns", "inline_ns"):
        monkeypatch.setattr(runtime._device.mailbox.words, policy, 0)
    monkeypatch.setattr(runtime, "_INLINE_ITEMS", 0)
    monkeypatch.setattr(runtime, "_CHUNK_NS", 1e-6)   # `_chunk_limit`: one group


def two_threads(request, how: str) -> kk.CPU:
    """A CPU backend of two threads that runs launches `how`: "scrambled", "queued" (in
    chunks of one group) or "as-the-policy-says"."""
    if how == "scrambled":
        return scrambled()
    if how == "queued":
        request.getfixturevalue("queued_in_chunks_of_one_group")
    return kk.CPU(threads=2)


HOWS = ["scrambled", "queued", "as-the-policy-says"]


def integers(shape, seed=0) -> np.ndarray:
    """Small whole numbers as float32: every sum of them is exact, in any order."""
    return np.random.default_rng(seed).integers(0, 8, shape).astype(np.float32)


@pytest.mark.parametrize("how", HOWS)
def test_every_launch_of_group_zeroed_local_tiles_and_atomics_is_exact(request, how):
    backend = two_threads(request, how)
    x = integers((EDGE, EDGE))
    launch = tile_sums(backend, (TILE, TILE))
    for number in range(LAUNCHES):
        out = np.zeros((EDGE, EDGE), np.float32)
        launch(out, x, EDGE, ndrange=(EDGE, EDGE))
        kk.synchronize(backend)
        wrong = np.argwhere(out != EDGE * x)
        assert not len(wrong), f"launch {number}: wrong from {wrong[:3].tolist()}"


@pytest.mark.parametrize("how", HOWS)
def test_the_tiled_matmul_gradient_is_whole_on_every_launch(request, how):
    backend = two_threads(request, how)
    rng = np.random.default_rng(0)
    a, b, seed = (rng.random((EDGE, EDGE), dtype=np.float32) for _ in range(3))
    expected_c = a.astype(np.float64) @ b
    expected_da = seed.astype(np.float64) @ b.T.astype(np.float64)
    expected_db = a.T.astype(np.float64) @ seed.astype(np.float64)
    forward, reverse = autodiff_thunk(ReverseSplit, matmul_tiled(backend, (TILE, TILE)),
                                      Duplicated, Duplicated, Duplicated, Const)
    for number in range(LAUNCHES // 2):
        c = np.zeros((EDGE, EDGE), np.float32)
        da, db = np.zeros_like(a), np.zeros_like(b)
        args = (Duplicated(c, seed.copy()), Duplicated(a, da), Duplicated(b, db), EDGE)
        tape = forward(*args, ndrange=(EDGE, EDGE))
        reverse(*args, tape=tape, ndrange=(EDGE, EDGE))
        # (no synchronize: `to_numpy` waits for the launches that write the array)
        for name, result, expected in (("C", c, expected_c), ("dA", da, expected_da),
                                       ("dB", db, expected_db)):
            wrong = np.argwhere(~np.isclose(kk.to_numpy(result), expected, rtol=1e-4))
            assert not len(wrong), \
                f"launch {number}: {name} wrong from {wrong[:3].tolist()} ({len(wrong)})"
