"""Lower bounds of integer values (`NonNegative`): which indices are never negative, so
that the body lowering indexes with them as they are, with no wrapping from the end.
An analysis of a function's IR; it builds nothing."""
from __future__ import annotations

from ..ir import definitions as D
from ..ir import types as T
from ..ir.definitions import Trait
from ..ir.function import Function
from ..ir.ops import BlockParam, Value, is_op


class NonNegative:
    """Which integer values of a function are never negative, so that indexing with them
    needs no wrapping. A value's lower bound, where one is known: constants; 0 for
    work-item geometry, array extents and unsigned numbers widened; and what 64-bit
    arithmetic makes of bounds, assuming it does not overflow 64 bits (`i + 1 - 1` is
    never negative, as a stencil's `u[r - 1, c]` with `r = i + 1`). A block parameter (a
    loop counter) is never negative when every value passed to it is, assuming it is
    itself (counting up from 0 by steps >= 0). Narrower integers wrap around in NumPy's
    arithmetic, so their sums and products have no bound."""

    def __init__(self, function: Function):
        incoming: dict[BlockParam, list[Value]] = {}
        for block in function.blocks:
            for op in block.ops:
                for successor in op.successors:
                    for param, arg in zip(successor.block.params, successor.args):
                        incoming.setdefault(param, []).append(arg)
        entry_params = set(function.entry.params) if function.blocks else set()
        self.assumed = {p for p in incoming if p not in entry_params and _is_integer(p.type)}
        while True:
            self.memo: dict[Value, int | None] = {}
            dropped = {p for p in self.assumed if not all(self(a) for a in incoming[p])}
            if not dropped:
                return
            self.assumed -= dropped

    def __call__(self, value: Value) -> bool:
        bound = self.lower_bound(value)
        return bound is not None and bound >= 0

    def lower_bound(self, value: Value, depth: int = 0) -> int | None:
        if value not in self.memo:
            self.memo[value] = self.decide(value, depth + 1) if depth < 64 else None
        return self.memo[value]

    def decide(self, value: Value, depth: int) -> int | None:
        if not _is_integer(value.type):
            return None
        if not value.type.is_signed:
            return 0
        if isinstance(value, BlockParam):
            return 0 if value in self.assumed else None
        kind, operands = value.definition, value.operands
        if kind is D.CONST:
            return value.attrs["value"]
        if kind.has(Trait.POSITION) or kind is D.DIM:
            return 0
        if kind is D.CAST:
            source = operands[0].type
            if not isinstance(source, T.ScalarType) or source.is_float:
                return None
            if not source.is_signed:
                return 0 if source.bits < value.type.bits else None  # below the sign bit
            return self.lower_bound(operands[0], depth) \
                if source.bits <= value.type.bits else None
        if kind is D.EXTRACT:
            tuple_op = operands[0]
            if is_op(tuple_op, D.TUPLE):
                return self.lower_bound(tuple_op.operands[value.attrs["index"]], depth)
            return None
        bounds = [self.lower_bound(v, depth) for v in operands]
        known = [b for b in bounds if b is not None]
        arithmetic = D.ARITHMETIC
        if kind is arithmetic["add"] and value.type.bits == 64 and len(known) == 2:
            return known[0] + known[1]
        if kind is arithmetic["sub"] and value.type.bits == 64 and bounds[0] is not None \
                and is_op(operands[1], D.CONST):
            return bounds[0] - operands[1].attrs["value"]
        never_negative = len(known) == len(bounds) and min(known) >= 0
        if kind is arithmetic["mul"] and value.type.bits == 64 and never_negative:
            return known[0] * known[1]
        if kind in _KEEPS_NON_NEGATIVE and never_negative:
            return 0
        if kind is arithmetic["min"] and len(known) == 2:
            return min(known)
        if kind is arithmetic["mod"]:
            return 0 if bounds[1] is not None and bounds[1] >= 0 else None  # Python's %
        if kind is arithmetic["max"] and known:
            return max(known)
        if kind is arithmetic["and"] and any(b >= 0 for b in known):
            return 0
        if kind is D.SELECT and bounds[1] is not None and bounds[2] is not None:
            return min(bounds[1], bounds[2])
        return None


# Never negative where their operands are not.
_KEEPS_NON_NEGATIVE = {D.ARITHMETIC[name] for name in ("floordiv", "shr", "or", "xor")}


def _is_integer(type: T.IRType) -> bool:
    return isinstance(type, T.ScalarType) and type.is_integer
