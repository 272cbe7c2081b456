"""How a CPU backend is configured: KERNELKIT_DEBUG turns on bounds checks,
KERNELKIT_NUM_THREADS and the process's CPU affinity set the threads, and default
work-group sizes cover 1-D, 2-D and 3-D ndranges that are not multiples of them."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.errors import BackendError


@kk.kernel
def read_next(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i + 1]


def test_kernelkit_debug_in_the_environment_makes_a_debug_backend(monkeypatch):
    monkeypatch.setenv("KERNELKIT_DEBUG", "1")
    backend = kk.CPU(threads=1)
    assert backend.debug
    assert "debug=True" in repr(backend)
    with pytest.raises(IndexError, match="read_next"):
        read_next(backend, 4)(np.zeros(8), np.zeros(8), ndrange=8)
        kk.synchronize(backend)


@pytest.mark.parametrize("value", ["", "0"])
def test_kernelkit_debug_empty_or_zero_leaves_bounds_checks_off(monkeypatch, value):
    monkeypatch.setenv("KERNELKIT_DEBUG", value)
    assert not kk.CPU(threads=1).debug


def test_explicit_debug_argument_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("KERNELKIT_DEBUG", "1")
    assert not kk.CPU(threads=1, debug=False).debug


@pytest.mark.parametrize("ndim, expected", [(1, (1024,)), (2, (4, 256)), (3, (4, 4, 64))])
def test_default_workgroupsize_has_about_1024_items_with_the_last_axis_longest(ndim, expected):
    assert kk.CPU(threads=1).default_workgroupsize(ndim) == expected


@kk.kernel
def stamp_1d(out):
    i = kk.index(kk.Global)
    out[i] += i + 1


@kk.kernel
def stamp_2d(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i, j] += i * 1000 + j + 1


@kk.kernel
def stamp_3d(out):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    out[i, j, k] += (i * 1000 + j) * 1000 + k + 1


@pytest.mark.parametrize("kernel, shape", [(stamp_1d, (1000,)), (stamp_2d, (33, 517)),
                                           (stamp_3d, (5, 7, 300))],
                         ids=["1d", "2d", "3d"])
def test_default_workgroupsize_covers_every_item_exactly_once(kernel, shape):
    backend = kk.CPU(threads=2)
    out = np.zeros(shape, np.int64)
    kernel(backend)(out, ndrange=shape)
    kk.synchronize(backend)
    index = np.indices(shape)
    expected = index[0] + 1
    for axis in range(1, len(shape)):
        expected = (expected - 1) * 1000 + index[axis] + 1
    np.testing.assert_array_equal(out, expected)


def test_kernelkit_num_threads_sets_the_default_threads(monkeypatch):
    monkeypatch.setenv("KERNELKIT_NUM_THREADS", "3")
    assert kk.CPU().threads == 3
    assert kk.CPU(threads=5).threads == 5      # an explicit count wins


@pytest.mark.parametrize("value", ["zero", "0", "-2", "1.5"])
def test_kernelkit_num_threads_that_is_no_count_is_an_error_naming_it(monkeypatch, value):
    monkeypatch.setenv("KERNELKIT_NUM_THREADS", value)
    with pytest.raises(BackendError, match="KERNELKIT_NUM_THREADS"):
        kk.CPU()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_the_default_threads_are_the_cores_the_process_may_run_on():
    # As `taskset -c 0 python ...` starts it: a process bound to one core.
    script = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
              "import kernelkit as kk; print(kk.CPU().threads)")
    environment = {k: v for k, v in os.environ.items() if k != "KERNELKIT_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=environment, check=True)
    assert result.stdout.strip() == "1"


# --- the group shape of kernels that do not observe their work-groups ------------------


@kk.kernel
def guarded_heat_step(out, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                       - 4.0 * u[i, j])


@kk.kernel
def group_width(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i, j] = kk.groupsize()[1]


@kk.kernel
def local_column(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i, j] = kk.index(kk.Local, kk.NTuple)[1]


@kk.kernel
def half_group_columns(out, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    gj = kk.index(kk.Group, kk.NTuple)[1]
    lj = kk.index(kk.Local, kk.NTuple)[1]
    out[i, j] = x[i, gj * 8 + lj]       # not j: 8 is half the group's width


def prepared_of(kernel, backend):
    (prepared,) = [p for key, p in kernel._specializations.items() if key[0] is backend]
    return prepared


def test_a_kernel_blind_to_its_groups_runs_in_the_cpus_group_shape_with_the_same_result():
    backend = kk.CPU(threads=2)
    u = np.random.default_rng(3).random((67, 45), dtype=np.float32)
    results = []
    for workgroupsize in [(16, 16), (4, 256), (1, 1)]:
        out = np.zeros_like(u)
        guarded_heat_step(backend, workgroupsize)(out, u, np.float32(0.2), ndrange=u.shape)
        kk.synchronize(backend)
        results.append(out)
    for out in results[1:]:
        np.testing.assert_array_equal(out, results[0])
    regrouped = [p.regrouped for key, p in guarded_heat_step._specializations.items()
                 if key[0] is backend and key[1] == (16, 16)]
    assert regrouped and [shape for _, shape in regrouped[0].values()] == \
        [backend.default_workgroupsize(2)]


def test_a_kernel_blind_to_its_groups_runs_long_rows_in_groups_of_one_row():
    """Rows of 1024 work-items or more run in groups of one row of 1024 (fewer streams of
    memory at once than several shorter rows), with the same result."""
    backend = kk.CPU(threads=2)
    u = np.random.default_rng(4).random((5, 2100), dtype=np.float32)
    results = []
    for workgroupsize in [(16, 16), (1, 1)]:
        out = np.zeros_like(u)
        guarded_heat_step(backend, workgroupsize)(out, u, np.float32(0.2), ndrange=u.shape)
        kk.synchronize(backend)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    (regrouped,) = [p.regrouped for key, p in guarded_heat_step._specializations.items()
                    if key[0] is backend and key[1] == (16, 16)]
    assert [shape for _, shape in regrouped.values()] == [(1, 1024)]


@kk.kernel
def row_times_column(c, a: kk.Const, b: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    acc = 0.0
    for p in range(a.shape[1]):
        acc += a[i, p] * b[p, j]
    c[i, j] = acc


def test_a_matrix_multiply_blind_to_its_groups_runs_long_rows_in_groups_of_one_row():
    backend = kk.CPU(threads=2)
    a = np.random.default_rng(5).random((4, 3), dtype=np.float32)
    b = np.random.default_rng(6).random((3, 1100), dtype=np.float32)
    c = np.zeros((4, 1100), np.float32)
    row_times_column(backend, (16, 16))(c, a, b, ndrange=c.shape)
    kk.synchronize(backend)
    np.testing.assert_allclose(c, a @ b, rtol=1e-6)
    (regrouped,) = [p.regrouped for key, p in row_times_column._specializations.items()
                    if key[0] is backend]
    assert [shape for _, shape in regrouped.values()] == [(1, 1024)]


@pytest.mark.parametrize("kernel, expected", [
    (group_width, lambda shape: np.full(shape, 16)),
    (local_column, lambda shape: np.indices(shape)[1] % 16),
], ids=["kk.groupsize()", "a local index"])
def test_a_kernel_that_sees_its_groups_keeps_their_shape(kernel, expected):
    backend = kk.CPU(threads=2)
    out = np.zeros((8, 40), np.int64)
    kernel(backend, (4, 16))(out, ndrange=out.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(out, expected(out.shape))
    assert prepared_of(kernel, backend).regrouped is False


def test_a_group_index_times_another_size_keeps_the_groups_shape():
    backend = kk.CPU(threads=2)
    x = np.arange(8 * 64, dtype=np.float64).reshape(8, 64)
    out = np.zeros((8, 48))
    half_group_columns(backend, (4, 16))(out, x, ndrange=out.shape)
    kk.synchronize(backend)
    j = np.arange(48)
    np.testing.assert_array_equal(out, x[:, (j // 16) * 8 + j % 16])
    assert prepared_of(half_group_columns, backend).regrouped is False


@kk.kernel
def scaled(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def long_kernel_source(statements: int) -> str:
    body = "\n".join(f"    v = v * a + {k}.0" for k in range(statements))
    return f"def long_kernel(y, a):\n    i = kk.index(kk.Global)\n    v = y[i]\n{body}\n" \
           f"    y[i] = v\n"


def vector_multiplies_per_trip(text: str) -> int:
    """The vector multiplies of the first vectorized loop of LLVM IR `text`."""
    body = text[text.index("\nvector.body:"):]
    return len(re.findall(r"fmul <\d+ x float>", body[:body.index("br i1")]))


def test_a_small_kernel_computes_four_vectors_of_work_items_per_trip():
    x = np.ones(4096, np.float32)
    text = kk.code_llvm(scaled, kk.CPU(), x, np.float32(2), x, ndrange=4096,
                        workgroupsize=256)
    assert vector_multiplies_per_trip(text) == 4


def test_a_large_kernel_computes_one_vector_of_work_items_per_trip():
    text = long_kernel_source(60)
    namespace = {"kk": kk}
    exec(text, namespace)  # noqa: S102 - a kernel too long to write out
    kernel = kk.kernel(namespace["long_kernel"], source=text)
    y = np.ones(4096, np.float32)
    text = kk.code_llvm(kernel, kk.CPU(), y, np.float32(0.5), ndrange=4096, workgroupsize=256)
    assert vector_multiplies_per_trip(text) == 60
