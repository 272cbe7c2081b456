"""The IR parser: print -> parse -> print gives the same text (the test suite checks this
for every kernel it compiles, see tests/conftest.py); here, texts written by hand with
every kind of attribute, forward references and locations in other files, and the
errors for text that does not parse, each with its line and column."""
import math

import pytest

from kernelkit.ir.parser import IRParseError, parse_module
from kernelkit.ir.printer import print_module
from kernelkit.ir.verifier import verify_module

LOOP = '''kernel @count(a, n) -> void file "k.py" {
^bb0(%0: array<i64, 1, C>, %1: i64):
  %2 = local_id {axis = 0} : i64 @3:4
  %3 = const 0 : i64 @4:4
  br ^bb2(%3) @5:4
^bb1():
  %4 = add %5, %6 : i64 @6:8
  store %0, %2, %4 @6:8
  br ^bb2(%4) @6:8
^bb2(%5: i64):
  %6 = const 1 : i64
  %7 = lt %5, %1 : bool @5:4
  cbr %7, ^bb1(), ^bb3() @5:4
^bb3():
  ret @7:0
}
'''

ATTRIBUTES = '''func @helper(x) -> tuple<f32, i64> file "lib.py" {
^bb0(%0: f32):
  %1 = const -0.0 : f32
  %2 = const "inf" : f64
  %3 = const 1e-05 : f32 @"other.py":9:2
  %4 = const true : bool
  print %0, %4 {format = "x = {} \\"quoted\\"\\n"} @"other.py":10:0
  %5 = local_id {axis = 2} : i64
  %6 = tuple %0, %5 : tuple<f32, i64>
  %7 = localmem : local<f32, 4x8>
  %8 = private : private<i32, 3>
  %9 = dim %7 {axis = 1} : i64
  %10 = atomic.add %7, %5, %9, %0 : f32
  ret %6
}

kernel @k(out) -> void file "k.py" {
^bb0(%0: array<f64, 2, A, const>):
  ret
}
'''


@pytest.mark.parametrize("text", [LOOP, ATTRIBUTES], ids=["forward-references", "attributes"])
def test_print_parse_print_is_identical(text):
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text


def test_parsed_constants_have_the_values_of_their_types():
    function = parse_module(ATTRIBUTES).functions["helper"]
    constants = [op.attrs["value"] for op in function.entry.ops if op.opcode == "const"]
    assert math.copysign(1, constants[0]) == -1 and constants[0] == 0.0
    assert constants[1] == math.inf
    assert constants[2] == 1e-05
    assert constants[3] is True


def test_locations_keep_their_file():
    function = parse_module(ATTRIBUTES).functions["helper"]
    located = [op.loc for op in function.entry.ops if op.loc is not None]
    assert [(loc.file, loc.line, loc.column) for loc in located] == [
        ("other.py", 9, 2), ("other.py", 10, 0)]


@pytest.mark.parametrize("text, line, column, message", [
    ("kernel @k(a) -> void {\n}\n", 1, 1, "expected 'kernel @name"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  %1 = frobnicate : i64\n  ret\n}\n',
     3, 8, "unknown operation 'frobnicate'"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  %1 = add %7, %7 : i64\n  ret\n}\n',
     3, 12, "%7 is not defined in @k"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  br ^bb4()\n}\n',
     3, 6, "^bb4 is not a block of @k"),
    ('kernel @k() -> void file "f" {\n^bb0(%0: f33):\n  ret\n}\n',
     2, 6, "unknown type 'f33'"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  ret @3:4 trailing\n}\n',
     3, 12, "unexpected 'trailing'"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  ret\n', 4, 1, "is not closed"),
    ('kernel @k() -> void file "f" {\n  ret\n}\n', 2, 1, "an operation outside a block"),
    ('kernel @k() -> void file "f" {\n^bb0():\n  %1 = const 1 : i64\n  %1 = const 2 : i64\n'
     '  ret\n}\n', 4, 1, "%1 is defined twice"),
])
def test_text_that_does_not_parse_is_an_error_with_line_and_column(text, line, column,
                                                                  message):
    with pytest.raises(IRParseError) as caught:
        parse_module(text, "dump.kkir")
    error = caught.value
    assert (error.line, error.column) == (line, column)
    assert message in str(error)
    assert str(error).startswith(f"dump.kkir:{line}:{column}: ")
