"""`k(backend, workgroupsize, ndrange)` gives the same launcher for the same arguments, so
that a launch written in a loop body, `k(backend, 64)(args..., ndrange=n)`, costs what a
launcher kept in a variable costs; sizes are still checked every time they are new."""
import inspect

import numpy as np
import pytest

import kernelkit as kk


@kk.kernel
def scale(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i]


def test_the_same_backend_and_sizes_give_the_same_launcher(backend):
    assert scale(backend, 64) is scale(backend, 64)
    assert scale(backend, (8, 8)) is scale(backend, (8, 8))
    assert scale(backend, 64, 128) is scale(backend, 64, 128)
    assert scale(backend) is scale(backend)
    assert scale(backend, 64) is not scale(backend, 32)
    assert scale(backend, 64) is not scale(backend, 64, 128)


def test_a_launcher_is_a_plain_function_named_after_its_kernel(backend):
    # A plain function takes `ndrange=` without the tuple and dictionary of arguments
    # that calling an object's __call__ makes: a fifth of a microsecond of each launch.
    launch = scale(backend, 64)
    assert inspect.isfunction(launch)
    assert launch.__name__ == "scale" and launch.kernel is scale and launch.backend is backend
    assert launch.workgroupsize == (64,) and launch.ndrange is None


def test_sizes_that_equal_valid_ones_are_still_refused(backend):
    scale(backend, 1)
    with pytest.raises(kk.LaunchError, match="workgroupsize must be an int"):
        scale(backend, True)
    with pytest.raises(kk.LaunchError, match="workgroupsize must be an int"):
        scale(backend, (True,))
    scale(backend, 4, 16)
    with pytest.raises(kk.LaunchError, match="ndrange must be an int"):
        scale(backend, 4, 16.0)


def test_a_launcher_from_a_loop_body_runs_each_launchs_arguments(backend):
    x32 = kk.to_backend(backend, np.arange(64, dtype=np.float32))
    x64 = kk.to_backend(backend, np.arange(64, dtype=np.float64))
    results = []
    for a, x, n in ((2.0, x32, 64), (3.0, x32, 32), (4, x64, 64), (5.0, x32, 64)):
        y = kk.zeros(backend, x.dtype, 64)
        scale(backend, 16)(y, a, x, ndrange=n)
        results.append(y)
    kk.synchronize(backend)
    expected = [2 * np.arange(64), np.where(np.arange(64) < 32, 3 * np.arange(64), 0),
                4 * np.arange(64), 5 * np.arange(64)]
    for y, values in zip(results, expected):
        np.testing.assert_array_equal(kk.to_numpy(y), values)
