"""SSA values and operations, and the table of opcodes with their properties.

An operation produces at most one value (itself). Control flow is explicit: a block
ends with a terminator (`br`, `cbr`, `ret`) whose successors pass values to the
parameters of the target blocks (block arguments instead of phi nodes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    __slots__ = ("opcode", "operands", "attrs", "successors", "loc", "block")

    def __init__(self, opcode: str, operands: list[Value], type: IRType = void,
                 attrs: dict[str, Any] | None = None, successors: list[Successor] | None = None,
                 loc: Location | None = None):
        assert opcode in OPCODES, opcode
        super().__init__(type)
        self.opcode = opcode
        self.operands = list(operands)
        self.attrs = attrs or {}
        self.successors = successors or []
        self.loc = loc
        self.block = None

    @property
    def is_terminator(self) -> bool:
        return OPCODES[self.opcode].terminator

    @property
    def is_pure(self) -> bool:
        return OPCODES[self.opcode].pure

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


@dataclass(frozen=True, slots=True)
class OpInfo:
    pure: bool = True          # no side effects: removable when unused, mergeable by CSE
    terminator: bool = False


_PURE = OpInfo()
_EFFECT = OpInfo(pure=False)
_TERMINATOR = OpInfo(pure=False, terminator=True)

BINARY_OPS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "min", "max",
              "and", "or", "xor", "shl", "shr")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY_OPS = ("neg", "not", "invert", "abs")
ATOMIC_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "exchange")
GEOMETRY_OPS = ("local_id", "group_id", "ndrange")

OPCODES: dict[str, OpInfo] = {
    "const": _PURE,
    **{name: _PURE for name in BINARY_OPS + COMPARE_OPS + UNARY_OPS},
    "cast": _PURE,
    "select": _PURE,
    "math": _PURE,
    **{name: _PURE for name in GEOMETRY_OPS},
    "dim": _PURE,        # an array's extent along attrs['axis']
    "tuple": _PURE,
    "extract": _PURE,    # element attrs['index'] of a tuple
    # Loads are not pure: a store or barrier between two equal loads changes the result.
    "load": _EFFECT,
    "store": _EFFECT,
    "atomic": _EFFECT,
    "atomic_cas": _EFFECT,
    "localmem": _EFFECT,  # one allocation per work-group: never merged
    "private": _EFFECT,   # one allocation per work-item: never merged
    "barrier": _EFFECT,
    "barrier_any": _EFFECT,  # a barrier that tells every work-item if any operand was true
    "print": _EFFECT,
    "call": _EFFECT,
    "intrinsic": _EFFECT,  # a plugin's marker (attrs['name']), rewritten by the plugin
    "deferred": _PURE,     # a reference to function attrs['function'] of the module
    "call_ref": _EFFECT,   # a call through a reference (operand 0)
    "assume": _EFFECT,     # operand 0 holds for every work-item of the group (versioning)
    "br": _TERMINATOR,
    "cbr": _TERMINATOR,
    "ret": _TERMINATOR,
}

BARRIER_OPS = ("barrier", "barrier_any")

# Loads have no side effects: an unused load can be dropped, but not merged with another.
REMOVABLE_WHEN_UNUSED = {name for name, info in OPCODES.items() if info.pure} | {"load"}
