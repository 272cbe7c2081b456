"""Liveness analysis, and which values are live across a work-group barrier (a target
that runs the work-items of a group one after another must keep those per item)."""
from __future__ import annotations

from ..ir.function import Function
from ..ir.ops import Value


def live_out(function: Function) -> dict:
    """The values live at the end of each block (before its successors' parameters bind)."""
    live_in = {b: set() for b in function.blocks}
    result = {b: set() for b in function.blocks}
    changed = True
    while changed:
        changed = False
        for block in reversed(function.blocks):
            out = set()
            terminator = block.terminator
            for successor in terminator.successors:
                out |= live_in[successor.block] - set(successor.block.params)
                out.update(successor.args)
            live = set(out)
            for op in reversed(block.ops):
                live.discard(op)
                live.update(op.operands)
            live -= set(block.params)
            if out != result[block] or live != live_in[block]:
                result[block], live_in[block] = out, live
                changed = True
    return result


def live_across_barriers(function: Function) -> set[Value]:
    """Values defined before some barrier and used after it."""
    outs = live_out(function)
    crossing: set[Value] = set()
    for block in function.blocks:
        if not any(op.opcode == "barrier" for op in block.ops):
            continue
        live = set(outs[block])
        for successor in block.terminator.successors:
            live.update(successor.args)
        for op in reversed(block.ops):
            if op.opcode == "barrier":
                crossing |= live
            live.discard(op)
            live.update(op.operands)
    return crossing
