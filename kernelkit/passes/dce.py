"""Removes what nothing needs: operations without side effects whose results no needed
value uses, and block parameters no needed value reads, even when they feed each other
around a loop (a counter nothing reads but its own increment)."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.function import Function, Module
from ..ir.ops import BlockParam, Op
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class DeadCode:
    name = "dce"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            remove_dead_code(function)


def remove_dead_code(function: Function) -> None:
    incoming: dict = {}
    for block in function.blocks:
        for op in block.ops:
            for successor in op.successors:
                for param, arg in zip(successor.block.params, successor.args):
                    incoming.setdefault(param, []).append(arg)
    needed: set = set()
    kept = [op for op in function.ops() if not op.definition.removable_when_unused]
    stack = [v for op in kept for v in op.operands]
    stack.extend(kept)
    while stack:
        value = stack.pop()
        if value in needed:
            continue
        needed.add(value)
        if isinstance(value, Op):
            stack.extend(value.operands)
        elif isinstance(value, BlockParam):
            stack.extend(incoming.get(value, ()))
    entry = function.entry
    for block in function.blocks:
        block.ops = [op for op in block.ops if op in needed]
        if block is entry:
            continue
        keep = [i for i, param in enumerate(block.params) if param in needed]
        if len(keep) != len(block.params):
            block.params = [block.params[i] for i in keep]
            for predecessor in function.blocks:
                for op in predecessor.ops:
                    for successor in op.successors:
                        if successor.block is block:
                            successor.args = [successor.args[i] for i in keep]
