"""Every kind of operation is defined once (`kernelkit.ir.definitions`): the verifier
checks each operation through its definition, passes ask its traits and effects, and
the math functions' table is the one the language, the folder and both lowerings use."""
import math

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.compiler.lowering import LOWERINGS
from kernelkit.frontend.intrinsics import lookup_intrinsic
from kernelkit.ir import types as T
from kernelkit.ir.definitions import (ATOMICS, BARRIER, DEFINITIONS, LOAD, MATH, PRINT, STORE,
                                      Trait)
from kernelkit.ir.fold import fold
from kernelkit.ir.math_functions import MATH_FUNCTIONS
from kernelkit.ir.ops import Op
from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_module
from kernelkit.ir.verifier import IRVerificationError, verify_module


def module_with(body: str, params: str = "%0: array<f32, 1, C>, %1: i64, %2: f32") -> str:
    return ('kernel @k(a, i, x) -> void file "k.py" {\n'
            f"^bb0({params}):\n" + "".join(f"  {line}\n" for line in body.splitlines())
            + "  ret\n}\n")


def verify_text(body: str, **kwargs) -> None:
    verify_module(parse_module(module_with(body, **kwargs)))


def test_well_typed_operations_of_every_family_pass_and_print_back_unchanged():
    text = module_with("%3 = load %0, %1 : f32\n"
                       "%4 = math.sqrt %3 : f32\n"
                       "%5 = math.isnan %4 : bool\n"
                       "%6 = atomic.max %0, %1, %4 : f32\n"
                       "%7 = math.atan2 %6, %2 : f32\n"
                       "store %0, %1, %7")
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text


@pytest.mark.parametrize("body, problem", [
    ("%3 = load %0, %1, %1 : f32", "load of a 1-dimensional array with 2 indices"),
    ("%3 = load %0, %2 : f32", "load with an index that is not an integer"),
    ("%3 = load %0, %1 : f64", "load gives f64; its operands make it f32"),
    ("store %0, %1, %1", "store of a i64 into an array of f32"),
    ("%3 = add %1, %2 : i64", "add of i64 and f32"),
    ("%3 = add %1, %1 : i32", "add gives i32; its operands make it i64"),
    ("%3 = lt %1, %1 : i64", "lt gives i64; its operands make it bool"),
    ("%3 = xor %2, %2 : f32", "xor of f32, f32: integers or bools only"),
    ("%3 = math.sqrt %2, %2 : f32", "math.sqrt takes 1 operands, has 2"),
    ("%3 = math.isinf %2 : f32", "math.isinf gives f32; its operands make it bool"),
    ("%3 = local_id : i64", "local_id without the attribute axis"),
    ("%3 = atomic.add %0, %1 : f32", "atomic.add of a 1-dimensional array with 0 indices"),
    ("%3 = select %1, %2, %2 : f32", "select on a i64"),
])
def test_the_verifier_checks_each_operation_through_its_definition(body, problem):
    with pytest.raises(IRVerificationError) as info:
        verify_text(body)
    assert problem in str(info.value)


def test_writing_into_a_const_array_is_invalid_ir():
    with pytest.raises(IRVerificationError, match="store into a const array"):
        verify_text("store %0, %1, %2", params="%0: array<f32, 1, C, const>, %1: i64, %2: f32")


def test_an_unknown_operation_is_a_parse_error_naming_it():
    with pytest.raises(Exception, match="unknown operation 'math.sine'"):
        parse_module(module_with("%3 = math.sine %2 : f32"))


def test_effects_say_what_a_pass_may_remove_or_merge():
    assert not LOAD.is_pure and LOAD.removable_when_unused   # reads memory: no merging
    assert LOAD.effects.reads == ("array",) and not LOAD.effects.writes
    assert STORE.effects.writes == ("array",) and not STORE.removable_when_unused
    assert all(a.effects.reads == a.effects.writes == ("array",) for a in ATOMICS.values())
    assert BARRIER.effects.barrier and BARRIER.has(Trait.BARRIER)
    assert PRINT.effects.unknown and not PRINT.removable_when_unused
    assert DEFINITIONS["localmem"].effects.allocates
    assert DEFINITIONS["add"].is_pure and DEFINITIONS["add"].has(Trait.COMMUTATIVE)
    assert not DEFINITIONS["sub"].has(Trait.COMMUTATIVE)
    assert DEFINITIONS["local_id"].has(Trait.PER_WORK_ITEM)
    assert not DEFINITIONS["group_id"].has(Trait.PER_WORK_ITEM)
    assert DEFINITIONS["br"].is_terminator and not DEFINITIONS["br"].is_pure


def test_an_operation_made_by_name_has_that_definition():
    op = Op("math.hypot", [], T.float32)
    assert op.definition is MATH["hypot"] and op.opcode == "math.hypot"
    assert op.definition.member is MATH_FUNCTIONS["hypot"]


def test_operands_are_found_by_their_role():
    module = parse_module(module_with("store %0, %1, %2"))
    store = next(op for op in module.kernel.ops() if op.definition is STORE)
    array, index, value = module.kernel.params
    assert STORE.operand(store, "array") is array and STORE.operand(store, "value") is value
    assert STORE.arity_problem(1) == "store takes at least 2 operands, has 1"


# --- the one table of math functions ---------------------------------------------------

def test_every_math_function_is_an_operation_the_language_and_both_targets_know():
    assert set(MATH) == set(MATH_FUNCTIONS)
    for name, function in MATH_FUNCTIONS.items():
        with np.errstate(all="ignore"):
            assert getattr(kk, name)(*[0.5] * function.arity) is not None   # on the host
        assert lookup_intrinsic(getattr(kk, name)) is not None          # and in kernels
        assert LOWERINGS[MATH[name]] is not None
        assert MATH[name].arity_problem(function.arity) is None


def test_only_exactly_defined_math_functions_fold():
    for name, function in MATH_FUNCTIONS.items():
        operands = [0.75] * function.arity
        folded = fold(MATH[name], operands, [T.float64] * function.arity,
                      T.bool_ if function.predicate else T.float64)
        if function.exact:
            expected = function.host(*operands)
            assert folded == (bool(expected) if function.predicate else float(expected)), name
        else:
            assert folded is None, name


def test_every_operation_left_at_lowering_has_a_lowering():
    """Calls, references and plugin markers are gone by then (inlined, resolved,
    rewritten); every other kind has one entry in the lowering's table."""
    resolved_before = {"call", "call_ref", "deferred", "intrinsic"}
    missing = [name for name, definition in DEFINITIONS.items()
               if name not in resolved_before and definition not in LOWERINGS]
    assert missing == []


def test_kk_math_functions_on_the_host_match_numpy():
    assert kk.hypot(np.float32(3), np.float32(4)) == np.float32(5)
    assert kk.gamma(5.0) == math.gamma(5.0)
