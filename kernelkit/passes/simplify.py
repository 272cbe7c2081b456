"""Folds constants, forwards trivial values and tidies the control-flow graph:
constant branches, block parameters that always receive the same value, unreachable
blocks, blocks that merely continue their single predecessor, and short branches of a
few cheap pure operations (the right side of `and`/`or`), which become `select`s."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.definitions import BR, CAST, CBR, CONST, EXTRACT, SELECT, TUPLE, Trait
from ..ir.fold import fold
from ..ir.function import Function, Module
from ..ir.ops import Op, Successor, constant_value, is_op
from ..ir.rewriter import Rewriter, replace_ops, replace_values
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class Simplify:
    name = "simplify"

    speculated_ops: int = 4
    """A branch of at most this many cheap pure operations is computed unconditionally."""

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            changed = True
            while changed:
                changed = False
                changed |= fold_constants(function)
                changed |= fold_branches(function)
                changed |= remove_unreachable(function)
                changed |= forward_block_params(function)
                changed |= merge_blocks(function)
                changed |= speculate_short_branches(function, self.speculated_ops)


def fold_constants(function: Function) -> bool:
    mapping = {}
    for op in function.ops():
        op.map_operands(mapping)   # a later operation sees what earlier ones fold to
        replacement = _simplified(op)
        if replacement is not None:
            mapping[op] = replacement
    replace_ops(function, mapping)
    return bool(mapping)


def _simplified(op: Op):
    """A value equal to `op`'s result, or None."""
    kind = op.definition
    if not op.is_pure or not op.operands:
        return None
    if kind is EXTRACT and is_op(op.operands[0], TUPLE):
        return op.operands[0].operands[op.attrs["index"]]
    if kind is CAST and op.operands[0].type == op.type:
        return op.operands[0]
    if kind is SELECT and is_op(op.operands[0], CONST):
        return op.operands[1] if constant_value(op.operands[0]) else op.operands[2]
    if all(is_op(v, CONST) for v in op.operands):
        value = fold(kind, [constant_value(v) for v in op.operands],
                     [v.type for v in op.operands], op.type)
        if value is not None:
            return Op(CONST, [], op.type, {"value": value}, loc=op.loc)
    return None


def fold_branches(function: Function) -> bool:
    changed = False
    for block in function.blocks:
        terminator = block.terminator
        if terminator is None or terminator.definition is not CBR:
            continue
        condition = constant_value(terminator.operands[0])
        if condition is None and terminator.successors[0].block is not terminator.successors[1].block:
            continue
        if condition is None:
            if terminator.successors[0].args != terminator.successors[1].args:
                continue
            condition = True
        taken = terminator.successors[0 if condition else 1]
        Rewriter(function).replace_op(terminator, Op(
            BR, [], successors=[Successor(taken.block, list(taken.args))], loc=terminator.loc))
        changed = True
    return changed


def remove_unreachable(function: Function) -> bool:
    reachable = set(function.reachable_blocks())
    if len(reachable) == len(function.blocks):
        return False
    function.blocks = [b for b in function.blocks if b in reachable]
    return True


def forward_block_params(function: Function) -> bool:
    predecessors = function.predecessors()
    mapping = {}
    for block in function.blocks[1:]:
        incoming = [s for p in predecessors[block] for s in p.terminator.successors
                    if s.block is block]
        keep = []
        for index, param in enumerate(block.params):
            sources = {s.args[index] for s in incoming} - {param}
            if len(sources) == 1:
                mapping[param] = sources.pop()
            else:
                keep.append(index)
        if len(keep) != len(block.params):
            block.params = [block.params[i] for i in keep]
            for successor in incoming:
                successor.args = [successor.args[i] for i in keep]
    replace_values(function, mapping)
    return bool(mapping)


def merge_blocks(function: Function) -> bool:
    """Appends a block to its only predecessor when that predecessor only goes there."""
    predecessors = function.predecessors()
    mapping: dict = {}   # the merged blocks' parameters -> their arguments, replaced at once
    merged: set = set()
    for block in list(function.blocks[1:]):
        preds = predecessors[block]
        if len(preds) != 1 or preds[0] is block:
            continue
        pred = preds[0]
        terminator = pred.terminator
        if terminator.definition is not BR or pred in merged:
            continue
        mapping.update(zip(block.params, terminator.successors[0].args))
        pred.ops.pop()
        for op in block.ops:
            pred.append(op)
        merged.add(block)
        for successor in block.successors:
            predecessors[successor] = [pred if p is block else p for p in predecessors[successor]]
    if merged:
        function.blocks = [b for b in function.blocks if b not in merged]
        replace_values(function, mapping)
    return bool(merged)




def speculate_short_branches(function: Function, limit: int) -> bool:
    """`P: cbr c, T(), J(a...)`, `T: <cheap pure ops>; br J(b...)` with P the only way
    into T and at most `limit` operations in T becomes `P: <T's ops>; br J(select(c, b,
    a)...)` (either side of the branch): the short-circuit `and`/`or` of a condition
    turns into plain arithmetic, which the uniformity analysis and the vectorizer can see
    through. Pure operations cannot fail, so computing them on both paths changes
    nothing but time."""
    predecessors = function.predecessors()
    removed: set = set()
    rewriter = Rewriter(function)
    for block in list(function.blocks):
        branch = block.terminator
        if block in removed or branch is None or branch.definition is not CBR:
            continue
        for side in (0, 1):
            short, other = branch.successors[side], branch.successors[1 - side]
            body = short.block
            jump = body.terminator
            if (short.args or body.params or predecessors[body] != [block] or
                    body in removed or other.block in removed or
                    jump.definition is not BR or jump.successors[0].block is not other.block or
                    other.block is body or len(body.ops) - 1 > limit or
                    any(not op.is_pure or op.has(Trait.EXPENSIVE) for op in body.ops[:-1])):
                continue
            condition = branch.operands[0]
            rewriter.position_before(branch)
            rewriter.loc = branch.loc
            for op in body.ops[:-1]:
                rewriter.insert(op)
            arguments = []
            for taken, not_taken in zip(jump.successors[0].args, other.args):
                if taken is not_taken:
                    arguments.append(taken)
                    continue
                if side == 1:
                    pair = [not_taken, taken]
                else:
                    pair = [taken, not_taken]
                arguments.append(rewriter.op(SELECT, [condition, *pair], taken.type))
            rewriter.replace_op(branch, Op(BR, [], successors=[Successor(other.block,
                                                                          arguments)],
                                           loc=branch.loc))
            removed.add(body)
            # The join's predecessors changed: it is not taken as a short branch until
            # the next sweep sees them.
            predecessors[other.block] = [block, block]
            break
    if removed:
        function.blocks = [b for b in function.blocks if b not in removed]
    return bool(removed)
