"""The regions of a kernel with barriers, for the CPU's group function (`group.py`),
which runs a group's work-items one after another: the barriers (after the
split-barriers pass) cut the kernel into regions, and a group runs region after region,
each as a loop over its work-items.

`RegionPlan` says what the regions are and what crosses a barrier (kept in a slot, or
computed again after it); `RegionLowering` lowers one work-item's code in a region, from
the region's start up to the barriers that end it."""
from __future__ import annotations

from kernelkit.analysis.liveness import live_across_barriers
from kernelkit.analysis.regions import (ends_with_barrier, region_dominance, region_order,
                                        region_starts, region_successors)
from kernelkit.analysis.uniformity import varying_values
from kernelkit.compiler.lowering import BodyLowering
from kernelkit.ir import types as T
from kernelkit.ir.definitions import ARITHMETIC, BARRIER_ANY, CONST, DEFERRED, LOCALMEM, Trait
from kernelkit.ir.ops import Op, is_op


class RegionPlan:
    """How a kernel with barriers is cut into regions, and what is kept across them."""

    def __init__(self, function):
        self.starts = region_starts(function)
        self.number = {block: index for index, block in enumerate(self.starts)}
        self.blocks = {start: region_order(start) for start in self.starts}
        self.cyclic = {start: cyclic_blocks(blocks) for start, blocks in self.blocks.items()}
        # A value that a work-item may define in a region and then read, around a cycle of
        # the region, where that definition is not the one that reaches (see
        # region_dominance), is kept per work-item and read from its slot there: not
        # recomputed (what it is made of may have changed since), not uniform (a
        # uniform slot is read as it was when the region began).
        self.reread = frozenset().union(*(reread_values(blocks)
                                          for blocks in self.blocks.values()))
        self.varying = varying_values(function, self.reread)
        self.recomputed = recomputable_values(function, self.varying)
        # What crosses a barrier is kept, or recomputed after it from what it is made of
        # (which then crosses in its place).
        self.kept = set()
        crossing, seen = [*live_across_barriers(function), *self.reread], set()
        while crossing:
            value = crossing.pop()
            if value in seen:
                continue
            seen.add(value)
            if value in self.recomputed and value not in self.reread:
                crossing.extend(value.operands)
            elif _needs_slot(value, function):
                self.kept.add(value)
        self.uniform = {v for v in self.kept if v not in self.varying}
        self.unanimous = unanimous_votes(self)

    def vote(self, start):
        """The barrier_any just before region `start` whose work-items' votes the region
        may take as true where all of them were (see `unanimous_votes`), or None."""
        return self.unanimous.get(start)

    def written_uniform(self, start) -> list:
        """The uniform kept values a region may write, in a fixed order."""
        written = []
        for block in self.blocks[start]:
            candidates = list(block.params) if block is not start else []
            candidates += block.ops
            if ends_with_barrier(block):
                candidates += block.successors[0].params
            written += [v for v in candidates if v in self.uniform]
        return written

    def runs_once(self, op: Op) -> bool:
        """Whether a group may compute `op` once for all its work-items."""
        return op.is_pure and op not in self.varying


UNANIMOUS_OPS = 200
"""A region that may run with its work-items' votes known true (`unanimous_votes`) has
its code twice; not one with more operations than this."""


def unanimous_votes(plan: RegionPlan) -> dict:
    """Region start -> the barrier_any op entered just before it, where the region reads
    its work-items' votes from their slots (a masked loop's trip reads whether its
    work-item goes on). Where every work-item voted true, each one's vote is true where
    the region reads it: the region starts with its work-items' values as they were at
    the barrier, and one it does not read around a cycle of its own (`reread`) is, where
    read from its slot, still that value. The region then runs without the branch on the
    vote (a grid-stride loop's trip without masks)."""
    unanimous = {}
    barriers: dict = {}
    ending = {block for blocks in plan.blocks.values() for block in blocks
              if ends_with_barrier(block)}
    for block in ending:
        barriers.setdefault(block.successors[0], []).append(block.ops[-2])
    for start, (barrier, *others) in barriers.items():
        vote = barrier.operands[0] if barrier.definition is BARRIER_ANY else None
        if others or vote is None or vote not in plan.kept or vote in plan.uniform or \
                vote in plan.reread:
            continue
        ops = [op for block in plan.blocks[start] for op in block.ops]
        if len(ops) <= UNANIMOUS_OPS and any(vote in op.all_operands() for op in ops):
            unanimous[start] = barrier
    return unanimous


def reread_values(order: list) -> set:
    """The values a region (its blocks in `order`) defines and reads in a block that its
    definition reaches but does not dominate."""
    dominated = region_dominance(order)
    reached: dict = {}
    reread = set()
    for block in order:
        for op in block.ops:
            for value in [*op.operands, *(a for s in op.successors for a in s.args)]:
                if dominated(value, block):
                    continue
                if value.block not in reached:
                    reached[value.block] = _reachable_within_region(value.block)
                if block in reached[value.block]:
                    reread.add(value)
    return reread


def _reachable_within_region(block) -> set:
    seen, stack = set(), list(region_successors(block))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(region_successors(current))
    return seen


def _recomputed(op: Op) -> bool:
    """Cheap to compute again where its operands are at hand: pure operations but pow
    and math functions, and local memory (the group's one array)."""
    kind = op.definition
    return kind is LOCALMEM or kind.is_pure and kind not in (ARITHMETIC["pow"], DEFERRED) \
        and not kind.has(Trait.MATH)


def cyclic_blocks(blocks: list) -> set:
    """The blocks that can reach themselves without passing a barrier."""
    cyclic = set()
    for block in blocks:
        stack, seen = list(region_successors(block)), set()
        while stack:
            current = stack.pop()
            if current is block:
                cyclic.add(block)
                break
            if current not in seen:
                seen.add(current)
                stack.extend(region_successors(current))
    return cyclic


def recomputable_values(function, varying: set) -> set:
    """Pure cheap operations computed from kernel arguments, constants, geometry and
    uniform values (one scalar each to keep, where a varying result would need a slot per
    work-item, and where an index computed again stays visibly affine in the work-item,
    so its loads stay contiguous). Computing one again after a barrier gives its value:
    what it is made of is read as it was when it was computed, since an SSA value's
    definition comes before every use of it."""
    params = set(function.params)
    result: set = set()
    changed = True
    while changed:
        changed = False
        for op in function.ops():
            if op not in result and _recomputed(op) and \
                    all(v in params or v in result or v not in varying for v in op.operands):
                result.add(op)
                changed = True
    return result


def _needs_slot(value, function) -> bool:
    """Kernel arguments, geometry and allocations are available everywhere already."""
    if is_op(value, CONST) or isinstance(value, Op) and (
            value.has(Trait.POSITION) or value.has(Trait.ALLOCATION)):
        return False
    if value in function.params:
        return False
    return not isinstance(value.type, T.ArrayType)


class RegionLowering(BodyLowering):
    """Lowers a work-item's code in a region: the blocks reachable from its start without
    passing a barrier. A block that ends with a barrier ends the lowering there:
    `exit(builder, successor, args)` emits how control leaves (`args`: the LLVM values of
    the branch arguments after the barrier), and the code after the barrier is not
    followed.

    Within a region a definition reaches only the blocks it dominates there, and none
    reach the prologue: around a cycle of the region, a work-item may come to a use
    holding the value from an earlier trip, or from before the barrier."""

    def __init__(self, env, function, llvm_function, values, exit):
        super().__init__(env, function, llvm_function, values)
        self.exit = exit
        self.dominated = None   # whether a definition reaches a block (region_dominance)

    def lower(self, builder, start=None, start_args=(), bindings=()) -> None:
        self.dominated = region_dominance(region_order(start or self.function.entry))
        super().lower(builder, start, start_args, bindings)

    def successors(self, block) -> list:
        return region_successors(block)

    def lower_block(self, builder, block) -> None:
        if not ends_with_barrier(block):
            super().lower_block(builder, block)
            return
        barrier = block.ops[-2]
        # A barrier_any has a part before the barrier: its work-item's vote.
        for op in block.ops[:-2] + ([barrier] if barrier.definition is BARRIER_ANY else []):
            self.lower_op(builder, op)
        (successor,) = block.ops[-1].successors
        self.exit(builder, successor, [self.use(builder, a) for a in successor.args])

    def reaches(self, builder, value) -> bool:
        if self.dominated is None or self.block is None:
            return True
        return self.dominated(value, None if builder is self.prologue else self.block)
