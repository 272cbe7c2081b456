"""Gives each loop over a range whose step is known only at run time (the grid-stride
loop `for p in range(i, n, stride)`) its trip count, computed once before the loop, and
has the header count the trips left down to 0 instead of testing the range's end.

Why: the frontend tests such a range as `p < stop if step > 0 else p > stop` on every
trip, and its counter `p + step` may wrap around as far as LLVM can tell, so LLVM cannot
count the trips: it does not unroll the loop, and each work-item keeps a single load in
flight, where a GPU needs several to hide memory latency (`nvcc` unrolls the same loop
written in CUDA C++, since overflow of its `int` counter is undefined). With the count in
hand, LLVM's unroller unrolls it and issues the loads of several trips together; counting
down, it runs the odd trips first, and the unrolled loop then needs no `p` beside its
addresses. The count is Python's `len(range(start, stop, step))`, computed in unsigned
arithmetic of the counter's width, where it cannot overflow: the loop runs the trips it
ran before (and stops where Python's range stops, even where `p + step` would pass the
counter type's largest value).

    ^pre: ...; br ^H(start, ...)
    ^H(%p, ...): %up = gt %step, 0; %test = select %up, (lt %p, %stop), (gt %p, %stop)
                 cbr %test, ^body(), ^exit()
    ^latch: br ^H(add %p, %step, ...)
becomes
    ^pre: ...; %count = <len(range(start, stop, step))>; br ^H(start, ..., %count)
    ^H(%p, ..., %left): %test = gt %left, 0; cbr %test, ^body(), ^exit()
    ^latch: br ^H(add %p, %step, ..., sub %left, 1)

A target whose code gains from it (CUDA) names it among its passes. Loops with a
constant step are left alone: the frontend tests them with one comparison, as a `while`
loop tests its counter, whose wrapping the rewrite would not keep."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.loops import InductionVariable, induction_variable, natural_loops
from ..ir import types as T
from ..ir.definitions import ARITHMETIC, CBR, COMPARISONS, SELECT
from ..ir.function import Block, Function, Module
from ..ir.ops import BlockParam, Op, Successor, Value, constant_value, is_op
from ..ir.rewriter import Rewriter
from .dce import remove_dead_code
from .pipeline import register

LT, GT = COMPARISONS["lt"], COMPARISONS["gt"]
ADD, SUB, FLOORDIV = ARITHMETIC["add"], ARITHMETIC["sub"], ARITHMETIC["floordiv"]


@register
@dataclass(frozen=True, slots=True)
class TripCounts:
    name = "trip-counts"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            changed = False
            for header, body in natural_loops(function).items():
                loop = range_with_run_time_step(header, body)
                if loop is not None:
                    count_trips(function, header, body, *loop)
                    changed = True
            if changed:
                remove_dead_code(function)   # the range's old test


@dataclass(frozen=True, slots=True)
class RangeTest:
    """The header's test of a range with a run-time step: `upward` is `step > 0`."""

    variable: InductionVariable
    stop: Value
    upward: Op


def range_with_run_time_step(header: Block, body: set[Block]
                             ) -> tuple[RangeTest, Successor] | None:
    """The loop's range test and the one edge into the loop, if its header goes on while
    `select(step > 0, p < stop, p > stop)` holds, `p` counts up by `step`, and `step` and
    `stop` are the same on every trip; else None."""
    branch = header.terminator
    if branch is None or branch.definition is not CBR or \
            branch.successors[0].block not in body or branch.successors[1].block in body:
        return None
    test = branch.operands[0]
    if not is_op(test, SELECT):
        return None
    upward, below, above = test.operands
    if not (is_op(upward, GT) and is_op(below, LT) and is_op(above, GT)) or \
            constant_value(upward.operands[1]) != 0:
        return None
    step = upward.operands[0]
    counter, stop = below.operands
    if above.operands != [counter, stop] or counter not in header.params:
        return None
    variable = induction_variable(header, body, counter)
    if variable is None or variable.subtracts or variable.step is not step or \
            not (_invariant(step, header, body) and _invariant(stop, header, body)):
        return None
    entries = [successor for block in header.function.blocks if block not in body
               for successor in (block.terminator.successors if block.terminator else ())
               if successor.block is header]
    if len(entries) != 1:
        return None
    return RangeTest(variable, stop, upward), entries[0]


def count_trips(function: Function, header: Block, body: set[Block], loop: RangeTest,
                entry: Successor) -> None:
    rewriter = Rewriter(function)
    rewriter.loc = header.terminator.loc
    preheader = next(block for block in function.blocks if block not in body and
                     block.terminator is not None and
                     any(s is entry for s in block.terminator.successors))
    rewriter.position_before_terminator(preheader)
    hoisted: dict[Value, Value] = {}
    step = _before_loop(loop.variable.step, rewriter, header, hoisted)
    stop = _before_loop(loop.stop, rewriter, header, hoisted)
    upward = _before_loop(loop.upward, rewriter, header, hoisted)
    count = trip_count(rewriter, loop.variable.start, stop, step, upward)

    left = header.add_param(count.type, "left")
    entry.args = [*entry.args, count]
    for block in body:
        for successor in block.terminator.successors:
            if successor.block is header:
                rewriter.position_before_terminator(block)
                following = rewriter.emit(SUB, [left, rewriter.constant(1, count.type)],
                                          count.type)
                successor.args = [*successor.args, following]
    rewriter.position_before_terminator(header)
    goes_on = rewriter.emit(GT, [left, rewriter.constant(0, count.type)], T.bool_)
    rewriter.set_operands(header.terminator, [goes_on])


def trip_count(rewriter: Rewriter, start: Value, stop: Value, step: Value,
               upward: Value) -> Value:
    """len(range(start, stop, step)) at the rewriter's position, as an unsigned integer of
    the counter's width: the distance to cover (`stop - start` upward, `start - stop`
    downward), less one, divided by the step's magnitude, plus one; 0 for an empty range.
    Each part is below 2**bits, so nothing overflows."""
    unsigned = T.ScalarType(T.Kind.UINT, start.type.bits)
    first, end, stride = (rewriter.cast(v, unsigned) for v in (start, stop, step))
    zero, one = rewriter.constant(0, unsigned), rewriter.constant(1, unsigned)

    def select(condition, if_true, if_false):
        return rewriter.emit(SELECT, [condition, if_true, if_false], if_true.type)

    distance = select(upward, rewriter.emit(SUB, [end, first], unsigned),
                      rewriter.emit(SUB, [first, end], unsigned))
    magnitude = select(upward, stride, rewriter.emit(SUB, [zero, stride], unsigned))
    nonempty = select(upward, rewriter.emit(LT, [start, stop], T.bool_),
                      rewriter.emit(GT, [start, stop], T.bool_))
    steps = rewriter.emit(FLOORDIV, [rewriter.emit(SUB, [distance, one], unsigned),
                                     magnitude], unsigned)
    return select(nonempty, rewriter.emit(ADD, [steps, one], unsigned), zero)


def _invariant(value: Value, header: Block, body: set[Block]) -> bool:
    """Whether `value` is the same on every trip: made outside the loop, or by pure
    operations of the header from such values."""
    if value.block not in body:
        return True
    return isinstance(value, Op) and value.block is header and value.is_pure and \
        all(_invariant(operand, header, body) for operand in value.operands)


def _before_loop(value: Value, rewriter: Rewriter, header: Block,
                 hoisted: dict[Value, Value]) -> Value:
    """`value` (`_invariant`) where the rewriter stands, before the loop: itself, or a
    copy of the header's operations that make it."""
    if isinstance(value, BlockParam) or value.block is not header:
        return value
    if value not in hoisted:
        operands = [_before_loop(v, rewriter, header, hoisted) for v in value.operands]
        hoisted[value] = rewriter.insert(Op(value.definition, operands, value.type,
                                            dict(value.attrs), loc=value.loc))
    return hoisted[value]
