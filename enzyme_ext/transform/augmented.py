"""The augmented forward kernel: the primal, with the pushes the tape plan asks for
(`tape.TapePlan`), the edge numbers of blocks with several predecessors, and each
work-item's stack counts stored where it returns."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import STORE
from kernelkit.ir.function import Block, Function
from kernelkit.ir.rewriter import Rewriter

from ..signature import AUGMENTED
from .clone import clone_with_parameters
from .custom import NO_DERIVATIVE, VJP_RESULT, markers
from .positions import linear_work_item
from .stacks import Stacks, TapePlan


def augmented_kernel(kernel: Function, plan: TapePlan, parameters, workgroupsize) -> Function:
    clone, values, extra = clone_with_parameters(kernel, f"{kernel.name}.{AUGMENTED}",
                                                 parameters)
    blocks = dict(zip(kernel.blocks, clone.blocks))   # clone_function keeps the order
    if not plan.uses_tape:
        return without_custom_markers(clone)
    b = Builder(clone)
    entry = clone.entry
    # The work-item's number and the stack cells, first thing in the kernel.
    setup = Block()
    setup.function = clone
    b.position_at_end(setup)
    work_item = linear_work_item(b, workgroupsize)
    tape = {field: extra[("tape", field)] for field in ("tape_floats", "tape_integers")}
    stacks = Stacks(b, setup, tape, work_item)
    zero = b.constant(0, T.int64)
    stacks.set_counts(zero, zero)
    for op in setup.ops:
        op.block = entry
    entry.ops[:0] = setup.ops
    firsts = {original: blocks[original].ops[0] for original in kernel.reachable_blocks()}
    for original, edges in plan.edge_numbers.items():
        copy = blocks[original]
        number = copy.add_param(T.int64, "edge")
        for position, (predecessor, successor_index) in enumerate(edges):
            terminator = blocks[predecessor].terminator
            b.position_before(terminator)
            terminator.successors[successor_index].args.append(b.constant(position, T.int64))
        b.position_before(firsts[original])
        stacks.b = b
        stacks.push(number)
    # Where a counted loop is left: its counter's last value, after the edge's number.
    for original, headers in plan.counters.items():
        b.position_before(firsts[original])
        stacks.b = b
        for header in headers:
            stacks.push(b.cast(values[plan.counted[header].counter], T.int64))
    several_exits = len(plan.exits) > 1
    counts = extra[("tape", "tape_counts")]
    for original in kernel.reachable_blocks():
        copy = blocks[original]
        b.position_before(copy.terminator)
        b.loc = copy.terminator.loc
        stacks.b = b
        for value in reversed(plan.pushes.get(original, ())):
            stacks.push(values[value])
        if original in plan.exits:
            if several_exits:
                stacks.push(b.constant(plan.exits.index(original), T.int64))
            for stack, count in enumerate(stacks.counts()):
                b.op(STORE, [counts, b.constant(stack, T.int64), work_item, count])
    return without_custom_markers(clone)


def without_custom_markers(function: Function) -> Function:
    """The primal of a call with a custom rule is the forward function's result."""
    rewriter = Rewriter(function)
    for op in markers(function, NO_DERIVATIVE, VJP_RESULT):
        rewriter.replace_op(op, op.operands[0])
    return function
