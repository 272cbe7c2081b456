"""promote-private: the elements of a private array loaded and stored only at constant
indices become values, carried between blocks as block parameters, so that a loop whose
counter lives in a cell is a counted loop the analyses know; a cell read before any store
reads 0; an array indexed by a value, or used otherwise, stays."""
from kernelkit.analysis.loops import counted_loop, natural_loops
from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_module
from kernelkit.passes import run_passes

HEADER = 'kernel @k(a, n) -> void file "k.py" {\n' \
    "^bb0(%0: array<f32, 1, C>, %1: i64):\n"

# a[c - 1] += 1 for c = 16, 15, ..., 1, the counter kept in a cell (as the reverse of a
# counted loop keeps it).
COUNTED_IN_A_CELL = """  %2 = private : private<i64, 1>
  %3 = const 0 : i64
  %4 = const 16 : i64
  %5 = const 1 : i64
  %6 = const 1.0 : f32
  store %2, %3, %4
  br ^bb1()
^bb1():
  %7 = load %2, %3 : i64
  %8 = eq %7, %3 : bool
  cbr %8, ^bb3(), ^bb2()
^bb2():
  %9 = sub %7, %5 : i64
  store %2, %3, %9
  %10 = load %2, %3 : i64
  %11 = load %0, %10 : f32
  %12 = add %11, %6 : f32
  store %0, %10, %12
  br ^bb1()
^bb3():
  ret
"""


def promoted(body: str) -> str:
    module = parse_module(HEADER + body + "}\n")
    run_passes(module, ["promote-private", "dce"], verify=True)
    return print_module(module).split("\n", 2)[2]


def test_a_counter_kept_in_a_cell_becomes_a_block_parameter():
    assert promoted(COUNTED_IN_A_CELL) == """  %2 = const 0 : i64
  %3 = const 16 : i64
  %4 = const 1 : i64
  %5 = const 1.0 : f32
  br ^bb1(%3)
^bb1(%6: i64):
  %7 = eq %6, %2 : bool
  cbr %7, ^bb3(), ^bb2()
^bb2():
  %8 = sub %6, %4 : i64
  %9 = load %0, %8 : f32
  %10 = add %9, %5 : f32
  store %0, %8, %10
  br ^bb1(%8)
^bb3():
  ret
}
"""


def test_the_promoted_loop_is_counted_with_a_constant_trip_count():
    module = parse_module(HEADER + COUNTED_IN_A_CELL + "}\n")
    run_passes(module, ["promote-private"], verify=True)
    ((header, body),) = natural_loops(module.kernel).items()
    assert counted_loop(header, body).trip_count(1 << 16) == 16


def test_a_cell_read_before_any_store_reads_zero_and_cells_are_apart():
    assert promoted("""  %2 = private : private<f32, 2>
  %3 = const 0 : i64
  %4 = const 1 : i64
  %5 = const 2.0 : f32
  store %2, %4, %5
  %6 = load %2, %3 : f32
  %7 = load %2, %4 : f32
  %8 = add %6, %7 : f32
  store %0, %1, %8
  ret
""") == """  %2 = const 0.0 : f32
  %3 = const 2.0 : f32
  %4 = add %2, %3 : f32
  store %0, %1, %4
  ret
}
"""


def test_a_value_joined_from_two_branches_is_a_parameter_of_the_join():
    assert promoted("""  %2 = private : private<f32, 1>
  %3 = const 0 : i64
  %4 = const 2.0 : f32
  %5 = const 3.0 : f32
  %6 = gt %1, %3 : bool
  cbr %6, ^bb1(), ^bb2()
^bb1():
  store %2, %3, %4
  br ^bb3()
^bb2():
  store %2, %3, %5
  br ^bb3()
^bb3():
  %7 = load %2, %3 : f32
  store %0, %1, %7
  ret
""") == """  %2 = const 0 : i64
  %3 = const 2.0 : f32
  %4 = const 3.0 : f32
  %5 = gt %1, %2 : bool
  cbr %5, ^bb1(), ^bb2()
^bb1():
  br ^bb3(%3)
^bb2():
  br ^bb3(%4)
^bb3(%6: f32):
  store %0, %1, %6
  ret
}
"""


def test_an_array_indexed_by_a_value_stays_in_memory():
    body = """  %2 = private : private<f32, 4>
  %3 = const 0 : i64
  %4 = const 2.0 : f32
  store %2, %3, %4
  %5 = load %2, %1 : f32
  store %0, %1, %5
  ret
"""
    assert promoted(body) == body + "}\n"
