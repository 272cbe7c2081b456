"""Common subexpression elimination: a pure operation equal to one that dominates it is
replaced by that one. So is a load from a `Const` array: such an array does not change
during a launch (the lowering tells LLVM so too, `invariant.load`), so a load of the same
element gives the same value wherever it is, whatever is stored elsewhere in between."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.dominance import dominator_tree
from ..ir import types as T
from ..ir.definitions import LOAD, TUPLE
from ..ir.function import Function, Module
from ..ir.rewriter import replace_values
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class CommonSubexpressions:
    name = "cse"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            eliminate(function)


def _key(op):
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    return (op.definition, tuple(id(v) for v in op.operands), attrs, op.type)


def _reads_a_const_array(op) -> bool:
    if op.definition is not LOAD:
        return False
    array = op.operands[0].type
    return isinstance(array, T.ArrayType) and array.const and array.space == "global"


def eliminate(function: Function) -> None:
    children = dominator_tree(function)
    mapping = {}
    scopes: list[dict] = [{}]
    stack = [(function.entry, False)]
    while stack:
        block, leaving = stack.pop()
        if leaving:
            scopes.pop()
            continue
        scope = dict(scopes[-1])
        scopes.append(scope)
        stack.append((block, True))
        kept = []
        for op in block.ops:
            op.map_operands(mapping)
            # Tuples only group values for `extract`, which simplify looks through.
            if op.is_pure and op.definition is not TUPLE or _reads_a_const_array(op):
                key = _key(op)
                if key in scope:
                    mapping[op] = scope[key]
                    continue
                scope[key] = op
            kept.append(op)
        block.ops = kept
        for child in reversed(children[block]):
            stack.append((child, False))
    replace_values(function, mapping)
