"""What a name can stand for while a kernel is translated.

A name is bound either to an IR `Value` (known at run time) or to a `PyConst`
(a Python object known at compile time: a module, a function, a dtype, `kk.Global`).
Numbers known at compile time become IR constants, so that folding sees them. A frozen
dataclass argument is a `StructValue`: its fields by name, each an IR value (or a
`StructValue`); the IR has no structs. A name bound on some paths but not on others is
`Undefined`, which says why for the error a read of it gives.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import types as T
from ..ir.definitions import CONST
from ..ir.ops import Value, is_op


@dataclass(frozen=True, slots=True)
class PyConst:
    value: Any


@dataclass(frozen=True, slots=True, eq=False)
class StructValue:
    """A frozen dataclass a kernel was given (`T.StructType`), read-only: the value of
    each field, in the order of `type.fields`. A kernel receives it as the parameters of
    its scalar leaves (`T.leaves`), and so does a device function it is passed to."""

    type: T.StructType
    fields: dict[str, Value | StructValue]

    @property
    def class_name(self) -> str:
        return self.type.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Undefined:
    """A name bound on some paths but not on others: `reason` says which, and `before`
    names the statement to assign it before; `hint`, where given, says what to do
    instead."""

    reason: str = ("it is not assigned on every path, or holds values of incompatible "
                   "types on different paths")
    before: str = "the if/loop"
    hint: str | None = None

    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED = Undefined()

FrontendValue = Value | PyConst | StructValue


def is_const(value) -> bool:
    return is_op(value, CONST)
