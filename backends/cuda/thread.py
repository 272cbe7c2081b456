"""The CUDA target's kernel function: one work-item per CUDA thread, one work-group per
thread block. The kernel takes the launch record (`ArgumentLayout`) as one parameter by
value, so a launch passes a single buffer.

Axes: the last axis of the ndrange (the fastest-varying one, in C order) is CUDA's x, so
that neighbouring work-items are neighbouring threads of a warp and their accesses
coalesce. Work-items outside the ndrange (in a last, partial group) return at once."""
from __future__ import annotations

from llvmlite import ir

from kernelkit.compiler.lowering import (ArrayValue, BodyLowering, EntryPointBuilder,
                                         LaunchRecord, i8, i32, i64, memory_type,
                                         printf_arguments, ptr)

from .libdevice import device_math

SHARED = 3
"""NVPTX's address space of shared memory (kk.localmem)."""

_AXES = "xyz"


class ThreadFunctionBuilder(EntryPointBuilder):
    """Builds the kernel function and serves as the body lowering's environment."""

    def build(self) -> ir.Function:
        record_type = ir.ArrayType(i8, self.layout.size)
        function_type = ir.FunctionType(ir.VoidType(), [ir.PointerType(record_type)])
        llvm_function = ir.Function(self.module, function_type, self.symbol)
        llvm_function.calling_convention = "ptx_kernel"
        self.llvm_function = llvm_function
        (record,) = llvm_function.args
        record.name = "record"
        record.add_attribute("byval")
        record.attributes.align = 8
        llvm_function.attributes.add("nounwind")
        builder = ir.IRBuilder(llvm_function.append_basic_block("entry"))
        launch = LaunchRecord(builder, record, self.layout, self.debug)
        self.extents, self.error_record = launch.extents, launch.error_record
        self.arguments = launch.arguments
        axes = [_AXES[self.ndim - 1 - axis] for axis in range(self.ndim)]
        self.local = [self.special_register(builder, "tid", a) for a in axes]
        self.group = [self.special_register(builder, "ctaid", a) for a in axes]
        self.allocate_storage(builder)
        inside = None
        for axis in range(self.ndim):
            index = builder.add(builder.mul(self.group[axis], ir.Constant(i64, self.sizes[axis])),
                                self.local[axis])
            within = builder.icmp_unsigned("<", index, self.extents[axis])
            inside = within if inside is None else builder.and_(inside, within)
        body = llvm_function.append_basic_block("body")
        outside = llvm_function.append_basic_block("outside")
        builder.cbranch(inside, body, outside)
        builder.position_at_end(outside)
        builder.ret_void()
        builder.position_at_end(body)
        self.add_module_flags()
        BodyLowering(self, self.function, llvm_function).lower(builder)
        return llvm_function

    def special_register(self, builder, name: str, axis: str) -> ir.Value:
        register = f"llvm.nvvm.read.ptx.sreg.{name}.{axis}"
        function = self.module.globals.get(register) or \
            ir.Function(self.module, ir.FunctionType(i32, []), register)
        return builder.zext(builder.call(function, []), i64)

    def allocate_storage(self, builder) -> None:
        """Local memory: a shared-memory array per `kk.localmem`; private arrays: a
        per-thread stack array, allocated once at the start."""
        self.storage = {}
        for index, op in enumerate(op for op in self.function.ops()
                                   if op.opcode in ("localmem", "private")):
            count = 1
            for extent in op.type.shape:
                count *= extent
            element = memory_type(op.type.dtype)
            if op.opcode == "localmem":
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

    def add_module_flags(self) -> None:
        """libdevice asks `__nvvm_reflect("__CUDA_FTZ")` whether to flush denormals: no."""
        flag = self.module.add_metadata([ir.Constant(i32, 4), ir.MetaDataString(
            self.module, "nvvm-reflect-ftz"), ir.Constant(i32, 0)])
        self.module.add_named_metadata("llvm.module.flags", flag)

    # -- KernelEnvironment ----------------------------------------------------------------

    def geometry(self, builder, opcode, axis):
        if opcode == "local_id":
            return self.local[axis]
        if opcode == "group_id":
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
        function = self.module.globals.get(name) or \
            ir.Function(self.module, ir.FunctionType(ir.VoidType(), [i32]), name)
        builder.call(function, [ir.Constant(i32, 0)])
        builder.branch(after)

    def barrier_any(self, builder, op, condition):
        name = "llvm.nvvm.barrier.cta.red.or.aligned.all"
        function = self.module.globals.get(name) or \
            ir.Function(self.module, ir.FunctionType(ir.IntType(1), [i32, ir.IntType(1)]), name)
        return builder.call(function, [ir.Constant(i32, 0), condition])

    def kernel_return(self, builder):
        builder.ret_void()

    def print(self, builder, format, values):
        """CUDA's `vprintf(format, buffer)`: the arguments packed in a local buffer."""
        text, args = printf_arguments(builder, format, values, self.string)
        vprintf = self.module.globals.get("vprintf") or \
            ir.Function(self.module, ir.FunctionType(i32, [ptr, ptr]), "vprintf")
        if args:
            packed = ir.LiteralStructType([a.type for a in args])
            buffer = builder.alloca(packed)
            for index, value in enumerate(args):
                builder.store(value, builder.gep(buffer, [ir.Constant(i32, 0),
                                                          ir.Constant(i32, index)]))
        else:
            buffer = ir.Constant(ptr, None)
        builder.call(vprintf, [self.string(text), buffer])

    def math(self, builder, name, args, type):
        return device_math(builder, name, args, type)
