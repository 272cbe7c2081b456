"""Splits each block parameter that holds a tuple (a tuple, vector or matrix carried
around a loop or joined after a branch) into one parameter per element: the block
rebuilds the tuple from them at its top, and each branch into it passes the elements
(`extract`, which `simplify` folds where the tuple was built in view). Nested tuples are
split level by level.

Afterwards a tuple lives only inside a block, between where it is built and where its
elements are read, and the passes after this one, automatic differentiation and the
targets see the numbers a loop carries as numbers."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..ir.definitions import EXTRACT, TUPLE
from ..ir.function import Function, Module
from ..ir.ops import BlockParam, Op, is_op
from ..ir.rewriter import replace_values
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class SplitTuples:
    name = "split-tuples"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            split_tuple_params(function)


def split_tuple_params(function: Function) -> None:
    while True:
        rebuilt: dict = {}
        for block in function.blocks[1:]:   # the entry's parameters are the arguments
            if any(isinstance(p.type, T.TupleType) for p in block.params):
                rebuilt.update(_split_block(function, block))
        if not rebuilt:
            return
        replace_values(function, rebuilt)


def _split_block(function: Function, block) -> dict:
    """Splits `block`'s tuple parameters; returns {old parameter: the tuple rebuilt}."""
    old_params = list(block.params)
    block.params, rebuilt, tuples = [], {}, []
    for param in old_params:
        if not isinstance(param.type, T.TupleType):
            block.params.append(param)
            continue
        elements = [BlockParam(t, block, f"{param.hint}[{i}]" if param.hint else "")
                    for i, t in enumerate(param.type.elements)]
        block.params.extend(elements)
        attrs = {"shape": param.type.shape} if isinstance(param.type, T.VectorType) else {}
        rebuilt[param] = Op(TUPLE, elements, param.type, attrs)
        tuples.append(rebuilt[param])
    loc = next((op.loc for op in block.ops if op.loc is not None), None)
    for op in reversed(tuples):
        op.block, op.loc = block, loc
        block.ops.insert(0, op)
    for predecessor in function.blocks:
        terminator = predecessor.terminator
        for successor in terminator.successors if terminator is not None else ():
            if successor.block is block:
                successor.args = _split_args(old_params, successor.args, terminator)
    return rebuilt


def _split_args(params: list[BlockParam], args: list, branch: Op) -> list:
    """The arguments of a branch into the split block: a tuple's elements in its place,
    read just before the branch."""
    split = []
    for param, arg in zip(params, args):
        if not isinstance(param.type, T.TupleType):
            split.append(arg)
        elif is_op(arg, TUPLE):
            split.extend(arg.operands)
        else:
            for index, element in enumerate(param.type.elements):
                extract = Op(EXTRACT, [arg], element, {"index": index}, loc=branch.loc)
                branch.block.insert_before_terminator(extract)
                split.append(extract)
    return split
