"""Sums of one value per work-item over each work-group, in a fixed order: how the
reverse kernel leaves an `Active` scalar's derivative, one partial per group."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import BARRIER, COMPARISONS, LOAD, LOCALMEM, STORE
from kernelkit.ir.ops import Value

from .positions import linear_group, linear_local_item, partial_group

ACCUMULATORS = 8          # independent sums when a work-group's shares are added


class GroupSum:
    """Sums one float64 per work-item over its work-group, in a fixed order: each
    work-item writes its value into local memory at its local number, and the group's
    first work-item adds them up, entry e into sum e mod ACCUMULATORS (independent
    additions, not one chain), then the sums in order. The same bits whatever the
    backend or its threads, with one barrier (a tree would take one per level).
    Work-items outside the ndrange do not run, so in a partial group the first
    work-item zeroes every entry first, behind a barrier of its own."""

    def __init__(self, b: Builder, workgroupsize: tuple[int, ...]):
        self.b, self.workgroupsize = b, workgroupsize
        self.size = 1
        for extent in workgroupsize:
            self.size *= extent

    def store(self, values: list[Value], arrays: list[Value]) -> None:
        """Each of `values` summed over the group, into its array at the group's number."""
        b, rows = self.b, range(len(values))
        lanes = ACCUMULATORS
        padded = -(-self.size // lanes) * lanes
        local = linear_local_item(b, self.workgroupsize)
        scratch = b.op(LOCALMEM, [], T.ArrayType(T.float64, 2, "C", space="local",
                                                 shape=(len(values), padded)))
        first = b.emit(COMPARISONS["eq"], [local, b.constant(0, T.int64)], T.bool_)
        zero = b.constant(0.0, T.float64)

        def zero_from(start: int) -> None:
            self.when(first, lambda: self.loop(start, padded, 1, lambda item: [
                b.op(STORE, [scratch, b.constant(row, T.int64), item, zero])
                for row in rows], 0))
        if padded > self.size:      # entries past the group's size: no work-item writes them
            zero_from(self.size)
        # In a partial group (the last along an axis) the missing work-items leave their
        # entries unwritten: the first zeroes them all before the others write theirs.
        def zero_all() -> None:
            zero_from(0)
            b.op(BARRIER, [])
        self.when(partial_group(b, self.workgroupsize), zero_all)
        for row, value in enumerate(values):
            b.op(STORE, [scratch, b.constant(row, T.int64), local, value])
        b.op(BARRIER, [])

        def entries(item):
            return [b.op(LOAD, [scratch, b.constant(row, T.int64),
                                b.binary("add", item, b.constant(lane, T.int64))], T.float64)
                    for row in rows for lane in range(lanes)]

        def add_up() -> None:
            sums = self.loop(0, padded, lanes, entries, len(values) * lanes)
            group = linear_group(b, self.workgroupsize)
            for row, array in enumerate(arrays):
                total = sums[row * lanes]
                for lane in range(1, lanes):
                    total = b.binary("add", total, sums[row * lanes + lane])
                b.op(STORE, [array, group, total])
        self.when(first, add_up)

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
        following = [b.binary("add", total, value) for total, value in zip(sums, values)] \
            if carried else []
        b.br(header, [b.binary("add", item, b.constant(step, T.int64))] + following)
        b.position_at_end(done)
        return list(done.params)
