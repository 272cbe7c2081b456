"""Liveness analysis, and which values are live across a work-group barrier (a target
that runs the work-items of a group one after another must keep those per item)."""
from __future__ import annotations

from ..ir.definitions import Trait
from ..ir.function import Function
from ..ir.ops import Value


def live_sets(function: Function) -> tuple[dict, dict]:
    """(live in, live out) of each block. Live in excludes the block's parameters; live
    out includes the values passed to successors' parameters."""
    live_in = {b: set() for b in function.blocks}
    live_out = {b: set() for b in function.blocks}
    changed = True
    while changed:
        changed = False
        for block in reversed(function.blocks):
            out = set()
            terminator = block.terminator
            for successor in terminator.successors:
                out |= live_in[successor.block]
                out.update(successor.args)
            live = set(out)
            for op in reversed(block.ops):
                live.discard(op)
                live.update(op.operands)
            live -= set(block.params)
            if out != live_out[block] or live != live_in[block]:
                live_out[block], live_in[block] = out, live
                changed = True
    return live_in, live_out


def live_out(function: Function) -> dict:
    """The values live at the end of each block (before its successors' parameters bind)."""
    return live_sets(function)[1]


def live_across_barriers(function: Function) -> set[Value]:
    """Values defined before some barrier and used after it. A barrier just before a
    branch hands the branch's arguments over as the target's parameters: those
    parameters are live across it, the arguments themselves are not."""
    live_in, outs = live_sets(function)
    crossing: set[Value] = set()
    for block in function.blocks:
        if not any(op.has(Trait.BARRIER) for op in block.ops):
            continue
        terminator = block.terminator
        handed_over = set(terminator.operands)
        for successor in terminator.successors:
            handed_over |= live_in[successor.block] | set(successor.block.params)
        live = set(outs[block])
        for op in reversed(block.ops):
            if op.has(Trait.BARRIER):
                crossing |= handed_over if op is block.ops[-2] else live
            live.discard(op)
            live.update(op.operands)
    return crossing
