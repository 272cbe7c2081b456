"""Compiled arithmetic agrees with constant folding (`kernelkit.ir.fold`), so a kernel
gives the same answer whether its operands are known at compile time or not: floor
division and modulo, min and max, at zeros of both signs, infinities, NaN and the
wrap-around edges of small integers."""
import itertools
import math

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.ir import types as T
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
            folded = fold(opcode, {}, [x.item(), y.item()], [type_, type_], type_)
            if folded is not None and not same(folded, computed):
                mismatches.append(f"{opcode}({x}, {y}): folded {folded}, computed {computed}")
    assert not mismatches, "\n".join(mismatches)
