"""Kernels compute in the default floating-point environment, whatever their thread's.

A thread's floating-point control word (x86's MXCSR, AArch64's FPCR) says whether
subnormal inputs and results are flushed to zero and how results are rounded, and any
library in the process may set it: Taichi's `ti.init` sets flush-to-zero and
denormals-are-zero on the thread that calls it. A CPU launch runs its groups on the
calling thread and on the backend's workers, so a kernel computing with subnormals would
give results that depend on which thread ran which group, and would differ from the GPU's
(kernelkit's CUDA code does not flush float32 or float64 subnormals).

So a kernel's exported group function (`kk_<name>_<digest>(args, first_group,
end_group)`) is a wrapper: it saves the control word, sets the default (round to nearest,
nothing flushed, every exception masked), calls the group function built by `group.py`,
and restores the word it saved. The call is kept (the group function is `noinline`), so
none of the kernel's arithmetic can be moved to before the default is set. On a machine
whose control word is not known here, the wrapper only calls the group function.
"""
from __future__ import annotations

from llvmlite import ir

from kernelkit.compiler.llvm_types import declared, i32, i64

MXCSR_DEFAULT = 0x1F80
"""x86's MXCSR at process start: every exception masked, round to nearest, and
neither flush-to-zero (bit 15) nor denormals-are-zero (bit 6)."""

FPCR_DEFAULT = 0
"""AArch64's FPCR at process start: round to nearest, no flush to zero (FZ, FZ16), no
default NaN, alternative half precision off."""

GROUPS_SUFFIX = ".groups"
"""The name the group function gets behind its wrapper: `<symbol>.groups`."""


def architecture(triple: str) -> str:
    """"x86_64", "aarch64", or "" for a machine whose control word is not known here."""
    arch = triple.split("-", 1)[0]
    if arch in ("x86_64", "amd64"):
        return "x86_64"
    if arch in ("aarch64", "arm64"):
        return "aarch64"
    return ""


def in_default_environment(module: ir.Module, groups: ir.Function, symbol: str,
                           triple: str) -> ir.Function:
    """Export `groups` (a group function, named `symbol` + GROUPS_SUFFIX) as `symbol`,
    run in the default floating-point environment on `triple`'s machine: `groups` is
    made internal and `noinline`, and `symbol` is the wrapper that calls it."""
    groups.linkage = "internal"
    groups.attributes.add("noinline")
    wrapper = ir.Function(module, groups.function_type, symbol)
    wrapper.attributes.add("nounwind")
    wrapper.args[0].add_attribute("noalias")
    for argument, name in zip(wrapper.args, ("args", "first_group", "end_group")):
        argument.name = name
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    restore = _set_default(builder, module, architecture(triple))
    builder.call(groups, list(wrapper.args))
    restore(builder)
    builder.ret_void()
    return wrapper


def _set_default(builder: ir.IRBuilder, module: ir.Module, arch: str):
    """Emit saving the control word and setting the default; return what emits the
    restore."""
    if arch == "x86_64":
        ptr = ir.PointerType(ir.IntType(8))
        store_word = declared(module, "llvm.x86.sse.stmxcsr", ir.VoidType(), [ptr])
        load_word = declared(module, "llvm.x86.sse.ldmxcsr", ir.VoidType(), [ptr])
        saved = builder.alloca(i32, name="saved_mxcsr")
        default = builder.alloca(i32, name="default_mxcsr")
        builder.call(store_word, [builder.bitcast(saved, ptr)])
        builder.store(ir.Constant(i32, MXCSR_DEFAULT), default)
        builder.call(load_word, [builder.bitcast(default, ptr)])
        return lambda after: after.call(load_word, [after.bitcast(saved, ptr)])
    if arch == "aarch64":
        get_word = declared(module, "llvm.aarch64.get.fpcr", i64, [])
        set_word = declared(module, "llvm.aarch64.set.fpcr", ir.VoidType(), [i64])
        saved = builder.call(get_word, [])
        builder.call(set_word, [ir.Constant(i64, FPCR_DEFAULT)])
        return lambda after: after.call(set_word, [saved])
    return lambda after: None

