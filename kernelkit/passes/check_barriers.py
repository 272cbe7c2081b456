"""Rejects a barrier that not every work-item of a group reaches: one under a branch on a
varying condition deadlocks a GPU, so it is a user error naming the line."""
from __future__ import annotations

import linecache
from dataclasses import dataclass

from ..analysis.uniformity import divergent_region, varying_values
from ..errors import CompileError
from ..ir.function import Module
from ..ir.definitions import Trait
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class CheckBarriers:
    """Rejects a barrier that not every work-item of a group reaches."""

    name = "check-barriers"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            if not any(op.has(Trait.BARRIER) for op in function.ops()):
                continue
            region = divergent_region(function, varying_values(function))
            for block in region:
                for op in block.ops:
                    if op.has(Trait.BARRIER):
                        raise divergent_barrier_error(module.kernel.name, op)


def divergent_barrier_error(kernel: str, op) -> CompileError:
    loc = op.loc
    file = loc.file if loc else None
    line = loc.line if loc else None
    source = linecache.getline(file, line) if file and line else None
    return CompileError(
        "kk.synchronize() is reached by only some work-items of a group here: it sits under a "
        "branch or loop whose condition depends on the work-item index", kernel=kernel,
        file=file, line=line, source_line=source,
        hint="move the barrier out of the branch so that every work-item of the group reaches "
             "it (compute the condition, synchronize, then branch)")
