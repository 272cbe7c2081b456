"""Sums of one value per work-item over each work-group, in a fixed order: how the
reverse kernel leaves an `Active` scalar's derivative, one partial per group."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (BARRIER, COMPARISONS, GROUP_ID, LOAD, LOCALMEM, NDRANGE,
                                      SELECT, STORE)
from kernelkit.ir.ops import Value

from .positions import linear_group, linear_local_item, partial_group, unflatten

ACCUMULATORS = 8          # independent sums when a work-group's shares are added


class GroupSum:
    """Sums one float64 per work-item over its work-group, in a fixed order: each
    work-item writes its value into local memory at its local number and, after one
    barrier, the group's first work-item adds them up, entry e into sum e mod
    ACCUMULATORS (independent additions, not one chain), then the sums in order. The
    same bits whatever the backend or its threads. Work-items outside the ndrange do not
    run: in a partial group (the last along an axis) the first work-item adds only the
    entries of the work-items that exist (a uniform branch, no barrier of its own)."""

    def __init__(self, b: Builder, workgroupsize: tuple[int, ...]):
        self.b, self.workgroupsize = b, workgroupsize
        self.size = 1
        for extent in workgroupsize:
            self.size *= extent

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
        scratch = b.op(LOCALMEM, [], T.ArrayType(T.float64, 2, "C", space="local",
                                                 shape=(rows, self.size)))
        for row, value in enumerate(values):
            b.op(STORE, [scratch, b.constant(row, T.int64), local, value])
        b.op(BARRIER, [])
        first = b.emit(COMPARISONS["eq"], [local, b.constant(0, T.int64)], T.bool_)
        partial = partial_group(b, self.workgroupsize)

        def first_item_sums() -> None:
            whole, ragged = b.new_block(), b.new_block()
            done = b.new_block((T.float64,) * rows)
            b.cbr(partial, ragged, [], whole, [])
            for block, guarded in ((whole, False), (ragged, True)):
                b.position_at_end(block)
                b.br(done, self.sums(scratch, rows, guarded))
            b.position_at_end(done)
            use(list(done.params))
        self.when(first, first_item_sums)

    def sums(self, scratch: Value, rows: int, guarded: bool) -> list[Value]:
        """Each row of `scratch` added up, entry e into lane e mod ACCUMULATORS, then the
        lanes in order; `guarded`: an entry counts only where its work-item exists."""
        b, lanes = self.b, ACCUMULATORS
        zero = b.constant(0.0, T.float64)

        def entry(row: int, item: Value) -> Value:
            value = b.op(LOAD, [scratch, b.constant(row, T.int64), item], T.float64)
            return b.op(SELECT, [self.exists(item), value, zero], T.float64) \
                if guarded else value

        def entries(item: Value) -> list[Value]:
            return [entry(row, b.binary("add", item, b.constant(lane, T.int64)))
                    for row in range(rows) for lane in range(lanes)]
        whole = self.size - self.size % lanes
        sums = self.loop(0, whole, lanes, entries, rows * lanes)
        for item in range(whole, self.size):     # the last size % lanes entries
            lane = item % lanes
            for row in range(rows):
                sums[row * lanes + lane] = b.binary(
                    "add", sums[row * lanes + lane], entry(row, b.constant(item, T.int64)))
        totals = []
        for row in range(rows):
            total = sums[row * lanes]
            for lane in range(1, lanes):
                total = b.binary("add", total, sums[row * lanes + lane])
            totals.append(total)
        return totals

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
        added up over the loop in order into a sum of its own, which are returned."""
        b = self.b
        header = b.new_block((T.int64,) + (T.float64,) * carried)
        inside, done = b.new_block(), b.new_block((T.float64,) * carried)
        b.br(header, [b.constant(start, T.int64)] + [b.constant(0.0, T.float64)] * carried)
        b.position_at_end(header)
        item, *sums = header.params
        b.cbr(b.compare("lt", item, b.constant(end, T.int64)), inside, [], done, sums)
        b.position_at_end(inside)
        values = body(item)
        following = [b.binary("add", total, value) for total, value in zip(sums, values)]
        b.br(header, [b.binary("add", item, b.constant(step, T.int64))] + following)
        b.position_at_end(done)
        return list(done.params)
