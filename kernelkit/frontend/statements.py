"""Statements and control flow, and the SSA form they build: a name's value is tracked
in `env` as the code is translated, and where control flow joins, the values that differ
become block parameters (`merge`); a loop's header takes the variables its body assigns.

`Statements` is mixed into `translate.FunctionTranslator`, whose state (`env`, `builder`,
`hints`, `loops`) it reads and writes; expressions are `expressions.Expressions`'."""
from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import types as T
from ..ir.builder import integer_range
from ..ir.function import Block
from ..ir.ops import Location, Value, constant_value
from .source import describe
from .specialize import Retype
from .values import UNDEFINED, PyConst, is_const


@dataclass
class Loop:
    continues: list = field(default_factory=list)   # (block, env) that jump back to the header
    breaks: list = field(default_factory=list)      # (block, env) that leave the loop


class Statements:
    # -- statements -----------------------------------------------------------------------

    def statements(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.builder.block is None:
                return  # unreachable code after return/break/continue
            self.node = statement
            self.builder.loc = Location(statement.lineno, statement.col_offset, self.source.file)
            method = getattr(self, "stmt_" + type(statement).__name__, None)
            if method is None:
                raise self.unsupported(f"'{describe(statement)}' is not supported in kernels",
                                       statement)
            method(statement)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        self.assign(node.target, self.expr(node.value))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op = self.binary_operator(node)
        target = node.target
        if isinstance(target, ast.Name):
            current = self.load_name(target.id, target)
            value = self.binary(op, current, self.expr(node.value), node)
            self.assign(target, value)
        elif isinstance(target, ast.Subscript):
            array = self.expr(target.value)
            index = self.expr(target.slice)
            current = self.subscript_load(array, index, target)
            value = self.binary(op, current, self.expr(node.value), node)
            self.subscript_store(array, index, value, target)
        else:
            raise self.error("only names and array elements can be updated in place", node)

    def stmt_FunctionDef(self, node) -> None:
        raise self.error("functions cannot be defined inside a kernel", node,
                         hint="define the helper function outside the kernel and call it")

    # -- branches and return --------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        condition = self.truth(self.expr(node.test), node.test)
        if is_const(condition):
            self.statements(node.body if constant_value(condition) else node.orelse)
            return
        ends = []
        then_block, else_block = self.builder.new_block(), self.builder.new_block()
        self.builder.cbr(condition, then_block, [], else_block, [])
        saved = dict(self.env)
        for block, body in ((then_block, node.body), (else_block, node.orelse)):
            self.env = dict(saved)
            self.builder.position_at_end(block)
            self.statements(body)
            ends.append((self.builder.block, self.env))
        self.merge(ends)

    def stmt_Return(self, node: ast.Return) -> None:
        if self.is_kernel:
            if node.value is not None:
                raise self.error("a kernel cannot return a value", node,
                                 hint="write results into an array argument")
            self.builder.ret()
            self.builder.block = None
            return
        if node.value is None:
            value = None
            value_type = T.void
        else:
            value = self.expr(node.value)
            if isinstance(value, PyConst):
                raise self.error("a device function must return numbers, arrays or tuples of "
                                 "them", node)
            value_type = value.type
        if self.return_type is None:
            self.return_type = value_type
            self.hints.return_type = value_type
        elif value_type != self.return_type:
            unified = T.unify(self.return_type, value_type)
            if unified is None:
                raise self.error(f"{self.pyfunc.__name__} returns {self.return_type.name} on one "
                                 f"path and {value_type.name} on another", node)
            if unified != self.return_type:
                self.hints.return_type = unified
                raise Retype()
            value = self.cast(value, unified)
        self.builder.ret(value)
        self.builder.block = None

    # -- loops ----------------------------------------------------------------------------

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error("'while ... else' is not supported", node)

        def test():
            return self.truth(self.expr(node.test), node.test)

        self.loop(node, node.body, test, before_body=None, latch=None, extra=())

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error("'for ... else' is not supported", node)
        iterable = node.iter
        if isinstance(iterable, ast.Call):
            function = self.expr(iterable.func)
            if isinstance(function, PyConst) and function.value is range:
                return self.for_range(node, iterable)
        value = self.expr(iterable)
        if isinstance(value, Value) and isinstance(value.type, T.TupleType):
            for index in range(len(value.type.elements)):
                if self.builder.block is None:
                    return
                self.assign(node.target, self.extract(value, index))
                self.statements(node.body)
            return
        raise self.error("a for loop must iterate over range(...) or a tuple", node.iter,
                         hint="write 'for i in range(n):'")

    def for_range(self, node: ast.For, call: ast.Call) -> None:
        if call.keywords or not 1 <= len(call.args) <= 3:
            raise self.error("range() takes 1 to 3 positional arguments", call)
        bounds = [self.expr(a) for a in call.args]
        for bound, argument in zip(bounds, call.args):
            if not self.is_scalar(bound) or not (bound.type.is_integer or bound.type.is_bool):
                raise self.error(f"range() needs integers, got {self.type_name(bound)}", argument,
                                 hint="convert with int(...)")
        if len(bounds) == 1:
            bounds = [self.constant(0, T.weak_int), bounds[0]]
        if len(bounds) == 2:
            bounds.append(self.constant(1, T.weak_int))
        counter_type = self.range_counter_type(bounds)
        start, stop, step = (self.cast(b, counter_type) for b in bounds)
        if is_const(step) and constant_value(step) == 0:
            raise self.error("range() step must not be zero", call)
        counter = f"$counter{node.lineno}:{node.col_offset}"
        self.env[counter] = start

        def test():
            current = self.env[counter]
            if is_const(step):
                return self.compare("lt" if constant_value(step) > 0 else "gt", current, stop, call)
            upward = self.compare("gt", step, self.constant(0, counter_type), call)
            return self.select(upward, self.compare("lt", current, stop, call),
                               self.compare("gt", current, stop, call))

        def before_body():
            self.assign(node.target, self.env[counter])

        def latch():
            self.env[counter] = self.binary("add", self.env[counter], step, call)

        self.loop(node, node.body, test, before_body, latch, extra=(counter,))
        self.env.pop(counter, None)

    @staticmethod
    def range_counter_type(bounds: list[Value]) -> T.ScalarType:
        """The type of a range() loop's counter: the bounds' promoted type where it holds
        every bound's value, else a Python int (range(-2, np.uint8(3)) counts from -2, as
        Python's range does whatever the integer types of its bounds)."""
        counter_type = functools.reduce(T.promote, [b.type for b in bounds])
        if not counter_type.is_integer or counter_type.weak:
            return T.weak_int   # all bools and Python ints, or int64 with uint64
        low, high = integer_range(counter_type)
        if (low, high) == integer_range(T.int64):
            return counter_type   # holds every Python int a kernel has
        for bound in bounds:
            bound_type = bound.type
            if not bound_type.weak:
                continue   # a strong type promotes to a type that holds its values
            if not (is_const(bound) and low <= constant_value(bound) <= high):
                return T.weak_int
        return counter_type

    def loop(self, node, body: list[ast.stmt], test: Callable[[], Value],
             before_body: Callable | None, latch: Callable | None, extra: tuple[str, ...]) -> None:
        assigned = _assigned_names(body) | set(extra)
        if isinstance(node, ast.For):
            assigned |= _target_names(node.target)
        carried = [name for name in self.env
                   if name in assigned and isinstance(self.env[name], Value)]
        header = self.builder.new_block()
        entry_args = []
        for name in carried:
            value = self.env[name]
            param_type = self.hints.variables.get(name, value.type)
            if isinstance(param_type, T.ArrayType):
                raise self.error(f"the array '{name}' is reassigned inside a loop; "
                                 "this is not supported", node)
            entry_args.append(self.cast(value, param_type))
            self.env[name] = header.add_param(param_type, name)
        self.builder.br(header, entry_args)
        self.builder.position_at_end(header)
        condition = test()
        body_block = self.builder.new_block()
        exit_block = None
        if is_const(condition):
            if not constant_value(condition):
                exit_block = self.builder.new_block()
                self.builder.br(exit_block)
            else:
                self.builder.br(body_block)
        else:
            exit_block = self.builder.new_block()
            self.builder.cbr(condition, body_block, [], exit_block, [])
        after_test_env = dict(self.env)
        loop = Loop()
        self.loops.append(loop)
        self.builder.position_at_end(body_block)
        if before_body:
            before_body()
        self.statements(body)
        self.loops.pop()
        if self.builder.block is not None:
            loop.continues.append((self.builder.block, self.env))
        continues = [(block, env) for block, env in loop.continues if block is not None]
        if len(continues) > 1:
            # One back edge: the counter steps once, after the paths of the body join, so
            # that it stays uniform when the paths were chosen per work-item.
            self.merge(continues)
            continues = [(self.builder.block, self.env)]
        for block, env in continues:
            self.builder.position_at_end(block)
            self.env = dict(env)
            if latch:
                latch()
            args = []
            for name, param in zip(carried, header.params):
                value = self.env.get(name, UNDEFINED)
                if value is UNDEFINED or not isinstance(value, Value):
                    raise self.error(f"'{name}' is not defined on every path through the loop", node)
                args.append(self.carried_value(name, value, param.type, node))
            self.builder.br(header, args)
        ends = list(loop.breaks)
        if exit_block is not None:
            ends.insert(0, (exit_block, after_test_env))
        self.merge(ends)

    def carried_value(self, name: str, value: Value, param_type: T.IRType, node) -> Value:
        if value.type == param_type:
            return value
        unified = T.unify(param_type, value.type)
        if unified is None:
            raise self.error(f"'{name}' changes type from {param_type.name} to {value.type.name} "
                             "inside the loop", node, hint="use a different variable name")
        if unified != param_type:
            self.hints.variables[name] = unified
            raise Retype()
        return self.cast(value, param_type)

    def stmt_Break(self, node: ast.Break) -> None:
        self.loops[-1].breaks.append((self.builder.block, dict(self.env)))
        self.builder.block = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.loops[-1].continues.append((self.builder.block, dict(self.env)))
        self.builder.block = None

    # -- merging control flow -------------------------------------------------------------

    def merge(self, ends: list[tuple[Block | None, dict]]) -> None:
        ends = [(block, env) for block, env in ends if block is not None]
        if not ends:
            self.builder.block = None
            return
        if len(ends) == 1:
            self.builder.position_at_end(ends[0][0])
            self.env = ends[0][1]
            return
        join = self.builder.new_block()
        names = list(dict.fromkeys(name for _, env in ends for name in env))
        merged: dict[str, object] = {}
        incoming: list[list[Value]] = [[] for _ in ends]
        for name in names:
            values = [env.get(name, UNDEFINED) for _, env in ends]
            first = values[0]
            if any(v is UNDEFINED for v in values):
                merged[name] = UNDEFINED
            elif all(v is first for v in values):
                merged[name] = first
            elif any(isinstance(v, PyConst) for v in values):
                merged[name] = first if all(v == first for v in values) else UNDEFINED
            else:
                unified = self.hints.variables.get(name) or functools.reduce(
                    lambda a, b: a and T.unify(a, b), (v.type for v in values))
                if unified is None or isinstance(unified, T.ArrayType):
                    merged[name] = UNDEFINED
                    continue
                merged[name] = join.add_param(unified, name)
                for args, value in zip(incoming, values):
                    args.append((value, unified))
        for (block, _), args in zip(ends, incoming):
            self.builder.position_at_end(block)
            self.builder.br(join, [self.cast(v, t) for v, t in args])
        self.builder.position_at_end(join)
        self.env = merged

    # -- assignment -----------------------------------------------------------------------

    def assign(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value):
                hinted = self.hints.variables.get(target.id)
                if hinted is not None and hinted != value.type:
                    unified = T.unify(hinted, value.type)
                    if unified is None:
                        raise self.error(f"'{target.id}' holds a {hinted.name} elsewhere and a "
                                         f"{value.type.name} here", target,
                                         hint="use a different variable name")
                    if unified != hinted:
                        self.hints.variables[target.id] = unified
                        raise Retype()
                    value = self.cast(value, hinted)
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            count = self.tuple_length(value, target)
            if count != len(target.elts):
                raise self.error(f"cannot unpack {count} values into {len(target.elts)} names",
                                 target)
            for index, element in enumerate(target.elts):
                self.assign(element, self.extract(value, index))
        elif isinstance(target, ast.Subscript):
            array = self.expr(target.value)
            index = self.expr(target.slice)
            self.subscript_store(array, index, value, target)
        elif isinstance(target, ast.Attribute):
            raise self.error("attributes cannot be assigned in kernels", target)
        else:
            raise self.error(f"cannot assign to {describe(target)}", target)


def _assigned_names(statements: list[ast.stmt]) -> set[str]:
    names = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.For):
                names.add(f"$counter{node.lineno}:{node.col_offset}")
    return names


def _target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
