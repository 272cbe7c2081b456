"""Reverse mode where work-items read each other's elements through a permutation of
their own indices (`x[j, i]` beside `x[i, j]`): each element's adjoint then has two
work-items adding into it, so its updates must be atomic; only the identity map of the
work-item's own indices, axis for axis, keeps them plain (enzyme_ext/transform/reverse.py).
The reverse kernel's IR is checked for which updates are atomic, and the gradients of
many launches in a row against the analytic ones: a lost update shows as a wrong
element (on the CPU, work-groups run on several threads at once)."""
import re
import sys

import numpy as np

import kernelkit as kk
from enzyme_ext import Duplicated, Reverse, autodiff, compiler_job_from_backend
from enzyme_ext.jobs import derivative_job
from kernelkit.compiler.driver import compile_job

TILE = 8
SIZE = 512     # enough work-groups that the CPU runs them on all its threads
RUNS = 40


def size_and_runs(backend) -> tuple[int, int]:
    """Where the race detector watches the launch (the AD suite's CPU), one small launch
    shows a lost update as a race, and where the CUDA driver is the host-memory stand-in
    (tests/backends/cuda/host_driver.py) nothing runs in parallel to lose one; on
    parallel hardware, many large launches show it as a wrong result."""
    cuda_runtime = sys.modules.get("backends.cuda.runtime")
    if getattr(backend, "races", False) or getattr(cuda_runtime, "HOST_DRIVER", False):
        return 4 * TILE, 1
    return SIZE, RUNS


@kk.kernel
def transposed_and_own(y, x, w):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j] * x[j, i] + w[i, j] * w[i, j]


@kk.kernel
def times_transpose(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j] * x[j, i]


@kk.kernel
def squares_transposed(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[j, i] * x[j, i]


@kk.kernel
def tile_times_its_transpose(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    tile = kk.localmem(np.float64, (TILE, TILE))
    tile[li, lj] = x[i, j]
    kk.synchronize()
    y[i, j] = tile[li, lj] * tile[lj, li]


def reverse_kernel_ir(backend, kernel, workgroupsize, arguments):
    arguments = tuple(kk.to_backend(backend, a) for a in arguments)
    parent = compiler_job_from_backend(backend, kernel(backend, workgroupsize), arguments)
    activities = ("duplicated",) * len(arguments)
    return compile_job(derivative_job(parent, "reverse", activities,
                                      (None,) * len(arguments))).ir


def updates_of(ir: str, value: str) -> list[str]:
    """The operations that write `value` (an IR value such as '%3') in the kernel's IR
    text, in order: 'store' or 'atomic.add'."""
    return re.findall(rf"\b(store|atomic\.\w+) {value},", ir)


def parameter_value(ir: str, name: str) -> str:
    """The IR value of the kernel parameter `name` (parameters are numbered first)."""
    names = re.search(r"^kernel @\S+\((.*?)\)", ir, re.MULTILINE).group(1).split(", ")
    return f"%{names.index(name)}"


def gradient_of_x(backend, kernel, x, seed, workgroupsize):
    """The adjoint of x after one reverse launch seeded with `seed` on y."""
    dx = kk.zeros(backend, np.float64, x.shape)
    autodiff(Reverse, kernel(backend, workgroupsize),
             Duplicated(kk.zeros(backend, np.float64, x.shape),
                        kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, x.copy()), dx), ndrange=x.shape)
    kk.synchronize(backend)
    return kk.to_numpy(dx)


def test_a_transposed_read_updates_its_adjoint_atomically_and_an_own_read_plainly(backend):
    arrays = [np.zeros((16, 16))] * 3
    ir = reverse_kernel_ir(backend, transposed_and_own, (TILE, TILE), arrays)
    assert updates_of(ir, parameter_value(ir, "d_x")) == ["atomic.add"] * 2, ir
    assert updates_of(ir, parameter_value(ir, "d_w")) == ["store"] * 2, ir


def test_a_transposed_read_loses_no_update_over_many_launches(backend):
    size, runs = size_and_runs(backend)
    rng = np.random.default_rng(11)
    x, seed = rng.uniform(-1, 1, (size, size)), rng.uniform(-1, 1, (size, size))
    expected = seed * x.T + (seed * x).T
    wrong = [run for run in range(runs)
             if not np.allclose(gradient_of_x(backend, times_transpose, x, seed, (TILE, TILE)),
                                expected, rtol=1e-14, atol=0)]
    assert wrong == [], f"{len(wrong)} of {runs} launches gave a wrong gradient"


def test_a_local_tile_read_transposed_updates_its_shadow_atomically(backend):
    size, runs = size_and_runs(backend)
    rng = np.random.default_rng(12)
    x, seed = rng.uniform(-1, 1, (size, size)), rng.uniform(-1, 1, (size, size))
    ir = reverse_kernel_ir(backend, tile_times_its_transpose, (TILE, TILE), [x, x])
    shadows = re.findall(r"^\s*(%\d+) = localmem\b", ir, re.MULTILINE)
    assert sorted(op for value in shadows for op in updates_of(ir, value)
                  if op != "store") == ["atomic.add"] * 2, ir
    # Within each tile, y = t * t.T: dt = s * t.T + (s * t).T.
    tiles = (size // TILE, TILE, size // TILE, TILE)
    t, s = x.reshape(tiles), seed.reshape(tiles)
    tiles_transposed = (0, 3, 2, 1)
    expected = (s * t.transpose(tiles_transposed) +
                (s * t).transpose(tiles_transposed)).reshape(size, size)
    wrong = [run for run in range(runs)
             if not np.allclose(gradient_of_x(backend, tile_times_its_transpose, x, seed,
                                              (TILE, TILE)), expected, rtol=1e-14, atol=0)]
    assert wrong == [], f"{len(wrong)} of {runs} launches gave a wrong gradient"


def test_an_array_read_only_transposed_is_gathered_by_each_elements_owner(backend):
    # Every read of x is at x[j, i]: one work-item per element, so the gather kernel
    # (enzyme_ext/transform/gather.py) makes its updates, plainly, not the atomics.
    size, runs = size_and_runs(backend)
    rng = np.random.default_rng(13)
    x, seed = rng.uniform(-1, 1, (size, size)), rng.uniform(-1, 1, (size, size))
    assert "atomic" not in reverse_kernel_ir(backend, squares_transposed, (TILE, TILE), [x, x])
    expected = 2.0 * x * seed.T
    wrong = [run for run in range(runs)
             if not np.allclose(gradient_of_x(backend, squares_transposed, x, seed,
                                              (TILE, TILE)), expected, rtol=1e-14, atol=0)]
    assert wrong == [], f"{len(wrong)} of {runs} launches gave a wrong gradient"
