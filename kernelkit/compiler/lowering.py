"""Typed IR -> LLVM IR (llvmlite.ir), shared by every target.

`BodyLowering` turns the body of a kernel into LLVM instructions. Everything that
depends on the hardware (work-item geometry, barriers, where arguments and local
memory come from, printing, math libraries, what an out-of-bounds access does) is
asked of a `KernelEnvironment` that the target supplies."""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..analysis.regions import ends_with_barrier, region_dominance, region_order
from ..ir import definitions as D
from ..ir import types as T
from ..ir.definitions import OpDefinition, Trait
from ..ir.function import Function
from ..ir.ops import BlockParam, Op, Value, is_op

i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
ptr = ir.PointerType()


def llvm_type(type: T.IRType) -> ir.Type:
    """The type of a value in a register."""
    if isinstance(type, T.ScalarType):
        if type.is_bool:
            return i1
        if type.is_float:
            return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[type.bits]
        return ir.IntType(type.bits)
    if isinstance(type, T.TupleType):
        return ir.LiteralStructType([llvm_type(t) for t in type.elements])
    if isinstance(type, T.VoidType):
        return ir.VoidType()
    raise TypeError(f"no LLVM register type for {type.name}")


def memory_type(type: T.ScalarType) -> ir.Type:
    """The type of an array element in memory (bools are bytes, as in NumPy)."""
    return i8 if type.is_bool else llvm_type(type)


@dataclass
class ArrayValue:
    """An array in LLVM: element pointer, extents and strides (in elements)."""

    data: ir.Value
    shape: list[ir.Value]
    strides: list[ir.Value]
    type: T.ArrayType


def c_strides(builder: ir.IRBuilder, shape: list[ir.Value]) -> list[ir.Value]:
    strides = [ir.Constant(i64, 1)]
    for extent in reversed(shape[1:]):
        strides.insert(0, builder.mul(strides[0], extent))
    return strides


class LaunchRecord:
    """The launch record (`kernelkit.runtime.arguments.ArgumentLayout`) read at the start
    of a kernel from `record`, a pointer to it: extents of the ndrange, number of groups
    per axis, the error record (debug) and the arguments."""

    def __init__(self, builder: ir.IRBuilder, record: ir.Value, layout, debug: bool):
        def load(offset, type=i64):
            address = builder.gep(record, [ir.Constant(i64, offset)], source_etype=i8)
            return builder.load(address, typ=type)
        ndim = layout.ndim
        self.extents = [load(layout.ndrange_offset(d)) for d in range(ndim)]
        self.group_counts = [load(layout.groups_offset(d)) for d in range(ndim)]
        self.error_record = load(layout.error_record_offset, ptr) if debug else None
        self.arguments = []
        for field in layout.fields:
            type = field.type
            if isinstance(type, T.ArrayType):
                data = load(field.offset, ptr)
                shape = [load(field.offset + 8 * (1 + d)) for d in range(type.ndim)]
                if type.layout == "C":
                    strides = c_strides(builder, shape)
                else:
                    strides = [load(field.offset + 8 * (1 + type.ndim + d))
                               for d in range(type.ndim)]
                self.arguments.append(ArrayValue(data, shape, strides, type))
            else:
                self.arguments.append(load(field.offset, llvm_type(type)))


class KernelEnvironment:
    """What the target tells the body lowering. See `backends/cpu` and `backends/cuda`."""

    debug: bool = False

    def argument(self, index: int, param: BlockParam):
        """The value (or `ArrayValue`) of kernel argument `index`."""
        raise NotImplementedError

    def geometry(self, builder: ir.IRBuilder, position: OpDefinition, axis: int) -> ir.Value:
        """The work-item's `position` (LOCAL_ID, GROUP_ID or NDRANGE) along `axis`."""
        raise NotImplementedError

    def allocation(self, builder: ir.IRBuilder, op: Op) -> ArrayValue:
        raise NotImplementedError

    def barrier(self, builder: ir.IRBuilder, after: ir.Block) -> None:
        """Emit a work-group barrier; execution continues at `after`."""
        raise NotImplementedError

    def barrier_any(self, builder: ir.IRBuilder, op: Op, condition: ir.Value):
        """A work-group barrier after which every work-item knows whether `condition`
        held for any of them: the result (an i1), or None where the target gives it to
        the code after the barrier another way."""
        raise NotImplementedError

    def kernel_return(self, builder: ir.IRBuilder) -> None:
        raise NotImplementedError

    def out_of_bounds(self, builder: ir.IRBuilder, loc, axis: int, indices: list[ir.Value],
                      shape: list[ir.Value]) -> None:
        """Report an out-of-bounds access (`indices[axis]` is outside `shape[axis]`) and
        end the block."""
        raise NotImplementedError

    def print(self, builder: ir.IRBuilder, format: str, values: list[tuple[ir.Value, T.ScalarType]]):
        raise NotImplementedError

    def math(self, builder: ir.IRBuilder, name: str, args: list[ir.Value], type: T.ScalarType):
        raise NotImplementedError

    def array_access(self, instruction: ir.Instruction) -> None:
        """Called with every load and store of array elements (e.g. to attach metadata)."""

    def is_demoted(self, value: Value) -> bool:
        return False

    def store_demoted(self, builder: ir.IRBuilder, value: Value, llvm_value: ir.Value) -> None:
        raise NotImplementedError

    def load_demoted(self, builder: ir.IRBuilder, value: Value) -> ir.Value:
        raise NotImplementedError

    def address_space(self, array: T.ArrayType) -> int:
        return 0


class EntryPointBuilder(KernelEnvironment):
    """What every target's kernel entry point builder shares: the job's facts, the
    argument layout, the kernel arguments once read, bounds-check locations, strings."""

    def __init__(self, module: ir.Module, function: Function, job, symbol: str):
        from ..runtime.arguments import ArgumentLayout
        self.module = module
        self.function = function
        self.job = job
        self.symbol = symbol
        self.debug = job.config.debug
        self.sizes = job.config.workgroupsize
        self.ndim = len(self.sizes)
        self.layout = ArgumentLayout(tuple(p.type for p in function.params), self.ndim)
        self.locations: list = []      # source locations of bounds checks, by number
        self.strings: dict[str, ir.Value] = {}
        self.arguments: list = []
        self.error_record = None

    def argument(self, index, param):
        return self.arguments[index]

    def out_of_bounds(self, builder, loc, axis, indices, shape):
        self.locations.append(loc)
        record_out_of_bounds(builder, self.error_record, len(self.locations) - 1, axis,
                             indices, shape)

    def string(self, text: str) -> ir.Value:
        return global_string(self.module, self.strings, text)


_INT_COMPARE = {D.COMPARISONS[name]: symbol for name, symbol in
                {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items()}
_FLOAT_COMPARE = {D.COMPARISONS[name]: symbol for name, symbol in
                  {"eq": ("==", True), "ne": ("!=", False), "lt": ("<", True),
                   "le": ("<=", True), "gt": (">", True), "ge": (">=", True)}.items()}


class BodyLowering:
    """Lowers a kernel's body, or the part of it a target runs at once (a region between
    barriers), into the LLVM function at a builder's position.

    `values` may hold LLVM values known beforehand (e.g. computed once per work-group).
    A value used but neither defined in the part being lowered nor demoted by the
    environment is a pure operation recomputed in the prologue, the block where the
    lowering starts, which dominates all of it (index arithmetic, constants, geometry)."""

    def __init__(self, env: KernelEnvironment, function: Function, llvm_function: ir.Function,
                 values: dict | None = None, prologue: ir.IRBuilder | None = None):
        self.env = env
        self.function = function
        self.llvm_function = llvm_function
        self.module = llvm_function.module
        self.values: dict[Value, object] = dict(values or {})
        self.prologue = prologue
        self.non_negative: NonNegative | None = None   # made at the first array access
        self.blocks: dict = {}
        self.phis: dict[BlockParam, ir.PhiInstr] = {}
        self.region_exit = None
        self.dominated = None   # within a region: whether a definition reaches a block
        self.block = None       # the block being lowered
        for index, param in enumerate(function.params):
            self.values.setdefault(param, env.argument(index, param))

    # -- driver ---------------------------------------------------------------------------

    def lower(self, builder: ir.IRBuilder, start=None, region_exit=None, start_args=(),
              bindings=()) -> None:
        """Lower the body from `start` (the entry by default) at the builder's block.

        With `region_exit`, a block that ends with a barrier (see the split-barriers pass)
        ends the lowering there: `region_exit(builder, successor, args)` emits how control
        leaves (`args`: the LLVM values of the branch arguments after the barrier), and
        the code after the barrier is not followed. A `start` other than the entry whose
        parameters the environment does not keep gets `start_args` for them; `bindings`
        are (value, value it equals) pairs made known in the prologue."""
        function = self.function
        start = start or function.entry
        self.region_exit = region_exit
        order = self.region_blocks(start)
        if region_exit is not None:
            self.dominated = region_dominance(order)
        for block in order:
            self.blocks[block] = self.llvm_function.append_basic_block()
        # Phis first, for every block: a branch may reach a block before it is lowered.
        for block in order:
            if block is function.entry or not block.params or block is start and not start_args:
                continue  # kernel arguments, or kept by the environment across a barrier
            builder_at = ir.IRBuilder(self.blocks[block])
            for param in block.params:
                self.phis[param] = builder_at.phi(llvm_type(param.type))
        prologue_block = builder.block
        self.prologue = ir.IRBuilder(prologue_block)
        self.prologue.position_before(builder.branch(self.blocks[start]))
        for value, equal in bindings:
            self.define(self.prologue, value, self.use(self.prologue, equal))
        if start.params and start.params[0] in self.phis:
            assert len(start_args) == len(start.params), "a start block needs its arguments"
            for param, arg in zip(start.params, start_args):
                self.phis[param].add_incoming(self.use(self.prologue, arg), prologue_block)
        for block in order:
            self.block = block
            builder.position_at_end(self.blocks[block])
            for param in block.params:
                if param in self.phis:
                    self.define(builder, param, self.phis[param])
            ops = block.ops
            leaves_region = region_exit is not None and ends_with_barrier(block)
            if leaves_region:
                barrier = block.ops[-2]
                # A barrier_any has a part before the barrier: its work-item's vote.
                ops = block.ops[:-2] + ([barrier] if barrier.definition is D.BARRIER_ANY else [])
            for op in ops:
                self.lower_op(builder, op)
            if leaves_region:
                (successor,) = block.ops[-1].successors
                region_exit(builder, successor, [self.use(builder, a) for a in successor.args])

    def region_blocks(self, start) -> list:
        """Blocks reachable from `start` (not past a barrier when lowering a region), in
        reverse post-order so that definitions come before uses."""
        return region_order(start, self.successors)

    def successors(self, block) -> list:
        if self.region_exit is not None and ends_with_barrier(block):
            return []
        return block.successors

    def define(self, builder: ir.IRBuilder, value: Value, llvm_value) -> None:
        self.values[value] = llvm_value
        if self.env.is_demoted(value):
            self.env.store_demoted(builder, value, llvm_value)

    def use(self, builder: ir.IRBuilder, value: Value):
        if value in self.values and self.reaches(builder, value):
            return self.values[value]
        if self.env.is_demoted(value):
            return self.env.load_demoted(builder, value)
        # Defined in another part of the kernel and cheap: recomputed here.
        assert isinstance(value, Op) and (value.is_pure or value.has(Trait.ALLOCATION)), \
            f"{value!r} is used where it is not defined"
        in_region = self.values.pop(value, None)  # a definition that does not reach here
        self.lower_op(self.prologue, value)
        recomputed = self.values[value]
        if in_region is not None:
            self.values[value] = in_region
        return recomputed

    def reaches(self, builder: ir.IRBuilder, value: Value) -> bool:
        """Whether the value lowered for `value` is the one at the builder's position:
        within a region, a definition reaches only the blocks it dominates there (and
        none reach the prologue)."""
        if self.dominated is None or self.block is None:
            return True
        return self.dominated(value, None if builder is self.prologue else self.block)

    def lower_op(self, builder: ir.IRBuilder, op: Op) -> None:
        handler = LOWERINGS.get(op.definition)
        if handler is None:
            raise NotImplementedError(f"no LLVM lowering for '{op.opcode}'")
        result = handler(self, builder, op)
        if result is not None:
            self.define(builder, op, result)

    def operands(self, builder, op: Op) -> list:
        return [self.use(builder, v) for v in op.operands]

    # -- control flow ---------------------------------------------------------------------

    def branch_args(self, builder, successor) -> None:
        for param, arg in zip(successor.block.params, successor.args):
            self.phis[param].add_incoming(self.use(builder, arg), builder.block)

    def op_br(self, builder, op: Op):
        (successor,) = op.successors
        self.branch_args(builder, successor)
        builder.branch(self.blocks[successor.block])

    def op_cbr(self, builder, op: Op):
        condition = self.use(builder, op.operands[0])
        then, orelse = op.successors
        self.branch_args(builder, then)
        self.branch_args(builder, orelse)
        builder.cbranch(condition, self.blocks[then.block], self.blocks[orelse.block])

    def op_ret(self, builder, op: Op):
        self.env.kernel_return(builder)

    def op_assume(self, builder, op: Op):
        """What a target checked before choosing this version of the kernel."""

    def op_barrier_any(self, builder, op: Op):
        return self.env.barrier_any(builder, op, self.use(builder, op.operands[0]))

    def op_barrier(self, builder, op: Op):
        after = self.llvm_function.append_basic_block("after_barrier")
        self.env.barrier(builder, after)
        builder.position_at_end(after)

    # -- values ---------------------------------------------------------------------------

    def op_const(self, builder, op: Op):
        value = op.attrs["value"]
        return ir.Constant(llvm_type(op.type), int(value) if not op.type.is_float else value)

    def op_tuple(self, builder, op: Op):
        result = ir.Constant(llvm_type(op.type), ir.Undefined)
        for index, value in enumerate(self.operands(builder, op)):
            result = builder.insert_value(result, value, index)
        return result

    def op_extract(self, builder, op: Op):
        return builder.extract_value(self.use(builder, op.operands[0]), op.attrs["index"])

    def op_position(self, builder, op: Op):
        return self.env.geometry(builder, op.definition, op.attrs["axis"])

    def op_select(self, builder, op: Op):
        return builder.select(*self.operands(builder, op))

    def op_cast(self, builder, op: Op):
        return convert(builder, self.use(builder, op.operands[0]), op.operands[0].type, op.type)

    def op_math(self, builder, op: Op):
        return self.env.math(builder, op.definition.member.name, self.operands(builder, op),
                             op.operands[0].type)

    def op_print(self, builder, op: Op):
        values = [(self.use(builder, v), v.type) for v in op.operands]
        self.env.print(builder, op.attrs["format"], values)

    # -- arithmetic -----------------------------------------------------------------------

    def op_binary(self, builder, op: Op):
        a, b = self.operands(builder, op)
        return _BINARY_HANDLERS[op.definition](builder, a, b, op.operands[0].type, self.env)

    def op_compare(self, builder, op: Op):
        a, b = self.operands(builder, op)
        type = op.operands[0].type
        if type.is_float:
            symbol, ordered = _FLOAT_COMPARE[op.definition]
            compare = builder.fcmp_ordered if ordered else builder.fcmp_unordered
            return compare(symbol, a, b)
        compare = builder.icmp_signed if type.is_signed else builder.icmp_unsigned
        return compare(_INT_COMPARE[op.definition], a, b)

    def op_neg(self, builder, op: Op):
        (a,) = self.operands(builder, op)
        return builder.fneg(a) if op.type.is_float else builder.neg(a)

    def op_not(self, builder, op: Op):
        (a,) = self.operands(builder, op)
        return builder.not_(a)

    def op_abs(self, builder, op: Op):
        (a,) = self.operands(builder, op)
        if op.type.is_float:
            return call_intrinsic(builder, "llvm.fabs", [a])
        if not op.type.is_signed:
            return a
        return builder.select(builder.icmp_signed("<", a, ir.Constant(a.type, 0)),
                              builder.neg(a), a)

    # -- memory ---------------------------------------------------------------------------

    def array(self, value: Value) -> ArrayValue:
        return self.use(None, value)

    def op_dim(self, builder, op: Op):
        return self.array(op.operands[0]).shape[op.attrs["axis"]]

    def op_allocation(self, builder, op: Op):
        self.values[op] = self.env.allocation(builder, op)

    def address(self, builder, op: Op, count: int):
        array = self.array(op.operands[0])
        written = self.operands(builder, op)[1:1 + count]
        indices = [self.wrap_negative(builder, value, index, extent) for value, index, extent
                   in zip(op.operands[1:1 + count], written, array.shape)]
        if self.env.debug:
            for axis in range(count):
                self.check_bounds(builder, op, axis, indices, written, array.shape)
        offset = None
        for index, stride in zip(indices, array.strides):
            term = index if _is_one(stride) else builder.mul(index, stride)
            offset = term if offset is None else builder.add(offset, term)
        if offset is None:
            offset = ir.Constant(i64, 0)
        return builder.gep(array.data, [offset], source_etype=memory_type(array.type.dtype))

    def wrap_negative(self, builder, value: Value, index: ir.Value, extent: ir.Value):
        """A negative index counts from the end, as in Python and NumPy: `index + extent`
        where `index < 0`. Indices that are never negative (see `NonNegative`), and those
        the kernel wrote as unsigned numbers, are used as they are."""
        if self.non_negative is None:
            self.non_negative = NonNegative(self.function)
        if self.non_negative(value) or _is_unsigned_index(value):
            return index
        if is_op(value, D.CONST):
            return builder.add(index, extent)
        negative = builder.icmp_signed("<", index, ir.Constant(index.type, 0))
        return builder.select(negative, builder.add(index, extent), index)

    def check_bounds(self, builder, op: Op, axis: int, indices, written, shape) -> None:
        """`indices` (after wrapping negative ones) must lie in `shape`; an error names
        the indices as the kernel `written` them."""
        inside = builder.icmp_unsigned("<", indices[axis], shape[axis])
        fail = self.llvm_function.append_basic_block("out_of_bounds")
        good = self.llvm_function.append_basic_block("in_bounds")
        builder.cbranch(inside, good, fail)
        builder.position_at_end(fail)
        self.env.out_of_bounds(builder, op.loc, axis, written, shape)
        builder.position_at_end(good)

    def op_load(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        value = builder.load(address, typ=memory_type(array_type.dtype))
        self.env.array_access(value)
        if array_type.const:
            # Const arrays are read-only for the whole launch.
            value.set_metadata("invariant.load", self.module.add_metadata([]))
        if array_type.dtype.is_bool:
            value = builder.icmp_unsigned("!=", value, ir.Constant(i8, 0))
        return value

    def op_store(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        value = self.use(builder, op.operands[-1])
        if array_type.dtype.is_bool:
            value = builder.zext(value, i8)
        self.env.array_access(builder.store(value, address))

    def op_atomic(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        value = self.use(builder, op.operands[-1])
        dtype = array_type.dtype
        name = op.definition.member
        if dtype.is_float:
            llvm_op = {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax",
                       "exchange": "xchg"}[name]
        else:
            llvm_op = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
                       "exchange": "xchg", "min": "min" if dtype.is_signed else "umin",
                       "max": "max" if dtype.is_signed else "umax"}[name]
        return builder.atomic_rmw(llvm_op, address, value, "monotonic")

    def op_atomic_cas(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        expected, new = (self.use(builder, v) for v in op.operands[-2:])
        dtype = array_type.dtype
        if dtype.is_float:
            as_int = ir.IntType(dtype.bits)
            pair = builder.cmpxchg(address, builder.bitcast(expected, as_int),
                                   builder.bitcast(new, as_int), "monotonic", "monotonic")
            return builder.bitcast(builder.extract_value(pair, 0), llvm_type(dtype))
        pair = builder.cmpxchg(address, expected, new, "monotonic", "monotonic")
        return builder.extract_value(pair, 0)


def _is_one(value) -> bool:
    return isinstance(value, ir.Constant) and value.constant == 1


def _is_unsigned_index(value: Value) -> bool:
    """An index the kernel wrote as an unsigned number (converted to the index type by
    the frontend): it never counts from the end, however large."""
    return is_op(value, D.CAST) and \
        not value.operands[0].type.is_signed and not value.operands[0].type.is_float


class NonNegative:
    """Which integer values of a function are never negative, so that indexing with them
    needs no wrapping. A value's lower bound, where one is known: constants; 0 for
    work-item geometry, array extents and unsigned numbers widened; and what 64-bit
    arithmetic makes of bounds, assuming it does not overflow 64 bits (`i + 1 - 1` is
    never negative, as a stencil's `u[r - 1, c]` with `r = i + 1`). A block parameter (a
    loop counter) is never negative when every value passed to it is, assuming it is
    itself (counting up from 0 by steps >= 0). Narrower integers wrap around in NumPy's
    arithmetic, so their sums and products have no bound."""

    def __init__(self, function: Function):
        incoming: dict[BlockParam, list[Value]] = {}
        for block in function.blocks:
            for op in block.ops:
                for successor in op.successors:
                    for param, arg in zip(successor.block.params, successor.args):
                        incoming.setdefault(param, []).append(arg)
        entry_params = set(function.entry.params) if function.blocks else set()
        self.assumed = {p for p in incoming if p not in entry_params and _is_integer(p.type)}
        while True:
            self.memo: dict[Value, int | None] = {}
            dropped = {p for p in self.assumed if not all(self(a) for a in incoming[p])}
            if not dropped:
                return
            self.assumed -= dropped

    def __call__(self, value: Value) -> bool:
        bound = self.lower_bound(value)
        return bound is not None and bound >= 0

    def lower_bound(self, value: Value, depth: int = 0) -> int | None:
        if value not in self.memo:
            self.memo[value] = self.decide(value, depth + 1) if depth < 64 else None
        return self.memo[value]

    def decide(self, value: Value, depth: int) -> int | None:
        if not _is_integer(value.type):
            return None
        if not value.type.is_signed:
            return 0
        if isinstance(value, BlockParam):
            return 0 if value in self.assumed else None
        kind, operands = value.definition, value.operands
        if kind is D.CONST:
            return value.attrs["value"]
        if kind.has(Trait.POSITION) or kind is D.DIM:
            return 0
        if kind is D.CAST:
            source = operands[0].type
            if not isinstance(source, T.ScalarType) or source.is_float:
                return None
            if not source.is_signed:
                return 0 if source.bits < value.type.bits else None  # below the sign bit
            return self.lower_bound(operands[0], depth) \
                if source.bits <= value.type.bits else None
        if kind is D.EXTRACT:
            tuple_op = operands[0]
            if is_op(tuple_op, D.TUPLE):
                return self.lower_bound(tuple_op.operands[value.attrs["index"]], depth)
            return None
        bounds = [self.lower_bound(v, depth) for v in operands]
        known = [b for b in bounds if b is not None]
        arithmetic = D.ARITHMETIC
        if kind is arithmetic["add"] and value.type.bits == 64 and len(known) == 2:
            return known[0] + known[1]
        if kind is arithmetic["sub"] and value.type.bits == 64 and bounds[0] is not None \
                and is_op(operands[1], D.CONST):
            return bounds[0] - operands[1].attrs["value"]
        never_negative = len(known) == len(bounds) and min(known) >= 0
        if kind is arithmetic["mul"] and value.type.bits == 64 and never_negative:
            return known[0] * known[1]
        if kind in _KEEPS_NON_NEGATIVE and never_negative:
            return 0
        if kind is arithmetic["min"] and len(known) == 2:
            return min(known)
        if kind is arithmetic["mod"]:
            return 0 if bounds[1] is not None and bounds[1] >= 0 else None  # Python's %
        if kind is arithmetic["max"] and known:
            return max(known)
        if kind is arithmetic["and"] and any(b >= 0 for b in known):
            return 0
        if kind is D.SELECT and bounds[1] is not None and bounds[2] is not None:
            return min(bounds[1], bounds[2])
        return None


# Never negative where their operands are not.
_KEEPS_NON_NEGATIVE = {D.ARITHMETIC[name] for name in ("floordiv", "shr", "or", "xor")}


def _is_integer(type: T.IRType) -> bool:
    return isinstance(type, T.ScalarType) and type.is_integer


# -- conversions and arithmetic -----------------------------------------------------------

def convert(builder: ir.IRBuilder, value: ir.Value, source: T.ScalarType,
            target: T.ScalarType) -> ir.Value:
    if source.strong == target.strong:
        return value
    to = llvm_type(target)
    if target.is_bool:
        if source.is_float:
            return builder.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
        return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
    if source.is_float and target.is_float:
        return builder.fpext(value, to) if target.bits > source.bits else builder.fptrunc(value, to)
    if source.is_float:
        name = "llvm.fptosi.sat" if target.is_signed else "llvm.fptoui.sat"
        return call_intrinsic(builder, name, [value], to)
    if target.is_float:
        if source.is_signed:
            return builder.sitofp(value, to)
        return builder.uitofp(value, to)
    if target.bits == source.bits:
        return value
    if target.bits < source.bits:
        return builder.trunc(value, to)
    return builder.sext(value, to) if source.is_signed else builder.zext(value, to)


def call_intrinsic(builder: ir.IRBuilder, name: str, args: list[ir.Value],
                   return_type: ir.Type | None = None) -> ir.Value:
    module = builder.module
    types = [a.type for a in args]
    suffix_types = ([return_type] if return_type is not None else []) + [types[0]]
    full_name = name + "".join("." + _mangle(t) for t in suffix_types)
    function = module.globals.get(full_name)
    if function is None:
        function_type = ir.FunctionType(return_type or types[0], types)
        function = ir.Function(module, function_type, full_name)
    return builder.call(function, args)


def _mangle(type: ir.Type) -> str:
    if isinstance(type, ir.IntType):
        return f"i{type.width}"
    if isinstance(type, ir.VectorType):
        return f"v{type.count}{_mangle(type.element)}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(type)]


def _add(b, x, y, t, env):
    return b.fadd(x, y) if t.is_float else b.add(x, y)


def _sub(b, x, y, t, env):
    return b.fsub(x, y) if t.is_float else b.sub(x, y)


def _mul(b, x, y, t, env):
    return b.fmul(x, y) if t.is_float else b.mul(x, y)


def _truediv(b, x, y, t, env):
    return b.fdiv(x, y)


def _float_divmod(b, x, y):
    """NumPy's floor division and remainder for floats."""
    zero = ir.Constant(x.type, 0.0)
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    adjust = b.and_(b.fcmp_unordered("!=", mod, zero),
                    b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
    mod = b.select(adjust, b.fadd(mod, y), mod)
    div = b.select(adjust, b.fsub(div, ir.Constant(x.type, 1.0)), div)
    floored = call_intrinsic(b, "llvm.floor", [div])
    floored = b.select(b.fcmp_ordered(">", b.fsub(div, floored), ir.Constant(x.type, 0.5)),
                       b.fadd(floored, ir.Constant(x.type, 1.0)), floored)
    quotient = b.fdiv(x, y)
    floordiv = b.select(b.fcmp_ordered("==", div, zero),
                        call_intrinsic(b, "llvm.copysign", [zero, quotient]), floored)
    floordiv = b.select(b.fcmp_ordered("==", y, zero), quotient, floordiv)
    mod = b.select(b.fcmp_ordered("==", mod, zero),
                   call_intrinsic(b, "llvm.copysign", [zero, y]), mod)
    return floordiv, mod


def _int_divmod(b, x, y, t):
    """Python's floor division and remainder for integers; division by zero gives 0 (as
    NumPy does) instead of a hardware trap."""
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    is_zero = b.icmp_unsigned("==", y, zero)
    if t.is_signed:
        # INT_MIN // -1 also traps on x86; dividing by 1 and negating gives NumPy's answer.
        minus_one = b.icmp_signed("==", y, ir.Constant(x.type, -1))
        safe = b.select(b.or_(is_zero, minus_one), one, y)
        quotient, remainder = b.sdiv(x, safe), b.srem(x, safe)
        quotient = b.select(minus_one, b.neg(x), quotient)
        adjust = b.and_(b.icmp_signed("!=", remainder, zero),
                        b.icmp_signed("<", b.xor(remainder, y), zero))
        quotient = b.select(adjust, b.sub(quotient, one), quotient)
        remainder = b.select(adjust, b.add(remainder, y), remainder)
    else:
        safe = b.select(is_zero, one, y)
        quotient, remainder = b.udiv(x, safe), b.urem(x, safe)
    return b.select(is_zero, zero, quotient), b.select(is_zero, zero, remainder)


def _floordiv(b, x, y, t, env):
    return (_float_divmod(b, x, y) if t.is_float else _int_divmod(b, x, y, t))[0]


def _mod(b, x, y, t, env):
    return (_float_divmod(b, x, y) if t.is_float else _int_divmod(b, x, y, t))[1]


def _pow(b, x, y, t, env):
    if t.is_float:
        return env.math(b, "pow", [x, y], t)
    # Exponentiation by squaring; a negative exponent gives 0 (NumPy raises instead).
    function = b.function
    start = b.block
    loop = function.append_basic_block("ipow")
    done = function.append_basic_block("ipow_done")
    one = ir.Constant(x.type, 1)
    b.branch(loop)
    b.position_at_end(loop)
    result = b.phi(x.type)
    base = b.phi(x.type)
    exponent = b.phi(x.type)
    result.add_incoming(one, start)
    base.add_incoming(x, start)
    exponent.add_incoming(y, start)
    odd = b.trunc(exponent, i1)
    new_result = b.select(odd, b.mul(result, base), result)
    new_base = b.mul(base, base)
    new_exponent = b.lshr(exponent, one) if not t.is_signed else b.ashr(exponent, one)
    body_end = b.block
    result.add_incoming(new_result, body_end)
    base.add_incoming(new_base, body_end)
    exponent.add_incoming(new_exponent, body_end)
    positive = b.icmp_signed(">", new_exponent, ir.Constant(x.type, 0)) if t.is_signed else \
        b.icmp_unsigned("!=", new_exponent, ir.Constant(x.type, 0))
    b.cbranch(positive, loop, done)
    b.position_at_end(done)
    if t.is_signed:
        negative = b.icmp_signed("<", y, ir.Constant(x.type, 0))
        return b.select(negative, ir.Constant(x.type, 0),
                        b.select(b.icmp_signed("==", y, ir.Constant(x.type, 0)), one, new_result))
    return b.select(b.icmp_unsigned("==", y, ir.Constant(x.type, 0)), one, new_result)


def _min(b, x, y, t, env):
    if t.is_float:
        return b.select(b.fcmp_ordered("<", y, x), y, x)
    less = b.icmp_signed("<", y, x) if t.is_signed else b.icmp_unsigned("<", y, x)
    return b.select(less, y, x)


def _max(b, x, y, t, env):
    if t.is_float:
        return b.select(b.fcmp_ordered(">", y, x), y, x)
    greater = b.icmp_signed(">", y, x) if t.is_signed else b.icmp_unsigned(">", y, x)
    return b.select(greater, y, x)


def _and(b, x, y, t, env):
    return b.and_(x, y)


def _or(b, x, y, t, env):
    return b.or_(x, y)


def _xor(b, x, y, t, env):
    return b.xor(x, y)


def _shl(b, x, y, t, env):
    return b.shl(x, y)


def _shr(b, x, y, t, env):
    return b.ashr(x, y) if t.is_signed else b.lshr(x, y)


_BINARY_HANDLERS = {D.ARITHMETIC[name]: handler for name, handler in {
    "add": _add, "sub": _sub, "mul": _mul, "truediv": _truediv, "floordiv": _floordiv,
    "mod": _mod, "pow": _pow, "min": _min, "max": _max, "and": _and, "or": _or, "xor": _xor,
    "shl": _shl, "shr": _shr}.items()}

# How each kind of operation is lowered: one entry per definition (`ir/definitions.py`).
LOWERINGS = {
    D.BR: BodyLowering.op_br, D.CBR: BodyLowering.op_cbr, D.RET: BodyLowering.op_ret,
    D.ASSUME: BodyLowering.op_assume, D.BARRIER: BodyLowering.op_barrier,
    D.BARRIER_ANY: BodyLowering.op_barrier_any, D.CONST: BodyLowering.op_const,
    D.TUPLE: BodyLowering.op_tuple, D.EXTRACT: BodyLowering.op_extract,
    D.LOCAL_ID: BodyLowering.op_position, D.GROUP_ID: BodyLowering.op_position,
    D.NDRANGE: BodyLowering.op_position, D.SELECT: BodyLowering.op_select,
    D.CAST: BodyLowering.op_cast, D.PRINT: BodyLowering.op_print,
    D.UNARY["neg"]: BodyLowering.op_neg, D.UNARY["not"]: BodyLowering.op_not,
    D.UNARY["invert"]: BodyLowering.op_not, D.UNARY["abs"]: BodyLowering.op_abs,
    D.DIM: BodyLowering.op_dim, D.LOCALMEM: BodyLowering.op_allocation,
    D.PRIVATE: BodyLowering.op_allocation, D.LOAD: BodyLowering.op_load,
    D.STORE: BodyLowering.op_store, D.ATOMIC_CAS: BodyLowering.op_atomic_cas,
    **{definition: BodyLowering.op_binary for definition in D.ARITHMETIC.values()},
    **{definition: BodyLowering.op_compare for definition in D.COMPARISONS.values()},
    **{definition: BodyLowering.op_math for definition in D.MATH.values()},
    **{definition: BodyLowering.op_atomic for definition in D.ATOMICS.values()},
}


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


def global_string(module: ir.Module, cache: dict, text: str) -> ir.Value:
    """A pointer to `text` as a NUL-terminated constant of the module (one per text)."""
    if text not in cache:
        data = bytearray(text.encode() + b"\0")
        constant = ir.Constant(ir.ArrayType(i8, len(data)), data)
        variable = ir.GlobalVariable(module, constant.type, f"str{len(cache)}")
        variable.global_constant = True
        variable.linkage = "private"
        variable.initializer = constant
        cache[text] = variable.gep([ir.Constant(i32, 0), ir.Constant(i32, 0)])
    return cache[text]


def record_out_of_bounds(builder: ir.IRBuilder, record: ir.Value, location: int, axis: int,
                         indices: list, shape: list) -> None:
    """The first failing bounds check of a launch fills the error record (flag, location
    number, axis, ndim, indices, extents: what `ERROR_RECORD_FIELDS` describes); then the
    work-item stops."""
    flag = builder.cmpxchg(record, ir.Constant(i64, 0), ir.Constant(i64, 1),
                           "monotonic", "monotonic")
    first = builder.extract_value(flag, 1)
    write = builder.function.append_basic_block("record_error")
    leave = builder.function.append_basic_block("leave")
    builder.cbranch(first, write, leave)
    builder.position_at_end(write)
    values = [ir.Constant(i64, location), ir.Constant(i64, axis),
              ir.Constant(i64, len(indices)), *indices, *shape]
    for position, value in enumerate(values, start=1):
        builder.store(value, builder.gep(record, [ir.Constant(i64, position)],
                                         source_etype=i64))
    builder.branch(leave)
    builder.position_at_end(leave)
    builder.ret_void()


def lower_math(builder: ir.IRBuilder, name: str, args: list, type: T.ScalarType, library):
    """Math every target lowers alike (float16 through float32, isnan/isinf/isfinite,
    fmin/fmax); `library(builder, name, args, type)` lowers the rest."""
    if type.bits == 16:
        single = ir.FloatType()
        widened = [builder.fpext(a, single) for a in args]
        result = lower_math(builder, name, widened, T.float32, library)
        return result if result.type == i1 else builder.fptrunc(result, llvm_type(type))
    x = args[0]
    if name == "isnan":
        return builder.fcmp_unordered("uno", x, x)
    if name in ("isinf", "isfinite"):
        magnitude = call_intrinsic(builder, "llvm.fabs", [x])
        infinity = ir.Constant(x.type, float("inf"))
        return builder.fcmp_ordered("==" if name == "isinf" else "<", magnitude, infinity)
    if name in ("fmin", "fmax"):
        # NumPy's rule, with no choice left open between +0.0 and -0.0 (LLVM's minnum
        # leaves it, so the folded and the computed result could differ): the first
        # argument unless the second is smaller (larger) or the first is NaN.
        first, second = args
        keeps = builder.fcmp_ordered("<=" if name == "fmin" else ">=", first, second)
        keeps = builder.or_(keeps, builder.fcmp_unordered("uno", second, second))
        return builder.select(keeps, first, second)
    return library(builder, name, args, type)


def call_math_function(builder: ir.IRBuilder, symbol: str, args: list) -> ir.Value:
    """Call `symbol(args...)`, declaring it (all arguments and the result of one type)."""
    function = builder.module.globals.get(symbol)
    if function is None:
        type = args[0].type
        function = ir.Function(builder.module, ir.FunctionType(type, [type] * len(args)), symbol)
    return builder.call(function, args)
