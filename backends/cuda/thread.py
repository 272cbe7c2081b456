"""The CUDA target's kernel function: one work-item per CUDA thread, one work-group per
thread block, or several (coarsening, below). The kernel takes the launch record
(`ArgumentLayout`) as one parameter by value, so a launch passes a single buffer.

Axes: the last axis of the ndrange (the fastest-varying one, in C order) is CUDA's x, so
that neighbouring work-items are neighbouring threads of a warp and their accesses
coalesce. Work-items outside the ndrange (in a last, partial group) return at once. CUDA
has three axes: a four-dimensional ndrange's first two share z (`cuda_shape`), and the
kernel takes them apart again (the first is z divided by the second's extent).

Coarsening: a kernel whose work-groups share nothing (no barriers, no local memory) and
whose work-item is short and has no loops (`can_coarsen`) may run `COARSENING`
consecutive work-groups along the first axis in one thread block, each thread running
the work-item at its place in each of them. The body is then an internal function
called once per work-group and inlined; where all of the block's groups lie inside the
ndrange, the calls follow one another with no checks between them, so the loads of one
work-item are in flight while another's run (a thread with one load of four bytes keeps
too little memory traffic in flight to reach an H100's bandwidth). The runtime chooses
per launch: one block per `COARSENING` groups where there are groups enough to fill the
GPU that way (`CUDABackend._blocks`), else one block per group; the kernel tells the two
apart by the number of blocks it was launched with.

Dependent launch (sm_90 and newer): a kernel begins with `griddepcontrol.wait` and then
`griddepcontrol.launch_dependents`, before it touches memory, and the runtime launches it
with programmatic stream serialization. The next kernel in the stream may then be
scheduled as soon as every block of this one has started, and its blocks wait at entry
until this grid has completed and its memory is visible: the result is that of stream
order, and the gap between kernels (the last blocks' tail, then the next grid's start) is
hidden. Launched without it, or after anything but a kernel that lets it start early,
a kernel starts only when the work before it has ended, and the wait returns at once."""
from __future__ import annotations

import math

from llvmlite import ir

from kernelkit.analysis.loops import natural_loops
from kernelkit.compiler.launch_record import EntryPointBuilder, LaunchRecord
from kernelkit.compiler.llvm_types import ArrayValue, declared, i8, i32, i64, memory_type, ptr
from kernelkit.compiler.lowering import BodyLowering
from kernelkit.compiler.printf import printf_arguments
from kernelkit.ir.definitions import GROUP_ID, LOCAL_ID, LOCALMEM, Trait

from .libdevice import device_math, device_sincos
from .warps import WarpMembers, lower_subgroup

SHARED = 3
"""NVPTX's address space of shared memory (kk.localmem)."""

_AXES = "xyz"


def cuda_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A work-group's sizes, or a grid's blocks, along CUDA's axes from z to x: the shape
    itself up to three axes; of four, the first two as one (their product)."""
    if len(shape) <= 3:
        return tuple(shape)
    return (shape[0] * shape[1], *shape[2:])


COARSENING = 4
"""Work-groups per thread block along the first axis, where a kernel can be coarsened."""
MAX_COARSENED_OPS = 64
"""The longest work-item (in IR operations) that is coarsened: four copies of a longer one
side by side need more registers than a full block of threads can have each."""


def can_coarsen(function) -> bool:
    """Whether a kernel gains from coarsening: its work-groups share nothing (no barriers,
    no local memory, no subgroup operations, whose lanes must all reach them), and its
    work-item is short and straight (no loops: a loop keeps its own loads in flight, and
    its copies would run one after the other anyway)."""
    ops = list(function.ops())
    return len(ops) <= MAX_COARSENED_OPS and not natural_loops(function) and not any(
        op.has(Trait.BARRIER) or op.has(Trait.SUBGROUP) or op.definition is LOCALMEM
        for op in ops)


class ThreadFunctionBuilder(EntryPointBuilder):
    """Builds the kernel function and serves as the body lowering's environment."""

    def build(self) -> ir.Function:
        record_type = ir.ArrayType(i8, self.layout.size)
        function_type = ir.FunctionType(ir.VoidType(), [ir.PointerType(record_type)])
        llvm_function = ir.Function(self.module, function_type, self.symbol)
        llvm_function.calling_convention = "ptx_kernel"
        (record,) = llvm_function.args
        record.name = "record"
        record.add_attribute("byval")
        record.attributes.align = 8
        llvm_function.attributes.add("nounwind")
        builder = ir.IRBuilder(llvm_function.append_basic_block("entry"))
        self.dependent_launch = self.job.config.target.dependent_launch
        if self.dependent_launch:
            for instruction in ("griddepcontrol.wait;", "griddepcontrol.launch_dependents;"):
                builder.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), instruction,
                                          "~{memory}", side_effect=True), [])
        folded = len(cuda_shape(self.sizes))
        axes = [_AXES[folded - 1 - axis] for axis in range(folded)]
        local = [self.special_register(builder, "tid", a) for a in axes]
        group = [self.special_register(builder, "ctaid", a) for a in axes]
        if folded < self.ndim:   # the first two axes share z: a work-group's are constants
            local = self.unfold(builder, local, ir.Constant(i64, self.sizes[1]))
        self.add_module_flags()
        self.add_block_size(llvm_function)
        self.coarsening = COARSENING if can_coarsen(self.function) and folded == self.ndim \
            else 1
        if self.coarsening == 1:
            self.llvm_function = llvm_function
            self.lower_body(builder, record, local, group)
        else:
            self.coarsened_entry(builder, record, local, group, axes[0])
        return llvm_function

    def lower_body(self, builder, record, local, group, checked: bool = True) -> None:
        """The body of the work-item at `local` in work-group `group`, at the builder;
        `checked`: work-items outside the ndrange return at once (else the caller
        checked)."""
        launch = LaunchRecord(builder, record, self.layout, self.debug)
        self.extents, self.error_record = launch.extents, launch.error_record
        self.arguments = launch.arguments
        if len(group) < self.ndim:   # the first two axes share z: the groups per launch
            group = self.unfold(builder, group, launch.group_counts[1])
        self.local, self.group = local, group
        self.allocate_storage(builder)
        if not checked:
            BodyLowering(self, self.function, self.llvm_function).lower(builder)
            return
        inside = None
        for axis in range(self.ndim):
            within = builder.icmp_unsigned("<", self.item_index(builder, axis),
                                           self.extents[axis])
            inside = within if inside is None else builder.and_(inside, within)
        if any(op.has(Trait.SUBGROUP) for op in self.function.ops()):
            self.warp = WarpMembers.at_entry(builder, self.linear_local(builder),
                                             math.prod(self.sizes), inside)
        body = self.llvm_function.append_basic_block("body")
        outside = self.llvm_function.append_basic_block("outside")
        builder.cbranch(inside, body, outside)
        builder.position_at_end(outside)
        builder.ret_void()
        builder.position_at_end(body)
        BodyLowering(self, self.function, self.llvm_function).lower(builder)

    def linear_local(self, builder) -> ir.Value:
        """The work-item's linear local index (C order), which is its thread's index in
        the block (x, CUDA's fastest axis, is the last axis)."""
        linear = self.local[0]
        for index, size in zip(self.local[1:], self.sizes[1:]):
            linear = builder.add(builder.mul(linear, ir.Constant(i64, size)), index)
        return linear

    @staticmethod
    def unfold(builder, positions: list, second_extent: ir.Value) -> list:
        """Positions along CUDA's axes (z first) as positions along the ndrange's four:
        z = first * second_extent + second."""
        shared = positions[0]
        return [builder.udiv(shared, second_extent), builder.urem(shared, second_extent),
                *positions[1:]]

    def item_index(self, builder, axis: int, group=None) -> ir.Value:
        group = self.group[axis] if group is None else group
        return builder.add(builder.mul(group, ir.Constant(i64, self.sizes[axis])),
                           self.local[axis])

    def coarsened_entry(self, builder, record, local, block, first_axis: str) -> None:
        """The entry of a coarsened kernel (see the module's doc): the body becomes
        `<symbol>_item(record, local..., group...)`, called for each of the block's
        work-groups along the first axis."""
        ndim, factor = self.ndim, self.coarsening
        item_type = ir.FunctionType(ir.VoidType(), [record.type] + [i64] * (2 * ndim))
        item = ir.Function(self.module, item_type, self.symbol + "_item")
        item.linkage = "internal"
        item.attributes.add("alwaysinline")
        item.attributes.add("nounwind")
        self.llvm_function = item
        item_builder = ir.IRBuilder(item.append_basic_block("entry"))
        self.lower_body(item_builder, item.args[0], list(item.args[1:1 + ndim]),
                        list(item.args[1 + ndim:]), checked=False)

        entry = builder.function
        launch = LaunchRecord(builder, record, self.layout, False)
        extents, groups = launch.extents, launch.group_counts
        self.local = local
        inside = ir.Constant(ir.IntType(1), 1)
        for axis in range(1, ndim):
            inside = builder.and_(inside, builder.icmp_unsigned(
                "<", self.item_index(builder, axis, block[axis]), extents[axis]))
        # Launched with fewer blocks than groups along the first axis: `factor` each.
        blocks = self.special_register(builder, "nctaid", first_axis)
        coarse = builder.icmp_unsigned("<", blocks, groups[0])
        first = builder.select(coarse, builder.mul(block[0], ir.Constant(i64, factor)),
                               block[0])
        last = builder.add(first, ir.Constant(i64, factor))
        whole = builder.and_(coarse, builder.icmp_unsigned(
            "<=", builder.mul(last, ir.Constant(i64, self.sizes[0])), extents[0]))
        work, done = entry.append_basic_block("work"), entry.append_basic_block("done")
        straight, checked = entry.append_basic_block("whole"), entry.append_basic_block("each")
        builder.cbranch(inside, work, done)
        builder.position_at_end(done)
        builder.ret_void()

        def call(builder, group):
            builder.call(item, [record] + list(local) + [group] + list(block[1:]))

        builder.position_at_end(work)
        builder.cbranch(whole, straight, checked)
        # Every group of the block lies inside the ndrange: one call after the other.
        builder.position_at_end(straight)
        for k in range(factor):
            call(builder, builder.add(first, ir.Constant(i64, k)))
        builder.branch(done)
        # A last, partial block, or one group per block: each group if inside.
        builder.position_at_end(checked)
        count = builder.select(coarse, ir.Constant(i64, factor), ir.Constant(i64, 1))
        end = builder.add(first, count)
        head, step = entry.append_basic_block("each.head"), entry.append_basic_block("each.do")
        next_ = entry.append_basic_block("each.next")
        builder.branch(head)
        builder.position_at_end(head)
        group = builder.phi(i64)
        group.add_incoming(first, checked)
        more = builder.and_(builder.icmp_unsigned("<", group, end), builder.icmp_unsigned(
            "<", self.item_index(builder, 0, group), extents[0]))
        builder.cbranch(more, step, done)
        builder.position_at_end(step)
        call(builder, group)
        builder.branch(next_)
        builder.position_at_end(next_)
        following = builder.add(group, ir.Constant(i64, 1))
        group.add_incoming(following, next_)
        builder.branch(head)

    def special_register(self, builder, name: str, axis: str) -> ir.Value:
        register = f"llvm.nvvm.read.ptx.sreg.{name}.{axis}"
        return builder.zext(builder.call(declared(self.module, register, i32, []), []), i64)

    def allocate_storage(self, builder) -> None:
        """Local memory: a shared-memory array per `kk.localmem`; private arrays: a
        per-thread stack array, allocated once at the start."""
        self.storage = {}
        for index, op in enumerate(op for op in self.function.ops()
                                   if op.has(Trait.ALLOCATION)):
            count = 1
            for extent in op.type.shape:
                count *= extent
            element = memory_type(op.type.dtype)
            if op.definition is LOCALMEM:
                variable = ir.GlobalVariable(self.module, ir.ArrayType(element, count),
                                             f"localmem{index}", addrspace=SHARED)
                variable.linkage = "internal"
                variable.align = 16
                variable.initializer = ir.Constant(variable.value_type, ir.Undefined)
                self.storage[op] = variable.gep([ir.Constant(i32, 0), ir.Constant(i32, 0)])
            else:
                storage = builder.alloca(element, size=count)
                storage.align = 16
                self.storage[op] = storage

    def add_block_size(self, llvm_function) -> None:
        """The block size is the work-group size, known here: ptxas then keeps to the
        registers a block of that size may have (rather than failing the launch)."""
        block = list(reversed(cuda_shape(self.sizes)))
        block += [1] * (3 - len(block))
        annotation = [llvm_function]
        for axis, size in zip(_AXES, block):
            annotation += [ir.MetaDataString(self.module, f"maxntid{axis}"),
                           ir.Constant(i32, size)]
        self.module.add_named_metadata("nvvm.annotations", annotation)

    def add_module_flags(self) -> None:
        """libdevice asks `__nvvm_reflect("__CUDA_FTZ")` whether to flush denormals: no."""
        flag = self.module.add_metadata([ir.Constant(i32, 4), ir.MetaDataString(
            self.module, "nvvm-reflect-ftz"), ir.Constant(i32, 0)])
        self.module.add_named_metadata("llvm.module.flags", flag)

    # -- KernelEnvironment ----------------------------------------------------------------

    def geometry(self, builder, position, axis):
        if position is LOCAL_ID:
            return self.local[axis]
        if position is GROUP_ID:
            return self.group[axis]
        return self.extents[axis]

    def allocation(self, builder, op):
        shape = [ir.Constant(i64, s) for s in op.type.shape]
        strides = [1]
        for extent in reversed(op.type.shape[1:]):
            strides.insert(0, strides[0] * extent)
        strides = [ir.Constant(i64, s) for s in strides]
        return ArrayValue(self.storage[op], shape, strides, op.type)

    def barrier(self, builder, after):
        name = "llvm.nvvm.barrier.cta.sync.aligned.all"
        builder.call(declared(self.module, name, ir.VoidType(), [i32]), [ir.Constant(i32, 0)])
        builder.branch(after)

    def barrier_any(self, builder, op, condition):
        name = "llvm.nvvm.barrier.cta.red.or.aligned.all"
        function = declared(self.module, name, ir.IntType(1), [i32, ir.IntType(1)])
        return builder.call(function, [ir.Constant(i32, 0), condition])

    def subgroup(self, builder, op, operands):
        return lower_subgroup(builder, op, operands, self.warp, self.job.config.target.arch,
                              self)

    def kernel_return(self, builder):
        builder.ret_void()

    def print(self, builder, format, values):
        """CUDA's `vprintf(format, buffer)`: the arguments packed in a local buffer."""
        text, args = printf_arguments(builder, format, values, self.string)
        vprintf = declared(self.module, "vprintf", i32, [ptr, ptr])
        if args:
            packed = ir.LiteralStructType([a.type for a in args])
            # In the entry block: a fixed stack slot, also where the body is inlined
            # into a loop (a coarsened kernel), which would otherwise save and restore
            # the stack around every call.
            entry = builder.function.entry_basic_block
            at_entry = ir.IRBuilder(entry)
            at_entry.position_at_start(entry)
            buffer = at_entry.alloca(packed)
            for index, value in enumerate(args):
                builder.store(value, builder.gep(buffer, [ir.Constant(i32, 0),
                                                          ir.Constant(i32, index)]))
        else:
            buffer = ir.Constant(ptr, None)
        builder.call(vprintf, [self.string(text), buffer])

    def math(self, builder, name, args, type):
        return device_math(builder, name, args, type)

    fuses_sincos = True     # libdevice's sincos

    def sincos(self, builder, x, type):
        return device_sincos(builder, x, type)
