"""Moves each load of a global array up its block, as far as what it reads allows, so that
a work-item's loads are issued together before the arithmetic that waits on them.

Why: on a GPU a work-item that loads, computes, stores, then loads again waits for one
access after another; where its loads come first, their latencies overlap. A derivative
kernel is written in that order (the primal's loads, its arithmetic, then each shadow
read where its adjoint is needed): `sin(x) * x`'s reverse read `d_y` after `sin` and
`cos`, past their slow paths' branches, and `d_x` after storing `d_y`.

A load moves above an operation that does not define one of its operands and cannot
change what it reads: a pure operation, another load, or an access to local or private
memory; and, in a kernel whose array parameters share no memory where one is written
(`Function.disjoint_arrays`), a store or atomic update of another array parameter. It
stops at a barrier, a call or any operation of unknown effects, and at a write to its
own array or to an array it cannot tell apart from its own. Loads keep their order."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.definitions import LOAD
from ..ir.function import Function, Module
from ..ir.ops import Op, Value
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class HoistLoads:
    name = "hoist-loads"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            hoist_loads(function)


def hoist_loads(function: Function) -> None:
    params = set(function.params)
    for block in function.blocks:
        ops = block.ops
        for position in range(len(ops)):
            op = ops[position]
            if op.definition is not LOAD or not _global(op.operands[0]):
                continue
            target = position
            while target > 0 and _may_pass(op, ops[target - 1], function, params):
                target -= 1
            if target != position:
                ops.insert(target, ops.pop(position))


def _global(array: Value) -> bool:
    return getattr(array.type, "space", None) == "global"


def _may_pass(load: Op, other: Op, function: Function, params: set) -> bool:
    """Whether `load` may move above `other`, the operation just before it."""
    if other in load.operands or other.definition is LOAD:
        return False
    effects = other.definition.effects
    if effects.unknown or effects.barrier or effects.allocates:
        return False
    if not effects.writes:
        return not effects.reads
    written = other.operands[0]
    if not _global(written):         # local or private memory: never a global array's
        return True
    array = load.operands[0]
    return function.disjoint_arrays and written is not array and \
        written in params and array in params
