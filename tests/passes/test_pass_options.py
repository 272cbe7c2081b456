"""Pass options are the fields of a pass: a pipeline names them as
`name{option=value,...}` (in `run_passes` and on the command line, `python -m kernelkit
opt FILE -p 'simplify{speculated_ops=8},dce'`), each value read by the field's type; an
unknown option or a value of the wrong type is an error naming the pass and listing its
options."""
import pytest

from kernelkit.__main__ import main
from kernelkit.errors import KernelkitError
from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_module
from kernelkit.passes import run_passes
from kernelkit.passes.loop_barriers import LoopBarriers
from kernelkit.passes.pipeline import pass_named, split_pipeline
from kernelkit.passes.simplify import Simplify

SHORT_BRANCH = '''func @pick(c, x) -> i64 file "f.py" {
^bb0(%0: bool, %1: i64):
  cbr %0, ^bb1(), ^bb2(%1)
^bb1():
  %2 = add %1, %1 : i64
  %3 = mul %2, %2 : i64
  br ^bb2(%3)
^bb2(%4: i64):
  ret %4
}
'''

SPECULATED = '''func @pick(c, x) -> i64 file "f.py" {
^bb0(%0: bool, %1: i64):
  %2 = add %1, %1 : i64
  %3 = mul %2, %2 : i64
  %4 = select %0, %3, %1 : i64
  ret %4
}
'''

# A loop of ten iterations doing per-item work.
TEN_ITERATIONS = '''kernel @k(a) -> void file "k.py" {
^bb0(%0: array<f32, 1, C>):
  %1 = local_id {axis = 0} : i64
  %2 = const 0 : i64
  %3 = const 1 : i64
  %4 = const 10 : i64
  br ^bb1(%2)
^bb1(%5: i64):
  %6 = lt %5, %4 : bool
  cbr %6, ^bb2(), ^bb3()
^bb2():
  %7 = load %0, %1 : f32
  store %0, %1, %7
  %8 = add %5, %3 : i64
  br ^bb1(%8)
^bb3():
  ret
}
'''


def after(text: str, *specs: str) -> str:
    module = parse_module(text)
    run_passes(module, specs, verify=True)
    return print_module(module)


def test_a_pass_named_with_options_has_them_as_fields_and_the_rest_default():
    assert pass_named("simplify{speculated_ops=8}") == Simplify(speculated_ops=8)
    assert pass_named("loop-barriers{ small_trip_count = 3 }") == LoopBarriers(3)
    assert pass_named("simplify") == pass_named("simplify{}") == Simplify(speculated_ops=4)


def test_speculated_ops_decides_which_short_branches_become_selects():
    assert after(SHORT_BRANCH, "simplify") == SPECULATED
    assert after(SHORT_BRANCH, "simplify{speculated_ops=2}") == SPECULATED
    assert after(SHORT_BRANCH, "simplify{speculated_ops=1}") == SHORT_BRANCH


def test_small_trip_count_decides_which_constant_loops_get_barriers():
    assert after(TEN_ITERATIONS, "loop-barriers") == TEN_ITERATIONS
    assert after(TEN_ITERATIONS, "loop-barriers{small_trip_count=10}") == TEN_ITERATIONS
    with_barriers = after(TEN_ITERATIONS, "loop-barriers{small_trip_count=9}")
    assert with_barriers.count("  barrier\n") == 2


def test_commas_inside_braces_separate_options_not_passes():
    assert split_pipeline("simplify{speculated_ops=8,}, dce,cse") == (
        "simplify{speculated_ops=8,}", "dce", "cse")


def test_unknown_option_is_an_error_naming_the_pass_and_listing_its_options():
    with pytest.raises(KernelkitError, match=r"pass 'simplify' has no option 'unroll'; its "
                                             r"options are: speculated_ops: int = 4$"):
        pass_named("simplify{unroll=2}")
    with pytest.raises(KernelkitError, match="pass 'dce' has no option 'x'; it has no options"):
        pass_named("dce{x=1}")


def test_a_value_of_the_wrong_type_is_an_error_naming_the_type():
    with pytest.raises(KernelkitError, match=r"pass 'loop-barriers': option 'small_trip_count' "
                                             r"takes a value of type int, not 'many'"):
        pass_named("loop-barriers{small_trip_count=many}")
    with pytest.raises(KernelkitError, match="option 'speculated_ops' takes a value of type int;"):
        pass_named("simplify{speculated_ops}")


def test_options_without_a_closing_brace_are_an_error_showing_how_to_write_them():
    with pytest.raises(KernelkitError, match=r"written 'simplify\{option=value,...\}'"):
        pass_named("simplify{speculated_ops=1")


def test_opt_runs_passes_with_options_from_the_command_line(tmp_path, capsys):
    file = tmp_path / "pick.kkir"
    file.write_text(SHORT_BRANCH)
    assert main(["opt", str(file), "-p", "simplify{speculated_ops=1},dce"]) == 0
    assert capsys.readouterr().out == SHORT_BRANCH
    assert main(["opt", str(file), "-p", "simplify{speculated_ops=8},dce"]) == 0
    assert capsys.readouterr().out == SPECULATED
    assert main(["opt", str(file), "-p", "dce,simplify{speculate=8}"]) == 1
    assert "pass 'simplify' has no option 'speculate'; its options are: speculated_ops" in \
        capsys.readouterr().err
