"""How many times the CPU lowers a kernel's code (backends/cpu/group.py): a small kernel
has copies of it for full groups, partial groups, groups that pass its guards and the
middle of each row; a large one (more than `MOST_COPIED_OPERATIONS` operations) has its
code once, which full and partial groups share, so that LLVM optimizes it once. The
copies are counted in the LLVM IR as lowered (before LLVM's passes, `KERNELKIT_DUMP`):
each copy of the kernel calls floor once per term."""
import textwrap

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu.group import MOST_COPIED_OPERATIONS


def guarded_sum_of_floors(terms: int):
    """A 2-D kernel whose guard on the row's ends the CPU splits rows at, adding up
    `terms` floors."""
    body = "\n".join(f"        s += math.floor(x[i, j] * {k}.25)" for k in range(1, terms + 1))
    source = textwrap.dedent('''\
        def floors(out, x: kk.Const):
            i, j = kk.index(kk.Global, kk.NTuple)
            s = 0.0
            if 0 < j and j < out.shape[1] - 1:
        {body}
            out[i, j] = s
        ''').format(body=body)
    namespace = {"kk": kk, "math": __import__("math")}
    exec(compile(source, "<floors>", "exec"), namespace)   # noqa: S102
    return kk.kernel(namespace["floors"], source=source)


def floor_calls_as_lowered(kernel, tmp_path, monkeypatch, shape=(4, 300)):
    """The floor calls of each build of `kernel` launched once over `shape` (the group
    shape asked for, and the CPU's own, which it runs a kernel blind to its groups in)."""
    monkeypatch.setenv("KERNELKIT_DUMP", str(tmp_path / "dump"))
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path / "cache"))
    x = np.linspace(0.0, 3.0, np.prod(shape)).reshape(shape)
    out = np.zeros(shape)
    kernel(kk.CPU(), (2, 64))(out, x, ndrange=shape)
    kk.synchronize(kk.CPU())
    builds = sorted((tmp_path / "dump").glob("*/llvm.ll"))
    assert builds
    return [b.read_text().count('call double @"llvm.floor.f64"') for b in builds], out, x


def expected(x, terms):
    s = sum(np.floor(x * (k + 0.25)) for k in range(1, terms + 1))
    inner = np.zeros_like(x)
    inner[:, 1:-1] = s[:, 1:-1]
    return inner


def test_a_small_kernel_is_lowered_once_for_each_kind_of_group_and_row_part(
        tmp_path, monkeypatch):
    terms = 3
    calls, out, x = floor_calls_as_lowered(guarded_sum_of_floors(terms), tmp_path, monkeypatch)
    assert min(calls) >= 3 * terms     # full and partial groups, and the rows' middles
    np.testing.assert_allclose(out, expected(x, terms))


def test_a_large_kernel_is_lowered_once(tmp_path, monkeypatch):
    terms = MOST_COPIED_OPERATIONS // 3
    calls, out, x = floor_calls_as_lowered(guarded_sum_of_floors(terms), tmp_path, monkeypatch)
    assert set(calls) == {terms}
    np.testing.assert_allclose(out, expected(x, terms))
