"""Removes operations whose results are unused and that have no side effects, and block
parameters that nothing reads."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.function import Function, Module
from ..ir.ops import REMOVABLE_WHEN_UNUSED
from .pipeline import register
from .uses import use_counts


@register
@dataclass(frozen=True, slots=True)
class DeadCode:
    name = "dce"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            while remove_dead_ops(function) | remove_dead_params(function):
                pass


def remove_dead_ops(function: Function) -> bool:
    counts = use_counts(function)
    changed = False
    for block in function.blocks:
        for op in reversed(list(block.ops)):
            if op.opcode in REMOVABLE_WHEN_UNUSED and counts[op] == 0:
                block.ops.remove(op)
                for operand in op.all_operands():
                    counts[operand] -= 1
                changed = True
    return changed


def remove_dead_params(function: Function) -> bool:
    """A parameter is dead when its only uses are the arguments that feed itself."""
    counts = use_counts(function)
    predecessors = function.predecessors()
    changed = False
    for block in function.blocks[1:]:
        incoming = [s for p in predecessors[block] for s in p.terminator.successors
                    if s.block is block]
        self_uses = {param: sum(1 for s in incoming if s.args[i] is param)
                     for i, param in enumerate(block.params)}
        keep = [i for i, p in enumerate(block.params) if counts[p] > self_uses[p]]
        if len(keep) != len(block.params):
            block.params = [block.params[i] for i in keep]
            for successor in incoming:
                successor.args = [successor.args[i] for i in keep]
            changed = True
    return changed
