"""Changes a function in place: the rewriter a pass builds and edits through, and
function cloning.

`Rewriter` is a `Builder` (insertion points, typed and folded operations) that also
knows every value's uses: it indexes the function once, and keeps the index as it
inserts, replaces and erases, so `uses(value)` costs what the answer holds. A pass
that changes operations behind the rewriter's back (assigning `op.operands`) must call
`reindex()` before asking for uses again."""
from __future__ import annotations

from typing import Iterable

from .builder import Builder
from .function import Block, Function
from .ops import Op, Successor, Value
from .types import IRType, void


class Rewriter(Builder):
    def __init__(self, function: Function):
        super().__init__(function)
        self._users: dict[Value, dict[Op, None]] | None = None

    # -- uses ---------------------------------------------------------------------------

    def reindex(self) -> None:
        self._users = {}
        for op in self.function.ops():
            self._add_uses(op)

    def uses(self, value: Value) -> list[Op]:
        """The operations that use `value` (as an operand or a branch argument), each
        once, in the order they were indexed or inserted."""
        if self._users is None:
            self.reindex()
        return list(self._users.get(value, ()))

    def is_used(self, value: Value) -> bool:
        return bool(self.uses(value))

    def _add_uses(self, op: Op) -> None:
        for value in op.all_operands():
            self._users.setdefault(value, {})[op] = None

    def _drop_uses(self, op: Op) -> None:
        for value in op.all_operands():
            users = self._users.get(value)
            if users is not None:
                users.pop(op, None)

    def inserted(self, op: Op) -> None:
        if self._users is not None:
            self._add_uses(op)

    # -- edits --------------------------------------------------------------------------

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Every use of `old` uses `new` instead."""
        if old is new:
            return
        mapping = {old: new}
        for user in self.uses(old):
            user.map_operands(mapping)
            self._users.setdefault(new, {})[user] = None
        self._users.pop(old, None)

    def set_operands(self, op: Op, operands: list[Value]) -> None:
        if self._users is None:
            op.operands = list(operands)
            return
        self._drop_uses(op)
        op.operands = list(operands)
        self._add_uses(op)

    def set_successors(self, op: Op, successors: list[Successor]) -> None:
        if self._users is not None:
            self._drop_uses(op)
        op.successors = list(successors)
        if self._users is not None:
            self._add_uses(op)

    def erase(self, op: Op) -> None:
        """Remove `op`, whose result nothing uses any more."""
        if self._users is not None:
            assert not self._users.get(op), f"erasing {op!r}, which is still used"
            self._drop_uses(op)
        if self.before is op:
            self.position_after(op)
            if self.before is op:   # `op` was the last operation
                self.before = None
        op.block.ops.remove(op)
        op.block = None

    def replace_op(self, op: Op, replacement: Value) -> None:
        """Use `replacement` wherever `op` was used, and remove `op`. A new operation
        given as the replacement takes `op`'s place in its block."""
        if isinstance(replacement, Op) and replacement.block is None:
            replacement.block = op.block
            op.block.ops.insert(op.block.ops.index(op), replacement)
            self.inserted(replacement)
        if op.type != void:   # nothing uses what gives no value (a store, a branch)
            self.replace_all_uses(op, replacement)
        self.erase(op)

    def split_block_after(self, op: Op) -> Block:
        """Move the operations after `op` into a new block placed after `op`'s block,
        which is left unterminated (the caller ends it with a branch)."""
        block = op.block
        position = block.ops.index(op) + 1
        after = Block()
        after.function = self.function
        for moved in block.ops[position:]:
            moved.block = after
            after.ops.append(moved)
        del block.ops[position:]
        self.function.blocks.insert(self.function.blocks.index(block) + 1, after)
        return after

    def insert_block_after(self, block: Block, new: Block) -> Block:
        new.function = self.function
        self.function.blocks.insert(self.function.blocks.index(block) + 1, new)
        return new


def replace_values(function: Function, mapping: dict[Value, Value]) -> None:
    """Every use of a key of `mapping` uses its value instead (a -> b, b -> c gives
    a -> c), in one sweep over the function: for passes that collect many replacements
    before applying them."""
    if not mapping:
        return
    for key in list(mapping):
        target = mapping[key]
        seen = {key}
        while target in mapping and target not in seen:
            seen.add(target)
            target = mapping[target]
        mapping[key] = target
    for op in function.ops():
        op.map_operands(mapping)


def replace_ops(function: Function, mapping: dict[Op, Value]) -> None:
    """Each operation of `mapping` is replaced by its value, in one sweep over the
    function: a new operation (one in no block yet) takes the replaced one's place, and
    every use of a replaced operation uses its value (chains resolved)."""
    if not mapping:
        return
    for block in function.blocks:
        kept = []
        for op in block.ops:
            replacement = mapping.get(op, op)
            if replacement is op:
                kept.append(op)
            elif isinstance(replacement, Op) and replacement.block is None:
                replacement.block = block
                kept.append(replacement)
        block.ops = kept
    replace_values(function, dict(mapping))


def clone_function(function: Function, name: str, values: dict[Value, Value] | None = None,
                   types: dict[IRType, IRType] | None = None,
                   added_params: Iterable[tuple[str, IRType]] = ()) -> Function:
    """A copy of `function` named `name`, with new blocks, parameters and operations.

    `values`, if given, receives the copy of each value of `function`; `types` maps
    the types of parameters and results to those the copy has; `added_params` are
    (name, type) parameters appended to the copy's arguments."""
    values = {} if values is None else values
    types = types or {}
    clone = Function(name, list(function.arg_names), types.get(function.return_type,
                                                               function.return_type),
                     function.is_kernel, source_file=function.source_file,
                     disjoint_arrays=function.disjoint_arrays)
    blocks: dict[Block, Block] = {}
    for block in function.blocks:
        copy = Block()
        for param in block.params:
            values[param] = copy.add_param(types.get(param.type, param.type), param.hint)
        blocks[block] = clone.add_block(copy)
    for arg_name, type in added_params:
        clone.arg_names.append(arg_name)
        clone.entry.add_param(type, arg_name)
    for block in function.blocks:
        for op in block.ops:
            blocks[block].append(clone_op(op, values, blocks, types))
    for op in clone.ops():   # uses laid out before their definitions
        op.map_operands(values)
    return clone


def clone_op(op: Op, values: dict[Value, Value], blocks: dict[Block, Block],
             types: dict[IRType, IRType] | None = None) -> Op:
    """A copy of `op` using the copies in `values` (an operand not there yet is mapped
    later with `map_operands`), branching to the copies in `blocks`."""
    types = types or {}
    successors = [Successor(blocks.get(s.block, s.block), [values.get(a, a) for a in s.args])
                  for s in op.successors]
    clone = Op(op.definition, [values.get(v, v) for v in op.operands],
               types.get(op.type, op.type), dict(op.attrs), successors, op.loc)
    values[op] = clone
    return clone
