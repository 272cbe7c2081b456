"""Rejects a barrier or a subgroup operation that not every work-item of a group reaches:
one under a branch on a varying condition deadlocks a GPU (or, for a subgroup operation,
exchanges values with lanes that are not there), so it is a user error naming the line."""
from __future__ import annotations

import linecache
from dataclasses import dataclass

from ..analysis.uniformity import divergent_region, varying_values
from ..errors import CompileError
from ..ir.function import Module
from ..ir.definitions import Trait
from ..ir.subgroups import user_name
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class CheckBarriers:
    """Rejects a barrier or subgroup operation that not every work-item of a group
    reaches."""

    name = "check-barriers"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            if not any(_needs_the_whole_group(op) for op in function.ops()):
                continue
            region = divergent_region(function, varying_values(function))
            for block in region:
                for op in block.ops:
                    if op.has(Trait.BARRIER):
                        raise divergent_barrier_error(module.kernel.name, op)
                    if op.has(Trait.SUBGROUP):
                        raise divergent_subgroup_error(module.kernel.name, op)


def _needs_the_whole_group(op) -> bool:
    return op.has(Trait.BARRIER) or op.has(Trait.SUBGROUP)


def divergent_barrier_error(kernel: str, op) -> CompileError:
    return _divergent_error(
        kernel, op, "kk.synchronize()",
        hint="move the barrier out of the branch so that every work-item of the group reaches "
             "it (compute the condition, synchronize, then branch)")


def divergent_subgroup_error(kernel: str, op) -> CompileError:
    name = user_name(op.definition)
    return _divergent_error(
        kernel, op, f"{name}()",
        hint=f"call {name} where every work-item of the group reaches it, before the branch, "
             f"and use its result inside (a work-item whose value should not count can pass "
             f"the operation's neutral value: 0 to a sum)")


def _divergent_error(kernel: str, op, what: str, hint: str) -> CompileError:
    loc = op.loc
    file = loc.file if loc else None
    line = loc.line if loc else None
    source = linecache.getline(file, line) if file and line else None
    return CompileError(
        f"{what} is reached by only some work-items of a group here: it sits under a "
        "branch or loop whose condition depends on the work-item index", kernel=kernel,
        file=file, line=line, source_line=source, hint=hint)
