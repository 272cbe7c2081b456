"""What the frontend makes of Python, read in the IR it hands to the passes (the module
KERNELKIT_DUMP writes first): names become SSA values and loop-carried names block
parameters; a name whose type a loop changes is retyped before the loop; `and`/`or`
short-circuit where the right operand reads memory (a select where it cannot fail); captured Python values become constants; operations keep their line."""
import re

import numpy as np
import pytest

import kernelkit as kk
from source_lines import line_starting_with

SCALE = 3


@pytest.fixture
def frontend_ir(tmp_path, monkeypatch):
    """The frontend's module for a kernel launched on the CPU with `args`."""
    monkeypatch.setenv("KERNELKIT_DUMP", str(tmp_path))

    def ir(kernel, *args) -> str:
        kk.code_ir(kernel, kk.CPU(), *args, ndrange=len(args[0]))
        (directory,) = [d for d in tmp_path.iterdir() if d.name.startswith(kernel.__name__)]
        return (directory / "00-frontend.kkir").read_text()

    return ir


def without_locations(text: str) -> str:
    return re.sub(r' @("[^"]*":)?\d+:\d+', "", text)


@kk.kernel
def running_sum(y, x: kk.Const, n: int):
    i = kk.index(kk.Global)
    total = 0
    for k in range(n):
        total += x[k]
    y[i] = total


def test_a_name_assigned_in_a_loop_is_a_parameter_of_the_loop_header(frontend_ir):
    text = without_locations(frontend_ir(running_sum, np.zeros(4, np.float32),
                                         np.ones(4, np.float32), 4))
    # The header takes the running total and the counter (a Python int, as range()
    # counts); `total = 0` meets a float32 in the loop, so the name is retyped: it
    # enters the loop as 0.0 in float32, and the loop carries a float32.
    assert re.search(r"br \^bb1\((%\d+), %\d+\)", text), text
    assert re.search(r"\^bb1\(%\d+: f32, %\d+: int\):", text), text
    assert re.search(r"= const 0\.0 : f32\n", text), text
    assert re.search(r"= add %\d+, %\d+ : f32\n.*\n  br \^bb1\(", text), text


@kk.kernel
def guarded(y, x: kk.Const):
    i = kk.index(kk.Global)
    if i > 0 and x[i - 1] > 0:
        y[i] = 1


def test_and_short_circuits_the_load_behind_it(frontend_ir):
    text = without_locations(frontend_ir(guarded, np.zeros(4, np.float32),
                                         np.ones(4, np.float32)))
    first_branch = text.index("cbr ")
    assert text.index("load ") > first_branch, text   # x[i - 1] only where i > 0


@kk.kernel
def interior(y, x: kk.Const):
    i = kk.index(kk.Global)
    n = x.shape[0]
    if 0 < i and i < n - 1 or not (i != n - 1):
        y[i] = x[i]


def test_and_or_of_tests_that_read_nothing_are_selects_with_one_branch(frontend_ir):
    """Where the right operand reads no memory and cannot fail, skipping it saves
    nothing: the condition is one value, tested by one branch (a boundary the derivative
    works out again, vector code on the CPU)."""
    text = without_locations(frontend_ir(interior, np.zeros(4, np.float32),
                                         np.ones(4, np.float32)))
    assert text.count("cbr ") == 1 and text.count("select ") >= 2, text


@kk.kernel
def scaled(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * SCALE


def test_a_captured_python_value_is_a_constant_of_the_kernel(frontend_ir):
    text = frontend_ir(scaled, np.zeros(4, np.int32), np.ones(4, np.int32))
    assert re.search(r"= const 3 : i32", text), text
    assert "SCALE" not in text


def test_an_operation_carries_the_line_and_column_of_its_statement(frontend_ir):
    text = frontend_ir(scaled, np.zeros(4, np.int64), np.ones(4, np.int64))
    line = line_starting_with(__file__, "y[i] = x[i] * SCALE")
    operations = [text_line for text_line in text.splitlines()
                  if text_line.startswith("  ") and "@" in text_line]
    multiplication = next(text_line for text_line in operations
                          if re.search(r"= mul %\d+, %\d+ : i64", text_line)
                          and "const" not in text_line and f"@{line}:" in text_line)
    assert multiplication.endswith(f"@{line}:4")
