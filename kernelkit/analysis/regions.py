"""Barrier regions: after split-barriers, every barrier is the last operation before a
branch to a block entered only just after a barrier (a region start). A region is the
blocks reachable from its start without passing a barrier; targets that run a group's
work-items one after another run a kernel region by region, each as a loop over the
work-items."""
from __future__ import annotations

from typing import Callable

from ..ir.definitions import BR, Trait
from ..ir.function import Block, Function
from ..ir.ops import Value
from .dominance import dominates, immediate_dominators, reverse_post_order


def ends_with_barrier(block: Block) -> bool:
    """Whether the block leaves its region: a barrier, then a branch to a region start."""
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


def region_dominance(order: list[Block]) -> Callable[[Value, Block | None], bool]:
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
