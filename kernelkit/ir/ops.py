"""SSA values and operations; what each kind of operation is lives in `definitions.py`.

An operation produces at most one value (itself). Control flow is explicit: a block
ends with a terminator (`br`, `cbr`, `ret`) whose successors pass values to the
parameters of the target blocks (block arguments instead of phi nodes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .definitions import CONST, DEFINITIONS, OpDefinition, Trait
from .types import IRType, void

if TYPE_CHECKING:
    from .function import Block


class Value:
    """Something an operation can use: an operation's result or a block parameter."""

    __slots__ = ("type",)

    def __init__(self, type: IRType):
        self.type = type


class BlockParam(Value):
    __slots__ = ("block", "hint")

    def __init__(self, type: IRType, block: Block | None = None, hint: str = ""):
        super().__init__(type)
        self.block = block
        self.hint = hint


@dataclass(slots=True)
class Successor:
    block: Block
    args: list[Value] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Location:
    """Where an operation came from in the kernel's Python source."""

    line: int
    column: int = 0
    file: str = ""


class Op(Value):
    """An operation of the kind `definition` (one of `definitions.DEFINITIONS`), made
    from the definition or from its name as the IR text spells it."""

    __slots__ = ("definition", "operands", "attrs", "successors", "loc", "block")

    def __init__(self, definition: OpDefinition | str, operands: list[Value],
                 type: IRType = void, attrs: dict[str, Any] | None = None,
                 successors: list[Successor] | None = None, loc: Location | None = None):
        if isinstance(definition, str):
            definition = DEFINITIONS[definition]
        super().__init__(type)
        self.definition = definition
        self.operands = list(operands)
        self.attrs = attrs or {}
        self.successors = successors or []
        self.loc = loc
        self.block = None

    @property
    def opcode(self) -> str:
        """The kind's name, as the IR text prints it (for messages and printing)."""
        return self.definition.name

    @property
    def is_terminator(self) -> bool:
        return self.definition.is_terminator

    @property
    def is_pure(self) -> bool:
        return self.definition.is_pure

    def has(self, trait: Trait) -> bool:
        return trait in self.definition.traits

    def all_operands(self):
        yield from self.operands
        for successor in self.successors:
            yield from successor.args

    def map_operands(self, mapping: dict[Value, Value]) -> None:
        self.operands = [mapping.get(v, v) for v in self.operands]
        for successor in self.successors:
            successor.args = [mapping.get(v, v) for v in successor.args]

    def __repr__(self) -> str:
        return f"<Op {self.opcode} : {self.type}>"


def is_op(value, definition: OpDefinition) -> bool:
    """Whether `value` is an operation of the kind `definition`."""
    return isinstance(value, Op) and value.definition is definition


def constant_value(value):
    """The value of a constant operation, or None for anything else."""
    return value.attrs["value"] if is_op(value, CONST) else None
