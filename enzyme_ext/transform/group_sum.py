"""Sums of one value per work-item over each work-group, in a fixed order: how the
reverse kernel leaves an `Active` scalar's derivative, one partial per group.

The order is the same on every target, so the same bits come out of each: each
subgroup's values added along the tree of `ir/subgroups.py` (pairs of lanes, then pairs
of pairs, the lower lanes on the left; a lane without a work-item counts as -0.0, which
leaves any sum as it is), then the subgroups' sums one after another, from the first.
How the work is shared follows the target (`Target.subgroups_in_hardware`):

- where a subgroup's work-items run together (a GPU's warp), `subgroup.sum` takes each
  subgroup's sum in a few shuffles, the subgroup's lowest member stores it in local
  memory and, after one barrier, the group's first work-item adds those up;
- elsewhere (the CPU, which runs a group's work-items one after another, and would pay
  a barrier for each subgroup operation), each work-item stores its value and, after one
  barrier, the group's first work-item adds them all up along the same trees.

Work-items outside the ndrange do not run: in a partial group (the last along an axis)
only those that exist count (a uniform branch, no barrier of its own)."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (BARRIER, COMPARISONS, GROUP_ID, LOAD, LOCALMEM, NDRANGE,
                                      SELECT, STORE, SUBGROUP)
from kernelkit.ir.ops import Value
from kernelkit.ir.subgroups import SUBGROUP_SIZE

from .positions import linear_group, linear_local_item, partial_group, unflatten

NOTHING = -0.0   # what a lane without a work-item adds: x + -0.0 is x, bit for bit


class GroupSum:
    """Sums float64 values, one per work-item, over its work-group (see the module)."""

    def __init__(self, b: Builder, workgroupsize: tuple[int, ...],
                 subgroups_in_hardware: bool = False):
        self.b, self.workgroupsize = b, workgroupsize
        self.in_hardware = subgroups_in_hardware
        self.size = 1
        for extent in workgroupsize:
            self.size *= extent
        self.subgroups = -(-self.size // SUBGROUP_SIZE)

    def store(self, values: list[Value], arrays: list[Value]) -> None:
        """Each of `values` summed over the group, into its array at the group's number."""
        b = self.b

        def store_totals(totals: list[Value]) -> None:
            group = linear_group(b, self.workgroupsize)
            for total, array in zip(totals, arrays):
                b.op(STORE, [array, group, total])
        self.add_up(values, store_totals)

    def add_up(self, values: list[Value], use) -> None:
        """Each of `values` summed over the group; `use(totals)` builds, where the group's
        first work-item goes on alone, what is done with the sums."""
        b, rows = self.b, len(values)
        local = linear_local_item(b, self.workgroupsize)
        if self.in_hardware:
            entries, add = self.subgroups_stored(values, local), self.subgroup_sums
        else:
            entries, add = self.values_stored(values, local), self.item_sums
        b.op(BARRIER, [])
        first = b.emit(COMPARISONS["eq"], [local, b.constant(0, T.int64)], T.bool_)
        partial = partial_group(b, self.workgroupsize)

        def first_item_sums() -> None:
            whole, ragged = b.new_block(), b.new_block()
            done = b.new_block((T.float64,) * rows)
            b.cbr(partial, ragged, [], whole, [])
            for block, guarded in ((whole, False), (ragged, True)):
                b.position_at_end(block)
                b.br(done, [add(entries, row, guarded) for row in range(rows)])
            b.position_at_end(done)
            use(list(done.params))
        self.when(first, first_item_sums)

    # -- a subgroup's work-items run together: its sum by shuffles ------------------------

    def subgroups_stored(self, values: list[Value], local: Value) -> Value:
        """Each subgroup's sums, stored by its lowest member at [row, subgroup]."""
        b = self.b
        group = {"group": tuple(self.workgroupsize)}
        lane = b.binary("mod", local, b.constant(SUBGROUP_SIZE, T.int64))
        lowest = b.op(SUBGROUP["min"], [b.cast(lane, T.int32)], T.int32, group)
        sums = [b.op(SUBGROUP["sum"], [value], T.float64, group) for value in values]
        scratch = b.op(LOCALMEM, [], T.ArrayType(T.float64, 2, "C", space="local",
                                                 shape=(len(values), self.subgroups)))
        subgroup = b.binary("floordiv", local, b.constant(SUBGROUP_SIZE, T.int64))

        def store_sums() -> None:
            for row, total in enumerate(sums):
                b.op(STORE, [scratch, b.constant(row, T.int64), subgroup, total])
        self.when(b.compare("eq", b.cast(lane, T.int32), lowest), store_sums)
        return scratch

    def subgroup_sums(self, scratch: Value, row: int, guarded: bool) -> Value:
        """The subgroups' sums of `row` added in order; `guarded`: a subgroup counts only
        where a work-item of it exists (else nothing stored its sum)."""
        b = self.b
        total = b.constant(NOTHING, T.float64)
        for subgroup in range(self.subgroups):
            value = b.op(LOAD, [scratch, b.constant(row, T.int64),
                                b.constant(subgroup, T.int64)], T.float64)
            if guarded:
                value = b.op(SELECT, [self.any_exists(subgroup), value,
                                      b.constant(NOTHING, T.float64)], T.float64)
            total = b.binary("add", total, value)
        return total

    # -- one work-item adds up the group's values -----------------------------------------

    def values_stored(self, values: list[Value], local: Value) -> Value:
        """Each work-item's values, stored at [row, its number in the group]."""
        b = self.b
        scratch = b.op(LOCALMEM, [], T.ArrayType(T.float64, 2, "C", space="local",
                                                 shape=(len(values), self.size)))
        for row, value in enumerate(values):
            b.op(STORE, [scratch, b.constant(row, T.int64), local, value])
        return scratch

    def item_sums(self, scratch: Value, row: int, guarded: bool) -> Value:
        """Row `row` of `scratch` added up subgroup by subgroup, each along its tree, the
        subgroups in order (a loop over the whole ones, then the last, shorter one);
        `guarded`: an entry counts only where its work-item exists."""
        b = self.b
        whole = self.size // SUBGROUP_SIZE

        def subgroup_sum(first: Value, lanes: int) -> Value:
            level = []
            for lane in range(lanes):
                item = b.binary("add", first, b.constant(lane, T.int64))
                value = b.op(LOAD, [scratch, b.constant(row, T.int64), item], T.float64)
                if guarded:
                    value = b.op(SELECT, [self.exists(item), value,
                                          b.constant(NOTHING, T.float64)], T.float64)
                level.append(value)
            level += [None] * (SUBGROUP_SIZE - lanes)      # lanes past the group's end
            while len(level) > 1:
                level = [left if right is None else right if left is None else
                         b.binary("add", left, right)
                         for left, right in zip(level[::2], level[1::2])]
            return level[0]
        [total] = self.loop(0, whole * SUBGROUP_SIZE, SUBGROUP_SIZE,
                            lambda item: [subgroup_sum(item, SUBGROUP_SIZE)], 1)
        rest = self.size - whole * SUBGROUP_SIZE
        if rest:
            total = b.binary("add", total, subgroup_sum(
                b.constant(whole * SUBGROUP_SIZE, T.int64), rest))
        return total

    # -- the parts ---------------------------------------------------------------------------

    def exists(self, item: Value) -> Value:
        """Whether the work-item numbered `item` in this group lies inside the ndrange."""
        b, inside = self.b, None
        for axis, (local, size) in enumerate(zip(unflatten(b, item, self.workgroupsize),
                                                 self.workgroupsize)):
            group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
            index = b.binary("add", b.binary("mul", group, b.constant(size, T.int64)), local)
            below = b.compare("lt", index, b.op(NDRANGE, [], T.int64, {"axis": axis}))
            inside = below if inside is None else b.binary("and", inside, below)
        return inside

    def any_exists(self, subgroup: int) -> Value:
        """Whether a work-item of `subgroup` lies inside the ndrange: its work-items are
        runs of consecutive ones along the group's last axis, each inside where its first
        is (the run's other coordinates are the first's, its last one larger)."""
        b, last = self.b, self.workgroupsize[-1]
        first, end = subgroup * SUBGROUP_SIZE, min((subgroup + 1) * SUBGROUP_SIZE, self.size)
        starts = [first] + [item for item in range(first + 1, end) if item % last == 0]
        exists = None
        for item in starts:
            this = self.exists(b.constant(item, T.int64))
            exists = this if exists is None else b.binary("or", exists, this)
        return exists

    def when(self, condition: Value, build) -> None:
        b = self.b
        then, after = b.new_block(), b.new_block()
        b.cbr(condition, then, [], after, [])
        b.position_at_end(then)
        build()
        b.br(after)
        b.position_at_end(after)

    def loop(self, start: int, end: int, step: int, body, carried: int) -> list[Value]:
        """`for item in range(start, end, step)`; `body(item)` gives `carried` values, each
        added up over the loop in order into a sum of its own (from -0.0, which the first
        leaves as it is), which are returned."""
        b = self.b
        header = b.new_block((T.int64,) + (T.float64,) * carried)
        inside, done = b.new_block(), b.new_block((T.float64,) * carried)
        b.br(header, [b.constant(start, T.int64)] +
             [b.constant(NOTHING, T.float64)] * carried)
        b.position_at_end(header)
        item, *sums = header.params
        b.cbr(b.compare("lt", item, b.constant(end, T.int64)), inside, [], done, sums)
        b.position_at_end(inside)
        values = body(item)
        following = [b.binary("add", total, value) for total, value in zip(sums, values)]
        b.br(header, [b.binary("add", item, b.constant(step, T.int64))] + following)
        b.position_at_end(done)
        return list(done.params)
