"""Typed IR -> LLVM IR (llvmlite.ir), shared by every target.

`BodyLowering` turns the body of a kernel into LLVM instructions, one handler per kind
of operation (`LOWERINGS`). Everything that depends on the hardware (work-item geometry,
barriers, where arguments and local memory come from, printing, math libraries, what an
out-of-bounds access does) is asked of a `KernelEnvironment` that the target supplies
(`kernelkit.compiler.environment`). Arithmetic is `arithmetic`'s, math functions are
`math_lowering`'s, and types are `llvm_types`'."""
from __future__ import annotations

from llvmlite import ir

from ..analysis.bounds import NonNegative
from ..analysis.dominance import reverse_post_order
from ..ir import definitions as D
from ..ir import types as T
from ..ir.definitions import Trait
from ..ir.function import Function
from ..ir.ops import BlockParam, Op, Value, is_op
from ..runtime.bounds import ASSERTION_AXIS
from .arithmetic import binary, compare, convert
from .environment import KernelEnvironment
from .llvm_types import ArrayValue, declared, i1, i8, i64, llvm_type, memory_type
from .math_lowering import SINCOS, call_intrinsic, shared_sincos_arguments


def assume(builder: ir.IRBuilder, condition: ir.Value) -> ir.Instruction:
    """Tell LLVM that `condition` holds at the builder's position: a fact it may use
    (where `j > 0` holds, `j - 1` needs no wrapping from the end)."""
    return builder.call(declared(builder.module, "llvm.assume", ir.VoidType(), [i1]),
                        [condition])


class BodyLowering:
    """Lowers a kernel's body, or the part of it reachable from a given block, into the
    LLVM function at a builder's position.

    `values` may hold LLVM values known beforehand (e.g. computed once per work-group).
    A value used but neither defined in the part being lowered nor demoted by the
    environment is a pure operation recomputed in the prologue, the block where the
    lowering starts, which dominates all of it (index arithmetic, constants, geometry).

    A target that lowers the body in parts subclasses it: `successors` says where a part
    ends, `lower_block` how a block is lowered, and `reaches` which definitions may be
    used where."""

    def __init__(self, env: KernelEnvironment, function: Function, llvm_function: ir.Function,
                 values: dict | None = None, prologue: ir.IRBuilder | None = None):
        self.env = env
        self.function = function
        self.llvm_function = llvm_function
        self.module = llvm_function.module
        self.values: dict[Value, object] = dict(values or {})
        self.prologue = prologue
        self.non_negative: NonNegative | None = None   # made at the first array access
        self.scopes: dict | None = None     # made at the first access (`alias_scopes`)
        self.blocks: dict = {}
        self.phis: dict[BlockParam, ir.PhiInstr] = {}
        self.block = None       # the block being lowered
        # Values known beforehand for every work-item being lowered (op -> LLVM value): a
        # target that knows them (a CPU's row split) has them used, not lowered again.
        self.known: dict = {}
        self._sincos_arguments: frozenset | None = None   # `sincos_arguments`
        for index, param in enumerate(function.params):
            self.values.setdefault(param, env.argument(index, param))

    # -- driver ---------------------------------------------------------------------------

    def lower(self, builder: ir.IRBuilder, start=None, start_args=(), bindings=()) -> None:
        """Lower the body from `start` (the entry by default) at the builder's block.

        A `start` other than the entry whose parameters the environment does not keep
        gets `start_args` for them; `bindings` are (value, value it equals) pairs made
        known in the prologue."""
        function = self.function
        start = start or function.entry
        order = self.block_order(start)
        for block in order:
            self.blocks[block] = self.llvm_function.append_basic_block()
        # Phis first, for every block: a branch may reach a block before it is lowered.
        for block in order:
            if block is function.entry or not block.params or block is start and not start_args:
                continue  # kernel arguments, or kept by the environment
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
            self.lower_block(builder, block)

    def block_order(self, start) -> list:
        """The blocks reachable from `start` (through `successors`), in reverse post-order,
        so that definitions come before the uses they dominate."""
        return reverse_post_order(start, self.successors)

    def successors(self, block) -> list:
        return block.successors

    def lower_block(self, builder: ir.IRBuilder, block) -> None:
        for op in block.ops:
            self.lower_op(builder, op)

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
        unreached = self.values.pop(value, None)  # a definition that does not reach here
        self.lower_op(self.prologue, value)
        recomputed = self.values[value]
        if unreached is not None:
            self.values[value] = unreached
        return recomputed

    def reaches(self, builder: ir.IRBuilder, value: Value) -> bool:
        """Whether the value lowered for `value` is the one at the builder's position."""
        return True

    def lower_op(self, builder: ir.IRBuilder, op: Op) -> None:
        known = self.known.get(op)
        if known is not None:
            self.define(builder, op, known)
            return
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
        self.env.before_branch(builder, self.function, self.block, (successor.block,))
        self.branch_args(builder, successor)
        self.loop_metadata(builder.branch(self.blocks[successor.block]), (successor.block,))

    def op_cbr(self, builder, op: Op):
        then, orelse = op.successors
        self.env.before_branch(builder, self.function, self.block, (then.block, orelse.block))
        condition = self.use(builder, op.operands[0])
        self.branch_args(builder, then)
        self.branch_args(builder, orelse)
        self.loop_metadata(builder.cbranch(condition, self.blocks[then.block],
                                           self.blocks[orelse.block]),
                           (then.block, orelse.block))

    def loop_metadata(self, branch, successors) -> None:
        metadata = self.env.back_edge_metadata(self.function, self.block, successors)
        if metadata is not None:
            branch.set_metadata("llvm.loop", metadata)

    def op_ret(self, builder, op: Op):
        self.env.kernel_return(builder)

    def op_assume(self, builder, op: Op):
        """What a target checked before choosing this version of the kernel."""
        self.assume(builder, self.use(builder, op.operands[0]))

    def assume(self, builder, condition: ir.Value) -> None:
        """Tell LLVM that `condition` holds here (`assume`)."""
        # (LLVM counts the call as touching memory: in the work-items' access group,
        # their loop stays one whose iterations are independent)
        self.env.array_access(assume(builder, condition))

    def op_barrier_any(self, builder, op: Op):
        return self.env.barrier_any(builder, op, self.use(builder, op.operands[0]))

    def op_subgroup(self, builder, op: Op):
        return self.env.subgroup(builder, op, self.operands(builder, op))

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

    def op_bitcast(self, builder, op: Op):
        return builder.bitcast(self.use(builder, op.operands[0]), llvm_type(op.type))

    def op_math(self, builder, op: Op):
        name = op.definition.member.name
        if name in SINCOS and self.env.fuses_sincos and \
                op.operands[0] in self.sincos_arguments():
            both = self.env.sincos(builder, self.use(builder, op.operands[0]),
                                   op.operands[0].type)
            return builder.extract_value(both, SINCOS.index(name))
        return self.env.math(builder, name, self.operands(builder, op), op.operands[0].type)

    def sincos_arguments(self) -> frozenset:
        if self._sincos_arguments is None:
            self._sincos_arguments = shared_sincos_arguments(self.function)
        return self._sincos_arguments

    def op_print(self, builder, op: Op):
        values = [(self.use(builder, v), v.type) for v in op.operands]
        self.env.print(builder, op.attrs["format"], values)

    # -- arithmetic -----------------------------------------------------------------------

    def op_binary(self, builder, op: Op):
        a, b = self.operands(builder, op)
        return binary(builder, op.definition, a, b, op.operands[0].type, self.env)

    def op_compare(self, builder, op: Op):
        a, b = self.operands(builder, op)
        return compare(builder, op.definition, a, b, op.operands[0].type)

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
        """The address of the element that `op` (a load, store or atomic) accesses, after
        the bounds check where the environment asks for it; the environment records the
        access there too (`record_access`)."""
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
        element = builder.gep(array.data, [offset], source_etype=memory_type(array.type.dtype))
        self.env.record_access(builder, op, element, indices)
        return element

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

    def op_assert(self, builder, op: Op):
        """A kernel's `assert`, checked where bounds are (debug builds): where it fails,
        the error record takes the work-item's position and the ndrange (as an access
        out of bounds along `ASSERTION_AXIS`), and the work-item stops."""
        if not self.env.debug:
            return
        condition, *position = self.operands(builder, op)
        fail = self.llvm_function.append_basic_block("assertion_failed")
        good = self.llvm_function.append_basic_block("assertion_held")
        builder.cbranch(condition, good, fail)
        builder.position_at_end(fail)
        extents = [self.env.geometry(builder, D.NDRANGE, axis) for axis in range(len(position))]
        self.env.out_of_bounds(builder, op.loc, ASSERTION_AXIS, position, extents)
        builder.position_at_end(good)

    def alias_scopes(self, instruction, array: Value):
        """On a kernel whose array parameters share no memory where one is written
        (`Function.disjoint_arrays`), an access to one is in that parameter's alias scope
        and in no other's, so that LLVM may reorder and merge the accesses to different
        arrays (a derivative kernel's stores of one shadow and loads of another). An
        access to the group's own memory (local and private arrays, which no parameter
        can reach) is in a scope of its own, apart from every parameter's: a derivative
        kernel's updates of a local adjoint, at one address for a whole row of
        work-items, then need no run-time check against the loads of the parameters,
        and the row's loop is vectorized (the tiled matmul's reverse, where LLVM gives up
        on the checks of three or more such updates)."""
        if not self.function.disjoint_arrays:
            return instruction
        if self.scopes is None:
            self.scopes = _array_scopes(self.module, self.llvm_function.name, self.function)
        scopes = self.scopes
        key = array if array.type.space == "global" else GROUP_MEMORY
        scope = scopes.get(key)
        if scope is not None:
            instruction.set_metadata("alias.scope", self.module.add_metadata([scope]))
            others = [other for value, other in scopes.items() if value is not key]
            if others:
                instruction.set_metadata("noalias", self.module.add_metadata(others))
        return instruction

    def op_load(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        value = self.alias_scopes(builder.load(address, typ=memory_type(array_type.dtype)),
                                  op.operands[0])
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
        self.env.array_access(self.alias_scopes(builder.store(value, address),
                                                op.operands[0]))

    def op_atomic(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        value = self.use(builder, op.operands[-1])
        dtype = array_type.dtype
        name = op.definition.member
        if array_type.space == "local" and self.env.work_items_in_sequence:
            return self.local_read_modify_write(builder, name, dtype, address, value,
                                                op.operands[0])
        if dtype.is_float:
            llvm_op = {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax",
                       "exchange": "xchg"}[name]
        else:
            llvm_op = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
                       "exchange": "xchg", "min": "min" if dtype.is_signed else "umin",
                       "max": "max" if dtype.is_signed else "umax"}[name]
        return self.alias_scopes(builder.atomic_rmw(llvm_op, address, value, "monotonic"),
                                 op.operands[0])

    def local_read_modify_write(self, builder, name: str, dtype, address, value, array):
        """An atomic on local memory where a group's work-items run in sequence: the old
        value, and the new one stored (min and max as LLVM's atomics: minnum, maxnum)."""
        old = self.alias_scopes(builder.load(address, typ=value.type), array)
        if name == "exchange":
            new = value
        elif dtype.is_float and name in ("min", "max"):
            new = call_intrinsic(builder, f"llvm.{name}num", [old, value])
        elif dtype.is_float:
            # The work-items' atomic updates of one element come in no set order: LLVM may
            # add them up in another (a vector loop's partial sums), as a GPU may.
            new = (builder.fadd if name == "add" else builder.fsub)(old, value,
                                                                     flags=("reassoc",))
        elif name in ("min", "max"):
            signed, smaller = dtype.is_signed, name == "min"
            less = (builder.icmp_signed if signed else builder.icmp_unsigned)("<", old, value)
            new = builder.select(less, old, value) if smaller else \
                builder.select(less, value, old)
        else:
            new = {"add": builder.add, "sub": builder.sub, "and": builder.and_,
                   "or": builder.or_, "xor": builder.xor}[name](old, value)
        self.alias_scopes(builder.store(new, address), array)
        return old

    def op_atomic_cas(self, builder, op: Op):
        array_type = op.operands[0].type
        address = self.address(builder, op, array_type.ndim)
        expected, new = (self.use(builder, v) for v in op.operands[-2:])
        dtype = array_type.dtype
        if array_type.space == "local" and self.env.work_items_in_sequence:
            old = builder.load(address, typ=expected.type)
            same = builder.icmp_unsigned("==", builder.bitcast(old, ir.IntType(dtype.bits)),
                                         builder.bitcast(expected, ir.IntType(dtype.bits))) \
                if dtype.is_float else builder.icmp_unsigned("==", old, expected)
            builder.store(builder.select(same, new, old), address)
            return old
        if dtype.is_float:
            as_int = ir.IntType(dtype.bits)
            pair = builder.cmpxchg(address, builder.bitcast(expected, as_int),
                                   builder.bitcast(new, as_int), "monotonic", "monotonic")
            return builder.bitcast(builder.extract_value(pair, 0), llvm_type(dtype))
        pair = builder.cmpxchg(address, expected, new, "monotonic", "monotonic")
        return builder.extract_value(pair, 0)


GROUP_MEMORY = "group memory"
"""The key of the alias scope of a group's local and private arrays (`_array_scopes`)."""


def _array_scopes(module: ir.Module, name: str, function: Function) -> dict:
    """The alias scope of each global array parameter of `function` (lowered as the LLVM
    function `name`), and of the group's own memory (at `GROUP_MEMORY`), one domain for
    them all: named nodes, the same for every version of the kernel in the module."""
    domain = module.add_metadata([ir.MetaDataString(module, f"{name}.arrays")])
    scopes = {param: module.add_metadata([ir.MetaDataString(module, f"{name}.{index}"),
                                          domain])
              for index, param in enumerate(function.params)
              if isinstance(param.type, T.ArrayType) and param.type.space == "global"}
    scopes[GROUP_MEMORY] = module.add_metadata([ir.MetaDataString(module, f"{name}.group"),
                                                domain])
    return scopes


def _is_one(value) -> bool:
    return isinstance(value, ir.Constant) and value.constant == 1


def _is_unsigned_index(value: Value) -> bool:
    """An index the kernel wrote as an unsigned number (converted to the index type by
    the frontend): it never counts from the end, however large."""
    return is_op(value, D.CAST) and \
        not value.operands[0].type.is_signed and not value.operands[0].type.is_float


# How each kind of operation is lowered: one entry per definition (`ir/definitions.py`).
LOWERINGS = {
    D.BR: BodyLowering.op_br, D.CBR: BodyLowering.op_cbr, D.RET: BodyLowering.op_ret,
    D.ASSUME: BodyLowering.op_assume, D.ASSERT: BodyLowering.op_assert,
    D.BARRIER: BodyLowering.op_barrier,
    D.BARRIER_ANY: BodyLowering.op_barrier_any, D.CONST: BodyLowering.op_const,
    D.TUPLE: BodyLowering.op_tuple, D.EXTRACT: BodyLowering.op_extract,
    D.LOCAL_ID: BodyLowering.op_position, D.GROUP_ID: BodyLowering.op_position,
    D.NDRANGE: BodyLowering.op_position, D.SELECT: BodyLowering.op_select,
    D.CAST: BodyLowering.op_cast, D.BITCAST: BodyLowering.op_bitcast,
    D.PRINT: BodyLowering.op_print,
    D.UNARY["neg"]: BodyLowering.op_neg, D.UNARY["not"]: BodyLowering.op_not,
    D.UNARY["invert"]: BodyLowering.op_not, D.UNARY["abs"]: BodyLowering.op_abs,
    D.DIM: BodyLowering.op_dim, D.LOCALMEM: BodyLowering.op_allocation,
    D.PRIVATE: BodyLowering.op_allocation, D.LOAD: BodyLowering.op_load,
    D.STORE: BodyLowering.op_store, D.ATOMIC_CAS: BodyLowering.op_atomic_cas,
    **{definition: BodyLowering.op_binary for definition in D.ARITHMETIC.values()},
    **{definition: BodyLowering.op_compare for definition in D.COMPARISONS.values()},
    **{definition: BodyLowering.op_math for definition in D.MATH.values()},
    **{definition: BodyLowering.op_atomic for definition in D.ATOMICS.values()},
    **{definition: BodyLowering.op_subgroup for definition in D.SUBGROUP.values()},
}
