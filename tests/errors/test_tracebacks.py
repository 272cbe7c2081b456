"""The traceback of an error a launch raises ends at the launch: it shows the user's
frames and the error, whose message points at the kernel's line, and none of the
compiler's frames. `KERNELKIT_TRACEBACK=full` keeps them all, and so does an internal
compiler error (a bug in kernelkit, whose frames are its report)."""
import os
import traceback

import numpy as np
import pytest

import kernelkit as kk
import kernelkit.compiler.driver
from kernelkit.errors import InternalCompilerError

PACKAGE = os.path.dirname(kk.__file__) + os.sep


def kernelkit_frames(error: BaseException) -> list[str]:
    """The frames inside the kernelkit package of every traceback the error prints."""
    printed = traceback.TracebackException.from_exception(error)
    frames = []
    while printed is not None:
        frames += [f"{frame.filename}:{frame.lineno} {frame.name}" for frame in printed.stack
                   if frame.filename.startswith(PACKAGE)]
        printed = printed.__cause__ or (None if printed.__suppress_context__
                                        else printed.__context__)
    return frames


def twice_unknown(v):
    return 2 * v + not_defined_anywhere   # noqa: F821 - the error under test


@kk.kernel
def calls_a_faulty_device_function(y):
    i = kk.index(kk.Global)
    y[i] = twice_unknown(i)


@kk.kernel
def mixes_up_types(y):
    i = kk.index(kk.Global)
    y[i] = (1, 2)


def test_a_compile_error_from_a_launch_shows_only_the_call_into_kernelkit(backend):
    y = kk.zeros(backend, np.float32, 8)
    with pytest.raises(kk.CompileError) as info:
        mixes_up_types(backend, 4)(y, ndrange=8)
    assert "y[i] = (1, 2)" in str(info.value)
    assert len(kernelkit_frames(info.value)) <= 1, kernelkit_frames(info.value)


def test_an_error_in_a_device_function_names_the_kernel_and_hides_the_compiler(backend):
    y = kk.zeros(backend, np.float32, 8)
    with pytest.raises(kk.CompileError) as info:
        calls_a_faulty_device_function(backend, 4)(y, ndrange=8)
    message = str(info.value)
    assert "in kernel 'calls_a_faulty_device_function' in device function 'twice_unknown'" \
        in message and "not_defined_anywhere" in message
    assert len(kernelkit_frames(info.value)) <= 1, kernelkit_frames(info.value)


def test_reflection_and_launcher_errors_hide_the_compiler_too():
    backend = kk.CPU()
    y = np.zeros(8, np.float32)
    with pytest.raises(kk.CompileError) as info:
        kk.code_ir(mixes_up_types, backend, y, ndrange=8, workgroupsize=4)
    assert len(kernelkit_frames(info.value)) <= 1, kernelkit_frames(info.value)
    with pytest.raises(kk.LaunchError) as info:
        mixes_up_types(backend, 4.5)
    assert len(kernelkit_frames(info.value)) <= 1, kernelkit_frames(info.value)


def test_kernelkit_traceback_full_keeps_the_compilers_frames(monkeypatch):
    monkeypatch.setenv("KERNELKIT_TRACEBACK", "full")
    with pytest.raises(kk.CompileError) as info:
        mixes_up_types(kk.CPU(), 4)(np.zeros(8, np.float32), ndrange=8)
    frames = kernelkit_frames(info.value)
    assert any("/frontend/" in frame for frame in frames), frames


def test_an_internal_compiler_error_keeps_every_frame_and_its_cause(monkeypatch):
    def broken_compiler(job):
        raise RuntimeError("a bug in the compiler")

    monkeypatch.setattr(kernelkit.compiler.driver, "compile_job", broken_compiler)
    with pytest.raises(InternalCompilerError, match="internal compiler error") as info:
        mixes_up_types(kk.CPU(), 2)(np.zeros(8, np.float32), ndrange=8)
    assert isinstance(info.value, kk.CompileError)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert any("lang/kernel.py" in frame and "specialize" in frame
               for frame in kernelkit_frames(info.value))
