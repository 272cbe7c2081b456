"""Makes every barrier the last operation before a branch to a "region start": a block
that is entered only just after a barrier. Targets that run a group's work-items one
after another cut the kernel into regions there (`analysis/regions.py`); a region
start's parameters are what flows into it across the barrier."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.regions import ends_with_barrier
from ..ir.definitions import BR, Trait
from ..ir.function import Block, Function, Module
from ..ir.rewriter import Rewriter
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
                    if op.has(Trait.BARRIER) and not _leads_to_region_start(function, block,
                                                                            position):
                        rewriter = Rewriter(function)
                        after = rewriter.split_block_after(op)
                        rewriter.position_at_end(block)
                        rewriter.loc = op.loc
                        rewriter.br(after)
                        break
                index += 1


def _leads_to_region_start(function: Function, block: Block, position: int) -> bool:
    """The barrier is followed only by `br target` and every edge into `target` comes
    from such a block."""
    if position + 2 != len(block.ops) or block.ops[-1].definition is not BR:
        return False
    target = block.successors[0]
    if target is function.entry:
        return False
    return all(ends_with_barrier(b) for b in function.blocks if target in b.successors)
