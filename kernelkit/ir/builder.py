"""Builds IR at an insertion point, with the typing rules of kernels.

The typed methods (`binary`, `compare`, `unary`, `cast`, `truth`, `select`, `math`)
follow NumPy's scalar rules with NEP 50 promotion (a Python number is weak: it takes the
other operand's precision) and fold operations on constants as the compiled code would
compute them. The frontend builds every expression through them, so a pass that builds
`x * y` gets the same types and constants the frontend would.

A rule a user's kernel can break (a float in a bitwise operation, subtracting bools)
raises `TypingError`; the frontend turns it into a CompileError at the source line."""
from __future__ import annotations

from typing import Any

from ..errors import KernelkitError
from . import types as T
from .definitions import (ARITHMETIC, CAST, COMPARISONS, CONST, DEFINITIONS, EXTRACT, MATH,
                          SELECT, TUPLE, UNARY, OpDefinition)
from .fold import fold, to_python
from .function import Block, Function
from .ops import Location, Op, Successor, Value, constant_value, is_op
from .types import IRType, void


class TypingError(KernelkitError):
    """An operation the typing rules refuse; `hint` says what to write instead."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


SWAPPED_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


class Builder:
    """Inserts operations at its insertion point: the end of a block
    (`position_at_end`), or just before or after an operation (`position_before`,
    `position_after`). Operations get the builder's `loc`."""

    def __init__(self, function: Function, loc: Location | None = None):
        self.function = function
        self.block: Block | None = None
        self.before: Op | None = None   # insert before this op; None: at the block's end
        self.loc = loc

    # -- the insertion point --------------------------------------------------------------

    def new_block(self, param_types: tuple[IRType, ...] = ()) -> Block:
        return self.function.add_block(Block(param_types))

    def position_at_end(self, block: Block) -> None:
        self.block, self.before = block, None

    def position_before(self, op: Op) -> None:
        self.block, self.before = op.block, op

    def position_after(self, op: Op) -> None:
        block = op.block
        following = block.ops.index(op) + 1
        self.block = block
        self.before = block.ops[following] if following < len(block.ops) else None

    def position_before_terminator(self, block: Block) -> None:
        self.block, self.before = block, block.terminator

    def insert(self, op: Op) -> Op:
        """Put `op` at the insertion point (which stays just after it)."""
        block = self.block
        assert block is not None
        op.block = block
        if self.before is None:
            assert not block.is_terminated, "inserting after a terminator"
            block.ops.append(op)
        else:
            block.ops.insert(block.ops.index(self.before), op)
        self.inserted(op)
        return op

    def inserted(self, op: Op) -> None:
        """Called for each operation put into the function (the rewriter keeps uses)."""

    # -- operations as given --------------------------------------------------------------

    def op(self, kind: OpDefinition | str, operands: list[Value], type: IRType = void,
           attrs: dict[str, Any] | None = None, successors: list[Successor] | None = None) -> Op:
        return self.insert(Op(kind, operands, type, attrs, successors, self.loc))

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

    # -- typed, folded --------------------------------------------------------------------

    def constant(self, value, type: T.ScalarType) -> Value:
        """A constant holding `value` as `type` holds it (wrapped, rounded)."""
        return self.const(to_python(value, type), type)

    def emit(self, kind: OpDefinition | str, operands: list[Value], type: IRType,
             attrs: dict[str, Any] | None = None) -> Value:
        """An operation of result `type`, or the constant it folds to."""
        definition = DEFINITIONS[kind] if isinstance(kind, str) else kind
        if operands and all(is_op(v, CONST) for v in operands):
            folded = fold(definition, [constant_value(v) for v in operands],
                          [v.type for v in operands], type)
            if folded is not None:
                return self.const(folded, type)
        return self.op(definition, operands, type, attrs)

    def cast(self, value: Value, type: IRType) -> Value:
        """`value` converted to `type`: NumPy's conversions (wrapping integers, truncating
        floats; to bool: `!= 0`); tuples element by element."""
        if is_op(value, CAST) and value.type.strong == value.operands[0].type.strong:
            value = value.operands[0]   # a weak view of a strong value (len(a)): no conversion
        if value.type == type:
            return value
        if isinstance(type, T.TupleType) and isinstance(value.type, T.TupleType):
            if isinstance(type, T.VectorType) != isinstance(value.type, T.VectorType):
                raise TypingError(f"cannot convert {value.type.name} to {type.name}")
            return self.make_tuple([self.cast(self.extract(value, i), t)
                                    for i, t in enumerate(type.elements)],
                                   getattr(type, "shape", None))
        if not isinstance(type, T.ScalarType) or not isinstance(value.type, T.ScalarType):
            raise TypingError(f"cannot convert {value.type.name} to {type.name}")
        if type.is_bool:
            return self.truth(value)
        return self.emit(CAST, [value], type)

    def truth(self, value: Value) -> Value:
        if value.type.is_bool:
            return value
        return self.emit(COMPARISONS["ne"], [value, self.constant(0, value.type)], T.bool_)

    def binary(self, name: str, left: Value, right: Value) -> Value:
        """`left <name> right` (`add`, `truediv`, `shl` ...) with NumPy's promotion."""
        a, b = left.type, right.type
        if name in ("and", "or", "xor"):
            if a.is_float or b.is_float:
                raise TypingError(f"bitwise operators need integers or bools, got {a.name} "
                                  f"and {b.name}")
            result = T.promote(a, b)
            return self.emit(ARITHMETIC[name], [self.cast(left, result),
                                                self.cast(right, result)], result)
        if a.is_bool and b.is_bool:
            return self.bool_binary(name, left, right)
        if name in ("shl", "shr") and (a.is_float or b.is_float):
            raise TypingError(f"shifts need integers, got {a.name} and {b.name}")
        # A bool with a number takes the number's type (NumPy: np.True_ + np.int8(1) is an
        # int8, np.True_ + 1 the default int).
        operand_type = T.promote(a, b)
        if name == "truediv" and not operand_type.is_float or \
                name == "pow" and operand_type.is_integer and is_op(right, CONST) \
                and constant_value(right) < 0:
            operand_type = T.weak_float if (a.weak and b.weak) else T.float64
        return self.emit(ARITHMETIC[name], [self.cast(left, operand_type),
                                            self.cast(right, operand_type)], operand_type)

    def bool_binary(self, name: str, left: Value, right: Value) -> Value:
        """Arithmetic between two bools, as NumPy does it on np.bool_: + is a logical or,
        * a logical and, min and max stay bools, / gives a float64, and the operations
        NumPy has no bool loop for (//, %, **, <<, >>) compute in int8; - raises."""
        if name == "sub":
            raise TypingError("bools cannot be subtracted (NumPy raises for np.bool_ - np.bool_)",
                              hint="use ^ or != for 'differs', or convert with int(...) first "
                                   "to subtract numbers")
        logical = {"add": "or", "mul": "and", "min": "and", "max": "or"}.get(name)
        if logical is not None:
            return self.emit(ARITHMETIC[logical], [left, right], T.bool_)
        operand_type = T.float64 if name == "truediv" else T.int8
        return self.emit(ARITHMETIC[name], [self.cast(left, operand_type),
                                            self.cast(right, operand_type)], operand_type)

    def compare(self, name: str, left: Value, right: Value) -> Value:
        """Compares the values of two numbers, as NumPy does: a Python int is compared by
        value with an integer of any type (50 < 300 holds for a uint8 50), and a signed
        integer with a uint64 without going through float64."""
        a, b = left.type, right.type
        if a.is_integer and b.is_integer and a.weak != b.weak:
            if a.weak:
                return self.compare(SWAPPED_COMPARISONS[name], right, left)
            return self.compare_with_python_int(name, left, right)
        operand_type = T.promote(a, b)
        if a.is_integer and b.is_integer and a.is_signed != b.is_signed and \
                not operand_type.is_integer:
            # int64 and uint64 have no common integer type (NumPy's promotion gives float64,
            # which cannot tell 2**63 - 1 from 2**63).
            if not a.is_signed:
                return self.compare(SWAPPED_COMPARISONS[name], right, left)
            return self.compare_signed_with_uint64(name, self.cast(left, T.int64), right)
        return self.emit(COMPARISONS[name], [self.cast(left, operand_type),
                                             self.cast(right, operand_type)], T.bool_)

    def compare_with_python_int(self, name: str, number: Value, python_int: Value) -> Value:
        """`number <name> python_int` where `number` is a strong integer and `python_int`
        a weak one (a literal, len(a), a Python int argument)."""
        low, high = integer_range(number.type)
        if is_op(python_int, CONST):
            value = constant_value(python_int)
            if low <= value <= high:
                return self.emit(COMPARISONS[name], [number, self.cast(python_int, number.type)],
                                 T.bool_)
            # Out of the number's range: the answer is the same for every value it holds.
            below = value < low
            holds = {"eq": False, "ne": True, "lt": not below, "le": not below,
                     "gt": below, "ge": below}[name]
            return self.constant(holds, T.bool_)
        if number.type == T.uint64:
            return self.compare(SWAPPED_COMPARISONS[name], self.cast(python_int, T.int64), number)
        # A Python int fits in an int64, and so does every value of the other type.
        return self.emit(COMPARISONS[name], [self.cast(number, T.int64),
                                             self.cast(python_int, T.int64)], T.bool_)

    def compare_signed_with_uint64(self, name: str, signed: Value, unsigned: Value) -> Value:
        """`signed <name> unsigned` for an int64 and a uint64: a negative value is below
        every uint64; otherwise both compare as uint64."""
        negative = self.emit(COMPARISONS["lt"], [signed, self.constant(0, T.int64)], T.bool_)
        compared = self.emit(COMPARISONS[name], [self.cast(signed, T.uint64), unsigned], T.bool_)
        if name in ("lt", "le", "ne"):
            return self.emit(ARITHMETIC["or"], [negative, compared], T.bool_)
        return self.emit(ARITHMETIC["and"], [self.unary("not", negative), compared], T.bool_)

    def unary(self, name: str, operand: Value) -> Value:
        return self.emit(UNARY[name], [operand], operand.type)

    def select(self, condition: Value, if_true: Value, if_false: Value) -> Value:
        result = T.unify(if_true.type, if_false.type)
        return self.emit(SELECT, [condition, self.cast(if_true, result),
                                  self.cast(if_false, result)], result)

    def math(self, name: str, *args: Value) -> Value:
        """`kk.<name>(args)`: computed in the promoted float type of the arguments
        (a float32 stays a float32; integers compute in float64)."""
        function = MATH[name].member
        operand_type = T.promote(args[0].type, args[1].type) if len(args) == 2 else args[0].type
        if not operand_type.is_float:
            operand_type = T.weak_float if operand_type.weak else T.float64
        operands = [self.cast(a, operand_type) for a in args]
        return self.emit(MATH[name], operands, T.bool_ if function.predicate else operand_type)

    def make_tuple(self, elements: list[Value], shape: tuple[int, ...] | None = None) -> Value:
        """A tuple of `elements`; with a `shape`, a vector or matrix (`T.VectorType`) of
        them, all of one type, in row-major order."""
        if shape is None:
            return self.op(TUPLE, elements, T.TupleType(tuple(e.type for e in elements)))
        return self.op(TUPLE, elements, T.VectorType(tuple(e.type for e in elements), shape),
                       {"shape": tuple(shape)})

    def extract(self, value: Value, index: int) -> Value:
        if is_op(value, TUPLE):
            return value.operands[index]
        return self.op(EXTRACT, [value], value.type.elements[index], {"index": index})


def integer_range(type: T.ScalarType) -> tuple[int, int]:
    """The smallest and largest value of an integer type."""
    if type.is_signed:
        return -(1 << (type.bits - 1)), (1 << (type.bits - 1)) - 1
    return 0, (1 << type.bits) - 1
