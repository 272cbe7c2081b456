"""Loops on small functions written as IR text: the natural loops of nested loops, and
the induction variables and trip counts of counted loops (`range(0, n, 2)`-like
counters with constant and unknown bounds, counting down, and counters that are not
induction variables)."""
from kernelkit.analysis.loops import counted_loop, induction_variable, natural_loops
from kernelkit.ir.definitions import COMPARISONS
from kernelkit.ir.parser import parse_module

NESTED = '''func @nested(n) -> void file "f.py" {
^bb0(%0: i64):
  %1 = const 0 : i64
  %2 = const 1 : i64
  br ^bb1(%1)
^bb1(%3: i64):
  %4 = lt %3, %0 : bool
  cbr %4, ^bb2(%1), ^bb5()
^bb2(%5: i64):
  %6 = lt %5, %0 : bool
  cbr %6, ^bb3(), ^bb4()
^bb3():
  %7 = add %5, %2 : i64
  br ^bb2(%7)
^bb4():
  %8 = add %3, %2 : i64
  br ^bb1(%8)
^bb5():
  ret
}
'''


def counting_loop(start: str, bound: str, step: str = "add %3, %2",
                  condition: str = "lt %3, %1") -> str:
    """`for i in range(start, bound, 2)`-like: %3 is the counter, %2 the step."""
    return f'''func @count(n) -> void file "f.py" {{
^bb0(%0: i64):
  %1 = {bound} : i64
  %2 = const 2 : i64
  %5 = {start} : i64
  br ^bb1(%5)
^bb1(%3: i64):
  %4 = {condition} : bool
  cbr %4, ^bb2(), ^bb3()
^bb2():
  %6 = {step} : i64
  br ^bb1(%6)
^bb3():
  ret
}}
'''


def only_loop(text: str):
    function = parse_module(text).kernel
    ((header, body),) = natural_loops(function).items()
    return header, body


def test_nested_loops_are_two_loops_the_outer_one_holding_the_inner_one():
    function = parse_module(NESTED).kernel
    entry, outer, inner, inner_body, outer_latch, exit_block = function.blocks
    assert natural_loops(function) == {outer: {outer, inner, inner_body, outer_latch},
                                       inner: {inner, inner_body}}


def test_straight_code_has_no_loops():
    function = parse_module('func @f() -> void file "f.py" {\n^bb0():\n  ret\n}\n').kernel
    assert natural_loops(function) == {}


def test_counter_stepping_by_two_up_to_an_argument_is_recognized_with_an_unknown_trip_count():
    header, body = only_loop(counting_loop(start="const 0", bound="add %0, %0"))
    loop = counted_loop(header, body)
    (counter,) = header.params
    assert loop.variable.counter is counter
    assert loop.variable.start.attrs["value"] == 0
    assert loop.variable.step.attrs["value"] == 2 and not loop.variable.subtracts
    assert loop.bound.opcode == "add" and loop.comparison is COMPARISONS["lt"]
    assert loop.trip_count(limit=1000) is None


def test_constant_start_step_and_bound_give_the_trip_count():
    header, body = only_loop(counting_loop(start="const 0", bound="const 9"))
    loop = counted_loop(header, body)
    assert loop.trip_count(limit=32) == 5        # 0, 2, 4, 6, 8
    assert loop.trip_count(limit=5) == 5
    assert loop.trip_count(limit=4) is None      # more than the limit


def test_a_counter_stepping_down_and_compared_from_the_left_is_counted():
    """`i = 10; while 0 < i: i -= 2`."""
    header, body = only_loop(counting_loop(start="const 10", bound="const 0",
                                           step="sub %3, %2", condition="lt %1, %3"))
    loop = counted_loop(header, body)
    assert loop.variable.subtracts and loop.bound_on_left
    assert loop.trip_count(limit=32) == 5        # 10, 8, 6, 4, 2


def test_a_loop_that_goes_on_while_its_comparison_fails_is_counted():
    """`i = 0; while not (i >= 9): i += 2`: the header leaves when `ge` holds."""
    text = counting_loop(start="const 0", bound="const 9", condition="ge %3, %1")
    text = text.replace("cbr %4, ^bb2(), ^bb3()", "cbr %4, ^bb3(), ^bb2()")
    loop = counted_loop(*only_loop(text))
    assert not loop.continues_on_true
    assert loop.trip_count(limit=32) == 5


def test_a_counter_that_doubles_is_not_an_induction_variable():
    header, body = only_loop(counting_loop(start="const 1", bound="const 64",
                                           step="mul %3, %2"))
    (counter,) = header.params
    assert induction_variable(header, body, counter) is None
    assert counted_loop(header, body) is None


def test_a_counter_with_a_different_step_on_each_back_edge_is_not_an_induction_variable():
    text = '''func @two_steps(n, c) -> void file "f.py" {
^bb0(%0: i64, %1: bool):
  %2 = const 0 : i64
  %3 = const 1 : i64
  %4 = const 2 : i64
  br ^bb1(%2)
^bb1(%5: i64):
  %6 = lt %5, %0 : bool
  cbr %6, ^bb2(), ^bb4()
^bb2():
  %7 = add %5, %3 : i64
  cbr %1, ^bb1(%7), ^bb3()
^bb3():
  %8 = add %5, %4 : i64
  br ^bb1(%8)
^bb4():
  ret
}
'''
    header, body = only_loop(text)
    (counter,) = header.params
    assert induction_variable(header, body, counter) is None
    step_one = next(op for block in body for op in block.ops
                    if op.opcode == "add" and op.operands[1].attrs["value"] == 1)
    excluded = tuple(s for block in body for s in block.terminator.successors
                     if s.block is header and s.args[0] is not step_one)
    # Without the edge that steps by two, the counter steps by one.
    variable = induction_variable(header, body, counter, excluded=excluded)
    assert variable.step.attrs["value"] == 1


def test_a_loop_on_a_comparison_of_two_of_its_own_parameters_is_not_counted():
    text = counting_loop(start="const 0", bound="const 9")
    text = text.replace("^bb1(%3: i64):", "^bb1(%3: i64, %7: i64):")
    text = text.replace("br ^bb1(%5)", "br ^bb1(%5, %0)").replace("br ^bb1(%6)",
                                                                 "br ^bb1(%6, %7)")
    text = text.replace("lt %3, %1", "lt %3, %7")
    assert counted_loop(*only_loop(text)) is None


def test_equal_constant_steps_on_two_back_edges_are_one_step():
    """`continue` after `i += 2` in one branch, `i += 2` at the end in the other: each
    branch has its own constant 2."""
    text = '''func @two_edges(n, c) -> void file "f.py" {
^bb0(%0: i64, %1: bool):
  %2 = const 0 : i64
  %3 = const 9 : i64
  br ^bb1(%2)
^bb1(%4: i64):
  %5 = lt %4, %3 : bool
  cbr %5, ^bb2(), ^bb4()
^bb2():
  cbr %1, ^bb3(), ^bb5()
^bb3():
  %6 = const 2 : i64
  %7 = add %4, %6 : i64
  br ^bb1(%7)
^bb5():
  %8 = const 2 : i64
  %9 = add %4, %8 : i64
  br ^bb1(%9)
^bb4():
  ret
}
'''
    loop = counted_loop(*only_loop(text))
    assert loop.variable.step.attrs["value"] == 2
    assert loop.trip_count(limit=32) == 5


def test_a_header_whose_both_branches_stay_in_the_loop_is_not_counted():
    """`while i < 0 or x[i] > 0` tests `i < 0` in the header, but a failing comparison goes
    on to the second condition inside the loop: it bounds nothing."""
    function = parse_module("""
kernel @k(x) -> void file "k.py" {
^bb0(%0: array<f64, 1, C>):
  %1 = const 0 : i64
  %2 = const 1 : i64
  br ^bb1(%1)
^bb1(%3: i64):
  %4 = lt %3, %1 : bool
  cbr %4, ^bb3(), ^bb2()
^bb2():
  %5 = load %0, %3 : f64
  %6 = const 0.0 : f64
  %7 = gt %5, %6 : bool
  cbr %7, ^bb3(), ^bb4()
^bb3():
  %8 = add %3, %2 : i64
  br ^bb1(%8)
^bb4():
  ret
}
""").kernel
    (header, body), = natural_loops(function).items()
    assert counted_loop(header, body) is None
