"""Helpers shared by passes: use counts, replacing values, cloning operations."""
from __future__ import annotations

from collections import Counter

from ..ir.function import Function
from ..ir.ops import Op, Successor, Value


def use_counts(function: Function) -> Counter:
    counts: Counter = Counter()
    for op in function.ops():
        counts.update(op.all_operands())
    return counts


def replace_all_uses(function: Function, mapping: dict[Value, Value]) -> None:
    if not mapping:
        return
    # Resolve chains (a -> b, b -> c) so a single sweep suffices.
    for key in list(mapping):
        target = mapping[key]
        seen = {key}
        while target in mapping and target not in seen:
            seen.add(target)
            target = mapping[target]
        mapping[key] = target
    for op in function.ops():
        op.map_operands(mapping)


def clone_op(op: Op, values: dict[Value, Value], blocks: dict) -> Op:
    successors = [Successor(blocks[s.block], [values.get(a, a) for a in s.args])
                  for s in op.successors]
    clone = Op(op.definition, [values.get(v, v) for v in op.operands], op.type, dict(op.attrs),
               successors, op.loc)
    values[op] = clone
    return clone


def clone_function(function: Function, name: str) -> Function:
    """A copy of `function` (new blocks, parameters and operations) named `name`."""
    from ..ir.function import Block
    clone = Function(name, list(function.arg_names), function.return_type,
                     function.is_kernel, source_file=function.source_file)
    values: dict[Value, Value] = {}
    blocks = {}
    for block in function.blocks:
        copy = Block()
        for param in block.params:
            values[param] = copy.add_param(param.type, param.hint)
        blocks[block] = clone.add_block(copy)
    for block in function.blocks:
        for op in block.ops:
            blocks[block].append(clone_op(op, values, blocks))
    for op in clone.ops():  # uses laid out before their definitions
        op.map_operands(values)
    return clone
