"""Read-only NumPy arrays on the CPU backend: a kernel may read them through a kk.Const
parameter; passed for any other parameter they are refused with a LaunchError before the
launch (the kernel could write them: into an immutable `bytes`, or a memory map opened
read-only, which crashed the process), never written."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernelkit as kk


@kk.kernel
def add_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1


def read_only_view(n):
    array = np.arange(n, dtype=np.float32)
    array.flags.writeable = False
    return array


def over_bytes(n):
    return np.frombuffer(bytes(4 * n), np.float32)


def read_only_memory_map(n, directory):
    path = os.path.join(directory, "data.bin")
    np.arange(n, dtype=np.float32).tofile(path)
    return np.memmap(path, np.float32, mode="r", shape=(n,))


@pytest.mark.parametrize("make", [read_only_view, over_bytes])
def test_a_read_only_array_for_a_written_parameter_is_refused_and_left_unwritten(make):
    backend = kk.CPU(threads=1)
    y, x = make(16), np.arange(16, dtype=np.float32)
    before = y.copy()
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, x, ndrange=16)
    kk.synchronize(backend)
    message = str(info.value)
    assert "kernel 'add_one'" in message and "argument 'y'" in message
    assert "read-only" in message and "kk.Const" in message
    np.testing.assert_array_equal(y, before)


def test_a_read_only_memory_map_for_a_written_parameter_is_refused_not_a_crash(tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        import kernelkit as kk

        @kk.kernel
        def add_one(y, x: kk.Const):
            i = kk.index(kk.Global)
            y[i] = x[i] + 1

        np.arange(16, dtype=np.float32).tofile({str(tmp_path / "data.bin")!r})
        y = np.memmap({str(tmp_path / "data.bin")!r}, np.float32, mode="r", shape=(16,))
        try:
            add_one(kk.CPU(threads=1), 4)(y, np.ones(16, np.float32), ndrange=16)
            kk.synchronize(kk.CPU(threads=1))
        except kk.LaunchError as error:
            print("refused:", error)
        """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr[-3000:]}"
    assert "refused:" in result.stdout and "argument 'y'" in result.stdout, result.stdout


def test_read_only_arrays_are_taken_for_a_const_parameter(tmp_path):
    backend = kk.CPU(threads=1)
    for x in (read_only_view(16), over_bytes(16), read_only_memory_map(16, tmp_path)):
        y = np.zeros(16, np.float32)
        add_one(backend, 4)(y, x, ndrange=16)
        kk.synchronize(backend)
        np.testing.assert_array_equal(y, np.asarray(x) + 1)


def test_an_array_made_read_only_after_a_launch_is_refused_at_the_next(tmp_path):
    backend = kk.CPU(threads=1)
    y, x = np.zeros(16, np.float32), np.arange(16, dtype=np.float32)
    launch = add_one(backend, 4)
    launch(y, x, ndrange=16)
    kk.synchronize(backend)
    y.flags.writeable = False
    with pytest.raises(kk.LaunchError):
        launch(y, x, ndrange=16)
    np.testing.assert_array_equal(y, x + 1)


def test_memory_maps_of_different_dtypes_are_typed_apart(tmp_path):
    backend = kk.CPU(threads=1)
    results = []
    for dtype in (np.float32, np.float64):
        path = os.path.join(tmp_path, f"{np.dtype(dtype).name}.bin")
        np.arange(8, dtype=dtype).tofile(path)
        x = np.memmap(path, dtype, mode="r", shape=(8,))
        y = np.zeros(8, np.float64)
        add_one(backend, 4)(y, x, ndrange=8)
        kk.synchronize(backend)
        results.append(y)
    np.testing.assert_array_equal(results[0], np.arange(8) + 1)
    np.testing.assert_array_equal(results[1], np.arange(8) + 1)
