"""The environment contract: what the body lowering (`kernelkit.compiler.lowering`) asks
of the target for everything that depends on the hardware. A target's code generator
implements it (see `backends/cpu/group.py` and `backends/cuda/thread.py`), next to the
`Target` hooks (`kernelkit.compiler.target`) that the driver calls."""
from __future__ import annotations

from llvmlite import ir

from ..ir import types as T
from ..ir.definitions import OpDefinition
from ..ir.ops import BlockParam, Op, Value
from .llvm_types import ArrayValue


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

    def subgroup(self, builder: ir.IRBuilder, op: Op, operands: list[ir.Value]) -> ir.Value:
        """The result of `op`, a subgroup operation (`kernelkit.ir.subgroups` says what
        each gives), of its lowered `operands`. A target without subgroup hardware has
        them rewritten by one of its passes first (the CPU's:
        `passes/subgroups_in_local_memory.py`) and is never asked."""
        raise NotImplementedError

    def kernel_return(self, builder: ir.IRBuilder) -> None:
        raise NotImplementedError

    def before_branch(self, builder: ir.IRBuilder, function, block, successors) -> None:
        """Called where the branch that ends `block` of `function` to `successors` (IR
        blocks) is about to be emitted: a target that polls for interrupts at loop back
        edges (the CPU's) emits its poll here, and leaves the builder where the branch
        goes; others emit nothing."""

    def back_edge_metadata(self, function, block, successors):
        """The `llvm.loop` metadata of the branch that ends `block` of `function` to
        `successors` (IR blocks), where it is the back edge of a loop the target has
        something to tell LLVM about (the CPU's: unroll it whole), or None."""
        return None

    def out_of_bounds(self, builder: ir.IRBuilder, loc, axis: int, indices: list[ir.Value],
                      shape: list[ir.Value]) -> None:
        """Report an out-of-bounds access (`indices[axis]` is outside `shape[axis]`) and
        end the block. `axis` `ASSERTION_AXIS` (`kernelkit.runtime.bounds`) reports a
        failed `assert` instead: `indices` is the work-item's position, `shape` the
        ndrange."""
        raise NotImplementedError

    def print(self, builder: ir.IRBuilder, format: str, values: list[tuple[ir.Value, T.ScalarType]]):
        raise NotImplementedError

    def math(self, builder: ir.IRBuilder, name: str, args: list[ir.Value], type: T.ScalarType):
        raise NotImplementedError

    # Whether the target's library computes a sine and a cosine of one value together,
    # with one argument reduction (`sincos`); where not, each is `math`'s.
    fuses_sincos: bool = False

    def sincos(self, builder: ir.IRBuilder, x: ir.Value, type: T.ScalarType) -> ir.Value:
        """`{sin(x), cos(x)}` (an LLVM struct) for a kernel that takes both of one value
        (`shared_sincos_arguments`), where `fuses_sincos`. The call must have no side
        effects, so that LLVM merges the one the sine's lowering makes with the
        cosine's."""
        raise NotImplementedError

    def array_access(self, instruction: ir.Instruction) -> None:
        """Called with every load and store of array elements, and every other
        instruction LLVM counts as touching memory (e.g. to attach metadata)."""

    def record_access(self, builder: ir.IRBuilder, op: Op, address: ir.Value,
                      indices: list[ir.Value]) -> None:
        """Called where `op`, a load, store or atomic of an array element, is about to
        access it, with the element's address and its indices (negative ones counted
        from the end already). A target that watches accesses records the access here
        (the CPU's race detector, `backends/cpu/races.py`); others emit nothing."""

    # Whether a group's work-items run one after another on one thread (the CPU's): then
    # an atomic on local memory, which only the group's work-items share, is a plain
    # read-modify-write, kept out of `array_access` so that no vector loop merges the
    # work-items' updates.
    work_items_in_sequence: bool = False

    def is_demoted(self, value: Value) -> bool:
        return False

    def store_demoted(self, builder: ir.IRBuilder, value: Value, llvm_value: ir.Value) -> None:
        raise NotImplementedError

    def load_demoted(self, builder: ir.IRBuilder, value: Value) -> ir.Value:
        raise NotImplementedError

    def address_space(self, array: T.ArrayType) -> int:
        return 0
