"""Splitting a row of work-items where a kernel's guards do not change.

Why: a guard on the last axis (`if 0 < j and j < cols - 1:`, `if i < n:`) is a branch
per work-item in the loop the vectorizer sees (`group.py`'s innermost work-item loop),
so it predicates the loop: every load and store of the guarded code becomes a masked
one. Masked stores are slow on some CPUs (AMD Zen 3: the guarded 5-point stencil on
4096 x 4096 took 15-18 ms, the same kernel without the guard 5.2 ms). Yet such a guard
is the same for almost every work-item of a row: it changes only near the array's edge.

A comparison of integers is a *row comparison* where one side is the local id along
the last axis, or its negation, plus values the same for the whole row (index
arithmetic of the group's position, the other axes' local ids, extents and arguments:
`INDEX_ARITHMETIC`), and the other side is such a value. Along the row its side grows
or shrinks by one per work-item, so the comparison changes its value at most once (at
most twice for == and !=), at a point computed once per row (`row_range`). Those points
cut the row into pieces; where no row comparison changes in the piece around the
middle of the row, and each has there the value predicted when the kernel was
compiled, the work-items of that piece run the kernel's code with those values as
constants (`group.py`'s `split_row`: its guards are gone, so LLVM vectorizes the loop
without masks), each work-item first assuming what the constants say (`llvm.assume`:
LLVM then knows, say, that `j - 1` is never negative where `j > 0`); the work-items
before and after it, in order, run the code as written. A row where the values differ
from the prediction runs the code as written throughout, as an unsplit row does.

The predicted value of a comparison of the position with a constant or with the
ndrange's extent along the row (plus a constant) is its value in the middle of a long
row, far above the one and below the other: `j - 1 < 0` and `j + 1 >= cols` predict
false, `j < cols - 1` true (the tests of a stencil's boundary, or of the halo a gradient
updates there). That of another comparison is the value with which the kernel does the
most (more of its operations can be reached once the branches that follow are taken
one way): `if i < n:` predicts true, `if i >= n: return` false; == predicts false and
!= true.

The points are exact where the side that moves does not wrap around along the row (its
values at both ends are within its type); where it may, the piece is empty."""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from kernelkit.compiler.llvm_types import i1, i64
from kernelkit.ir import types as T
from kernelkit.ir.builder import SWAPPED_COMPARISONS
from kernelkit.ir.definitions import (ARITHMETIC, CAST, COMPARISONS, CONST, GROUP_ID,
                                      LOCAL_ID, NDRANGE, SELECT,
                                      UNARY, OpDefinition)
from kernelkit.ir.function import Function
from kernelkit.ir.ops import Op, Value
from kernelkit.passes.guard_versioning import INDEX_ARITHMETIC

MOST_COMPARISONS = 8
"""A kernel with more row comparisons along the row than this is not split (each costs a
few instructions per row, to find where it changes)."""

MOST_ACROSS = 16
"""Nor one with more comparisons along other axes than this (each costs a test per row:
a gradient's gather kernel tests each neighbour's position along each axis)."""

_WIDE = ir.IntType(128)   # the points are computed without overflow in 128 bits
# The comparison with its operands swapped, for a comparison whose right side moves.
_MIRRORED = {COMPARISONS[name]: COMPARISONS[swapped]
             for name, swapped in SWAPPED_COMPARISONS.items()}
_ORDERED = set(_MIRRORED)
EQ, NE, LT, LE, GT, GE = (COMPARISONS[name] for name in ("eq", "ne", "lt", "le", "gt", "ge"))


@dataclass(frozen=True, slots=True)
class RowComparison:
    """A comparison `moving <op> fixed` whose value changes only at a few work-items of a
    row: with D = moving - fixed at local id 0, moving - fixed is D + slope * l at local
    id l, which meets 0 at l = -D (slope 1) or l = D (slope -1); the value may change
    there plus each of `offsets`. (A comparison of the position along another axis
    (`axis`) with a constant or that axis's extent is the same for the whole row (the
    halo tests of a gradient along the rows' axis, `i - 1 < 0`): it joins the split with
    no points, its value in the middle of the ndrange predicted.)"""

    op: Op
    moving: Value
    fixed: Value
    slope: int            # +1 or -1
    offsets: tuple        # where the value changes, relative to moving == fixed
    signed: bool
    bits: int
    axis: int             # the axis `moving` moves along: the row's, or another (below)


def row_comparisons(function: Function, axis: int) -> tuple[RowComparison, ...]:
    """The row comparisons of `function` along `axis` (see the module docstring); empty
    where there are none, or more than `MOST_COMPARISONS` along the row or `MOST_ACROSS`
    along other axes."""
    slopes: dict = {}
    across: dict = {}
    params = set(function.params)
    found = []
    for op in function.ops():
        if op.definition not in _ORDERED:
            continue
        left, right = op.operands
        if not left.type.is_integer or left.type != right.type:
            continue
        left_slope = _slope(left, axis, params, slopes)
        right_slope = _slope(right, axis, params, slopes)
        if left_slope is None or right_slope is None:
            continue
        along = axis
        if left_slope == right_slope == 0:     # the same along the row: another axis?
            along, left_slope, right_slope = _across(op, axis, params, across)
            if along is None:
                continue
        if sorted((abs(left_slope), abs(right_slope))) != [0, 1]:
            continue
        predicate = op.definition
        moving, fixed, slope = left, right, left_slope
        if right_slope:
            moving, fixed, slope, predicate = right, left, right_slope, _MIRRORED[predicate]
        found.append(RowComparison(op, moving, fixed, slope,
                                   _offsets(predicate, slope) if along == axis else (),
                                   left.type.is_signed, left.type.bits, along))
    along_the_row = sum(comparison.axis == axis for comparison in found)
    if along_the_row > MOST_COMPARISONS or len(found) - along_the_row > MOST_ACROSS:
        return ()
    return tuple(found)


def _across(op: Op, axis: int, params: set, slopes: dict):
    """(the axis, the slopes of both sides along it) of a comparison, the same along the
    row, of the position along an earlier axis with a constant or that axis's extent (a
    prediction `_inside_a_long_row` can make); (None, 0, 0) for any other."""
    left, right = op.operands
    for other in range(axis):
        along = slopes.setdefault(other, {})
        left_slope = _slope(left, other, params, along)
        right_slope = _slope(right, other, params, along)
        if left_slope is None or right_slope is None or \
                sorted((abs(left_slope), abs(right_slope))) != [0, 1]:
            continue
        if _bound(right if left_slope else left, other) is not None:
            return other, left_slope, right_slope
    return None, 0, 0


@dataclass(frozen=True, slots=True)
class RowSplit:
    """How a kernel's rows are split: its row comparisons and the value predicted for
    each in the middle of a row."""

    comparisons: tuple[RowComparison, ...]
    predicted: tuple[bool, ...]

    def used_in(self, blocks) -> RowSplit | None:
        """The split by the comparisons that `blocks` use (as an operation or an
        operand), or None where they use none: a loop over work-items that run those
        blocks gains nothing from the others."""
        used = {value for block in blocks for op in block.ops
                for value in (op, *op.all_operands())}
        kept = [(comparison, predicted) for comparison, predicted
                in zip(self.comparisons, self.predicted) if comparison.op in used]
        if not kept:
            return None
        comparisons, predicted = zip(*kept)
        return RowSplit(comparisons, predicted)


def row_split(function: Function, axis: int) -> RowSplit | None:
    """The split of `function`'s rows along `axis` (see the module docstring), or None
    where it has no row comparisons."""
    comparisons = row_comparisons(function, axis)
    if not comparisons:
        return None
    # == predicts false and != true; each ordering comparison, in turn, the value with
    # which more of the kernel can run.
    predicted = [comparison.op.definition is not EQ for comparison in comparisons]
    for index, comparison in enumerate(comparisons):
        inside = _inside_a_long_row(comparison)
        if inside is not None:
            predicted[index] = inside
            continue
        if comparison.op.definition in (EQ, NE):
            continue
        flipped = list(predicted)
        flipped[index] = not flipped[index]
        if _work(function, comparisons, flipped) > _work(function, comparisons, predicted):
            predicted = flipped
    return RowSplit(comparisons, tuple(predicted))


def _inside_a_long_row(comparison: RowComparison) -> bool | None:
    """The comparison's value in the middle of a long row (or, for one along another
    axis, of the ndrange), where its fixed side is a constant (the moving side is far
    above it) or the ndrange's extent along its axis plus a constant (far below it);
    None for any other fixed side."""
    side = _bound(comparison.fixed, comparison.axis)
    if side is None or not _position(comparison.moving):
        return None
    above = (side < 0) == (comparison.slope > 0)    # moving - fixed is large and positive
    definition = comparison.op.definition
    if definition in (EQ, NE):
        return definition is NE
    return above == (definition in (GT, GE))


def _position(value: Value) -> bool:
    """Whether `value` is made of work-item positions and constants alone (a global
    index plus a constant, not `k - i`)."""
    if not isinstance(value, Op):
        return False
    if value.definition in (CONST, LOCAL_ID, GROUP_ID):
        return True
    return value.definition in (ARITHMETIC["add"], ARITHMETIC["sub"], ARITHMETIC["mul"],
                                UNARY["neg"], CAST) and \
        all(_position(operand) for operand in value.operands)


def _bound(value: Value, axis: int) -> int | None:
    """-1 where `value` is a constant, 1 where it is the ndrange's extent along `axis`
    plus or minus constants, else None."""
    if isinstance(value, Op) and value.definition is CONST:
        return -1
    if isinstance(value, Op) and value.definition is NDRANGE:
        return 1 if value.attrs["axis"] == axis else None
    if isinstance(value, Op) and value.definition in (ARITHMETIC["add"], ARITHMETIC["sub"],
                                                      CAST):
        sides = [_bound(operand, axis) for operand in value.operands]
        if None in sides:
            return None
        if value.definition is CAST:
            return sides[0]
        if sides[1] == -1 or (value.definition is ARITHMETIC["add"] and sides[0] == -1):
            return max(sides)
    return None


_VARIES = object()   # a value not known from the comparisons' values alone


def _work(function: Function, comparisons, values) -> int:
    """How many of `function`'s operations a work-item can reach where `comparisons`
    have `values`: the branches that follow from them (through not, and, or, select
    and block parameters) taken one way. (Sparse conditional constant propagation of
    booleans: a block parameter is known where every reached edge passes it the same
    value.)"""
    fixed = {comparison.op: value for comparison, value in zip(comparisons, values)}
    known: dict = dict(fixed)
    for param in function.entry.params:
        known[param] = _VARIES

    def join(param, value) -> bool:
        if param not in known:
            known[param] = value
            return True
        if known[param] is not _VARIES and known[param] != value:
            known[param] = _VARIES
            return True
        return False

    reached = {function.entry}
    changed = True
    while changed:
        changed = False
        for block in function.blocks:
            if block not in reached:
                continue
            for op in block.ops:
                if op.successors:
                    condition = known.get(op.operands[0], _VARIES) if op.operands else _VARIES
                    taken = op.successors if condition is _VARIES or len(op.successors) != 2 \
                        else [op.successors[0 if condition else 1]]
                    for successor in taken:
                        if successor.block not in reached:
                            reached.add(successor.block)
                            changed = True
                        for param, arg in zip(successor.block.params, successor.args):
                            changed |= join(param, known.get(arg, _VARIES))
                elif op not in fixed:
                    value = _boolean(op, known)
                    if value is not None and known.get(op) != value:
                        known[op] = value
                        changed = True
    return sum(len(block.ops) for block in reached)


def _boolean(op: Op, known: dict):
    """`op`'s value where it follows from the `known` values: True or False; `_VARIES`
    where it does not; None where an operand has no value yet."""
    if not (isinstance(op.type, T.ScalarType) and op.type.is_bool):
        return _VARIES
    if op.definition is CONST:
        return bool(op.attrs["value"])
    operands = [known.get(operand) for operand in op.operands]
    if op.definition is UNARY["not"]:
        (value,) = operands
        return value if value is None or value is _VARIES else not value
    if op.definition is SELECT:
        condition, if_true, if_false = operands
        if condition is True or condition is False:
            return if_true if condition else if_false
        if if_true is not None and if_true is if_false:
            return if_true
        return None if condition is None else _VARIES
    if op.definition in (ARITHMETIC["and"], ARITHMETIC["or"]):
        absorbing = op.definition is ARITHMETIC["or"]   # True absorbs or, False and
        if absorbing in operands:
            return absorbing
        if None in operands:
            return None
        return _VARIES if _VARIES in operands else not absorbing
    return _VARIES


def _offsets(predicate: OpDefinition, slope: int) -> tuple:
    """Where, relative to the local id at which moving == fixed, `moving <predicate>
    fixed` may change its value (see `RowComparison`); `predicate` is a comparison's
    definition."""
    if predicate in (EQ, NE):
        return (0, 1)
    # moving - fixed = D + l (slope 1): < and >= change at l = -D, <= and > at l = 1 - D;
    # D - l (slope -1): <= and > at l = D, < and >= at l = D + 1.
    late = predicate in (LE, GT) if slope == 1 else predicate in (LT, GE)
    return (1,) if late else (0,)


def _slope(value: Value, axis: int, params: set, slopes: dict) -> int | None:
    """1 or -1 where `value` is, modulo 2**bits, the local id along `axis` or its negation
    plus values the same for the whole row; 0 where it is such a value alone; None
    for anything else."""
    if value in slopes:
        return slopes[value]
    slopes[value] = None   # (a value is never its own operand; this ends any cycle)
    slope = None
    if value in params:
        slope = 0
    elif isinstance(value, Op) and value.definition is LOCAL_ID:
        slope = 1 if value.attrs["axis"] == axis else 0
    elif isinstance(value, Op) and value.definition in INDEX_ARITHMETIC:
        operands = [_slope(operand, axis, params, slopes) for operand in value.operands]
        if None not in operands:
            slope = 0 if not any(operands) else _moving_slope(value, operands)
    slopes[value] = slope
    return slope


def _moving_slope(op: Op, operands: list) -> int | None:
    """The slope of `op`, one of whose operands moves along the row: a sum, difference,
    negation or narrowing (modulo 2**bits, all add the same to each work-item's value)."""
    if not op.type.is_integer:
        return None
    definition = op.definition
    if definition is ARITHMETIC["add"] and 0 in operands:
        return sum(operands)
    if definition is ARITHMETIC["sub"] and 0 in operands:
        return operands[0] - operands[1]
    if definition is UNARY["neg"]:
        return -operands[0]
    if definition is CAST and op.operands[0].type.is_integer and \
            op.type.bits <= op.operands[0].type.bits:
        return operands[0]
    return None


def row_range(builder: ir.IRBuilder, comparisons, at_start, extent: ir.Value, axis: int):
    """(first, end): the work-items [first, end) of a row of `extent` around its middle
    where no comparison of `comparisons` changes its value; an empty range (0, 0) where a
    moving side may wrap around. `at_start(value)` is the LLVM value of an IR value at
    the row's local id 0."""
    length = builder.sext(extent, _WIDE)
    zero = ir.Constant(_WIDE, 0)
    middle = builder.ashr(length, ir.Constant(_WIDE, 1))
    first, end, exact = zero, length, ir.Constant(i1, 1)
    for comparison in comparisons:
        if comparison.axis != axis:    # the same along the whole row: no points
            continue
        extend = builder.sext if comparison.signed else builder.zext
        moving = extend(at_start(comparison.moving), _WIDE)
        difference = builder.sub(moving, extend(at_start(comparison.fixed), _WIDE))
        # The moving side's value at the row's last work-item must be within its type.
        last = builder.add(moving, builder.mul(ir.Constant(_WIDE, comparison.slope),
                                               builder.sub(length, ir.Constant(_WIDE, 1))))
        bits = comparison.bits
        if comparison.slope > 0:
            limit = (1 << (bits - 1)) - 1 if comparison.signed else (1 << bits) - 1
            within = builder.icmp_signed("<=", last, ir.Constant(_WIDE, limit))
        else:
            limit = -(1 << (bits - 1)) if comparison.signed else 0
            within = builder.icmp_signed(">=", last, ir.Constant(_WIDE, limit))
        exact = builder.and_(exact, within)
        # The work-item at which moving == fixed: l = -D rising, l = D falling.
        meets = builder.neg(difference) if comparison.slope > 0 else difference
        for offset in comparison.offsets:
            point = _clamp(builder, builder.add(meets, ir.Constant(_WIDE, offset)), zero, length)
            before = builder.icmp_signed("<=", point, middle)
            first = builder.select(before, _maximum(builder, first, point), first)
            end = builder.select(before, end, _minimum(builder, end, point))
    first = builder.select(exact, first, zero)
    end = builder.select(exact, end, zero)
    return builder.trunc(first, i64), builder.trunc(end, i64)


def _clamp(builder, value, low, high):
    return _minimum(builder, _maximum(builder, value, low), high)


def _maximum(builder, a, b):
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def _minimum(builder, a, b):
    return builder.select(builder.icmp_signed("<", a, b), a, b)
