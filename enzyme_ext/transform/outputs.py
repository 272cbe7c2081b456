"""Arrays a kernel overwrites whole: what a program's reverse pass may leave unzeroed.

The reverse of `out[i] = f(...)` reads out's adjoint and zeroes it (the array's earlier
contents did not count). In a program of many launches that zero is often dead: the next
reverse launch that touches the shadow is the one whose gather kernel stores a new
adjoint into every element of it (a time loop swapping two buffers: step k's output is
step k + 1's input). Where a kernel overwrites an array whole, its reverse kernel's
zeroing of that array's shadow can be left to whoever needs the zeros (`program.py`), and
the reverse kernel without it (`REVERSE_UNZEROED`) is then right, if each zeroing store is
the last access of its element:

- every access of the array in the kernel is a store at the work-item's own element
  (index k the global index along axis k): no load, no atomic, no neighbour's element;
- no store is in a loop, and every path from the kernel's entry to a return passes
  exactly one store (the two sides of an `if` may each have one).

Then each work-item's reverse reads its element's adjoint once, zeroes it, and touches
it no more, and no other work-item touches it. When a launch's ndrange is the array's
shape, the reverse kernel zeroes every element of the shadow: the unzeroed one leaves
the whole shadow zero in value (`stale`), not in memory."""
from __future__ import annotations

from kernelkit.analysis.loops import natural_loops
from kernelkit.ir import types as T
from kernelkit.ir.definitions import RET, STORE
from kernelkit.ir.function import Function

from .positions import own_element


def whole_outputs(kernel: Function, workgroupsize: tuple[int, ...]) -> tuple[int, ...]:
    """The positions of the array parameters `kernel` overwrites whole (see the module)."""
    in_loops = set().union(*natural_loops(kernel).values())
    blocks = kernel.reachable_blocks()
    found = []
    for position, param in enumerate(kernel.params):
        if not isinstance(param.type, T.ArrayType):
            continue
        stores = {}   # block -> stores into the array
        for block in blocks:
            for op in block.ops:
                if not any(operand is param for operand in op.all_operands()):
                    continue
                if _own_store(op, param, workgroupsize) and block not in in_loops:
                    stores[block] = stores.get(block, 0) + 1
                elif op.definition is STORE or op.successors or \
                        not isinstance(op.type, T.ScalarType) or not op.definition.effects.none:
                    break    # an access other than a store at the own element
            else:
                continue
            break
        else:
            if stores and _once_on_every_path(blocks, stores):
                found.append(position)
    return tuple(found)


def _own_store(op, param, workgroupsize) -> bool:
    return (op.definition is STORE and op.operands[0] is param
            and not any(operand is param for operand in op.operands[1:])
            and own_element(op.operands[1:-1], workgroupsize))


def _once_on_every_path(blocks, stores: dict) -> bool:
    """Whether every path from the entry (`blocks[0]`) to a return passes exactly one of
    `stores` (stores made in each block, none in a loop): the fewest and the most stores
    made before each block's end, to a fixed point (a loop adds none, so one exists)."""
    before = {blocks[0]: (0, 0)}
    changed = True
    while changed:
        changed = False
        for block in blocks:
            if block not in before:
                continue
            low, high = before[block]
            made = stores.get(block, 0)
            after = (min(low + made, 2), min(high + made, 2))
            for successor in block.successors:
                old = before.get(successor)
                new = after if old is None else (min(old[0], after[0]), max(old[1], after[1]))
                if new != old:
                    before[successor] = new
                    changed = True
    ends = [block for block in blocks
            if block in before and block.terminator is not None
            and block.terminator.definition is RET]
    return bool(ends) and all(
        tuple(min(n + stores.get(block, 0), 2) for n in before[block]) == (1, 1)
        for block in ends)
