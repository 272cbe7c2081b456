"""Private cells as SSA values: each element of a private array that is only loaded and
stored at constant indices becomes a value, carried between blocks as block parameters
(the classic construction: parameters where the stores' dominance frontiers meet,
then one walk of the dominator tree).

Why: code that keeps values in private cells across its control flow (the AD
transform's adjoints, loop counters and tape) hides from the IR's analyses what LLVM
would only find after lowering. A loop whose counter lives in a cell is not a counted
loop (`analysis.loops`): a target that unrolls, or that does not poll, only loops of a
constant trip count treats it as any loop; a value the same for the whole group is not
seen to be uniform. As values, they are what the analyses know.

A cell read before anything is stored into it reads 0 (a private array's elements are
unspecified until stored, so any value is right). An array used other than by loads and
stores at constant indices, or in a block the entry does not reach, is left as it is."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.dominance import dominator_tree, immediate_dominators
from ..ir.builder import Builder
from ..ir.definitions import LOAD, PRIVATE, STORE
from ..ir.function import Block, Function, Module
from ..ir.ops import Op, Value, constant_value
from ..ir.rewriter import replace_values
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class PromotePrivate:
    name = "promote-private"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            promote_private_cells(function)


def promote_private_cells(function: Function) -> None:
    order = function.reachable_blocks()
    predecessors = {block: [] for block in order}
    for block in order:
        for successor in block.successors:
            predecessors[successor].append(block)
    if predecessors[function.entry]:
        return     # the entry's parameters are the arguments: no cell can join there
    cells = promotable_cells(function, set(order))
    if not cells:
        return
    accesses = {op for ops in cells.values() for op in ops}
    idom = immediate_dominators(order, predecessors)
    frontiers = dominance_frontiers(order, predecessors, idom)

    # Parameters where definitions of a cell meet (the iterated dominance frontier of its
    # stores); blocks where it is not read are given one too, which dead-code removal
    # takes away again.
    joined: dict[Block, list[tuple]] = {block: [] for block in order}
    element_types = {}
    for key, ops in cells.items():
        element_types[key] = key[0].type.dtype
        work = [op.block for op in ops if op.definition is STORE]
        placed: set[Block] = set()
        while work:
            for frontier in frontiers[work.pop()]:
                if frontier not in placed:
                    placed.add(frontier)
                    joined[frontier].append(key)
                    work.append(frontier)
    params = {block: [block.add_param(element_types[key], "cell") for key in keys]
              for block, keys in joined.items()}

    # Before any store, a cell reads 0: one constant per element type, at the entry.
    entry = function.entry
    b = Builder(function)
    b.position_before(entry.ops[0])
    zeros = {dtype: b.constant(0, dtype)
             for dtype in sorted(set(element_types.values()), key=str)}
    current: dict[tuple, list[Value]] = {key: [zeros[element_types[key]]] for key in cells}
    replaced: dict[Value, Value] = {}
    children = dominator_tree(function)

    def resolve(value: Value) -> Value:
        while value in replaced:
            value = replaced[value]
        return value

    # The walk of the dominator tree, with an explicit stack (deep trees).
    stack: list[tuple[Block, list[tuple] | None]] = [(entry, None)]
    while stack:
        block, pushed = stack.pop()
        if pushed is not None:          # leaving the block: its definitions end here
            for key in pushed:
                current[key].pop()
            continue
        pushed = []
        for key, param in zip(joined[block], params[block]):
            current[key].append(param)
            pushed.append(key)
        kept = []
        for op in block.ops:
            if op not in accesses:
                kept.append(op)
                continue
            key = cell_key(op)
            if op.definition is LOAD:
                replaced[op] = current[key][-1]
            else:
                current[key].append(resolve(op.operands[-1]))
                pushed.append(key)
        block.ops = kept
        terminator = block.terminator
        for successor in terminator.successors if terminator else ():
            successor.args.extend(current[key][-1] for key in joined[successor.block])
        stack.append((block, pushed))
        stack.extend((child, None) for child in reversed(children[block]))
    replace_values(function, replaced)
    for array in {key[0] for key in cells}:
        array.block.ops.remove(array)


def cell_key(op: Op) -> tuple:
    indices = op.operands[1:] if op.definition is LOAD else op.operands[1:-1]
    return (op.operands[0], tuple(constant_value(index) for index in indices))


def promotable_cells(function: Function, reachable: set[Block]) -> dict[tuple, list[Op]]:
    """(array, constant indices) -> the loads and stores of that element, for each private
    array whose every use is such an access, in a block the entry reaches."""
    arrays = {op for op in function.ops() if op.definition is PRIVATE}
    refused: set = set()
    found: dict = {}
    for block in function.blocks:
        for op in block.ops:
            for position, operand in enumerate(op.all_operands()):
                if operand not in arrays:
                    continue
                indices = op.operands[1:] if op.definition is LOAD else op.operands[1:-1]
                if op.definition not in (LOAD, STORE) or position != 0 or \
                        block not in reachable or operand in op.operands[1:] or \
                        any(not isinstance(constant_value(index), int) or
                            isinstance(constant_value(index), bool) for index in indices):
                    refused.add(operand)
                else:
                    found.setdefault(operand, []).append(op)
    return {key: ops for array, accesses in found.items() if array not in refused
            for key, ops in group_by_element(accesses).items()}


def group_by_element(accesses: list[Op]) -> dict[tuple, list[Op]]:
    groups: dict[tuple, list[Op]] = {}
    for op in accesses:
        groups.setdefault(cell_key(op), []).append(op)
    return groups


def dominance_frontiers(order: list[Block], predecessors: dict, idom: dict
                        ) -> dict[Block, list[Block]]:
    """The blocks where each block's dominance ends: join points it reaches but does not
    strictly dominate (Cooper, Harvey and Kennedy's walk up from each predecessor)."""
    frontiers: dict[Block, list[Block]] = {block: [] for block in order}
    for block in order:
        if len(predecessors[block]) < 2:
            continue
        for predecessor in predecessors[block]:
            runner = predecessor
            while runner is not idom[block]:
                if block not in frontiers[runner]:
                    frontiers[runner].append(block)
                runner = idom[runner]
    return frontiers
