"""Puts a work-group barrier on every edge into the header of a loop that all work-items
of a group run alike (its condition and exits do not depend on the work-item), so that a
target running a group's work-items one after another can turn the loop inside out:

    for each work-item: for p in range(k): acc += a[i, p] * b[p, j]
becomes
    for p in range(k): for each work-item: acc += a[i, p] * b[p, j]

where the loop over work-items is innermost and vectorizes. The barrier changes nothing a
kernel can observe: without one, work-items of a group may run in any order.

Loops with a small constant trip count are left alone (LLVM unrolls them whole), and so
are loops that do no per-work-item work, and loops whose header waits at a barrier
before it does anything (a masked loop's `barrier_any`): each of their trips is a region
already."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.loops import counted_loop, natural_loops
from ..analysis.uniformity import divergent_region, varying_values
from ..ir.definitions import BARRIER, Trait
from ..ir.function import Block, Function, Module
from ..ir.ops import Successor
from ..ir.rewriter import Rewriter
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class LoopBarriers:
    name = "loop-barriers"

    small_trip_count: int = 32
    """Loops known to run at most this many times are left to LLVM, which unrolls them."""

    def __call__(self, module: Module) -> None:
        for kernel in module.functions.values():
            if kernel.is_kernel:
                self.put_barriers(kernel)

    def put_barriers(self, kernel: Function) -> None:
        varying = varying_values(kernel)
        divergent = divergent_region(kernel, varying)
        for header, body in natural_loops(kernel).items():
            # A loop some work-items leave earlier than others (or enter at all) has a
            # branch on a varying condition from which the header is reached before the
            # paths join again: the header is in the divergent region.
            if header in divergent:
                continue
            if not any(op in varying or not op.is_pure for block in body for op in block.ops
                       if not op.is_terminator):
                continue
            if _passes_a_barrier_first(header):
                continue   # each trip already starts at a barrier (a masked loop's vote)
            counted = counted_loop(header, body)
            if counted is not None and counted.trip_count(self.small_trip_count) is not None:
                continue
            put_barriers_on_edges_into(kernel, header)


def _passes_a_barrier_first(header: Block) -> bool:
    """Whether the header reaches a barrier after pure operations alone: a work-item
    then waits there on every trip, and one on the edges into it would add only a
    second wait (a pass over the group, for a target that loops over its work-items)."""
    for op in header.ops:
        if op.has(Trait.BARRIER):
            return True
        if not op.is_pure:
            return False
    return False


def put_barriers_on_edges_into(function: Function, header: Block) -> None:
    """Every edge into `header` goes through a new block `barrier; br header(args)`."""
    rewriter = Rewriter(function)
    for block in list(function.blocks):
        terminator = block.terminator
        if terminator is None or (block.ops[-2:-1] and block.ops[-2].has(Trait.BARRIER)
                                  and len(terminator.successors) == 1):
            continue
        for index, successor in enumerate(terminator.successors):
            if successor.block is not header:
                continue
            edge = rewriter.insert_block_after(block, Block())
            rewriter.position_at_end(edge)
            rewriter.loc = terminator.loc
            rewriter.op(BARRIER, [])
            rewriter.br(header, successor.args)
            terminator.successors[index] = Successor(edge)
