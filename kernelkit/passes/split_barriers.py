"""Makes every barrier the last operation before an unconditional branch to a block of
its own, so that "just after this barrier" is the start of a block: targets that run a
group's work-items one after another resume there."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.function import Block, Module
from ..ir.ops import Op, Successor
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class SplitBarriers:
    name = "split-barriers"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            index = 0
            while index < len(function.blocks):
                block = function.blocks[index]
                for position, op in enumerate(block.ops):
                    if op.opcode == "barrier" and block.ops[position + 1].opcode != "br" \
                            or op.opcode == "barrier" and block.ops[position + 1:] and \
                            _target_has_other_predecessors(function, block, position):
                        after = Block()
                        after.function = function
                        for moved in block.ops[position + 1:]:
                            after.append(moved)
                        del block.ops[position + 1:]
                        block.append(Op("br", [], successors=[Successor(after)], loc=op.loc))
                        function.blocks.insert(index + 1, after)
                        break
                index += 1


def _target_has_other_predecessors(function, block, position) -> bool:
    """A barrier followed by a branch to a block that others also reach (or that has
    parameters) still needs a block of its own after it."""
    branch = block.ops[position + 1]
    if branch.opcode != "br" or position + 2 != len(block.ops):
        return True
    target = branch.successors[0].block
    if target.params:
        return True
    return sum(b.successors.count(target) for b in function.blocks) > 1
