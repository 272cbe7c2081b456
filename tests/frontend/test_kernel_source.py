"""Kernels from anywhere Python runs. Their source is read where Python keeps it (a file,
`linecache`, the command of `python -c`), or given: `kk.kernel(fn, source=text)` with the
text given to `exec()` (the device functions it defines are read from it too) or the
function's definition alone. Where it cannot be found, the error says whether it is a
kernel or a device function that cannot be read, and what to do."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernelkit as kk

PROGRAM = textwrap.dedent("""\
    import numpy as np
    import kernelkit as kk

    def twice(v):
        return 2 * v

    @kk.kernel
    def doubled_positions(out):
        i = kk.index(kk.Global)
        out[i] = twice(i)

    out = np.zeros(4, np.int64)
    doubled_positions(kk.CPU(), 4)(out, ndrange=4)
    kk.synchronize(kk.CPU())
    print(out.tolist())
    """)


def run_python(*arguments, stdin=None):
    return subprocess.run([sys.executable, *arguments], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_a_kernel_and_its_device_function_run_from_python_dash_c():
    result = run_python("-c", PROGRAM)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0, 2, 4, 6]"


def test_a_kernel_read_from_standard_input_fails_saying_what_to_do():
    result = run_python("-", stdin=PROGRAM)
    assert result.returncode != 0
    assert "cannot read the source of kernel 'doubled_positions'" in result.stderr
    assert "source=text" in result.stderr and "Jupyter" in result.stderr
    assert "device function" not in result.stderr


EXECUTED = textwrap.dedent("""\
    def offset(v):
        return v + OFFSET

    def shifted(y, x):
        i = kk.index(kk.Global)
        y[i] = offset(x[i])
    """)


def executed(offset):
    namespace = {"kk": kk, "OFFSET": offset}
    exec(EXECUTED, namespace)
    return namespace


def test_a_kernel_executed_from_a_string_runs_with_the_source_given(backend):
    shifted = kk.kernel(executed(10)["shifted"], source=EXECUTED)
    x = kk.to_backend(backend, np.arange(8, dtype=np.float32))
    y = kk.zeros(backend, np.float32, 8)
    shifted(backend, 4)(y, x, ndrange=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.arange(8) + 10)


def test_kernels_executed_from_strings_that_differ_compile_apart():
    backend = kk.CPU()
    results = []
    for constant in (1.5, 2.5):
        text = f"def fill(y):\n    y[kk.index(kk.Global)] = {constant}\n"
        namespace = {"kk": kk}
        exec(text, namespace)
        y = np.zeros(4, np.float32)
        kk.kernel(namespace["fill"], source=text)(backend, 4)(y, ndrange=4)
        kk.synchronize(backend)
        results.append(y[0])
    assert results == [1.5, 2.5]


def test_device_functions_executed_from_strings_that_differ_compile_apart():
    backend = kk.CPU()
    results = []
    for constant in (2.0, 3.0):
        text = (f"def scaled(x):\n    return x * {constant}\n"
                f"def fill(y):\n    y[kk.index(kk.Global)] = scaled(1.0)\n")
        namespace = {"kk": kk}
        exec(text, namespace)
        y = np.zeros(4, np.float32)
        kk.kernel(namespace["fill"], source=text)(backend, 4)(y, ndrange=4)
        kk.synchronize(backend)
        results.append(y[0])
    assert results == [2.0, 3.0]


def test_a_kernel_its_executed_text_decorated_is_made_again_from_the_text_given():
    text = "@kk.kernel\ndef fill(y):\n    y[kk.index(kk.Global)] = 4.0\n"
    namespace = {"kk": kk}
    exec(text, namespace)
    y = np.zeros(4, np.float32)
    kk.kernel(namespace["fill"], source=text)(kk.CPU(), 4)(y, ndrange=4)
    kk.synchronize(kk.CPU())
    np.testing.assert_array_equal(y, 4.0)


def test_the_source_can_be_the_definition_alone_given_to_the_decorator():
    namespace = executed(0)
    definition = textwrap.dedent("""\
        def shifted(y, x):
            i = kk.index(kk.Global)
            y[i] = x[i] * 3
        """)
    tripled = kk.kernel(source=definition)(namespace["shifted"])
    y = np.zeros(4, np.float32)
    tripled(kk.CPU(), 4)(y, np.arange(4, dtype=np.float32), ndrange=4)
    kk.synchronize(kk.CPU())
    np.testing.assert_array_equal(y, [0, 3, 6, 9])


def test_a_compile_error_in_given_source_shows_its_line():
    text = "def broken(y):\n    y[kk.index(kk.Global)] = undefined_name\n"
    namespace = {"kk": kk}
    exec(text, namespace)
    broken = kk.kernel(namespace["broken"], source=text)
    with pytest.raises(kk.CompileError, match="name 'undefined_name' is not defined") as info:
        broken(kk.CPU(), 4)(np.zeros(4), ndrange=4)
    assert "y[kk.index(kk.Global)] = undefined_name" in str(info.value)
    assert info.value.line == 2 and info.value.file.startswith("<string#")


def test_source_without_the_function_is_refused_when_the_kernel_is_made():
    with pytest.raises(kk.CompileError, match=r"has no definition of shifted\(\)"):
        kk.kernel(executed(0)["shifted"], source="def something_else(y):\n    pass\n")


def test_a_kernel_executed_without_its_source_is_called_a_kernel_in_the_error():
    namespace = {"kk": kk}
    exec("def unreadable(y):\n    y[kk.index(kk.Global)] = 1\n", namespace)
    with pytest.raises(kk.CompileError) as info:
        kk.kernel(namespace["unreadable"])(kk.CPU(), 4)(np.zeros(4), ndrange=4)
    message = str(info.value)
    assert "cannot read the source of kernel 'unreadable'" in message
    assert "device function" not in message
    assert "kk.kernel(unreadable, source=text)" in message and "Jupyter" in message


def device_function_from_exec():
    namespace = {}
    exec("def plus_one(v):\n    return v + 1\n", namespace)
    return namespace["plus_one"]


plus_one = device_function_from_exec()


@kk.kernel
def calls_an_unreadable_device_function(y):
    i = kk.index(kk.Global)
    y[i] = plus_one(i)


def test_a_device_function_executed_without_its_source_is_called_one_in_the_error():
    with pytest.raises(kk.CompileError) as info:
        calls_an_unreadable_device_function(kk.CPU(), 4)(np.zeros(4), ndrange=4)
    message = str(info.value)
    assert "in kernel 'calls_an_unreadable_device_function'" in message
    assert "cannot read the source of device function 'plus_one'" in message
    assert "source=text" in message
