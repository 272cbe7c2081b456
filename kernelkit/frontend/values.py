"""What a name can stand for while a kernel is translated.

A name is bound either to an IR `Value` (known at run time) or to a `PyConst`
(a Python object known at compile time: a module, a function, a dtype, `kk.Global`).
Numbers known at compile time become IR constants, so that folding sees them. A name
bound on some paths but not on others is `Undefined`, which says why for the error a
read of it gives.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.definitions import CONST
from ..ir.ops import Value, is_op


@dataclass(frozen=True, slots=True)
class PyConst:
    value: Any


@dataclass(frozen=True, slots=True)
class Undefined:
    """A name bound on some paths but not on others: `reason` says which, and `before`
    names the statement to assign it before."""

    reason: str = ("it is not assigned on every path, or holds values of incompatible "
                   "types on different paths")
    before: str = "the if/loop"

    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED = Undefined()

FrontendValue = Value | PyConst


def is_const(value) -> bool:
    return is_op(value, CONST)
