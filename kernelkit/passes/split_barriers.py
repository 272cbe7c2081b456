"""Makes every barrier the last operation before a branch to a "region start": a block
that is entered only just after a barrier. Targets that run a group's work-items one
after another cut the kernel into regions there; a region start's parameters are what
flows into it across the barrier."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.definitions import BR, Trait
from ..ir.function import Block, Function, Module
from ..ir.rewriter import Rewriter
from .dominance import dominates, immediate_dominators, reverse_post_order
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


def ends_with_barrier(block: Block) -> bool:
    return len(block.ops) >= 2 and block.ops[-2].has(Trait.BARRIER) \
        and block.ops[-1].definition is BR


def region_starts(function: Function) -> list[Block]:
    """The entry, then each block entered just after a barrier, in block order."""
    targets = {block.successors[0] for block in function.blocks if ends_with_barrier(block)}
    return [function.entry] + [b for b in function.blocks if b in targets]


def region_successors(block: Block) -> list[Block]:
    """A block's successors within its region: none after a barrier."""
    return [] if ends_with_barrier(block) else block.successors


def region_order(start: Block) -> list[Block]:
    """The blocks of the region beginning at `start` (reachable from it without passing a
    barrier), in reverse post-order: definitions come before the uses they dominate."""
    return reverse_post_order(start, region_successors)


def region_dominance(order: list[Block]):
    """`dominated(value, block)`: whether every path from the region's start to `block`
    passes the definition of `value` (always, for a value defined outside the region).
    Where it does not, a work-item reaches `block` holding the value it had before the
    barrier, or from an earlier trip around a cycle of the region, not the one the
    region's own definition gives on the way."""
    predecessors: dict = {block: [] for block in order}
    for block in order:
        for successor in region_successors(block):
            predecessors[successor].append(block)
    idom = immediate_dominators(order, predecessors)

    def dominated(value, block) -> bool:
        """(`block` None: before the region's start.)"""
        definition = getattr(value, "block", None)
        return definition not in idom or block is not None and dominates(idom, definition,
                                                                          block)

    return dominated


def _leads_to_region_start(function: Function, block: Block, position: int) -> bool:
    """The barrier is followed only by `br target` and every edge into `target` comes
    from such a block."""
    if position + 2 != len(block.ops) or block.ops[-1].definition is not BR:
        return False
    target = block.successors[0]
    if target is function.entry:
        return False
    return all(ends_with_barrier(b) for b in function.blocks if target in b.successors)
