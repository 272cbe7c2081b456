"""Loops: the natural loops of a function (a header and the blocks that reach one of its
back edges without passing it), and the counters that step through them.

A counter (`InductionVariable`) is a parameter of a loop's header that enters the loop
with one value and goes around it as itself plus (or minus) one step. A loop whose
header exits on a comparison of a counter with a bound is a `CountedLoop`: its trip
count is known when start, step and bound are constants."""
from __future__ import annotations

import operator
from dataclasses import dataclass

from ..ir.definitions import ADD, CBR, COMPARISONS, SUB, OpDefinition
from ..ir.function import Block, Function
from ..ir.ops import BlockParam, Op, Successor, Value, constant_value, is_op
from .dominance import dominates, immediate_dominators


def natural_loops(function: Function) -> dict[Block, set[Block]]:
    """Each loop header with the blocks of its loop (header included). Loops that share
    a header are one loop."""
    order = function.reachable_blocks()
    predecessors = function.predecessors()
    idom = immediate_dominators(order, predecessors)

    loops: dict = {}
    for block in order:
        for successor in block.successors:
            if dominates(idom, successor, block):
                body = loops.setdefault(successor, {successor})
                stack = [block]
                while stack:
                    current = stack.pop()
                    if current not in body:
                        body.add(current)
                        stack.extend(p for p in predecessors[current] if p in idom)
    return loops


@dataclass(frozen=True, slots=True)
class InductionVariable:
    """`counter` enters the loop as `start` and goes around it as `counter + step`
    (`counter - step` when `subtracts`)."""

    counter: BlockParam
    start: Value
    step: Value
    subtracts: bool


def induction_variable(header: Block, body: set[Block], counter: BlockParam,
                       excluded: tuple[Successor, ...] = ()) -> InductionVariable | None:
    """`counter`, a parameter of `header`, as an induction variable of the loop `body`:
    every edge into the loop passes the same value (its start, which then dominates the
    header), and every edge around it passes `counter + step` or `counter - step` with
    the same step (constants of equal value count as the same step); None if it is not
    one. Edges in `excluded` are not looked at (masked-loops' edge for work-items that
    wait, which passes the counter as it is)."""
    position = header.params.index(counter)
    starts: list[Value] = []
    steps: list[tuple[Value, bool]] = []
    for block in header.function.blocks:
        for successor in (block.terminator.successors if block.terminator else ()):
            if successor.block is not header or any(successor is e for e in excluded):
                continue
            value = successor.args[position]
            if block not in body:
                starts.append(value)
            elif (is_op(value, ADD) or is_op(value, SUB)) and value.operands[0] is counter:
                steps.append((value.operands[1], value.definition is SUB))
            else:
                return None
    if not starts or not steps:
        return None
    start, (step, subtracts) = starts[0], steps[0]
    if any(other is not start for other in starts) or not all(
            _same_step(other, step) and other_subtracts == subtracts
            for other, other_subtracts in steps):
        return None
    return InductionVariable(counter, start, step, subtracts)


def _same_step(a: Value, b: Value) -> bool:
    return a is b or constant_value(a) is not None and \
        constant_value(a) == constant_value(b) and a.type == b.type


_COMPARISONS = {COMPARISONS[name]: test for name, test in {
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "ne": operator.ne, "eq": operator.eq}.items()}


@dataclass(frozen=True, slots=True)
class CountedLoop:
    """A loop whose header goes on while `counter <comparison> bound` holds (`bound
    <comparison> counter` when `bound_on_left`), or while it fails when not
    `continues_on_true`."""

    variable: InductionVariable
    comparison: OpDefinition   # one of COMPARISONS
    bound: Value
    bound_on_left: bool
    continues_on_true: bool

    def trip_count(self, limit: int) -> int | None:
        """How many times the loop's body runs, when start, step and bound are constants
        and it is at most `limit`; None when it is unknown or more."""
        values = [constant_value(v) for v in (self.variable.start, self.variable.step,
                                               self.bound)]
        if None in values:
            return None
        value, step, bound = values
        step = -step if self.variable.subtracts else step
        holds = _COMPARISONS[self.comparison]
        for iterations in range(limit + 1):
            goes_on = holds(bound, value) if self.bound_on_left else holds(value, bound)
            if goes_on != self.continues_on_true:
                return iterations
            value += step
        return None


def counted_loop(header: Block, body: set[Block]) -> CountedLoop | None:
    """The loop as a `CountedLoop`, if its header ends with a branch, one way into the
    loop and one out of it, on a comparison of an induction variable with a value other
    than a parameter of the header."""
    branch = header.terminator
    if branch.definition is not CBR:
        return None
    # The branch must leave the loop when the comparison fails: with both successors in
    # the loop (`while i < n or more:` joins them inside it), the comparison bounds
    # nothing.
    if [s.block in body for s in branch.successors].count(True) != 1:
        return None
    condition = branch.operands[0]
    if not isinstance(condition, Op) or condition.definition not in _COMPARISONS:
        return None
    left, right = condition.operands
    counter, bound, bound_on_left = (left, right, False) if left in header.params else \
        (right, left, True)
    if counter not in header.params or bound in header.params:
        return None
    variable = induction_variable(header, body, counter)
    if variable is None:
        return None
    return CountedLoop(variable, condition.definition, bound, bound_on_left,
                       continues_on_true=branch.successors[0].block in body)
