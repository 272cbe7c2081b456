"""Expressions: names and the Python values they stand for, constants, attributes,
tuples, operators, comparisons, short-circuit and conditional expressions, subscripts and
array indexing; and the typed building blocks every part of the translator builds with,
thin wrappers over `ir.builder.Builder` (which owns the typing rules) that report its
errors at the source line.

`Expressions` is mixed into `translate.FunctionTranslator`; calls are `calls.Calls`'."""
from __future__ import annotations

import ast
import builtins
import difflib
import functools
from collections.abc import Callable

import numpy as np

from ..errors import CompileError
from ..ir import types as T
from ..ir.builder import TypingError
from ..ir.definitions import OpDefinition
from ..ir.ops import Value, constant_value
from .source import describe
from .values import PyConst, StructValue, Undefined, is_const


# Operators that cannot fail whatever their operands (no division, no shift past the
# width, no power).
_HARMLESS_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)


class Expressions:
    # -- expressions ----------------------------------------------------------------------

    def expr(self, node: ast.expr):
        saved = self.node
        self.node = node
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(f"{describe(node)} is not supported in kernels", node)
        result = method(node)
        self.node = saved
        return result

    def expr_Constant(self, node: ast.Constant):
        return self.python_value(node.value, node)

    def expr_Name(self, node: ast.Name):
        return self.load_name(node.id, node)

    def load_name(self, name: str, node):
        if name in self.env:
            value = self.env[name]
            if isinstance(value, Undefined):
                raise self.error(f"'{name}' may be undefined here: {value.reason}", node,
                                 hint=value.hint or f"assign '{name}' before {value.before}")
            return value
        if name in self.closure:
            return self.python_value(self.closure[name], node)
        if name in self.globals:
            return self.python_value(self.globals[name], node)
        if hasattr(builtins, name):
            return PyConst(getattr(builtins, name))
        raise self.error(f"name '{name}' is not defined", node,
                         hint="define it before use, or as a module-level constant")

    def python_value(self, value, node):
        """A compile-time Python object as a frontend value: numbers become constants."""
        if isinstance(value, np.generic) and T.from_numpy(value.dtype) is not None:
            return self.constant(value.item(), T.from_numpy(value.dtype))
        if isinstance(value, bool):
            return self.constant(value, T.bool_)
        if isinstance(value, int):
            if not -2**63 <= value < 2**64:
                raise self.error(f"the integer {value} does not fit in 64 bits", node)
            return self.constant(value, T.weak_int if value < 2**63 else T.uint64)
        if isinstance(value, float):
            return self.constant(value, T.weak_float)
        if isinstance(value, tuple) and all(isinstance(v, (int, float, bool, np.generic))
                                            for v in value):
            return self.make_tuple([self.python_value(v, node) for v in value])
        return PyConst(value)

    def expr_Attribute(self, node: ast.Attribute):
        base = self.expr(node.value)
        if isinstance(base, PyConst):
            try:
                value = getattr(base.value, node.attr)
            except AttributeError:
                raise self.error(f"{describe(node.value)} has no attribute '{node.attr}'",
                                 node) from None
            return self.python_value(value, node)
        if isinstance(base, StructValue):
            return self.field(base, node)
        if isinstance(base.type, T.VectorType):
            return self.extract(base, self.component_position(base, node))
        if isinstance(base.type, T.ArrayType):
            if node.attr == "shape":
                return self.make_tuple([self.array_dim(base, axis)
                                        for axis in range(base.type.ndim)])
            if node.attr == "ndim":
                return self.constant(base.type.ndim, T.weak_int)
            if node.attr == "size":
                return functools.reduce(lambda a, b: self.binary("mul", a, b, node),
                                        [self.array_dim(base, a) for a in range(base.type.ndim)],
                                        self.constant(1, T.weak_int))
            if node.attr == "dtype":
                return PyConst(base.type.dtype.numpy_dtype.type)
        raise self.error(f"a {self.type_name(base)} has no attribute '{node.attr}' in kernels",
                         node)

    def field(self, struct: StructValue, node: ast.Attribute):
        """`p.x`: the value of a field of a dataclass argument."""
        value = struct.fields.get(node.attr)
        if value is None:
            names = list(struct.fields)
            close = difflib.get_close_matches(node.attr, names, n=1)
            raise self.error(f"{describe(node.value)} is a {struct.class_name}, a dataclass "
                             f"without a field '{node.attr}'; its fields are "
                             f"{', '.join(names) or 'none'}", node,
                             hint=f"did you mean '{describe(node.value)}.{close[0]}'?" if close
                             else f"add the field '{node.attr}' to {struct.class_name}, or "
                                  f"read one it has")
        return value

    def expr_Tuple(self, node: ast.Tuple):
        elements = [self.expr(e) for e in node.elts]
        for element, element_node in zip(elements, node.elts):
            if isinstance(element, StructValue):
                raise self.error(f"a tuple cannot hold a dataclass ({describe(element_node)} is "
                                 f"a {element.class_name})", element_node,
                                 hint="put its fields in the tuple, or use it as it is")
        if any(isinstance(e, PyConst) for e in elements):
            if all(isinstance(e, PyConst) for e in elements):
                return PyConst(tuple(e.value for e in elements))
            raise self.error("a tuple cannot mix run-time values with "
                             "compile-time objects", node)
        return self.make_tuple(elements)

    def expr_BinOp(self, node: ast.BinOp):
        op = self.binary_operator(node)
        return self.binary(op, self.expr(node.left), self.expr(node.right), node)

    def binary_operator(self, node: ast.BinOp | ast.AugAssign) -> str:
        """The builder's name for the operator of `a + b` or `a += b`."""
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(f"operator {describe(node.op)} is not supported", node)
        return op

    def expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return self.unary("not", self.truth(operand, node.operand), node)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.USub) and isinstance(getattr(operand, "type", None),
                                                        T.VectorType):
            return self.vector_unary("neg", operand, node)
        self.require_scalar(operand, node.operand)
        if isinstance(node.op, ast.USub):
            if operand.type.is_bool:
                raise self.error("a bool cannot be negated (NumPy raises for -np.bool_)", node,
                                 hint="use 'not x' or ~x for the logical negation, or -int(x) "
                                      "for the number")
            return self.unary("neg", operand, node)
        if isinstance(node.op, ast.Invert):
            if operand.type.is_float:
                raise self.error("~ needs an integer or bool operand, got "
                                 f"{operand.type.name}", node)
            return self.unary("invert", operand, node)
        raise self.error(f"operator {describe(node.op)} is not supported", node)

    def expr_BoolOp(self, node: ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        result = self.expr(node.values[0])
        for operand_node in node.values[1:]:
            result = self.short_circuit(result, operand_node, is_and, node)
        return result

    def short_circuit(self, left, right_node: ast.expr, is_and: bool, node):
        self.require_scalar(left, node)
        condition = self.truth(left, node)
        if is_const(condition):
            if bool(constant_value(condition)) == is_and:
                return self.expr(right_node)
            return left
        if self.harmless(right_node):
            # Nothing to skip: a select, not a branch (one block, one test of the whole
            # condition: vector code on the CPU, a boundary the derivative works out).
            right = self.expr(right_node)
            self.require_scalar(right, right_node)
            result_type = T.unify(left.type, right.type)
            if result_type is None:
                raise self.error(f"the operands of '{'and' if is_and else 'or'}' have "
                                 f"incompatible types {left.type.name} and {right.type.name}",
                                 node)
            left, right = self.cast(left, result_type), self.cast(right, result_type)
            return self.builder.select(condition, *((right, left) if is_and else (left, right)))
        right_block = self.builder.new_block()
        join = self.builder.new_block()
        left_block = self.builder.block
        if is_and:
            self.builder.cbr(condition, right_block, [], join, [])
        else:
            self.builder.cbr(condition, join, [], right_block, [])
        self.builder.position_at_end(right_block)
        right = self.expr(right_node)
        self.require_scalar(right, right_node)
        result_type = T.unify(left.type, right.type)
        if result_type is None:
            raise self.error(f"the operands of '{'and' if is_and else 'or'}' have incompatible "
                             f"types {left.type.name} and {right.type.name}", node)
        param = join.add_param(result_type)
        self.builder.br(join, [self.cast(right, result_type)])
        # The left operand reaches the join straight from the branch; its conversion to the
        # result type, known only now, goes just before that branch.
        branch = left_block.ops.pop()
        self.builder.position_at_end(left_block)
        converted = self.cast(left, result_type)
        left_block.append(branch)
        next(s for s in branch.successors if s.block is join).args = [converted]
        self.builder.position_at_end(join)
        return param

    def harmless(self, node: ast.expr) -> bool:
        """Whether evaluating `node` where Python would skip it changes nothing: it reads
        no memory, calls nothing and cannot fail (names, constants, comparisons, `+ - *`
        and bitwise arithmetic, unary operators, attributes such as `a.shape`, and items
        of tuples at constant places), so that `and` and `or` may evaluate it
        regardless."""
        if isinstance(node, (ast.Constant, ast.Name)):
            return True
        if isinstance(node, ast.Compare):
            return self.harmless(node.left) and all(map(self.harmless, node.comparators))
        if isinstance(node, ast.BoolOp):
            return all(map(self.harmless, node.values))
        if isinstance(node, ast.UnaryOp):
            return self.harmless(node.operand)
        if isinstance(node, ast.BinOp):
            return isinstance(node.op, _HARMLESS_OPERATORS) and self.harmless(node.left) and \
                self.harmless(node.right)
        if isinstance(node, ast.Attribute):
            return isinstance(node.value, ast.Name)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = node.value       # an item of a tuple or of a shape, at a constant place
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                return self.harmless(base)
            held = self.env.get(base.id) if isinstance(base, ast.Name) else None
            return (isinstance(held, PyConst) and isinstance(held.value, tuple)) or (
                isinstance(held, Value) and isinstance(held.type, T.TupleType))
        return False

    def expr_Compare(self, node: ast.Compare):
        return self.compare_chain(self.expr(node.left), list(zip(node.ops, node.comparators)),
                                  node)

    def compare_chain(self, left, rest: list, node) -> Value:
        """a < b < c: b is evaluated once, and c only if a < b holds."""
        op, right_node = rest[0]
        right = self.expr(right_node)
        if isinstance(op, (ast.Is, ast.IsNot)):
            result = self.identity(left, right, isinstance(op, ast.IsNot), node)
        else:
            name = _COMPARES.get(type(op))
            if name is None:
                raise self.error(f"comparison '{describe(op)}' is not supported", node)
            result = self.compare(name, left, right, node)
        if len(rest) == 1:
            return result
        return self.short_circuit_thunk(result, lambda: self.compare_chain(right, rest[1:], node))

    def identity(self, left, right, negated: bool, node) -> Value:
        """`a is b`, known when the kernel is compiled: whether two compile-time objects are
        the same (`scale is None` for a default argument); a run-time value is never one."""
        if not (isinstance(left, PyConst) or isinstance(right, PyConst)):
            raise self.error("'is' compares compile-time objects such as None, not run-time "
                             "values", node, hint="use == and != to compare numbers")
        same = isinstance(left, PyConst) and isinstance(right, PyConst) and \
            left.value is right.value
        return self.constant(same != negated, T.bool_)

    def short_circuit_thunk(self, condition: Value, evaluate: Callable[[], Value]) -> Value:
        if is_const(condition):
            return evaluate() if constant_value(condition) else condition
        right_block, join = self.builder.new_block(), self.builder.new_block()
        param = join.add_param(T.bool_)
        self.builder.cbr(condition, right_block, [], join, [condition])
        self.builder.position_at_end(right_block)
        right = evaluate()
        self.builder.br(join, [right])
        self.builder.position_at_end(join)
        return param

    def expr_IfExp(self, node: ast.IfExp):
        condition = self.truth(self.expr(node.test), node.test)
        if is_const(condition):
            return self.expr(node.body if constant_value(condition) else node.orelse)
        then_block, else_block = self.builder.new_block(), self.builder.new_block()
        self.builder.cbr(condition, then_block, [], else_block, [])
        results = []
        for block, branch in ((then_block, node.body), (else_block, node.orelse)):
            self.builder.position_at_end(block)
            value = self.expr(branch)
            if isinstance(value, (PyConst, StructValue)) or isinstance(value.type, T.ArrayType):
                raise self.error("a conditional expression must choose between numbers or "
                                 "tuples", branch)
            results.append((self.builder.block, value))
        result_type = T.unify(results[0][1].type, results[1][1].type)
        if result_type is None:
            raise self.error(f"the two branches give {results[0][1].type.name} and "
                             f"{results[1][1].type.name}", node)
        join = self.builder.new_block((result_type,))
        for block, value in results:
            self.builder.position_at_end(block)
            self.builder.br(join, [self.cast(value, result_type)])
        self.builder.position_at_end(join)
        return join.params[0]

    def expr_Subscript(self, node: ast.Subscript):
        base = self.expr(node.value)
        index = self.expr(node.slice)
        return self.subscript_load(base, index, node)

    # -- typed building blocks: the builder's rules, errors at the source line ------------

    def typing_error(self, error: TypingError, node=None) -> CompileError:
        """A rule of the typed builder the kernel broke, at its source line."""
        return self.error(str(error), node, hint=error.hint)

    def constant(self, value, type: T.ScalarType) -> Value:
        return self.builder.constant(value, type)

    def emit(self, kind: OpDefinition | str, operands: list[Value], type: T.IRType,
             attrs=None) -> Value:
        return self.builder.emit(kind, operands, type, attrs)

    def cast(self, value: Value, type: T.IRType) -> Value:
        try:
            return self.builder.cast(value, type)
        except TypingError as error:
            raise self.typing_error(error) from None

    def truth(self, value, node) -> Value:
        if isinstance(value, PyConst):
            return self.constant(bool(value.value), T.bool_)
        self.require_scalar(value, node)
        return self.builder.truth(value)

    def binary(self, op: str, left, right, node) -> Value:
        if op == "matmul" or any(isinstance(getattr(side, "type", None), T.VectorType)
                                 for side in (left, right)):
            return self.vector_binary(op, left, right, node)
        self.require_scalar(left, node)
        self.require_scalar(right, node)
        try:
            return self.builder.binary(op, left, right)
        except TypingError as error:
            raise self.typing_error(error, node) from None

    def compare(self, op: str, left, right, node) -> Value:
        if any(isinstance(getattr(side, "type", None), T.VectorType) for side in (left, right)):
            return self.vector_compare(op, left, right, node)
        self.require_scalar(left, node)
        self.require_scalar(right, node)
        return self.builder.compare(op, left, right)

    def unary(self, op: str, operand: Value, node) -> Value:
        return self.builder.unary(op, operand)

    def select(self, condition: Value, a: Value, b: Value) -> Value:
        return self.builder.select(condition, a, b)

    def make_tuple(self, elements: list[Value]) -> Value:
        return self.builder.make_tuple(elements)

    def extract(self, value, index: int):
        if isinstance(value, PyConst) and isinstance(value.value, tuple):
            return self.python_value(value.value[index], self.node)
        return self.builder.extract(value, index)

    def item(self, value, index: int):
        """Item `index` of a tuple as unpacking and a for loop see it: an element, or
        a matrix's row."""
        if isinstance(value, Value) and isinstance(value.type, T.VectorType) and \
                len(value.type.shape) == 2:
            return self.vector_subscript(value, self.constant(index, T.weak_int), self.node)
        return self.extract(value, index)

    def tuple_length(self, value, node) -> int:
        """How many items `len`, unpacking and a for loop see: a tuple's elements, a
        matrix's rows."""
        if isinstance(value, PyConst) and isinstance(value.value, tuple):
            return len(value.value)
        if isinstance(value, Value) and isinstance(value.type, T.VectorType):
            return value.type.shape[0]
        if isinstance(value, Value) and isinstance(value.type, T.TupleType):
            return len(value.type.elements)
        raise self.error(f"cannot unpack a {self.type_name(value)}", node)

    def array_dim(self, array: Value, axis: int) -> Value:
        """An array's extent along `axis` as the kernel sees it (`len(a)`, `a.shape[i]`):
        a Python int, so weak (254 + len(a) on a uint8 stays a uint8)."""
        if array.type.shape is not None:
            return self.constant(array.type.shape[axis], T.weak_int)
        return self.cast(self.builder.op("dim", [array], T.int64, {"axis": axis}), T.weak_int)

    # -- arrays and tuples ----------------------------------------------------------------

    def subscript_load(self, base, index, node) -> Value:
        if isinstance(base, StructValue):
            return self.element_of(base, index, node)
        if isinstance(base, PyConst) and isinstance(base.value, tuple):
            position = self.constant_index(index, len(base.value), node)
            return self.python_value(base.value[position], node)
        if isinstance(base, Value) and isinstance(base.type, T.VectorType):
            return self.vector_subscript(base, index, node)
        if isinstance(base, Value) and isinstance(base.type, T.TupleType):
            position = self.constant_index(index, len(base.type.elements), node)
            return self.extract(base, position)
        array = self.require_array(base, node)
        indices = self.array_indices(array, index, node)
        return self.builder.op("load", [array, *indices], array.type.dtype)

    def subscript_store(self, base, index, value, node) -> None:
        """`node` (`base[index] = value`): an array's element, or a vector's or matrix's
        elements, which gives the name that holds it a new vector."""
        if isinstance(base, StructValue):
            self.store_element(base, index, value, node)
            return
        if isinstance(base, Value) and isinstance(base.type, T.VectorType):
            self.assign(node.value, self.vector_with(base, self.vector_offsets(base, index, node),
                                                     value, node))
            return
        if isinstance(base, Value) and isinstance(base.type, T.TupleType):
            raise self.error(f"a tuple cannot be changed in place ({describe(node.value)} is a "
                             f"{base.type.name})", node,
                             hint="build a new tuple, or use a vector (kk.vec3 ...), whose "
                                  "elements can be assigned")
        array = self.require_array(base, node)
        if array.type.const:
            raise self.error(f"'{describe(node.value)}' is read-only (annotated kk.Const)",
                             node, hint="remove the kk.Const annotation to write to it")
        indices = self.array_indices(array, index, node)
        if isinstance(value, PyConst) or not isinstance(value.type, T.ScalarType):
            raise self.error(f"cannot store a {self.type_name(value)} into an array of "
                             f"{array.type.dtype.name}", node)
        self.builder.op("store", [array, *indices, self.cast(value, array.type.dtype)])

    def constant_index(self, index, length: int, node) -> int:
        if isinstance(index, Value) and isinstance(index.type, T.ScalarType) and \
                index.type.is_integer and not is_const(index):
            self.unroll_for_tuple_index(index, node)
        if not is_const(index) or not isinstance(constant_value(index), int) or \
                isinstance(constant_value(index), bool):
            raise self.error("a tuple can only be indexed with a constant integer", node)
        position = constant_value(index)
        if not -length <= position < length:
            raise self.error(f"index {position} is out of range for a tuple of {length}", node)
        return position % length

    def array_indices(self, array: Value, index, node) -> list[Value]:
        if isinstance(index, Value) and isinstance(index.type, T.TupleType):
            elements = [self.extract(index, i) for i in range(len(index.type.elements))]
        elif isinstance(index, PyConst) and isinstance(index.value, tuple):
            elements = [self.python_value(v, node) for v in index.value]
        else:
            elements = [index]
        ndim = array.type.ndim
        if len(elements) != ndim:
            raise self.error(f"a {ndim}-D array needs {ndim} indices, got {len(elements)}", node,
                             hint="slices and partial indexing are not supported in kernels")
        result = []
        for element in elements:
            if isinstance(element, PyConst) or not isinstance(element.type, T.ScalarType) \
                    or not element.type.is_integer:
                raise self.error(f"array indices must be integers, got {self.type_name(element)}",
                                 node, hint="convert the index with int(...)")
            # A negative index counts from the end: the lowering wraps it (see
            # `BodyLowering.wrap_negative`), where bounds checks still see what was written.
            result.append(self.cast(element, T.index_type))
        return result


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and",
           ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr",
           ast.MatMult: "matmul"}
_COMPARES = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
             ast.GtE: "ge"}
