"""Activity analysis: which values of a kernel carry derivatives, which arrays hold such
values, and which arrays the kernel writes.

A value is active when it is a float that depends on a differentiated argument (an
`Active` or `Duplicated` scalar, or a load from a `Duplicated` array or from a local or
private array an active value was stored into). Integers and bools are never active.
An active value stored into an array the caller gave as `Const` (or did not
differentiate) would lose its derivative silently: that is an error here."""
from __future__ import annotations

import linecache
from dataclasses import dataclass, field

from kernelkit.errors import CompileError
from kernelkit.ir import types as T
from kernelkit.ir.definitions import (ATOMIC_CAS, ATOMICS, EXTRACT, INTRINSIC, LOAD, LOCALMEM,
                                      PRIVATE, STORE, TUPLE, Trait)
from kernelkit.ir.function import Function
from kernelkit.ir.ops import BlockParam, Op, Value, is_op

from ..activities import is_differentiated
from .derivatives import PARTIALS

CUSTOM_RULES = ("enzyme.custom_vjp", "enzyme.custom_jvp", "enzyme.custom_vjp_result")


def source_error(function: Function, op: Op | None, message: str, hint: str) -> CompileError:
    loc = op.loc if op is not None else None
    file = (loc.file or function.source_file) if loc else None
    return CompileError(message, kernel=function.name, file=file,
                        line=loc.line if loc else None,
                        source_line=linecache.getline(file, loc.line) if loc and file else None,
                        hint=hint)


def array_root(function: Function, op: Op, value: Value) -> Value:
    """The kernel parameter or allocation an array operand is."""
    if isinstance(value, BlockParam) and value.block is function.entry or \
            is_op(value, LOCALMEM) or is_op(value, PRIVATE):
        return value
    raise source_error(function, op, "an array chosen at run time cannot be differentiated",
                       "index one array per access: an array argument, kk.localmem or "
                       "kk.private")


def is_float(value: Value) -> bool:
    return isinstance(value.type, T.ScalarType) and value.type.is_float


def is_float_array(value: Value) -> bool:
    return isinstance(value.type, T.ArrayType) and value.type.dtype.is_float


@dataclass
class ActivityAnalysis:
    function: Function
    activities: list[str]
    values: set = field(default_factory=set)        # active values
    arrays: set = field(default_factory=set)        # array roots that hold active values
    written: set = field(default_factory=set)       # array roots stored or atomically updated
    useful: set = field(default_factory=set)        # active values a result depends on

    def __contains__(self, value: Value) -> bool:
        return value in self.values

    def needs_adjoint(self, value: Value) -> bool:
        """Whether reverse mode carries an adjoint for `value`: it is active, and something
        stored into a differentiated array depends on it. (An adjoint that is always zero
        would still meet the infinite partials of values nobody reads: x / 0 whose result
        only chooses an index.)"""
        return value in self.useful

    def active_operands(self, op: Op) -> list[bool]:
        return [v in self.values for v in op.operands]


def analyze(function: Function, activities: list[str], params=None) -> ActivityAnalysis:
    """The function's active values and arrays, found by iterating to a fixed point over
    its operations and branch arguments. `activities` are those of `params` (by default,
    the function's parameters)."""
    result = ActivityAnalysis(function, activities)
    values, arrays = result.values, result.arrays
    for param, activity in zip(function.params if params is None else params, activities):
        if is_differentiated(activity):
            if is_float(param):
                values.add(param)
            elif is_float_array(param):
                arrays.add(param)
    ops = [op for block in function.reachable_blocks() for op in block.ops]
    result.written = written_arrays(function)
    changed = True
    while changed:
        changed = False
        for op in ops:
            new_values, new_arrays = _transfer(function, op, values, arrays)
            for value in new_values:
                if value not in values:
                    values.add(value)
                    changed = True
            for array in new_arrays:
                if array not in arrays:
                    arrays.add(array)
                    changed = True
    result.useful = _useful(function, ops, result)
    for op in ops:
        if (op.definition is STORE or op.has(Trait.ATOMIC)) and op.operands[-1] in values:
            root = array_root(function, op, op.operands[0])
            if root not in arrays:
                name = function.arg_names[function.params.index(root)] \
                    if root in function.params else "an array"
                raise source_error(function, op, f"a value that depends on differentiated "
                                   f"arguments is stored into '{name}', which is not "
                                   f"differentiated, so its derivative would be lost",
                                   f"pass '{name}' as Duplicated(array, shadow)")
    return result


def written_arrays(function: Function) -> set:
    """The array roots the function stores into or updates atomically."""
    return {array_root(function, op, op.operands[0])
            for block in function.reachable_blocks() for op in block.ops
            if op.definition is STORE or op.has(Trait.ATOMIC)}


def _useful(function: Function, ops: list[Op], activity: ActivityAnalysis) -> set:
    """The active values a store into a differentiated array depends on, followed back
    through the operations that carry derivatives and the branch arguments."""
    values, useful = activity.values, set()
    work = [op.operands[-1] for op in ops
            if (op.definition is STORE or op.has(Trait.ATOMIC))
            and array_root(function, op, op.operands[0]) in activity.arrays]
    arguments: dict = {}     # block parameter -> the values branches pass it
    for op in ops:
        for successor in op.successors:
            for param, arg in zip(successor.block.params, successor.args):
                arguments.setdefault(param, []).append(arg)
    while work:
        value = work.pop()
        if value not in values or value in useful:
            continue
        useful.add(value)
        if isinstance(value, Op) and value.definition is not LOAD:
            work.extend(value.operands)
        work.extend(arguments.get(value, ()))
    return useful


def _transfer(function: Function, op: Op, values: set, arrays: set):
    """What `op` makes active, given the active values and arrays so far."""
    new_values, new_arrays = [], []
    definition = op.definition
    if definition is LOAD:
        if array_root(function, op, op.operands[0]) in arrays and is_float(op):
            new_values.append(op)
    elif definition is STORE or definition in ATOMICS.values() or definition is ATOMIC_CAS:
        root = array_root(function, op, op.operands[0])
        # A local or private array holds what is stored into it; an argument's activity
        # is the caller's to give (an active value stored into a Const one is an error).
        if any(v in values for v in op.operands[1:]) and is_float_array(root) and \
                root not in function.params:
            new_arrays.append(root)
        if op.has(Trait.ATOMIC) and is_float(op) and \
                array_root(function, op, op.operands[0]) in arrays:
            new_values.append(op)
    elif definition is INTRINSIC and op.attrs["name"] in CUSTOM_RULES:
        # A call with a custom rule carries the derivatives of its arguments.
        if is_float(op) and any(v in values for v in op.operands):
            new_values.append(op)
    elif op.has(Trait.SUBGROUP):
        # Carries the other lanes' derivatives too: active where its value is.
        if is_float(op) and op.operands[0] in values:
            new_values.append(op)
    elif definition in PARTIALS or definition in (TUPLE, EXTRACT):
        if is_float(op) or definition is TUPLE:
            if any(v in values for v in op.operands):
                new_values.append(op)
    for successor in op.successors:
        for param, arg in zip(successor.block.params, successor.args):
            if arg in values and (is_float(param) or isinstance(param.type, T.TupleType)):
                new_values.append(param)
    return new_values, new_arrays
