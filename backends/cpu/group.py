"""The CPU target's group function: `void kernel(ptr args, i64 first_group, i64 end_group)`
runs work-groups `first_group .. end_group - 1`; inside a group, work-items are a loop
nest (last axis innermost, so the vectorizer sees unit-stride accesses). Each group runs
either the full-group code, whose loop trip counts are constants, or the code for a
group cut short by the end of the ndrange.

A kernel without barriers is one loop nest. Barriers (the kernel's own, and those the
loop-barriers pass puts around loops that all work-items run alike) cut it into regions;
a group runs region after region, each as a loop nest over its work-items, and the next
region is the one after the barrier its work-items reached (all reach the same one). The
control flow a region starts with that is the same for all work-items (a uniform loop's
condition) runs once per group, outside the loop nest.

Values live across a barrier are kept in slots: one per work-item for values that differ
between work-items, one per group for uniform ones. Work-items run one after another, so
a uniform slot is read from its `current` copy and written to its `next` copy, which
becomes current when the region ends. Cheap pure values (index arithmetic) are computed
again where they are used instead of being kept. Which values those are, and how a
work-item's code in one region is lowered, is `regions.py`'s.

Where the job's target detects races (`races.py`), each access to global and local
memory is recorded with the group's number, the work-item's and the barriers the group
has passed (its regions so far), and the work-item loops stay scalar."""
from __future__ import annotations

from llvmlite import ir

from kernelkit.analysis.loops import counted_loop, natural_loops
from kernelkit.analysis.regions import ends_with_barrier, region_order
from kernelkit.compiler.launch_record import EntryPointBuilder, LaunchRecord
from kernelkit.compiler.llvm_types import (ArrayValue, declared, i1, i8, i32, i64, llvm_type,
                                           memory_type, ptr)
from kernelkit.compiler.lowering import BodyLowering, assume
from kernelkit.compiler.printf import printf_arguments
from kernelkit.ir.definitions import (ADD, ARITHMETIC, ASSUME, BARRIER_ANY, BR, CBR, COMPARISONS,
                                      GROUP_ID, LOCAL_ID, MUL, PRIVATE, RET, Trait)
from kernelkit.ir import types as T
from kernelkit.ir.ops import Op
from kernelkit.passes.guard_versioning import SUFFIX as GUARDED_SUFFIX
from kernelkit.passes.loop_barriers import LoopBarriers

from .item_split import row_range, row_split
from .libc import cpu_math
from .interrupts import InterruptPolls, polled_back_edges
from .races import RaceInstrumentation, detects_races
from .regions import RegionLowering, RegionPlan

FINISHED = -1
"""The region number that ends a group."""

PREFIX_BLOCKS = 16
"""At most this many blocks of a region's uniform control flow run once per group (each
branch there copies the code after it)."""

INTERLEAVED = 4
"""The innermost work-item loop of a small kernel (at most `SMALL_KERNEL` operations)
whose rows are at least `INTERLEAVED_ROW` work-items long runs this many vectors of
work-items per trip, each independent of the others (LLVM's interleaving: loads of
several vectors in flight, a quarter of the loop's own instructions). LLVM does not
interleave a loop it may not unroll (see `loop_metadata`), so the count is asked for:
the naive 1024 x 1024 matrix multiply on one thread (AMD Zen 3) went from 103-110 ms to
87-91 ms, Numba's i-k-j loop taking 90-99 ms; a 1M-element saxpy from 175 to 168 us."""
SMALL_KERNEL = 48
INTERLEAVED_ROW = 64

MOST_COPIED_OPERATIONS = 1000
"""A kernel of more operations than this has its code lowered once: full groups run the
code partial groups run (their extents as values, not constants), with no version for
groups that pass its guards and no row split. Each of those copies the kernel's code,
which LLVM then optimizes again, in a time that grows faster than the code: a fuzzed
kernel of 1,364 operations took 12.8 s to compile with its three copies split (six in
all), 4.7 s with two and 1.8 s with one; its derivative kernels of 1,098 operations 1.9
s, of 1,387 and 1,988 operations 17 and 25 s. (The heat step's reverse, an Active
scalar's group sum in it, has 619.)"""

UNROLLED_OPERATIONS = 2048
"""The most operations a loop unrolled whole (`unrolled_loops`) may come to: its trip
count times its body's operations."""


def _first_item_axes(condition) -> set | None:
    """The axes whose local ids `condition` requires to be 0, if it is `p == 0` where p
    is local ids scaled by positive constants and added (never negative: 0 only where
    each of them is), or such tests and-ed; None for any other condition."""
    if not isinstance(condition, Op):
        return None
    if condition.definition is ARITHMETIC["and"]:
        axes = [_first_item_axes(operand) for operand in condition.operands]
        return None if None in axes else set().union(*axes)
    if condition.definition is not COMPARISONS["eq"]:
        return None
    left, right = condition.operands
    if _constant(left) == 0:
        left, right = right, left
    return _local_axes(left) if _constant(right) == 0 else None


def _local_axes(value) -> set | None:
    """The axes of the local ids `value` adds up, each times a positive constant; None
    if it is anything else."""
    if not isinstance(value, Op):
        return None
    if value.definition is LOCAL_ID:
        return {value.attrs["axis"]}
    if value.definition is ADD:
        axes = [_local_axes(operand) for operand in value.operands]
        return None if None in axes else set().union(*axes)
    if value.definition is MUL:
        first, second = value.operands
        if _constant(first) is not None:
            first, second = second, first
        factor = _constant(second)
        # Positive and small: a local number times it cannot wrap round to 0.
        return _local_axes(first) if factor is not None and 0 < factor < 2 ** 31 else None
    return None


def _constant(value):
    return value.attrs["value"] if isinstance(value, Op) and value.has(Trait.CONSTANT) \
        else None


def _redefines(block, values: list) -> bool:
    """Whether `block` defines one of `values`, or a value a pure one of them is computed
    from: that value, taken after the block, is no longer the one `values` were made of."""
    defined = {*block.params, *block.ops}
    stack, seen = list(values), set()
    while stack:
        value = stack.pop()
        if value in defined:
            return True
        if value in seen:
            continue
        seen.add(value)
        if isinstance(value, Op) and value.is_pure:
            stack.extend(value.operands)
    return False


class KernelVersion:
    """One version of the kernel the group function runs (the kernel as written, or the
    one for groups that pass its guards) with its region plan and storage."""

    def __init__(self, function, ndim: int, row_length: int, copies: bool = True):
        """`copies`: whether the kernel's code may be lowered again for parts of a row
        (`MOST_COPIED_OPERATIONS`)."""
        self.function = function
        self.has_barrier = any(op.has(Trait.BARRIER) for op in function.ops())
        self.plan = RegionPlan(function) if self.has_barrier else None
        self.storage: dict = {}
        self.slot_sets: list = []
        # Where the kernel's guards change along a row (`item_split`); not where a
        # region keeps a comparison (or what it is made of) from an earlier one in a
        # slot, which a work-item's code would read before it is written.
        self.row_split = row_split(function, ndim - 1) if row_length > 1 and copies \
            else None
        if self.row_split is not None and self.plan is not None and \
                _reads_kept(self.row_split.comparisons, self.plan.kept):
            self.row_split = None
        self.region_splits: dict = {}   # a region's block -> the split its code uses
        self.interleaved = row_length >= INTERLEAVED_ROW and \
            sum(1 for _ in function.ops()) <= SMALL_KERNEL

    def split_from(self, block):
        """The row split of the work-item code from `block` to the region's end."""
        if self.row_split is None:
            return None
        if block not in self.region_splits:
            self.region_splits[block] = self.row_split.used_in(region_order(block))
        return self.region_splits[block]


class GroupFunctionBuilder(EntryPointBuilder):
    """Builds the group function and serves as the body lowering's environment."""

    def __init__(self, module: ir.Module, ir_module, job, symbol: str):
        super().__init__(module, ir_module.kernel, job, symbol)
        self.items = 1
        for size in self.sizes:
            self.items *= size
        self.known: dict = {}   # comparison -> its value in the row piece being lowered
        self.assumed: dict = {}   # a vote -> its value in a region where all were alike
        operations = sum(1 for _ in ir_module.kernel.ops())
        self.copies = operations <= MOST_COPIED_OPERATIONS
        self.general = KernelVersion(ir_module.kernel, self.ndim, self.sizes[-1], self.copies)
        interior = ir_module.functions.get(ir_module.kernel.name + GUARDED_SUFFIX)
        self.interior = KernelVersion(interior, self.ndim, self.sizes[-1]) \
            if interior is not None and self.copies else None
        self.access_group = _DistinctNode(module)
        # Race detection (`races.py`), where the job's target asks for it.
        self.races = RaceInstrumentation(module, self.locations) \
            if detects_races(job.config.target) else None
        self.polls = InterruptPolls(module)
        self.polled_edges: dict = {}   # function -> its `polled_back_edges`
        self.unrolled_headers: dict = {}   # function -> its `unrolled_loops`

    # -- the group function ---------------------------------------------------------------

    def build(self) -> ir.Function:
        function_type = ir.FunctionType(ir.VoidType(), [ptr, i64, i64])
        llvm_function = ir.Function(self.module, function_type, self.symbol)
        self.llvm_function = llvm_function
        args, first, end = llvm_function.args
        args.name, first.name, end.name = "args", "first_group", "end_group"
        args.add_attribute("noalias")
        llvm_function.attributes.add("nounwind")
        builder = ir.IRBuilder(llvm_function.append_basic_block("entry"))
        record = LaunchRecord(builder, args, self.layout, self.debug)
        self.extents, self.group_counts = record.extents, record.group_counts
        self.error_record, self.arguments = record.error_record, record.arguments
        if self.races is not None:
            self.races.start(builder, self.error_record)
        self.region = builder.alloca(i32, name="region")
        self.verdict = builder.alloca(i8, name="all_pass")
        for version in (self.general, self.interior):
            if version is not None:
                self.allocate_storage(builder, version)

        first_index = self.decompose_group(builder, first)
        entry = builder.block
        group_loop = self.group_loop = self.new_block("group_loop")
        group_body = self.new_block("group_body")
        next_group = self.new_block("next_group")
        done = self.polls.done = self.new_block("done")
        builder.branch(group_loop)
        builder.position_at_end(group_loop)
        group = builder.phi(i64, "group")
        group.add_incoming(first, entry)
        self.group_index = []
        for axis, start in enumerate(first_index):
            index = builder.phi(i64, f"group{axis}")
            index.add_incoming(start, entry)
            self.group_index.append(index)
        builder.cbranch(builder.icmp_signed("<", group, end), group_body, done)
        builder.position_at_end(group_body)
        self.polls.poll(builder)
        self.group_number = group
        if self.races is not None:
            self.races.group_started(builder)
        # A group runs only where the ndrange has work-items: each extent is at least 1
        # (LLVM then knows, say, which way a grid-stride loop over `ndrange()` counts).
        for extent in self.extents:
            assume(builder, builder.icmp_signed(">", extent, ir.Constant(i64, 0)))
        valid = self.valid_items(builder)
        if not self.copies:     # one copy of the code, for full and partial groups alike
            self.emit_group(builder, self.general, valid, 1)
            builder.branch(next_group)
            return self.finish(builder, group, next_group, done)
        full = builder.icmp_signed("==", valid[0], ir.Constant(i64, self.sizes[0]))
        for axis in range(1, self.ndim):
            full = builder.and_(full, builder.icmp_signed("==", valid[axis],
                                                          ir.Constant(i64, self.sizes[axis])))
        full_group = self.new_block("full_group")
        partial_group = self.new_block("partial_group")
        builder.cbranch(full, full_group, partial_group)
        constant_extents = [ir.Constant(i64, s) for s in self.sizes]
        builder.position_at_end(full_group)
        if self.interior is not None:
            # Groups whose work-items all pass the kernel's guards run the version
            # without them (see kernelkit/passes/guard_versioning.py).
            self.extents_now = constant_extents
            all_pass = self.all_pass_guards(builder, self.interior)
            interior_group = self.new_block("interior_group")
            guarded_group = self.new_block("guarded_group")
            builder.cbranch(all_pass, interior_group, guarded_group)
            builder.position_at_end(interior_group)
            self.emit_group(builder, self.interior, constant_extents, 0)
            builder.branch(next_group)
            builder.position_at_end(guarded_group)
        self.emit_group(builder, self.general, constant_extents, 0)
        builder.branch(next_group)
        builder.position_at_end(partial_group)
        self.emit_group(builder, self.general, valid, 1)
        builder.branch(next_group)
        return self.finish(builder, group, next_group, done)

    def finish(self, builder, group, next_group, done) -> ir.Function:
        """The step to the next group, and the return where there is none."""
        builder.position_at_end(next_group)
        group.add_incoming(builder.add(group, ir.Constant(i64, 1)), next_group)
        for index, following in zip(self.group_index, self.following_group(builder)):
            index.add_incoming(following, next_group)
        builder.branch(self.group_loop)
        builder.position_at_end(done)
        builder.ret_void()
        return self.llvm_function

    def emit_group(self, builder, version: KernelVersion, extents, slot_set: int) -> None:
        """One group's work with `version` of the kernel; `extents` are the loop trip
        counts (constants for a full group)."""
        self.use_version(version)
        self.extents_now = extents
        self.slots, self.current, self.next, self.unanimous = version.slot_sets[slot_set]
        if version.has_barrier:
            self.run_regions(builder)
        else:
            self.work_item_loops(builder, lambda b: self.lower_item(b, self.function.entry),
                                 version.row_split)

    def use_version(self, version: KernelVersion) -> None:
        self.version = version
        self.function, self.plan = version.function, version.plan
        self.has_barrier, self.storage = version.has_barrier, version.storage

    def all_pass_guards(self, builder, version: KernelVersion) -> ir.Value:
        """Whether every work-item of the group satisfies each `assume` of `version`."""
        self.use_version(version)
        self.slots, self.current, self.next, self.unanimous = version.slot_sets[0]
        conditions = [op.operands[0] for op in version.function.ops() if op.definition is ASSUME]
        verdict = self.verdict
        builder.store(ir.Constant(i8, 1), verdict)

        def body(item_builder):
            self.flat_item = None
            lowering = BodyLowering(self, version.function, self.llvm_function)
            lowering.prologue = item_builder
            passes = ir.Constant(i1, 1)
            for condition in conditions:
                passes = item_builder.and_(passes, lowering.use(item_builder, condition))
            current = item_builder.load(verdict, typ=i8)
            item_builder.store(item_builder.and_(current, item_builder.zext(passes, i8)),
                               verdict)
            item_builder.branch(self.item_done)

        self.work_item_loops(builder, body)
        return builder.icmp_unsigned("!=", builder.load(verdict, typ=i8), ir.Constant(i8, 0))

    def new_block(self, name: str) -> ir.Block:
        return self.llvm_function.append_basic_block(name)

    def allocate_storage(self, builder, version: KernelVersion) -> None:
        """Local and private memory and the slots of one version of the kernel."""
        for op in version.function.ops():
            if not op.has(Trait.ALLOCATION):
                continue
            count = 1
            for extent in op.type.shape:
                count *= extent
            if op.definition is PRIVATE:
                count *= self.items
            storage = builder.alloca(memory_type(op.type.dtype), size=count)
            storage.align = 64
            version.storage[op] = storage
        version.slot_sets = [self.allocate_slots(builder, version) for _ in range(2)]

    def allocate_slots(self, builder, version: KernelVersion) -> tuple[dict, dict, dict, dict]:
        """Slots for the values kept across barriers: (per work-item, current, next,
        unanimous: per barrier_any of `RegionPlan.unanimous`, whether every vote was
        true). The full-group and the partial-group code each get their own, so that in
        the full-group code, where every slot is addressed by constants once the loops
        are unrolled, LLVM can keep them in registers."""
        slots, current, next, unanimous = {}, {}, {}, {}
        if version.has_barrier:
            plan = version.plan
            for value in sorted(plan.kept, key=_definition_order(version.function)):
                type = llvm_type(value.type)
                if value in plan.uniform:
                    current[value] = builder.alloca(type)
                    next[value] = builder.alloca(type)
                else:
                    slot = builder.alloca(_slot_type(value.type), size=self.items)
                    slot.align = 64
                    slots[value] = slot
            for barrier in plan.unanimous.values():
                unanimous[barrier] = builder.alloca(i1)
        return slots, current, next, unanimous

    def decompose_group(self, builder, group) -> list:
        """Group number -> group index per axis (row-major, the last axis fastest)."""
        rest = group
        indices = []
        for axis in reversed(range(self.ndim)):
            if axis == 0:
                indices.insert(0, rest)
            else:
                indices.insert(0, builder.urem(rest, self.group_counts[axis]))
                rest = builder.udiv(rest, self.group_counts[axis])
        return indices

    def following_group(self, builder) -> list:
        """The next group's index per axis, counted on from this one's (no division per
        group: a 64-bit division costs as much as a small group's work)."""
        following = list(self.group_index)
        carry = ir.Constant(i1, 1)
        for axis in reversed(range(self.ndim)):
            stepped = builder.add(following[axis], builder.zext(carry, i64))
            if axis == 0:
                following[axis] = stepped
                break
            wraps = builder.icmp_signed("==", stepped, self.group_counts[axis])
            following[axis] = builder.select(wraps, ir.Constant(i64, 0), stepped)
            carry = wraps
        return following

    def valid_items(self, builder) -> list:
        """The number of work-items of this group inside the ndrange, per axis."""
        valid = []
        for axis, index in enumerate(self.group_index):
            size = ir.Constant(i64, self.sizes[axis])
            remaining = builder.sub(self.extents[axis], builder.mul(index, size))
            smaller = builder.icmp_signed("<", remaining, size)
            valid.append(builder.select(smaller, remaining, size))
        return valid

    def work_item_loops(self, builder, body, split=None, axis: int = 0) -> None:
        """for l[axis] in range(extents_now[axis]): ... (innermost: `body(builder)`, which
        ends by branching to `self.item_done`); the innermost loop split where the
        comparisons of `split` (a `RowSplit`) change (`split_row`)."""
        if axis == 0:
            self.local = [None] * self.ndim
        extent = self.extents_now[axis]
        zero = ir.Constant(i64, 0)
        if axis + 1 < self.ndim:
            self.item_loop(builder, axis, zero, extent,
                           lambda b: self.work_item_loops(b, body, split, axis + 1))
        elif split is not None:
            self.split_row(builder, body, split)
        else:
            self.item_loop(builder, axis, zero, extent, body, innermost=True)

    def item_loop(self, builder, axis: int, first, end, body, innermost: bool = False):
        """for l[axis] in range(first, end): `body(builder)`, which ends by branching to
        `self.item_done` where `innermost`, else leaves the builder where the work-item
        ends; the builder is left after the loop."""
        preheader = builder.block
        header = self.new_block(f"item_loop{axis}")
        item = self.new_block(f"item{axis}")
        latch = self.new_block(f"item_next{axis}")
        after = self.new_block(f"item_loop{axis}_end")
        builder.branch(header)
        builder.position_at_end(header)
        index = builder.phi(i64, f"local{axis}")
        index.add_incoming(first, preheader)
        builder.cbranch(builder.icmp_signed("<", index, end), item, after)
        builder.position_at_end(item)
        self.local[axis] = index
        if innermost:
            self.item_done = latch
        body(builder)
        if not innermost:
            builder.branch(latch)
        builder.position_at_end(latch)
        index.add_incoming(builder.add(index, ir.Constant(i64, 1)), latch)
        back_edge = builder.branch(header)
        if innermost:
            back_edge.set_metadata("llvm.loop", self.loop_metadata())
        builder.position_at_end(after)

    def split_row(self, builder, body, split) -> None:
        """The innermost work-item loop, split where the comparisons of `split` change
        (`item_split`), in order: the work-items before the piece where none changes,
        as written; those of the piece, where the comparisons have the predicted values
        (`self.known`); those after it, as written (the same loop, entered twice).
        Where the values differ from the prediction, the piece is empty."""
        axis = self.ndim - 1
        extent = self.extents_now[axis]
        at_start = self.row_lowering(builder, ir.Constant(i64, 0))
        first, end = row_range(builder, split.comparisons,
                               lambda value: at_start.use(builder, value), extent, axis)
        at_first = self.row_lowering(builder, first)
        taken = builder.icmp_signed("<", first, end)
        for comparison, predicted in zip(split.comparisons, split.predicted):
            value = at_first.use(builder, comparison.op)
            taken = builder.and_(taken, value if predicted else builder.not_(value))
        first = builder.select(taken, first, extent)
        end = builder.select(taken, end, extent)
        # Two passes over the loop as written: [0, first), then [end, extent).
        preheader = builder.block
        row = self.new_block("row_part")
        builder.branch(row)
        builder.position_at_end(row)
        start = builder.phi(i64, "row_part_start")
        stop = builder.phi(i64, "row_part_stop")
        before = builder.phi(i1, "before_piece")
        start.add_incoming(ir.Constant(i64, 0), preheader)
        stop.add_incoming(first, preheader)
        before.add_incoming(ir.Constant(i1, 1), preheader)
        self.item_loop(builder, axis, start, stop, body, innermost=True)
        piece = self.new_block("row_piece")
        after = self.new_block("row_end")
        builder.cbranch(before, piece, after)
        builder.position_at_end(piece)
        self.known = dict(zip((comparison.op for comparison in split.comparisons),
                              split.predicted))
        self.item_loop(builder, axis, first, end, body, innermost=True)
        self.known = {}
        start.add_incoming(end, builder.block)
        stop.add_incoming(extent, builder.block)
        before.add_incoming(ir.Constant(i1, 0), builder.block)
        builder.branch(row)
        builder.position_at_end(after)

    def row_lowering(self, builder, local) -> BodyLowering:
        """A lowering at the builder's position of values the same for the whole row
        (with the last axis' local id `local`)."""
        self.local[self.ndim - 1] = local
        return BodyLowering(self, self.function, self.llvm_function, prologue=builder)

    def loop_metadata(self):
        """Properties of the innermost work-item loop: its iterations are independent
        (work-items of a group may run in any order: one work-item writing what another
        reads without a barrier in between is a race), so the vectorizer needs no
        run-time alias checks; and it is not unrolled before the vectorizer sees it (a
        full unroll of a short constant loop would leave it the outer loop, with strided
        accesses); in a small kernel, it is interleaved (`INTERLEAVED`)."""
        module = self.module
        identity = module.add_metadata([ir.MetaDataString(module, f"item_loop{len(module.metadata)}")])
        interleave = [module.add_metadata([
            ir.MetaDataString(module, "llvm.loop.interleave.count"),
            ir.Constant(i32, INTERLEAVED)])] if self.version.interleaved else []
        # A kernel recording its accesses for race detection runs its work-items one by
        # one, each access recorded before it happens.
        scalar = [module.add_metadata([
            ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
            ir.Constant(i1, 0)])] if self.races is not None else []
        identity.operands = (
            identity,
            module.add_metadata([ir.MetaDataString(module, "llvm.loop.parallel_accesses"),
                                 self.access_group]),
            module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")]),
            *interleave, *scalar)
        return identity

    work_items_in_sequence = True     # a group's work-items: a loop on one thread

    def array_access(self, instruction) -> None:
        instruction.set_metadata("llvm.access.group", self.access_group)

    def record_access(self, builder, op, address, indices) -> None:
        """For race detection: every access to global and local memory (a private
        array is its work-item's own)."""
        if self.races is not None and op.operands[0].type.space != "private":
            self.races.access(builder, op, self.function, address, indices,
                              self.group_number, self.flat_item)

    def lower_item(self, builder, start, values=None, start_args=(), bindings=()) -> None:
        """The code of one work-item from `start` up to a barrier or the end."""
        flat = self.local[0]
        for axis in range(1, self.ndim):
            flat = builder.add(builder.mul(flat, ir.Constant(i64, self.sizes[axis])),
                               self.local[axis])
        self.flat_item = flat
        if self.has_barrier:
            lowering = RegionLowering(self, self.function, self.llvm_function, values,
                                      self.leave_region)
        else:
            lowering = BodyLowering(self, self.function, self.llvm_function, values)
        if self.known:
            # In a row's piece (`split_row`): the comparisons' values are constants,
            # which the work-item first assumes (computed afresh: they are index
            # arithmetic).
            facts = BodyLowering(self, self.function, self.llvm_function, prologue=builder)
            for op, predicted in self.known.items():
                fact = facts.use(builder, op)
                facts.assume(builder, fact if predicted else builder.not_(fact))
                lowering.known[op] = ir.Constant(i1, int(predicted))
        lowering.lower(builder, start, start_args=start_args, bindings=bindings)

    # -- regions --------------------------------------------------------------------------

    def run_regions(self, builder) -> None:
        """Dispatch on the region number until the group is finished.

        A group starts with its uniform slots and unanimous votes undefined, and a region
        that may write a uniform value first sets its `next` copy to the `current` one
        (which holds the same value, copied over by the region that wrote it last, or one
        nothing reads). Otherwise LLVM cannot tell that no slot is live from one group to
        the next, nor a `next` copy from one region to the next: each becomes a phi at
        the group loop and at the dispatch with an operand for every way out of every
        region, a web of regions times kept values in which LLVM's SLP vectorizer spends
        time that grows far faster than the web (2.4 s of an augmented kernel's 2.6 s of
        optimization, where its tape pushes made ten loops regions of their own)."""
        for slot in (*self.current.values(), *self.next.values(), *self.unanimous.values()):
            builder.store(ir.Constant(slot.allocated_type, ir.Undefined), slot)
        builder.store(ir.Constant(i32, 0), self.region)
        dispatch = self.new_block("next_region")
        finished = self.new_block("group_finished")
        builder.branch(dispatch)
        builder.position_at_end(dispatch)
        self.polls.poll(builder)
        switch = builder.switch(builder.load(self.region, typ=i32), finished)
        for start in self.plan.starts:
            number = self.plan.number[start]
            block = self.new_block(f"region{number}")
            switch.add_case(ir.Constant(i32, number), block)
            builder.position_at_end(block)
            written = self.plan.written_uniform(start)
            for value in written:
                builder.store(builder.load(self.current[value], typ=llvm_type(value.type)),
                              self.next[value])
            self.region_done = self.new_block(f"region{number}_done")
            self.emit_region(builder, start)
            builder.position_at_end(self.region_done)
            for value in written:
                builder.store(builder.load(self.next[value], typ=llvm_type(value.type)),
                              self.current[value])
            if self.races is not None:
                self.races.barrier_passed(builder)
            builder.branch(dispatch)
        builder.position_at_end(finished)

    def emit_region(self, builder, start) -> None:
        """The region's uniform leading control flow once, then loop nests over the
        work-items where per-item work begins."""
        prologue_block = builder.block
        body = self.new_block("region_body")
        prologue = ir.IRBuilder(prologue_block)
        prologue.position_before(prologue.branch(body))
        builder.position_at_end(body)
        self.group_level = BodyLowering(self, self.function, self.llvm_function,
                                        prologue=prologue)
        values = dict(self.group_level.values)
        for param in start.params:
            if param in self.plan.uniform:
                values[param] = prologue.load(self.current[param], typ=llvm_type(param.type))
        for block in self.plan.blocks[start]:
            if ends_with_barrier(block) and block.ops[-2] in self.next:
                builder.store(ir.Constant(i1, 0), self.next[block.ops[-2]])  # no votes yet
            if ends_with_barrier(block) and block.ops[-2] in self.unanimous:
                builder.store(ir.Constant(i1, 1), self.unanimous[block.ops[-2]])
        barrier = self.plan.vote(start)
        if barrier is not None:
            # Every work-item voted true: the region reads each one's vote as true.
            unanimous = prologue.load(self.unanimous[barrier], typ=i1)
            voted, split = self.new_block("all_voted_true"), self.new_block("votes_split")
            builder.cbranch(unanimous, voted, split)
            builder.position_at_end(voted)
            self.assumed = {barrier.operands[0]: ir.Constant(i1, 1)}
            self.walk_region(builder, start, values)
            self.assumed = {}
            builder.position_at_end(split)
        self.walk_region(builder, start, values)

    def walk_region(self, builder, start, values) -> None:
        """The code of the region from `start`, its leading uniform blocks once (`walk`)."""
        self.prefix_budget = PREFIX_BLOCKS
        self.walk(builder, start, start, values, [], (), frozenset())

    def walk(self, builder, start, block, values, bindings, edge_args, path) -> None:
        plan = self.plan
        if not self.runs_once(start, block, bindings, edge_args, path):
            args = edge_args if block is not start else ()
            leading = self.leading_items(start, block, bindings)
            if self.first_item_only(block):
                self.first_item(builder, lambda b: self.lower_item(b, block, values, args,
                                                                    bindings))
            elif leading is not None:
                self.leading_item_loops(builder, block, values, *leading,
                                        lambda b: self.lower_item(b, block, values, args,
                                                                  bindings))
            else:
                self.work_item_loops(builder, lambda b: self.lower_item(b, block, values, args,
                                                                        bindings),
                                     self.version.split_from(block))
            builder.branch(self.region_done)
            return
        self.prefix_budget -= 1
        values, bindings = dict(values), list(bindings)
        lowering = self.group_level
        lowering.values = values
        if block is not start:
            for param, arg in zip(block.params, edge_args):
                if param in plan.varying:
                    bindings.append((param, arg))
                else:
                    lowering.define(builder, param, lowering.use(builder, arg))
        ops = block.ops[:-2] if ends_with_barrier(block) else block.ops[:-1]
        for op in ops:
            lowering.lower_op(builder, op)
        terminator = block.ops[-1]
        path = path | {block}
        if ends_with_barrier(block):
            (successor,) = terminator.successors
            self.enter_region(builder, successor, [lowering.use(builder, a) for a in successor.args])
            builder.branch(self.region_done)
        elif terminator.definition is RET:
            self.select_region(builder, FINISHED)
            builder.branch(self.region_done)
        elif terminator.definition is BR:
            (successor,) = terminator.successors
            self.walk(builder, start, successor.block, values, bindings, successor.args, path)
        else:
            condition = lowering.use(builder, terminator.operands[0])
            branches = [self.new_block("uniform_then"), self.new_block("uniform_else")]
            builder.cbranch(condition, *branches)
            for successor, branch in zip(terminator.successors, branches):
                builder.position_at_end(branch)
                self.walk(builder, start, successor.block, values, bindings, successor.args,
                          path)

    def first_item_only(self, block) -> bool:
        """Whether only the group's first work-item does anything from `block` on: the
        block computes pure values and branches on `local position == 0`, and the others'
        way ends the group at once (a group's sum, say, that its first work-item adds
        up after a barrier). Then the region runs that one work-item, not a loop over
        all of them testing the condition."""
        terminator = block.ops[-1]
        if terminator.definition is not CBR or ends_with_barrier(block) or \
                not all(op.is_pure for op in block.ops[:-1]):
            return False
        if _first_item_axes(terminator.operands[0]) != set(range(self.ndim)):
            return False
        others = terminator.successors[1]
        for _ in range(PREFIX_BLOCKS):      # empty blocks on the way to the end
            if others.args or len(others.block.ops) != 1:
                return False
            end = others.block.ops[0]
            if end.definition is RET:
                return True
            if end.definition is not BR:
                return False
            others = end.successors[0]
        return False

    def leading_items(self, start, block, bindings):
        """(axis, bound, others) where only the work-items whose local id along `axis`
        is below a group-uniform `bound` do anything from `block` on: the block computes
        pure values none of which is kept across a barrier, and branches on
        `local_id < bound`; the others' way (`others`, a successor) goes through empty
        blocks to a barrier or the end (a step of a tree reduction in local memory,
        `if l < step: s[l] += s[l + step]`). None otherwise, and where a work-item
        carries values of its own into the block (`bindings`: it would keep them for
        after the barrier) or the others vote at a barrier_any."""
        terminator = block.ops[-1]
        if terminator.definition is not CBR or ends_with_barrier(block) or bindings or \
                (block.params and block is not start):
            return None
        if any(not op.is_pure or self.is_demoted(op) for op in block.ops[:-1]):
            return None
        condition = terminator.operands[0]
        if not isinstance(condition, Op) or \
                condition.definition not in (COMPARISONS["lt"], COMPARISONS["gt"]):
            return None
        local, bound = condition.operands
        if condition.definition is COMPARISONS["gt"]:
            local, bound = bound, local
        if not (isinstance(local, Op) and local.definition is LOCAL_ID) or \
                bound in self.plan.varying or not bound.type.is_integer:
            return None
        others = terminator.successors[1]
        for _ in range(PREFIX_BLOCKS):
            if others.args or len(others.block.ops) > 2:
                return None
            end = others.block.ops[-1]
            if end.definition is RET and len(others.block.ops) == 1:
                return local.attrs["axis"], bound, None
            if end.definition is not BR or len(others.block.ops) == 2 and \
                    not ends_with_barrier(others.block):
                return None
            if ends_with_barrier(others.block):
                (after,) = end.successors
                votes = others.block.ops[-2].definition is BARRIER_ANY
                return (local.attrs["axis"], bound, after) if not (after.args or votes) \
                    else None
            others = end.successors[0]
        return None

    def leading_item_loops(self, builder, block, values, axis, bound, others, body) -> None:
        """The work-item loops over the leading work-items alone (see leading_items): the
        others' way is taken for the group first, then those work-items run."""
        if others is None:
            self.select_region(builder, FINISHED)
        else:
            self.enter_region(builder, others, [])
        lowering = self.group_level
        lowering.values = dict(values)
        for op in block.ops[:-1]:
            if self.plan.runs_once(op):
                lowering.lower_op(builder, op)
        limit = lowering.use(builder, bound)
        if limit.type != i64:
            limit = builder.sext(limit, i64) if bound.type.is_signed else \
                builder.zext(limit, i64)
        limit = builder.select(builder.icmp_signed("<", limit, ir.Constant(i64, 0)),
                               ir.Constant(i64, 0), limit)
        extents = self.extents_now
        self.extents_now = list(extents)
        self.extents_now[axis] = builder.select(
            builder.icmp_signed("<", limit, extents[axis]), limit, extents[axis])
        self.work_item_loops(builder, body, self.version.split_from(block))
        self.extents_now = extents

    def first_item(self, builder, body) -> None:
        """`body(builder)` for the work-item at local position (0, ..., 0) alone (every
        group has it); like the work-item loops, `body` ends by branching to
        `self.item_done`."""
        self.local = [ir.Constant(i64, 0)] * self.ndim
        self.item_done = self.new_block("first_item_done")
        body(builder)
        builder.position_at_end(self.item_done)

    def runs_once(self, start, block, bindings, edge_args, path) -> bool:
        """Whether `block` can run once for the whole group at this point of a region."""
        plan = self.plan
        if self.prefix_budget <= 0 or block in path or block in plan.cyclic[start]:
            return False
        if ends_with_barrier(block) and (bindings or any(p in plan.varying
                                                          for p in block.params)):
            return False  # each work-item keeps its own values across the barrier
        pending = [arg for _, arg in bindings]
        if block is not start:
            pending += [arg for param, arg in zip(block.params, edge_args)
                        if param in plan.varying]
        if _redefines(block, pending):
            return False  # a pending per-item value is made of what the block defines anew
        if ends_with_barrier(block) and block.ops[-2].definition is BARRIER_ANY:
            return False  # each work-item votes
        terminator = block.ops[-1]
        ops = block.ops[:-2] if ends_with_barrier(block) else block.ops[:-1]
        if not all(plan.runs_once(op) for op in ops):
            return False
        if terminator.definition is CBR and terminator.operands[0] in plan.varying:
            return False
        if ends_with_barrier(block) and any(p in plan.varying
                                            for p in terminator.successors[0].block.params):
            return False  # the next region's start keeps a value per work-item
        return True

    def enter_region(self, builder, successor, args) -> None:
        """Hand the branch arguments over to the next region's start and select it."""
        for param, value in zip(successor.block.params, args):
            if param in self.next or param in self.slots:
                self.store_demoted(builder, param, value)
        self.select_region(builder, self.plan.number[successor.block])

    def select_region(self, builder, number: int) -> None:
        self.array_access(builder.store(ir.Constant(i32, number), self.region))

    def leave_region(self, builder, successor, args) -> None:
        self.enter_region(builder, successor, args)
        builder.branch(self.item_done)

    # -- KernelEnvironment ----------------------------------------------------------------

    def geometry(self, builder, position, axis):
        if position is LOCAL_ID:
            return self.local[axis]
        if position is GROUP_ID:
            return self.group_index[axis]
        return self.extents[axis]

    def allocation(self, builder, op):
        """Local memory is one array per group. Private arrays are one array per work-item,
        interleaved: element e of work-item w is at e * items + w, so that neighbouring
        work-items' elements are neighbours in memory (vector loads and stores)."""
        shape = [ir.Constant(i64, s) for s in op.type.shape]
        spacing = self.items if op.definition is PRIVATE else 1
        strides = [spacing]
        for extent in reversed(op.type.shape[1:]):
            strides.insert(0, strides[0] * extent)
        strides = [ir.Constant(i64, s) for s in strides]
        storage = self.storage[op]
        if op.definition is PRIVATE:
            storage = builder.gep(storage, [self.flat_item], source_etype=memory_type(op.type.dtype))
        return ArrayValue(storage, shape, strides, op.type)

    def barrier_any(self, builder, op, condition):
        """Each work-item ORs its vote into the group's `next` slot of the result (set to
        false when the region starts); the regions after the barrier read it."""
        if op in self.next:
            slot = self.next[op]
            vote = builder.or_(builder.load(slot, typ=i1), condition)
            self.array_access(builder.store(vote, slot))
        if op in self.unanimous:
            slot = self.unanimous[op]
            every = builder.and_(builder.load(slot, typ=i1), condition)
            self.array_access(builder.store(every, slot))
        return None

    def before_branch(self, builder, function, block, successors) -> None:
        edges = self.polled_edges.get(function)
        if edges is None:
            edges = self.polled_edges[function] = polled_back_edges(function)
        if any((block, successor) in edges for successor in successors):
            self.polls.poll(builder)

    def back_edge_metadata(self, function, block, successors):
        """Back edges of the loops `unrolled_loops` gives: LLVM is told to unroll them
        whole (as the loop-barriers pass, which leaves them alone, expects)."""
        headers = self.unrolled_headers.get(function)
        if headers is None:
            headers = self.unrolled_headers[function] = unrolled_loops(function)
        if not any(successor in headers and block in headers[successor]
                   for successor in successors):
            return None
        module = self.module
        node = module.add_metadata([ir.MetaDataString(module, f"unrolled{len(module.metadata)}")])
        node.operands = (node, module.add_metadata([
            ir.MetaDataString(module, "llvm.loop.unroll.full")]))
        return node

    def kernel_return(self, builder):
        if self.has_barrier:
            self.select_region(builder, FINISHED)
        builder.branch(self.item_done)

    def is_demoted(self, value):
        return value in self.slots or value in self.next

    def store_demoted(self, builder, value, llvm_value):
        if value in self.next:
            address = self.next[value]
        else:
            type = _slot_type(value.type)
            address = builder.gep(self.slots[value], [self.flat_item], source_etype=type)
            if type != llvm_value.type:
                llvm_value = builder.zext(llvm_value, type)
        self.array_access(builder.store(llvm_value, address))

    def load_demoted(self, builder, value):
        if value in self.assumed:
            return self.assumed[value]
        type = llvm_type(value.type)
        if value in self.current:
            address = self.current[value]
            load = builder.load(address, typ=type)
        else:
            stored = _slot_type(value.type)
            address = builder.gep(self.slots[value], [self.flat_item], source_etype=stored)
            load = builder.load(address, typ=stored)
        self.array_access(load)
        return load if load.type == type else builder.trunc(load, type)

    def print(self, builder, format, values):
        text, args = printf_arguments(builder, format, values, self.string)
        printf = declared(self.module, "printf", i32, [ptr], var_arg=True)
        builder.call(printf, [self.string(text), *args])

    def math(self, builder, name, args, type):
        return cpu_math(builder, name, args, type, self.job.config.target.vector_library)


def unrolled_loops(function) -> dict:
    """The loops LLVM is told to unroll whole (header -> the blocks of the loop): those
    of a constant trip count small enough that the loop-barriers pass leaves them in the
    work-items' code (`LoopBarriers.small_trip_count`), whose body of at most
    `UNROLLED_OPERATIONS` once unrolled has no barrier. LLVM unrolls a short loop of a
    short body on its own; one of a longer body it would keep as a loop inside the
    work-item loop, which then stays scalar (the vectorizer takes innermost loops only):
    the reverse of a tiled matrix multiply's loop over a tile (a 16-trip loop of two
    shadow updates and their products) ran a scalar loop per work-item. Only a body
    without branches is unrolled: one with a branch in it, unrolled, is as many
    diamonds in a row, and the augmented forward of a guarded 31-trip loop (a push to
    the tape on one side of each, at a position that depends on the sides taken
    before) kept LLVM's optimizer busy for over ten minutes."""
    loops = {}
    trips_at_most = LoopBarriers().small_trip_count
    for header, body in natural_loops(function).items():
        counted = counted_loop(header, body)
        trips = counted.trip_count(trips_at_most) if counted is not None else None
        if trips is None or any(ends_with_barrier(block) for block in body):
            continue
        if any(block.terminator.definition is not BR for block in body if block is not header):
            continue   # a branch in the body: see above
        if trips * sum(len(block.ops) for block in body) <= UNROLLED_OPERATIONS:
            loops[header] = body
    return loops


class _DistinctNode(ir.values.MDValue):
    """`distinct !{}`: an access group (llvmlite writes only uniqued metadata nodes)."""

    def __init__(self, module: ir.Module):
        super().__init__(module, [], name=str(len(module.metadata)))

    def descr(self, buf):
        buf += ("distinct !{}", "\n")


def _reads_kept(comparisons, kept: set) -> bool:
    """Whether one of `comparisons` is, or is computed from, a value in `kept`."""
    stack, seen = [comparison.op for comparison in comparisons], set()
    while stack:
        value = stack.pop()
        if value in kept:
            return True
        if value not in seen and isinstance(value, Op):
            seen.add(value)
            stack.extend(value.operands)
    return False


def _slot_type(type) -> ir.Type:
    """A per-work-item slot holds a bool as a byte: LLVM loads and stores bytes as
    vectors, where bits of i1 memory are read one at a time."""
    return memory_type(type) if isinstance(type, T.ScalarType) else llvm_type(type)


def _definition_order(function):
    """A deterministic order of values: by where they are defined."""
    order = {}
    for block in function.blocks:
        for param in block.params:
            order[param] = len(order)
        for op in block.ops:
            order[op] = len(order)
    return lambda value: order[value]
