"""Checks and output in kernels: `assert cond, "message"` is checked in a debug build (the
error names the kernel, the source line, the work-item and the message) and compiled out
otherwise; `kk.print` formats values with f-strings' format specifications and
printf-style `%` formatting, as Python writes them, on every backend; and what printf
cannot write is an error at the line."""
import functools
import re

import numpy as np
import pytest

import kernelkit as kk

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)


@kk.kernel
def square_roots(y, x: kk.Const):
    i = kk.index(kk.Global)
    assert x[i] >= 0.0, "x must not be negative"
    y[i] = kk.sqrt(x[i])


def test_a_failed_assert_in_a_debug_build_names_the_kernel_line_work_item_and_message(
        debug_backend):
    x = np.array([1.0, 4.0, 9.0, -1.0, 16.0, 25.0])
    y = kk.zeros(debug_backend, np.float64, 6)
    with pytest.raises(AssertionError) as info:
        square_roots(debug_backend, 2)(y, kk.to_backend(debug_backend, x), ndrange=6)
        kk.synchronize(debug_backend)
    message = str(info.value)
    assert "work-item 3 of the ndrange (6,): x must not be negative" in message
    assert_points_at(info.value, "square_roots", 'assert x[i] >= 0.0, "x must not be negative"')


def test_an_assert_that_holds_passes_and_a_build_without_debug_has_no_check(backend):
    x = kk.to_backend(backend, np.array([1.0, 4.0, -9.0, 16.0]))
    y = kk.zeros(backend, np.float64, 4)
    square_roots(backend, 2)(y, x, ndrange=4)     # not checked: no error
    kk.synchronize(backend)
    operation = re.compile(r"^\s+assert ", re.MULTILINE)
    assert not operation.search(kk.code_ir(square_roots, backend, y, x, ndrange=4))
    debug = type(backend)(debug=True)
    assert operation.search(kk.code_ir(square_roots, debug, kk.zeros(debug, np.float64, 4),
                                       kk.to_backend(debug, np.array([1.0, 4.0, 9.0])),
                                       ndrange=3))


@kk.kernel
def checked_grid(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    assert i * 10 + j != 23
    out[i, j] = 1.0


def test_the_work_item_of_a_multi_dimensional_launch_is_its_position(debug_backend):
    with pytest.raises(AssertionError, match=r"assertion failed in work-item \(2, 3\) of the "
                                             r"ndrange \(4, 5\)$"):
        checked_grid(debug_backend, (2, 2))(kk.zeros(debug_backend, np.float64, (4, 5)),
                                            ndrange=(4, 5))
        kk.synchronize(debug_backend)


@kk.kernel
def formats(x: kk.Const, n):
    i = kk.index(kk.Global)
    if i == 1:
        kk.print(f"x[{i}] = {x[i]:.3f} n={n:>5} hex={n:#x} e={x[i]:+10.2e} {{braces}} 100%")
        kk.print("printf: %5.2f|%-4d|%s|%03d %%" % (x[i], n, x[i], i), "end")
        kk.print("truncated %d" % x[i], sep="")
        print(f"{x[i] > 0} {x[i] > 0:d} {n:c} {np.float32(x[i]):g}|{n:<6}|{-n:08}")


def test_print_formats_f_strings_and_printf_style_as_python_does(backend, capfd):
    x = np.array([1.0, 2.71828, 3.0])
    capfd.readouterr()
    formats(backend, 2)(kk.to_backend(backend, x), np.int64(65), ndrange=2)
    kk.synchronize(backend)
    i, n, v = 1, np.int64(65), x[1]
    expected = (f"x[{i}] = {v:.3f} n={n:>5} hex={n:#x} e={v:+10.2e} {{braces}} 100%\n"
                + "printf: %5.2f|%-4d|%s|%03d %%" % (v, n, v, i) + " end\n"
                + "truncated %d" % v + "\n"
                + f"{v > 0} {v > 0:d} {n:c} {np.float32(v):g}|{n:<6}|{-n:08}\n")
    assert capfd.readouterr().out == expected


@kk.kernel
def centres(x: kk.Const):
    kk.print(f"{x[0]:^9}")


@kk.kernel
def groups_digits(x: kk.Const):
    kk.print(f"{x[0]:,}")


@kk.kernel
def prints_an_integer_with_precision(n):
    kk.print(f"{n:.2d}")


@kk.kernel
def converts_with_repr(x: kk.Const):
    kk.print(f"{x[0]!r}")


@kk.kernel
def builds_a_string(x: kk.Const):
    text = f"{x[0]}"
    kk.print(text)


@kk.kernel
def asserts_with_a_computed_message(x: kk.Const):
    assert x[0] > 0, "x is " + "negative"


@pytest.mark.parametrize("kernel, line, message", [
    (centres, 'kk.print(f"{x[0]:^9}")', "does not centre"),
    (groups_digits, 'kk.print(f"{x[0]:,}")', "printf has no digit grouping"),
    (prints_an_integer_with_precision, 'kk.print(f"{n:.2d}")', "an integer takes no precision"),
    (converts_with_repr, 'kk.print(f"{x[0]!r}")', "!r is not supported"),
    (builds_a_string, 'text = f"{x[0]}"', "kk.print(f"),
    (asserts_with_a_computed_message, 'assert x[0] > 0, "x is " + "negative"',
     "the message of an assert in a kernel is a string literal"),
])
def test_what_printf_and_asserts_cannot_do_is_an_error_at_the_line(backend, kernel, line,
                                                                   message):
    with pytest.raises(kk.CompileError) as info:
        kernel(backend, 1)(kk.zeros(backend, np.float64, 1) if kernel is not
                           prints_an_integer_with_precision else 5, ndrange=1)
        kk.synchronize(backend)
    assert message in str(info.value)
    assert_points_at(info.value, kernel.name, line)
