"""Builds IR one operation at a time at an insertion point."""
from __future__ import annotations

from typing import Any

from .definitions import OpDefinition
from .function import Block, Function
from .ops import Location, Op, Successor, Value
from .types import IRType, void


class Builder:
    def __init__(self, function: Function):
        self.function = function
        self.block: Block | None = None
        self.loc: Location | None = None

    def new_block(self, param_types: tuple[IRType, ...] = ()) -> Block:
        return self.function.add_block(Block(param_types))

    def position_at_end(self, block: Block) -> None:
        self.block = block

    def op(self, kind: OpDefinition | str, operands: list[Value], type: IRType = void,
           attrs: dict[str, Any] | None = None, successors: list[Successor] | None = None) -> Op:
        assert self.block is not None and not self.block.is_terminated
        return self.block.append(Op(kind, operands, type, attrs, successors, self.loc))

    def const(self, value, type: IRType) -> Op:
        return self.op("const", [], type, {"value": value})

    def br(self, target: Block, args: list[Value] = ()) -> Op:
        return self.op("br", [], successors=[Successor(target, list(args))])

    def cbr(self, cond: Value, then: Block, then_args: list[Value],
            orelse: Block, else_args: list[Value]) -> Op:
        return self.op("cbr", [cond], successors=[Successor(then, list(then_args)),
                                                  Successor(orelse, list(else_args))])

    def ret(self, value: Value | None = None) -> Op:
        return self.op("ret", [value] if value is not None else [])
