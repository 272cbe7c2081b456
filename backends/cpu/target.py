"""CPUTarget: kernels as native functions over a range of work-groups (host LLVM JIT).

The entry point is `void kernel(ptr args, i64 first_group, i64 end_group)`. Inside a
group, work-items are a loop nest (the last axis innermost, so the vectorizer sees
unit-stride accesses). A kernel with barriers becomes a state machine: each round runs
every work-item up to its next barrier, and every value live across a barrier is kept
per work-item in a slot of its own."""
from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.lowering import (ArrayValue, BodyLowering, KernelEnvironment,
                                         c_strides, call_intrinsic, i1, i8, i32, i64,
                                         llvm_type, memory_type, ptr)
from kernelkit.compiler.target import Target
from kernelkit.ir import types as T
from kernelkit.passes.liveness import live_across_barriers
from kernelkit.runtime.arguments import ArgumentLayout

# Math functions LLVM knows as intrinsics; the others are C library calls.
_INTRINSICS = {"sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "fabs", "floor",
               "ceil", "trunc", "rint", "pow", "copysign"}
_LIBM = {"expm1": "expm1", "log1p": "log1p", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
         "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc", "gamma": "tgamma",
         "lgamma": "lgamma", "cbrt": "cbrt", "atan2": "atan2", "hypot": "hypot"}


@functools.lru_cache(maxsize=1)
def _initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.lru_cache(maxsize=None)
def _target_machine(cpu: str, features: str, opt_level: int):
    _initialize_llvm()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=min(opt_level, 3),
                                        reloc="pic", codemodel="jitdefault")


@dataclass(frozen=True, slots=True)
class CPUTarget(Target):
    cpu: str
    features: str
    name: str = "cpu"

    @classmethod
    def host(cls) -> CPUTarget:
        _initialize_llvm()
        return cls(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())

    def machine(self, opt_level: int = 3):
        return _target_machine(self.cpu, self.features, opt_level)

    def passes(self) -> tuple[str, ...]:
        return ("split-barriers",)

    def triple(self) -> str:
        return llvm.get_process_triple()

    def datalayout(self) -> str:
        return str(self.machine().target_data)

    def emit_kernel(self, module: ir.Module, function, job) -> dict:
        builder = GroupFunctionBuilder(module, function, job)
        builder.build()
        return {"locations": builder.locations}

    def optimize(self, llvm_module, job) -> None:
        options = llvm.create_pipeline_tuning_options(speed_level=job.config.opt_level)
        options.loop_vectorization = True
        options.slp_vectorization = True
        options.loop_unrolling = True
        builder = llvm.create_pass_builder(self.machine(job.config.opt_level), options)
        manager = builder.getModulePassManager()
        manager.run(llvm_module, builder)

    def emit(self, llvm_module, job) -> bytes:
        return self.machine(job.config.opt_level).emit_object(llvm_module)

    def load(self, artifact: bytes, job) -> int:
        return _loader.load(artifact, entry_symbol(job))

    def assembly(self, llvm_module, job) -> str:
        return self.machine(job.config.opt_level).emit_assembly(llvm_module)


def entry_symbol(job) -> str:
    source = job.source
    digest = hashlib.sha256(repr((source.qualname, source.module, source.source_hash,
                                  source.argtypes, source.constants,
                                  job.config)).encode()).hexdigest()[:16]
    return f"kk_{source.function.__name__}_{digest}"


class _Loader:
    """Loads object files into JIT engines (one per object file: an engine that has been
    finalized does not reliably take more objects)."""

    def __init__(self):
        self.engines: list = []
        self.symbols: dict[str, int] = {}
        self.lock = threading.Lock()

    def load(self, artifact: bytes, symbol: str) -> int:
        with self.lock:
            if symbol in self.symbols:
                return self.symbols[symbol]
            _initialize_llvm()
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                CPUTarget.host().machine())
            object_file = llvm.ObjectFileRef.from_data(artifact)
            engine.add_object_file(object_file)
            engine.finalize_object()
            address = engine.get_function_address(symbol)
            assert address, f"symbol {symbol} not found after loading its object file"
            self.engines.append((engine, object_file))
            self.symbols[symbol] = address
            return address


_loader = _Loader()


class GroupFunctionBuilder(KernelEnvironment):
    """Builds the entry point and serves as the body lowering's environment."""

    def __init__(self, module: ir.Module, function, job):
        self.module = module
        self.function = function
        self.job = job
        self.debug = job.config.debug
        self.sizes = job.config.workgroupsize
        self.ndim = len(self.sizes)
        self.items = 1
        for size in self.sizes:
            self.items *= size
        self.layout = ArgumentLayout(tuple(p.type for p in function.params), self.ndim)
        self.has_barrier = any(op.opcode == "barrier" for op in function.ops())
        self.demoted = live_across_barriers(function) if self.has_barrier else set()
        self.demoted = {v for v in self.demoted if _needs_slot(v, function)}
        self.slots: dict = {}
        self.locations: list = []
        self.strings: dict[str, ir.GlobalVariable] = {}

    # -- the entry point ------------------------------------------------------------------

    def build(self) -> ir.Function:
        function_type = ir.FunctionType(ir.VoidType(), [ptr, i64, i64])
        llvm_function = ir.Function(self.module, function_type, entry_symbol(self.job))
        self.llvm_function = llvm_function
        args, first, end = llvm_function.args
        args.name, first.name, end.name = "args", "first_group", "end_group"
        args.add_attribute("noalias")
        llvm_function.attributes.add("nounwind")
        entry = llvm_function.append_basic_block("entry")
        builder = ir.IRBuilder(entry)
        self.entry_builder = builder
        self.read_header(builder, args)
        self.arguments = [self.read_argument(builder, args, field) for field in self.layout.fields]
        self.allocate_storage(builder)

        group_loop = llvm_function.append_basic_block("group_loop")
        group_body = llvm_function.append_basic_block("group_body")
        done = llvm_function.append_basic_block("done")
        builder.branch(group_loop)
        builder.position_at_end(group_loop)
        group = builder.phi(i64, "group")
        group.add_incoming(first, entry)
        builder.cbranch(builder.icmp_signed("<", group, end), group_body, done)
        builder.position_at_end(group_body)
        self.decompose_group(builder, group)
        if self.has_barrier:
            self.run_regions(builder)
        else:
            self.work_item_loops(builder, self.function.entry)
        group.add_incoming(builder.add(group, ir.Constant(i64, 1)), builder.block)
        builder.branch(group_loop)
        builder.position_at_end(done)
        builder.ret_void()
        return llvm_function

    def run_regions(self, builder) -> None:
        """Barriers cut the kernel into regions, each entered at the start or just after a
        barrier. A region runs as a loop over the work-items from its start up to the next
        barrier, which every work-item reaches alike; the region that comes next is the
        one after the barrier the first work-item stopped at. Each region is a plain loop,
        so the vectorizer sees it like a kernel without barriers."""
        function = self.llvm_function
        starts = [self.function.entry] + [block.successors[0] for block in self.function.blocks
                                          if ends_with_barrier(block)]
        self.region_ids = {block: index for index, block in enumerate(starts)}
        builder.store(ir.Constant(i32, 0), self.region)
        dispatch = function.append_basic_block("next_region")
        finished = function.append_basic_block("group_finished")
        builder.branch(dispatch)
        builder.position_at_end(dispatch)
        first_state = builder.gep(self.resume, [ir.Constant(i64, 0)], source_etype=i32)
        switch = builder.switch(builder.load(self.region, typ=i32), finished)
        for start, index in self.region_ids.items():
            block = function.append_basic_block(f"region{index}")
            switch.add_case(ir.Constant(i32, index), block)
            builder.position_at_end(block)
            self.work_item_loops(builder, start)
            builder.store(builder.load(first_state, typ=i32), self.region)
            builder.branch(dispatch)
        builder.position_at_end(finished)

    def read_header(self, builder, args) -> None:
        def load(offset):
            address = builder.gep(args, [ir.Constant(i64, offset)], source_etype=i8)
            return builder.load(address, typ=i64)
        self.extents = [load(self.layout.ndrange_offset(d)) for d in range(self.ndim)]
        self.group_counts = [load(self.layout.groups_offset(d)) for d in range(self.ndim)]
        if self.debug:
            address = builder.gep(args, [ir.Constant(i64, self.layout.error_record_offset)],
                                  source_etype=i8)
            self.error_record = builder.load(address, typ=ptr)

    def read_argument(self, builder, args, field):
        def load(offset, type):
            address = builder.gep(args, [ir.Constant(i64, offset)], source_etype=i8)
            return builder.load(address, typ=type)
        type = field.type
        if isinstance(type, T.ArrayType):
            data = load(field.offset, ptr)
            shape = [load(field.offset + 8 * (1 + d), i64) for d in range(type.ndim)]
            if type.layout == "C":
                strides = c_strides(builder, shape)
            else:
                strides = [load(field.offset + 8 * (1 + type.ndim + d), i64)
                           for d in range(type.ndim)]
            return ArrayValue(data, shape, strides, type)
        return load(field.offset, llvm_type(type))

    def allocate_storage(self, builder) -> None:
        self.allocations = {}
        self.private_bases = {}
        for op in self.function.ops():
            if op.opcode not in ("localmem", "private"):
                continue
            count = 1
            for extent in op.type.shape:
                count *= extent
            element = memory_type(op.type.dtype)
            per_item = op.opcode == "private" and self.has_barrier
            storage = builder.alloca(element, size=count * (self.items if per_item else 1))
            storage.align = 64
            if per_item:
                self.private_bases[op] = (storage, count)
            else:
                self.allocations[op] = storage
        if self.has_barrier:
            self.resume = builder.alloca(i32, size=self.items, name="resume")
            self.region = builder.alloca(i32, name="region")
            for value in sorted(self.demoted, key=lambda v: id(v)):
                slot = builder.alloca(llvm_type(value.type), size=self.items)
                self.slots[value] = slot

    def decompose_group(self, builder, group) -> None:
        """Group number -> group index per axis (row-major) and valid items per axis."""
        rest = group
        indices = []
        for axis in reversed(range(self.ndim)):
            if axis == 0:
                indices.insert(0, rest)
            else:
                indices.insert(0, builder.urem(rest, self.group_counts[axis]))
                rest = builder.udiv(rest, self.group_counts[axis])
        self.group_index = indices
        self.valid = []
        for axis, index in enumerate(indices):
            size = ir.Constant(i64, self.sizes[axis])
            remaining = builder.sub(self.extents[axis], builder.mul(index, size))
            smaller = builder.icmp_signed("<", remaining, size)
            self.valid.append(builder.select(smaller, remaining, size))

    def work_item_loops(self, builder, start, axis: int = 0) -> None:
        """for l[axis] in range(valid[axis]): ... (innermost: the body from `start`)."""
        function = self.llvm_function
        if axis == 0:
            self.local = [None] * self.ndim
        preheader = builder.block
        header = function.append_basic_block(f"item_loop{axis}")
        body = function.append_basic_block(f"item{axis}")
        latch = function.append_basic_block(f"item_next{axis}")
        after = function.append_basic_block(f"item_loop{axis}_end")
        builder.branch(header)
        builder.position_at_end(header)
        index = builder.phi(i64, f"local{axis}")
        index.add_incoming(ir.Constant(i64, 0), preheader)
        builder.cbranch(builder.icmp_signed("<", index, self.valid[axis]), body, after)
        builder.position_at_end(body)
        self.local[axis] = index
        if axis + 1 < self.ndim:
            self.work_item_loops(builder, start, axis + 1)
            builder.branch(latch)
        else:
            self.item_done = latch
            self.emit_item(builder, start)
        builder.position_at_end(latch)
        next_index = builder.add(index, ir.Constant(i64, 1))
        index.add_incoming(next_index, latch)
        builder.branch(header)
        builder.position_at_end(after)

    def emit_item(self, builder, start) -> None:
        """The body for one work-item, from `start` to a barrier or the end."""
        if self.has_barrier:
            flat = self.local[0]
            for axis in range(1, self.ndim):
                flat = builder.add(builder.mul(flat, ir.Constant(i64, self.sizes[axis])),
                                   self.local[axis])
            self.flat_item = flat
            self.private_pointers = {
                op: builder.gep(base, [builder.mul(flat, ir.Constant(i64, count))],
                                source_etype=memory_type(op.type.dtype))
                for op, (base, count) in self.private_bases.items()}
            self.state_address = builder.gep(self.resume, [flat], source_etype=i32)
        lowering = BodyLowering(self, self.function, self.llvm_function)
        lowering.lower(builder, start, region_exit=self.region_exit if self.has_barrier else None)

    def region_exit(self, builder, after) -> None:
        builder.store(ir.Constant(i32, self.region_ids[after]), self.state_address)
        builder.branch(self.item_done)

    # -- KernelEnvironment ----------------------------------------------------------------

    def argument(self, index, param):
        return self.arguments[index]

    def geometry(self, builder, opcode, axis):
        if opcode == "local_id":
            return self.local[axis]
        if opcode == "group_id":
            return self.group_index[axis]
        return self.extents[axis]

    def allocation(self, builder, op):
        storage = self.private_pointers[op] if op in self.private_bases else self.allocations[op]
        shape = [ir.Constant(i64, s) for s in op.type.shape]
        strides = [ir.Constant(i64, 1)]
        for extent in reversed(op.type.shape[1:]):
            strides.insert(0, ir.Constant(i64, strides[0].constant * extent))
        return ArrayValue(storage, shape, strides, op.type)

    def kernel_return(self, builder):
        if self.has_barrier:
            builder.store(ir.Constant(i32, -1), self.state_address)
        builder.branch(self.item_done)

    def is_demoted(self, value):
        return value in self.slots

    def slot_address(self, builder, value):
        return builder.gep(self.slots[value], [self.flat_item],
                           source_etype=llvm_type(value.type))

    def store_demoted(self, builder, value, llvm_value):
        builder.store(llvm_value, self.slot_address(builder, value))

    def load_demoted(self, builder, value):
        return builder.load(self.slot_address(builder, value), typ=llvm_type(value.type))

    def out_of_bounds(self, builder, loc, axis, indices, shape):
        self.locations.append(loc)
        record = self.error_record
        flag = builder.cmpxchg(record, ir.Constant(i64, 0), ir.Constant(i64, 1),
                               "monotonic", "monotonic")
        first = builder.extract_value(flag, 1)
        write = self.llvm_function.append_basic_block("record_error")
        leave = self.llvm_function.append_basic_block("leave")
        builder.cbranch(first, write, leave)
        builder.position_at_end(write)
        values = [ir.Constant(i64, len(self.locations) - 1), ir.Constant(i64, axis),
                  ir.Constant(i64, len(indices)), *indices, *shape]
        for position, value in enumerate(values, start=1):
            builder.store(value, builder.gep(record, [ir.Constant(i64, position)],
                                             source_etype=i64))
        builder.branch(leave)
        builder.position_at_end(leave)
        builder.ret_void()

    def print(self, builder, format, values):
        text, args = printf_arguments(builder, format, values, self.string)
        printf = self.module.globals.get("printf")
        if printf is None:
            printf = ir.Function(self.module, ir.FunctionType(i32, [ptr], var_arg=True), "printf")
        builder.call(printf, [self.string(text), *args])

    def string(self, text: str) -> ir.GlobalVariable:
        if text not in self.strings:
            data = bytearray(text.encode() + b"\0")
            constant = ir.Constant(ir.ArrayType(i8, len(data)), data)
            variable = ir.GlobalVariable(self.module, constant.type, f"str{len(self.strings)}")
            variable.global_constant = True
            variable.linkage = "private"
            variable.initializer = constant
            self.strings[text] = variable.gep([ir.Constant(i32, 0), ir.Constant(i32, 0)])
        return self.strings[text]

    def math(self, builder, name, args, type):
        return cpu_math(builder, name, args, type)


def ends_with_barrier(block) -> bool:
    return len(block.ops) >= 2 and block.ops[-2].opcode == "barrier"


def _needs_slot(value, function) -> bool:
    """Constants, kernel arguments and geometry are available everywhere already."""
    if getattr(value, "opcode", None) in ("const", "local_id", "group_id", "ndrange",
                                         "localmem", "private"):
        return False
    if value in function.params:
        return False
    return not isinstance(value.type, T.ArrayType)


def printf_arguments(builder, format: str, values, string):
    """Turn a kernel print format ('{}' per value) into a printf format and arguments."""
    pieces = format.replace("%", "%%").split("{}")
    pieces = [p.replace("{{", "{").replace("}}", "}") for p in pieces]
    text = pieces[0]
    args = []
    for (value, type), piece in zip(values, pieces[1:]):
        if type.is_bool:
            text += "%s"
            args.append(builder.select(value, string("True"), string("False")))
        elif type.is_float:
            text += "%g"
            args.append(value if type.bits == 64 else builder.fpext(value, ir.DoubleType()))
        elif type.is_signed:
            text += "%lld"
            args.append(value if type.bits == 64 else builder.sext(value, i64))
        else:
            text += "%llu"
            args.append(value if type.bits == 64 else builder.zext(value, i64))
        text += piece
    return text, args


def cpu_math(builder, name: str, args, type: T.ScalarType):
    if type.bits == 16:
        single = ir.FloatType()
        widened = [builder.fpext(a, single) for a in args]
        result = cpu_math(builder, name, widened, T.float32)
        return result if result.type == i1 else builder.fptrunc(result, llvm_type(type))
    (x, *rest) = args
    if name == "isnan":
        return builder.fcmp_unordered("uno", x, x)
    if name in ("isinf", "isfinite"):
        magnitude = call_intrinsic(builder, "llvm.fabs", [x])
        infinity = ir.Constant(x.type, float("inf"))
        if name == "isinf":
            return builder.fcmp_ordered("==", magnitude, infinity)
        return builder.fcmp_ordered("<", magnitude, infinity)
    if name == "fmod":
        return builder.frem(x, rest[0])
    if name in ("fmin", "fmax"):
        return call_intrinsic(builder, "llvm.minnum" if name == "fmin" else "llvm.maxnum", args)
    if name in _INTRINSICS:
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = _LIBM[name] + ("f" if type.bits == 32 else "")
    function = builder.module.globals.get(symbol)
    if function is None:
        function = ir.Function(builder.module, ir.FunctionType(x.type, [x.type] * len(args)),
                               symbol)
    return builder.call(function, args)


__all__ = ["CPUTarget"]
