"""Puts a work-group barrier on every edge into the header of a loop that all work-items
of a group run alike (its condition and exits do not depend on the work-item), so that a
target running a group's work-items one after another can turn the loop inside out:

    for each work-item: for p in range(k): acc += a[i, p] * b[p, j]
becomes
    for p in range(k): for each work-item: acc += a[i, p] * b[p, j]

where the loop over work-items is innermost and vectorizes. The barrier changes nothing a
kernel can observe: without one, work-items of a group may run in any order.

Loops with a small constant trip count are left alone (LLVM unrolls them whole), and so
are loops that do no per-work-item work."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.definitions import ADD, BARRIER, CBR, COMPARISONS, CONST, SUB, Trait
from ..ir.function import Block, Function, Module
from ..ir.ops import Op, Successor, is_op
from ..ir.rewriter import Rewriter
from .dominance import natural_loops
from .uniformity import divergent_region, varying_values
from .pipeline import register

SMALL_TRIP_COUNT = 32
"""Loops known to run at most this many times are unrolled by LLVM instead."""


@register
@dataclass(frozen=True, slots=True)
class LoopBarriers:
    name = "loop-barriers"

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
            if runs_at_most(header, body, SMALL_TRIP_COUNT):
                continue
            put_barriers_on_edges_into(kernel, header)


def runs_at_most(header: Block, body: set[Block], limit: int) -> bool:
    """Whether the loop's condition is `counter <op> constant` with a counter that starts
    at a constant and steps by a constant, and stops within `limit` iterations."""
    condition_branch = header.terminator
    if condition_branch.definition is not CBR:
        return False
    condition = condition_branch.operands[0]
    if not isinstance(condition, Op) or condition.definition not in _COMPARE:
        return False
    left, right = condition.operands
    counter, bound, flipped = (left, right, False) if left in header.params else \
        (right, left, True)
    if counter not in header.params or not _is_const(bound):
        return False
    position = header.params.index(counter)
    starts, steps = set(), set()
    for block in header.function.blocks:
        for successor in (block.terminator.successors if block.terminator else ()):
            if successor.block is not header:
                continue
            value = successor.args[position]
            if block not in body and _is_const(value):
                starts.add(value.attrs["value"])
            elif block in body and (is_op(value, ADD) or is_op(value, SUB)) \
                    and value.operands[0] is counter and _is_const(value.operands[1]):
                step = value.operands[1].attrs["value"]
                steps.add(step if value.definition is ADD else -step)
            else:
                return False
    if len(starts) != 1 or len(steps) != 1:
        return False
    (value,), (step,) = starts, steps
    stays = _COMPARE[condition.definition]
    continue_on_true = condition_branch.successors[0].block in body
    bound_value = bound.attrs["value"]
    for _ in range(limit + 1):
        holds = stays(bound_value, value) if flipped else stays(value, bound_value)
        if holds != continue_on_true:
            return True
        value += step
    return False


_COMPARE = {COMPARISONS[name]: test for name, test in {
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "ne": lambda a, b: a != b, "eq": lambda a, b: a == b}.items()}


def _is_const(value) -> bool:
    return is_op(value, CONST)


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
