"""`CompilerJob`: a frozen value naming what to compile by content. Equal jobs for the
same function and argument types; any change of argument types, work-group size, debug
flag or captured constants gives another job, and so another cache entry."""
import dataclasses

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.compiler.job import CompilerJob, function_source
from kernelkit.ir import types as T

F32_ARRAY = T.ArrayType(T.float32, 1, "C")
ARGTYPES = (F32_ARRAY, T.weak_float)
MODULE_SCALE = 3


def scale(y, a):
    i = kk.index(kk.Global)
    y[i] = a * y[i]


def scale_by_module_constant(y):
    i = kk.index(kk.Global)
    y[i] = y[i] * MODULE_SCALE


def make_scaler(factor):
    def scale_by_closure_constant(y):
        i = kk.index(kk.Global)
        y[i] = y[i] * factor
    return scale_by_closure_constant


def job(function=scale, argtypes=ARGTYPES, workgroupsize=(64,), backend=None):
    backend = backend or kk.CPU(threads=1)
    return backend.compiler_job(function, argtypes, workgroupsize=workgroupsize)


def test_two_jobs_for_the_same_function_and_argument_types_are_equal_and_hash_equal():
    first, second = job(), job()
    assert first is not second
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_jobs_are_frozen():
    first = job()
    assert isinstance(first, CompilerJob)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.config = None


def test_different_argument_types_give_different_jobs():
    assert job() != job(argtypes=(T.ArrayType(T.float64, 1, "C"), T.weak_float))
    assert job() != job(argtypes=(T.ArrayType(T.float32, 1, "A"), T.weak_float))
    assert job() != job(argtypes=(F32_ARRAY, T.float32))


def test_different_workgroup_sizes_give_different_jobs():
    assert job(workgroupsize=(64,)) != job(workgroupsize=(128,))


def test_debug_flag_gives_a_different_job():
    plain = job(backend=kk.CPU(threads=1, debug=False))
    debug = job(backend=kk.CPU(threads=1, debug=True))
    assert plain != debug
    assert plain.source == debug.source


def test_module_constants_a_function_reads_are_part_of_its_source():
    source = function_source(scale_by_module_constant, (F32_ARRAY,))
    assert ("MODULE_SCALE", ("int", 3)) in source.constants


def test_closure_constants_are_part_of_the_source_so_closures_give_different_jobs():
    by_two, by_three = make_scaler(2.0), make_scaler(3.0)
    assert [name for name, _ in function_source(by_two, (F32_ARRAY,)).constants] == ["factor"]
    assert job(by_two, (F32_ARRAY,)) != job(by_three, (F32_ARRAY,))
    assert job(by_two, (F32_ARRAY,)) == job(make_scaler(2.0), (F32_ARRAY,))


def test_numpy_scalar_constants_are_keyed_by_dtype():
    as_float32 = function_source(make_scaler(np.float32(2.0)), (F32_ARRAY,))
    as_float64 = function_source(make_scaler(np.float64(2.0)), (F32_ARRAY,))
    as_int = function_source(make_scaler(2), (F32_ARRAY,))
    assert len({as_float32, as_float64, as_int}) == 3


def test_closure_constants_zero_and_negative_zero_give_different_jobs():
    # y * 0.0 and y * -0.0 give zeros of opposite signs: they must not share a kernel.
    assert job(make_scaler(0.0), (F32_ARRAY,)) != job(make_scaler(-0.0), (F32_ARRAY,))


def double(x):
    return x * 2


def triple(x):
    return x * 3


def make_applier(operation):
    def apply(y):
        i = kk.index(kk.Global)
        y[i] = operation(y[i])
    return apply


def test_closures_calling_different_device_functions_give_different_jobs():
    assert job(make_applier(double), (F32_ARRAY,)) != job(make_applier(triple), (F32_ARRAY,))


def test_functions_and_constants_read_through_a_module_are_part_of_the_source(tmp_path,
                                                                           monkeypatch):
    import importlib
    import sys
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "job_helpers.py").write_text("FACTOR = 2\n\ndef bump(v):\n    return v + 1\n")
    import job_helpers

    def through_module(y):
        i = kk.index(kk.Global)
        y[i] = job_helpers.bump(y[i]) * job_helpers.FACTOR

    through_module.__globals__["job_helpers"] = job_helpers
    before = job(through_module, (F32_ARRAY,))
    (tmp_path / "job_helpers.py").write_text("FACTOR = 2\n\ndef bump(v):\n    return v + 5\n")
    importlib.reload(job_helpers)
    after_callee = job(through_module, (F32_ARRAY,))
    job_helpers.FACTOR = 3
    after_constant = job(through_module, (F32_ARRAY,))
    sys.modules.pop("job_helpers", None)
    assert len({before, after_callee, after_constant}) == 3


def test_closures_calling_different_builtin_functions_give_different_jobs():
    import math
    jobs = {job(make_applier(function), (F32_ARRAY,))
            for function in (math.sqrt, math.exp, abs, np.sin, np.cos, np.float32, np.float64)}
    assert len(jobs) == 7


def test_a_captured_builtin_function_is_the_one_the_compiled_kernel_calls():
    import math
    x = np.array([4.0, 9.0], dtype=np.float32)
    results = []
    for function in (math.sqrt, math.exp):
        y = x.copy()
        kk.kernel(make_applier(function))(kk.CPU(threads=1), 2)(y, ndrange=2)
        kk.synchronize(kk.CPU(threads=1))
        results.append(y)
    assert results[0].tolist() == [2.0, 3.0]
    np.testing.assert_allclose(results[1], np.exp(x), rtol=1e-6)
