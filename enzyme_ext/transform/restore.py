"""Loads of local memory computed again in the reverse pass, not taped.

A tiled kernel stores, each iteration, one element per work-item into a local array
(`tile[li, lj] = a[i, start + lj]`), waits at a barrier, and then each work-item reads
many of the group's elements (`tile[li, p]` for every p). The reverse pass needs those
values; pushing each load onto the tape costs a push and a pop per inner iteration (and
the tape grows with the loop). Where the element a load reads was stored, in the same
iteration, by the work-item at the element's local position, and the stored value can
be computed from that position alone, the reverse computes it again there: the store's
value with the local ids replaced by the load's indices.

A local array qualifies when it has the work-group's shape and one store, at the
work-item's own local position, in a block every work-item of the group reaches alike;
that store comes before each load on every path (it dominates it) and in the same
iteration of every loop around it; and its value is made of pure operations, loads of
arrays the kernel never writes, positions, and values the same for the whole group
defined outside any loop the store is not in. In a work-group cut short by the end of the
ndrange, an element whose work-item does not exist was never stored (the primal read
whatever local memory held): its value counts as 0, computed at a position that exists."""
from __future__ import annotations

from kernelkit.analysis.dominance import block_dominators, dominates
from kernelkit.analysis.loops import natural_loops
from kernelkit.analysis.uniformity import divergent_region, varying_values
from kernelkit.ir import types as T
from kernelkit.ir.definitions import GROUP_ID, LOAD, LOCAL_ID, LOCALMEM, NDRANGE, STORE
from kernelkit.ir.function import Function
from kernelkit.ir.ops import BlockParam, Op, Value, is_op


def restorable_local_arrays(kernel: Function, written: set, workgroupsize: tuple[int, ...]
                            ) -> dict[Op, Op]:
    """The local arrays whose loads can be computed again, each with its one store."""
    varying = varying_values(kernel)
    divergent = divergent_region(kernel, varying)
    idom = block_dominators(kernel)
    loops = list(natural_loops(kernel).values())
    ndim = len(workgroupsize)
    found = {}
    for local in [op for op in kernel.ops() if op.definition is LOCALMEM]:
        if tuple(local.type.shape) != tuple(workgroupsize):
            continue
        users = [op for op in kernel.ops() if any(v is local for v in op.all_operands())]
        stores = [op for op in users if op.definition is STORE and op.operands[0] is local]
        loads = [op for op in users if op.definition is LOAD and op.operands[0] is local]
        if len(stores) != 1 or len(stores) + len(loads) != len(users):
            continue
        store = stores[0]
        own = [index.attrs["axis"] if is_op(index, LOCAL_ID) else None
               for index in store.operands[1:-1]]
        if own != list(range(ndim)) or store.block in divergent:
            continue
        if not computable(store.operands[-1], store, varying, written, loops, set()):
            continue
        if all(_before(idom, store, load) and
               all(load.block in body for body in loops if store.block in body)
               for load in loads):
            found[local] = store
    return found


def _before(idom: dict, store: Op, load: Op) -> bool:
    if store.block is load.block:
        ops = store.block.ops
        return ops.index(store) < ops.index(load)
    return dominates(idom, store.block, load.block)


def computable(value: Value, store: Op, varying: set, written: set, loops: list, seen: set
               ) -> bool:
    """Whether `value` can be computed at another work-item's local position, where
    `store` uses it: see the module's docstring."""
    if value in seen:
        return True
    seen.add(value)
    if is_op(value, LOCAL_ID):
        return True
    if value not in varying:
        # The group's, as the reverse has it at the load: the same as at the store where
        # every loop around its definition is around the store too.
        return all(store.block in body for body in loops if value.block in body)
    if not isinstance(value, Op):
        return False
    if value.definition is LOAD:
        array = value.operands[0]
        return isinstance(array, BlockParam) and array not in written and \
            all(computable(v, store, varying, written, loops, seen) for v in value.operands[1:])
    return value.is_pure and all(computable(v, store, varying, written, loops, seen)
                                 for v in value.operands)


class Restorer:
    """Builds, in the reverse kernel, the value a restorable load read."""

    def __init__(self, reverse, kernel: Function, written: set,
                 workgroupsize: tuple[int, ...]):
        self.reverse, self.workgroupsize, self.written = reverse, workgroupsize, written
        self.stores = restorable_local_arrays(kernel, written, workgroupsize)

    def restores(self, value: Value) -> bool:
        return is_op(value, LOAD) and value.operands[0] in self.stores

    def restore(self, load: Op) -> Value:
        """The value `load` read: its element's store computed again at the local position
        the load's indices give (clamped into the group's existing work-items), 0 where
        that work-item does not exist."""
        reverse, b = self.reverse, self.reverse.b
        store = self.stores[load.operands[0]]
        indices = [b.cast(reverse.primal(index), T.int64) for index in load.operands[1:]]
        exists = None
        at = {}
        for axis, (index, size) in enumerate(zip(indices, self.workgroupsize)):
            group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
            first = b.binary("mul", group, b.constant(size, T.int64))
            extent = b.op(NDRANGE, [], T.int64, {"axis": axis})
            here = b.binary("min", b.constant(size, T.int64), b.binary("sub", extent, first))
            inside = b.binary("and", b.compare("ge", index, b.constant(0, T.int64)),
                              b.compare("lt", index, here))
            exists = inside if exists is None else b.binary("and", exists, inside)
            last = b.binary("sub", here, b.constant(1, T.int64))
            at[axis] = b.binary("max", b.constant(0, T.int64), b.binary("min", index, last))
        value = self.value_at(store.operands[-1], at, {})
        return b.select(exists, value, b.constant(0.0, value.type) if value.type.is_float
                        else b.constant(0, value.type))

    def value_at(self, value: Value, at: dict, copies: dict) -> Value:
        reverse, b = self.reverse, self.reverse.b
        if value in copies:
            return copies[value]
        if is_op(value, LOCAL_ID):
            result = b.cast(at[value.attrs["axis"]], value.type)
        elif isinstance(value, Op) and (value.is_pure or value.definition is LOAD and
                                        value.operands[0] not in self.written):
            # Computed again, not popped: a loop's counter under it is the reverse's own.
            operands = [self.value_at(v, at, copies) if i or value.definition is not LOAD
                        else reverse.primal(v) for i, v in enumerate(value.operands)]
            result = b.op(value.definition, operands, value.type, dict(value.attrs))
        else:
            result = reverse.primal(value)
        copies[value] = result
        return result
