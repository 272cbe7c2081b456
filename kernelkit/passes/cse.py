"""Common subexpression elimination: a pure operation equal to one that dominates it is
replaced by that one."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.dominance import dominator_tree
from ..ir.definitions import TUPLE
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
            if op.is_pure and op.definition is not TUPLE:
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
