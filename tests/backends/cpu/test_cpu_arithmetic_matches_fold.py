"""Compiled arithmetic agrees with constant folding (`kernelkit.ir.fold`), so a kernel
gives the same answer whether its operands are known at compile time or not: floor
division and modulo, min and max, at zeros of both signs, infinities, NaN and the
wrap-around edges of small integers; and every math function, on float32 and float64,
whether the compiler folds it or leaves it to run time."""
import itertools
import math

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.ir.math_functions import MATH_FUNCTIONS
from kernelkit.ir import types as T
from kernelkit.ir.definitions import DEFINITIONS, MATH
from kernelkit.ir.fold import fold

OPCODES = ("floordiv", "mod", "min", "max")


@kk.kernel
def four_ops(out, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    out[0, i] = a[i] // b[i]
    out[1, i] = a[i] % b[i]
    out[2, i] = min(a[i], b[i])
    out[3, i] = max(a[i], b[i])


def same(folded, computed) -> bool:
    if isinstance(folded, float):
        if math.isnan(folded):
            return bool(np.isnan(computed))
        return folded == computed and math.copysign(1, folded) == np.copysign(1, computed)
    return folded == computed


@pytest.mark.parametrize("dtype, values", [
    (np.float64, [-7.5, -2.0, -0.0, 0.0, 1.0, 3.0, np.inf, -np.inf, np.nan]),
    (np.int8, [-128, -7, -1, 0, 1, 2, 7, 127]),
], ids=["f64", "i8"])
def test_compiled_floordiv_mod_min_max_agree_with_fold(dtype, values):
    pairs = list(itertools.product(values, repeat=2))
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    out = np.zeros((len(OPCODES), len(pairs)), dtype)
    backend = kk.CPU(threads=1)
    four_ops(backend, 16)(out, a, b, ndrange=len(pairs))
    kk.synchronize(backend)
    type_ = T.from_numpy(dtype)
    mismatches = []
    for row, opcode in enumerate(OPCODES):
        for x, y, computed in zip(a, b, out[row]):
            folded = fold(DEFINITIONS[opcode], [x.item(), y.item()], [type_, type_], type_)
            if folded is not None and not same(folded, computed):
                mismatches.append(f"{opcode}({x}, {y}): folded {folded}, computed {computed}")
    assert not mismatches, "\n".join(mismatches)


UNARY_ARGUMENTS = (10.0, 0.5, -0.5, 2.0, 100.0, 1e-3, 0.7, -3.25, 2.5, 88.5, -0.0, np.inf,
                   -np.inf, np.nan)
BINARY_ARGUMENTS = ((2.0, 0.5), (10.0, 3.0), (-7.5, 2.0), (0.0, -0.0), (-0.0, 0.0), (1.0, np.nan),
                    (np.inf, 2.0), (3.0, 4.0), (-1.5, -2.5), (0.5, 100.0), (-8.0, 1 / 3))


def math_kernels(name: str, dtype):
    """Two kernels applying kk.`name` to the same arguments: as constants of the kernel
    (folded where the compiler folds) and read from arrays (computed at run time)."""
    function = getattr(kk, name)
    arity = MATH_FUNCTIONS[name].arity
    pairs = BINARY_ARGUMENTS if arity == 2 else [(v, 0.0) for v in UNARY_ARGUMENTS]
    firsts = tuple(dtype(a) for a, _ in pairs)
    seconds = tuple(dtype(b) for _, b in pairs)
    positions = tuple(range(len(pairs)))

    @kk.kernel
    def math_of_constants(out):
        kernel_of = name  # the name keeps kernels of different functions apart
        for k in positions:
            if arity == 1:
                out[k] = function(firsts[k])
            else:
                out[k] = function(firsts[k], seconds[k])

    @kk.kernel
    def math_at_run_time(out, a: kk.Const, b: kk.Const):
        i = kk.index(kk.Global)
        kernel_of = name
        if arity == 1:
            out[i] = function(a[i])
        else:
            out[i] = function(a[i], b[i])

    return math_of_constants, math_at_run_time, np.array(firsts), np.array(seconds)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(MATH_FUNCTIONS))
def test_math_of_constants_is_folded_only_to_what_the_function_gives_at_run_time(name, dtype):
    """Where kernelkit folds kk.`name` of constants, the kernel gives the run-time
    function's answer; the arguments it does not fold reach the compiled code as math
    operations, which LLVM does not evaluate in its own way either: the kernel of
    constants gives the run-time answer for every argument."""
    of_constants, at_run_time, a, b = math_kernels(name, dtype)
    result_dtype = np.bool_ if MATH_FUNCTIONS[name].predicate else dtype
    backend = kk.CPU(threads=1)
    from_constants = np.zeros(len(a), result_dtype)
    computed = np.zeros(len(a), result_dtype)
    of_constants(backend, 1)(from_constants, ndrange=1)
    at_run_time(backend, 16)(computed, a, b, ndrange=len(a))
    kk.synchronize(backend)
    type_ = T.from_numpy(dtype)
    arity = MATH_FUNCTIONS[name].arity
    mismatches, left_to_run_time = [], 0
    for x, y, constant_result, at_run in zip(a, b, from_constants, computed):
        arguments = [x.item(), y.item()][:arity]
        value = fold(MATH[name], arguments, [type_] * arity, T.from_numpy(result_dtype))
        if value is None:
            left_to_run_time += 1
            if not same(constant_result.item(), at_run):
                mismatches.append(f"kk.{name}{tuple(arguments)}: kernel of constants "
                                  f"{constant_result}, {at_run} at run time")
        elif not (same(value, at_run) and same(constant_result.item(), at_run)):
            mismatches.append(f"kk.{name}{tuple(arguments)}: folded {value}, kernel of constants "
                              f"{constant_result}, {at_run} at run time")
    assert not mismatches, "\n".join(mismatches)
    ir = kk.code_ir(of_constants, backend, from_constants, ndrange=1)
    assert ir.count('= math.') == left_to_run_time, ir
