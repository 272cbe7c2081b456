"""Rewrites each subgroup operation into local memory and barriers, for a target with no
subgroup hardware of its own (the CPU's, which runs a group's work-items one after
another): each work-item writes its value into a slot of a per-group scratch array (its
linear local index), all wait at a barrier, each reads what it needs (its source lane's
slot, or its subgroup's 32 slots folded along the tree of `ir/subgroups.py`), and all
wait again before the scratch is written anew.

    %r = subgroup.sum %v {group = [64]}
becomes
    store %scratch[%item], %v; barrier
    %r = add(add(slot 0, slot 1), add(slot 2, slot 3)) ...   (32 leaves)
    barrier

A lane is a member when its work-item exists: inside the group, and inside the ndrange
where the group is cut short by its end (the work-items outside run nothing, so their
slots hold nothing). Which lanes are is computed from the group's shape and position,
so only members' slots are read. One scratch array per value type serves every
operation of a function: the barrier that ends one operation orders it before the
next one's writes."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import types as T
from ..ir.definitions import (ARITHMETIC, BARRIER, COMPARISONS, GROUP_ID, LOAD, LOCAL_ID,
                              LOCALMEM, NDRANGE, STORE, Trait)
from ..ir.function import Function, Module
from ..ir.ops import Op, Value
from ..ir.rewriter import Rewriter
from ..ir.subgroups import COMBINE, SUBGROUP_SIZE, identity, propagates_nan
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class SubgroupsInLocalMemory:
    name = "subgroups-in-local-memory"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            operations = [op for op in function.ops() if op.has(Trait.SUBGROUP)]
            if operations:
                _Lowering(function).lower(operations)


class _Lowering:
    """The rewrite of one function's subgroup operations."""

    def __init__(self, function: Function):
        self.function = function
        self.rewriter = Rewriter(function)
        self.scratch: dict[T.ScalarType, Op] = {}

    def lower(self, operations: list[Op]) -> None:
        for op in operations:
            self.rewriter.loc = op.loc
            self.rewriter.position_before(op)
            result = self.exchange(op)
            self.rewriter.replace_op(op, result)

    def scratch_for(self, type: T.ScalarType, group: tuple[int, ...]) -> Op:
        if type not in self.scratch:
            at_entry = Rewriter(self.function)
            at_entry.position_before(self.function.entry.ops[0])
            array = T.ArrayType(type, 1, "C", space="local", shape=(math.prod(group),))
            self.scratch[type] = at_entry.op(LOCALMEM, [], array)
        return self.scratch[type]

    def exchange(self, op: Op) -> Value:
        r = self.rewriter
        group = tuple(op.attrs["group"])
        value = op.operands[0]
        scratch = self.scratch_for(value.type, group)
        members = Members(r, group)
        r.op(STORE, [scratch, members.item, value])
        r.op(BARRIER, [])
        kind = op.definition.member
        if kind == "shuffle":
            result = self.shuffle(scratch, members, value, op.operands[1])
        else:
            lanes = [members.lane_slot(k) for k in range(SUBGROUP_SIZE)]
            read = [(member, r.op(LOAD, [scratch, slot], value.type)) for member, slot in lanes]
            result = self.vote(kind, read) if value.type.is_bool else \
                self.reduction(kind, read, value.type)
        r.op(BARRIER, [])
        return result

    def shuffle(self, scratch: Op, members: Members, value: Value, source: Value) -> Value:
        """The source lane's slot where it is a member, else the work-item's own value."""
        r = self.rewriter
        in_range = r.emit(ARITHMETIC["and"], [
            r.compare("ge", source, r.constant(0, T.int64)),
            r.compare("lt", source, r.constant(SUBGROUP_SIZE, T.int64))], T.bool_)
        slot = r.binary("add", members.base, r.select(in_range, source,
                                                      r.constant(0, T.int64)))
        valid = r.emit(ARITHMETIC["and"], [in_range, members.exists(slot)], T.bool_)
        return r.op(LOAD, [scratch, r.select(valid, slot, members.item)], value.type)

    def reduction(self, kind: str, read: list, type: T.ScalarType) -> Value:
        r = self.rewriter
        neutral = r.constant(identity(kind, type), type)
        level = [r.select(member, value, neutral) for member, value in read]
        while len(level) > 1:
            level = [self.combine(kind, left, right, type)
                     for left, right in zip(level[::2], level[1::2])]
        return level[0]

    def combine(self, kind: str, left: Value, right: Value, type: T.ScalarType) -> Value:
        r = self.rewriter
        combined = r.emit(ARITHMETIC[COMBINE[kind]], [left, right], type)
        if propagates_nan(kind, type):
            right_is_nan = r.emit(COMPARISONS["ne"], [right, right], T.bool_)
            combined = r.select(right_is_nan, right, combined)
        return combined

    def vote(self, kind: str, read: list) -> Value:
        r = self.rewriter
        if kind == "ballot":
            bits = r.constant(0, T.uint32)
            for lane, (member, condition) in enumerate(read):
                held = r.emit(ARITHMETIC["and"], [member, condition], T.bool_)
                bit = r.select(held, r.constant(1 << lane, T.uint32), r.constant(0, T.uint32))
                bits = r.emit(ARITHMETIC["or"], [bits, bit], T.uint32)
            return bits
        result = None
        for member, condition in read:
            if kind == "any":
                counted = r.emit(ARITHMETIC["and"], [member, condition], T.bool_)
            else:   # all: a lane that is not a member does not say no
                counted = r.emit(ARITHMETIC["or"], [r.unary("not", member), condition],
                                 T.bool_)
            result = counted if result is None else \
                r.emit(ARITHMETIC["or" if kind == "any" else "and"], [result, counted], T.bool_)
        return result


class Members:
    """Which lanes of the work-item's subgroup have a work-item, built as IR at the
    rewriter's position: `item` is the work-item's linear local index, `base` that of its
    subgroup's lane 0, and `exists(slot)` whether the work-item of linear local index
    `slot` (at least 0) runs."""

    def __init__(self, rewriter: Rewriter, group: tuple[int, ...]):
        r = self.rewriter = rewriter
        self.group = group
        local = [r.op(LOCAL_ID, [], T.int64, {"axis": axis}) for axis in range(len(group))]
        item = local[0]
        for index, extent in zip(local[1:], group[1:]):
            item = r.binary("add", r.binary("mul", item, r.constant(extent, T.int64)), index)
        self.item = item
        lane = r.binary("mod", item, r.constant(SUBGROUP_SIZE, T.int64))
        self.base = r.binary("sub", item, lane)
        # Along each axis, the work-items that exist: the group's extent, or fewer where
        # the ndrange ends inside the group.
        self.limits = []
        for axis, extent in enumerate(group):
            size = r.constant(extent, T.int64)
            start = r.binary("mul", r.op(GROUP_ID, [], T.int64, {"axis": axis}), size)
            left = r.binary("sub", r.op(NDRANGE, [], T.int64, {"axis": axis}), start)
            self.limits.append(r.emit(ARITHMETIC["min"], [size, left], T.int64))

    def exists(self, slot: Value) -> Value:
        r = self.rewriter
        inside = None
        rest = slot
        for axis in range(len(self.group) - 1, -1, -1):
            if axis > 0:
                extent = r.constant(self.group[axis], T.int64)
                position, rest = r.binary("mod", rest, extent), r.binary("floordiv", rest, extent)
            else:
                position = rest   # the first axis's position bounds the whole group's too
            within = r.compare("lt", position, self.limits[axis])
            inside = within if inside is None else \
                r.emit(ARITHMETIC["and"], [inside, within], T.bool_)
        return inside

    def lane_slot(self, lane: int) -> tuple[Value, Value]:
        """Whether lane `lane` of the subgroup is a member, and the slot to read for it:
        its own, or (where it is not a member) the work-item's, which exists."""
        r = self.rewriter
        slot = r.binary("add", self.base, r.constant(lane, T.int64))
        member = self.exists(slot)
        return member, r.select(member, slot, self.item)
