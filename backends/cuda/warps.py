"""Subgroup operations on CUDA: a subgroup is a warp (32 threads of consecutive linear
thread index, which is the work-item's linear local index, `thread.py`), and each
operation is one of the warp's own instructions: `shfl.sync` for shuffles and the sums'
trees, `vote.sync` for any / all / ballot, `redux.sync` (sm_80 and newer) for sums,
minima and maxima of integers of up to 32 bits.

The `.sync` instructions name the lanes taking part (a mask), and must be executed by
every lane of it. That mask is the warp's members: the threads of the warp that exist
(the last warp of a block whose size is not a multiple of 32 has fewer) and lie inside
the ndrange; it is taken with a ballot at the kernel's entry, before the threads outside
the ndrange return (`WarpMembers.at_entry`).

Results are those `kernelkit.ir.subgroups` defines, bit for bit as the CPU computes them:
a shuffle from a lane that is not a member gives the caller's own value, and floating
sums, minima and maxima follow the tree over the lanes, each node taken from any member
lane below it (every member of a node holds its value) or, where it has none, the
operation's identity; the lower lanes' node is the left operand."""
from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

from kernelkit.compiler.arithmetic import binary
from kernelkit.compiler.llvm_types import declared, i1, i32, i64, llvm_type
from kernelkit.ir import types as T
from kernelkit.ir.definitions import ARITHMETIC
from kernelkit.ir.subgroups import COMBINE, SUBGROUP_SIZE, VOTES, identity, propagates_nan

_ALL_LANES = ir.Constant(i32, 0xFFFFFFFF)
_LAST_LANE = ir.Constant(i32, SUBGROUP_SIZE - 1)


def _intrinsic(builder: ir.IRBuilder, name: str, result: ir.Type, args: list[ir.Value]):
    return builder.call(declared(builder.module, name, result, [a.type for a in args]), args)


@dataclass
class WarpMembers:
    """The lanes of the work-item's warp that take part (`mask`, an i32) and its own
    lane (an i32)."""

    mask: ir.Value
    lane: ir.Value

    @classmethod
    def at_entry(cls, builder: ir.IRBuilder, linear_local: ir.Value, group_items: int,
                 inside: ir.Value) -> WarpMembers:
        """At the kernel's entry, where every thread of the block runs: the threads of
        the warp that exist (`group_items` threads per block, `linear_local` this one's
        index, an i64) vote whether they are `inside` the ndrange."""
        lane = _intrinsic(builder, "llvm.nvvm.read.ptx.sreg.laneid", i32, [])
        first = builder.sub(linear_local, builder.zext(lane, i64))
        count = builder.trunc(builder.sub(ir.Constant(i64, group_items), first), i32)
        full = builder.icmp_unsigned(">=", count, ir.Constant(i32, SUBGROUP_SIZE))
        # (a shift by 32 would be poison: the select takes the other side there)
        prefix = builder.sub(builder.shl(ir.Constant(i32, 1),
                                         builder.and_(count, _LAST_LANE)), ir.Constant(i32, 1))
        existing = builder.select(full, _ALL_LANES, prefix)
        mask = _intrinsic(builder, "llvm.nvvm.vote.ballot.sync", i32, [existing, inside])
        return cls(mask, lane)

    def is_member(self, builder: ir.IRBuilder, lane: ir.Value) -> ir.Value:
        """Whether `lane` (an i32 in 0..31) takes part."""
        bit = builder.and_(builder.lshr(self.mask, lane), ir.Constant(i32, 1))
        return builder.icmp_unsigned("!=", bit, ir.Constant(i32, 0))


def lower_subgroup(builder: ir.IRBuilder, op, operands: list[ir.Value], members: WarpMembers,
                   arch: str, env) -> ir.Value:
    """The result of the subgroup operation `op` (`definitions.SUBGROUP`)."""
    kind = op.definition.member
    if kind == "shuffle":
        return shuffle(builder, members, operands[0], op.operands[0].type, operands[1])
    if kind in VOTES:
        result = i32 if kind == "ballot" else i1
        return _intrinsic(builder, f"llvm.nvvm.vote.{kind}.sync", result,
                          [members.mask, operands[0]])
    type = op.operands[0].type
    if type.is_integer and type.bits <= 32 and _has_redux(arch):
        return _redux(builder, kind, operands[0], type, members)
    return _tree(builder, kind, operands[0], type, members, env)


def shuffle(builder: ir.IRBuilder, members: WarpMembers, value: ir.Value,
            type: T.ScalarType, source: ir.Value) -> ir.Value:
    """`value` of lane `source` (an i64), or the caller's own where that lane is not a
    member."""
    in_range = builder.icmp_unsigned("<", source, ir.Constant(i64, SUBGROUP_SIZE))
    lane = builder.and_(builder.trunc(source, i32), _LAST_LANE)
    valid = builder.and_(in_range, members.is_member(builder, lane))
    lane = builder.select(valid, lane, members.lane)
    return builder.select(valid, _shuffle_from(builder, members, value, type, lane), value)


def _shuffle_from(builder, members: WarpMembers, value, type: T.ScalarType, lane) -> ir.Value:
    """`value` of the member `lane`, in 32-bit words (`shfl.sync.idx` moves one each)."""
    words = [_intrinsic(builder, "llvm.nvvm.shfl.sync.idx.i32", i32,
                        [members.mask, word, lane, _LAST_LANE])
             for word in _to_words(builder, value, type)]
    return _from_words(builder, words, type)


def _to_words(builder, value, type: T.ScalarType) -> list[ir.Value]:
    if type.is_float:
        value = builder.bitcast(value, ir.IntType(type.bits))
    if type.bits == 64:
        return [builder.trunc(value, i32),
                builder.trunc(builder.lshr(value, ir.Constant(i64, 32)), i32)]
    if type.bits < 32:   # bools, 8- and 16-bit numbers
        value = builder.zext(value, i32)
    return [value]


def _from_words(builder, words: list[ir.Value], type: T.ScalarType) -> ir.Value:
    if type.bits == 64:
        low, high = (builder.zext(word, i64) for word in words)
        value = builder.or_(low, builder.shl(high, ir.Constant(i64, 32)))
    else:
        (value,) = words
        if type.bits < 32:
            value = builder.trunc(value, ir.IntType(type.bits))
    return builder.bitcast(value, llvm_type(type)) if type.is_float else value


def _has_redux(arch: str) -> bool:
    return int(re.match(r"sm_(\d+)", arch).group(1)) >= 80


def _redux(builder, kind: str, value, type: T.ScalarType, members: WarpMembers) -> ir.Value:
    """`redux.sync` on the value widened to 32 bits (an integer sum wraps the same way
    wide and then narrowed; a minimum of widened values is the minimum)."""
    if type.bits < 32:
        value = builder.sext(value, i32) if type.is_signed else builder.zext(value, i32)
    operation = {"sum": "add", "max": "max", "min": "min"}[kind]
    if operation != "add" and not type.is_signed:
        operation = "u" + operation
    result = _intrinsic(builder, f"llvm.nvvm.redux.sync.{operation}", i32,
                        [value, members.mask])
    return builder.trunc(result, llvm_type(type)) if type.bits < 32 else result


def _tree(builder, kind: str, value, type: T.ScalarType, members: WarpMembers, env):
    """The tree of `ir/subgroups.py`: at each level every member holds its node's value
    and takes the sibling node's from the lowest member lane in it."""
    neutral = _constant(identity(kind, type), type)
    width = 1
    while width < SUBGROUP_SIZE:
        node = builder.and_(members.lane, ir.Constant(i32, ~(width - 1) & 0xFFFFFFFF))
        sibling = builder.xor(node, ir.Constant(i32, width))
        sibling_lanes = builder.shl(ir.Constant(i32, (1 << width) - 1), sibling)
        present = builder.and_(members.mask, sibling_lanes)
        has_members = builder.icmp_unsigned("!=", present, ir.Constant(i32, 0))
        first = _intrinsic(builder, "llvm.cttz.i32", i32, [present, ir.Constant(i1, 0)])
        source = builder.select(has_members, first, members.lane)
        other = builder.select(has_members,
                               _shuffle_from(builder, members, value, type, source), neutral)
        upper = builder.icmp_unsigned("!=", builder.and_(members.lane, ir.Constant(i32, width)),
                                      ir.Constant(i32, 0))
        left = builder.select(upper, other, value)
        right = builder.select(upper, value, other)
        value = binary(builder, ARITHMETIC[COMBINE[kind]], left, right, type, env)
        if propagates_nan(kind, type):
            value = builder.select(builder.fcmp_unordered("!=", right, right), right, value)
        width *= 2
    return value


def _constant(value, type: T.ScalarType) -> ir.Constant:
    if type.is_float:
        return ir.Constant(llvm_type(type), float(value))
    if value >= 1 << (type.bits - 1):    # as LLVM writes integers: two's complement
        value -= 1 << type.bits
    return ir.Constant(llvm_type(type), value)
