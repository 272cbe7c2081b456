"""Statements and control flow, and the SSA form they build: a name's value is tracked
in `env` as the code is translated, and where control flow joins, the values that differ
become block parameters (`merge`); a loop's header takes the variables its body assigns.

A for loop runs over `range(...)`, `reversed(range(...))` or a tuple. A loop over a tuple
is unrolled (its variable may take values of different types), and so is a loop over a
range with constant bounds whose variable indexes a tuple: the index must be a constant,
so the first translation asks for the loop to be unrolled (`unroll_for_tuple_index`) and
the function is translated again. After a loop its variable, and any name it assigns,
keeps its last value, as in Python; a name the loop alone assigns is defined after it
only where the loop surely ran.

`Statements` is mixed into `translate.FunctionTranslator`, whose state (`env`, `builder`,
`hints`, `loops`) it reads and writes; expressions are `expressions.Expressions`'."""
from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import types as T
from ..ir.builder import integer_range
from ..ir.definitions import ASSERT
from ..ir.function import Block
from ..ir.ops import BlockParam, Location, Op, Value, constant_value
from .intrinsics import global_position
from .source import describe
from .specialize import Retype
from .structs import flat_type
from .values import UNDEFINED, PyConst, StructValue, Undefined, is_const

# A loop over a constant range is unrolled for a tuple index only up to this many
# iterations: tuples are short, and each iteration is a copy of the body.
MAX_UNROLLED_ITERATIONS = 256


@dataclass
class Loop:
    continues: list = field(default_factory=list)   # (block, env) that jump back to the header
    breaks: list = field(default_factory=list)      # (block, env) that leave the loop
    node: ast.stmt | None = None        # the loop statement; None for one unrolled iteration
    header: Block | None = None         # the block whose parameters the iterations change
    trip_count: int | None = None       # the iterations of a range with constant bounds
    copies: int = 1                     # an unrolled iteration: how many its loop has


def _loop_variable_undefined() -> Undefined:
    return Undefined(reason="it is assigned only inside the loop, which may run zero times "
                            "or not have reached the assignment yet",
                     before="the loop")


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
        elif isinstance(target, ast.Attribute):
            current = self.expr(target)
            self.assign_attribute(target, self.binary(op, current, self.expr(node.value), node))
        else:
            raise self.error("only names and array elements can be updated in place", node)

    def stmt_Assert(self, node: ast.Assert) -> None:
        """`assert condition, "message"`: checked in a debug build (the error names the
        kernel, the line and the work-item), compiled out otherwise, as `python -O` does."""
        if node.msg is not None and not (isinstance(node.msg, ast.Constant) and
                                         isinstance(node.msg.value, str)):
            raise self.error("the message of an assert in a kernel is a string literal",
                             node.msg, hint="write the values into an array, or kk.print "
                                            "them before the assert")
        if not self.context.debug:
            return
        condition = self.truth(self.expr(node.test), node.test)
        if is_const(condition) and constant_value(condition):
            return
        self.builder.op(ASSERT, [condition, *global_position(self, node)],
                        attrs={"message": node.msg.value if node.msg is not None else ""})

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
                raise self.error("a device function must return numbers, arrays, tuples of "
                                 "them or a dataclass", node)
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
            if not isinstance(value, StructValue):
                value = self.cast(value, unified)
        if isinstance(value, StructValue):     # as its leaves, of the types of every return
            value = self.joined_value(value, flat_type(self.return_type))
        self.builder.ret(value)
        self.builder.block = None

    # -- loops ----------------------------------------------------------------------------

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error("'while ... else' is not supported", node)

        def test():
            return self.truth(self.expr(node.test), node.test)

        self.loop(node, node.body, test, before_body=None, latch=None, extra=(),
                  record=Loop(node=node))

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error("'for ... else' is not supported", node)
        iterable, reverse = node.iter, False
        if self.called_object(iterable) is reversed:
            if iterable.keywords or len(iterable.args) != 1:
                raise self.error("reversed() takes one argument", iterable)
            iterable, reverse = iterable.args[0], True
        if self.called_object(iterable) is range:
            return self.for_range(node, iterable, reverse)
        value = self.expr(iterable)
        if isinstance(value, Value) and isinstance(value.type, T.TupleType):
            elements = [self.item(value, i) for i in range(self.tuple_length(value, iterable))]
        elif isinstance(value, PyConst) and isinstance(value.value, tuple):
            elements = [self.python_value(v, iterable) for v in value.value]
        else:
            raise self.error("a for loop must iterate over range(...), reversed(range(...)) "
                             "or a tuple", node.iter, hint="write 'for i in range(n):'")
        self.unrolled(node, elements[::-1] if reverse else elements)

    def called_object(self, node: ast.expr):
        """The Python object a call calls (`range` in `range(n)`), or None."""
        if not isinstance(node, ast.Call):
            return None
        function = self.expr(node.func)
        return function.value if isinstance(function, PyConst) else None

    def for_range(self, node: ast.For, call: ast.Call, reverse: bool) -> None:
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
        target_type = counter_type = self.range_counter_type(bounds)
        start, stop, step = (self.cast(b, counter_type) for b in bounds)
        if is_const(step) and constant_value(step) == 0:
            raise self.error("range() step must not be zero", call)
        if reverse:
            start, stop, step, counter_type = self.reversed_range(start, stop, step, counter_type,
                                                                  call)
        trip_count = None
        if all(is_const(b) for b in (start, stop, step)):
            values = range(constant_value(start), constant_value(stop), constant_value(step))
            if _position(node) in self.hints.unrolled_loops:
                self.unrolled(node, [self.constant(v, target_type) for v in values])
                return
            trip_count = len(values)
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
            self.assign(node.target, self.cast(self.env[counter], target_type))

        def latch():
            self.env[counter] = self.binary("add", self.env[counter], step, call)

        self.loop(node, node.body, test, before_body, latch, extra=(counter,),
                  record=Loop(node=node, trip_count=trip_count))
        self.env.pop(counter, None)

    def reversed_range(self, start: Value, stop: Value, step: Value,
                       counter_type: T.ScalarType, node) -> tuple:
        """reversed(range(start, stop, step)) as the range that counts from its last value
        down to `start - step` by `-step`, and the type that counter needs: an int64 or a
        Python int, which holds `start - step` where the range's own type may not."""
        wide = counter_type if counter_type in (T.int64, T.weak_int) else T.weak_int
        start, stop, step = (self.cast(b, wide) for b in (start, stop, step))
        zero, one = self.constant(0, wide), self.constant(1, wide)
        upward = self.compare("gt", step, zero, node)
        direction = self.select(upward, one, self.constant(-1, wide))

        def arithmetic(op, a, b):
            return self.binary(op, a, b, node)

        # len(range(start, stop, step)), rounding the distance up to whole steps.
        distance = arithmetic("sub", arithmetic("add", arithmetic("sub", stop, start), step),
                              direction)
        count = arithmetic("max", arithmetic("floordiv", distance, step), zero)
        last = arithmetic("add", start, arithmetic("mul", arithmetic("sub", count, one), step))
        return last, arithmetic("sub", start, step), self.unary("neg", step, node), wide

    def unrolled(self, node: ast.For, values: list) -> None:
        """A for loop as its body once per value of its variable, in order: a constant, or
        one element of a tuple, in each copy. `break` leaves the copies, `continue` goes on
        to the next one."""
        breaks = []
        for value in values:
            if self.builder.block is None:
                break
            iteration = Loop(copies=len(values))
            self.loops.append(iteration)
            self.assign(node.target, value)
            self.statements(node.body)
            self.loops.pop()
            self.merge(iteration.continues + [(self.builder.block, self.env)])
            breaks += iteration.breaks
        self.merge([(self.builder.block, self.env)] + breaks)

    def unroll_for_index(self, index) -> None:
        """Where `index`, not a constant, changes with a loop over a constant range that
        can be unrolled, that loop is unrolled: raises `Retype`, to translate the function
        again, in which the index is a constant. Otherwise returns."""
        for loop in reversed(self.loops_changing(index)):   # the innermost first
            if loop.trip_count is not None and \
                    loop.trip_count * self.copies() <= MAX_UNROLLED_ITERATIONS:
                self.hints.unrolled_loops.add(_position(loop.node))
                raise Retype()

    def loops_changing(self, index) -> list[Loop]:
        return [loop for loop in self.loops
                if loop.header is not None and _depends_on(index, loop.header)]

    def copies(self) -> int:
        """How many copies of the code here the unrolled loops around it hold."""
        copies = 1
        for loop in self.loops:
            copies *= loop.copies
        return copies

    def unroll_for_tuple_index(self, index, node) -> None:
        """A tuple indexed by `index`, which is not a constant: if it changes with a loop
        over a constant range, that loop is unrolled (raises `Retype`, to translate the
        function again); otherwise the error says what to write."""
        self.unroll_for_index(index)
        loops, copies = self.loops_changing(index), self.copies()
        hint = ("index tuples with constants, or with the variable of a for loop over a "
                "range with constant bounds, such as range(len(t)) (the loop is then "
                "unrolled); or keep the values in kk.private(dtype, shape)")
        if loops:
            loop = loops[-1]
            if loop.trip_count is not None:
                inside = f", each holding {copies} unrolled copies of the code here," \
                    if copies > 1 else ""
                reason = (f"its {loop.trip_count} iterations{inside} are too many to unroll "
                          f"(at most {MAX_UNROLLED_ITERATIONS} copies of the code)")
            elif isinstance(loop.node, ast.For):
                reason = "the range's bounds are not constants"
            else:
                reason = "a while loop is not unrolled"
            raise self.error(f"a tuple can only be indexed with a constant integer; this index "
                             f"changes with the loop '{_loop_heading(loop.node)}' at line "
                             f"{loop.node.lineno}, and {reason}", node, hint=hint)
        raise self.error("a tuple can only be indexed with a constant integer", node, hint=hint)

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
             before_body: Callable | None, latch: Callable | None, extra: tuple[str, ...],
             record: Loop) -> None:
        """A loop: a header that takes the names the body changes and tests, the body, one
        back edge, and the exit, which joins the paths that leave. `record.trip_count` is
        the number of iterations where the bounds are constants."""
        assigned = _assigned_names(body) | set(extra)
        if isinstance(node, ast.For):
            assigned |= _target_names(node.target)
        # A vector the body changes an element of (v[0] = x, v.x += 1) changes as a whole.
        assigned |= {name for name in _changed_in_place(body)
                     if isinstance(getattr(self.env.get(name), "type", None), T.TupleType)}
        carried = [name for name in self.env
                   if name in assigned and isinstance(self.env[name], (Value, StructValue))]
        # A dataclass comes round as the tuple of its leaves.
        structs = {name: self.env[name].type for name in carried
                   if isinstance(self.env[name], StructValue)}
        # Names the loop is first to assign: undefined in it until assigned, and after it
        # unless the loop surely assigned them.
        first_assigned = sorted(name for name in assigned if not name.startswith("$")
                                and isinstance(self.env.get(name, UNDEFINED), Undefined))
        header = self.builder.new_block()
        entry_args = []
        for name in carried:
            value = self.env[name]
            if name in structs:
                value = self.flattened(value)
            param_type = self.hints.variables.get(name, value.type)
            if isinstance(param_type, T.ArrayType):
                raise self.error(f"the array '{name}' is reassigned inside a loop; "
                                 "this is not supported", node)
            entry_args.append(self.cast(value, param_type))
            self.env[name] = header.add_param(param_type, name)
        entry = self.builder.br(header, entry_args)
        self.builder.position_at_end(header)
        for name, struct_type in structs.items():
            self.env[name] = self.unflattened(struct_type, self.env[name])
        for name in first_assigned:
            self.env[name] = _loop_variable_undefined()
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
        test_branch = self.builder.block.terminator
        after_test_env = dict(self.env)
        record.header = header
        self.loops.append(record)
        self.builder.position_at_end(body_block)
        if before_body:
            before_body()
        self.statements(body)
        self.loops.pop()
        if self.builder.block is not None:
            record.continues.append((self.builder.block, self.env))
        continues = [(block, env) for block, env in record.continues if block is not None]
        if len(continues) > 1:
            # One back edge: the counter steps once, after the paths of the body join, so
            # that it stays uniform when the paths were chosen per work-item.
            self.merge(continues)
            continues = [(self.builder.block, self.env)]
        runs_at_least_once = bool(record.trip_count)
        for block, env in continues:
            self.builder.position_at_end(block)
            self.env = dict(env)
            if latch:
                latch()
            args = []
            for name, param in zip(carried, header.params):
                value = self.env.get(name, UNDEFINED)
                if name in structs:
                    value = self.struct_coming_round(name, value, structs[name], node)
                if isinstance(value, Undefined) or not isinstance(value, Value):
                    raise self.error(f"'{name}' is not defined on every path through the loop",
                                     node)
                args.append(self.carried_value(name, value, param.type, node))
            if runs_at_least_once and exit_block is not None:
                # Leaving through the test is leaving after an iteration: the names the
                # loop first assigned have the values of the last one.
                for name in first_assigned:
                    value = self.env.get(name) if self.live_after(name, node) else None
                    if isinstance(value, Value) and \
                            isinstance(value.type, (T.ScalarType, T.TupleType)):
                        param_type = self.hints.variables.get(name, value.type)
                        args.append(self.carried_value(name, value, param_type, node))
                        after_test_env[name] = header.add_param(param_type, name)
                        entry.successors[0].args.append(self.placeholder(param_type, entry))
            self.builder.br(header, args)
        if runs_at_least_once and exit_block is not None and not continues:
            # The body never comes back to the test, which holds the first time: the test
            # cannot leave the loop.
            self.builder.position_at_end(test_branch.block)
            test_branch.block.ops.remove(test_branch)
            self.builder.br(body_block)
            self.function.blocks.remove(exit_block)
            exit_block = None
        ends = list(record.breaks)
        if exit_block is not None:
            ends.insert(0, (exit_block, after_test_env))
        self.merge(ends)

    def placeholder(self, type: T.IRType, branch: Op) -> Value:
        """A value of `type` for a block parameter on an edge where the name it stands for
        is unassigned (and so never read), made just before `branch`."""
        saved_block, saved_before = self.builder.block, self.builder.before
        self.builder.position_before(branch)
        if isinstance(type, T.TupleType):
            value = self.builder.make_tuple([self.placeholder(t, branch) for t in type.elements],
                                            getattr(type, "shape", None))
        else:
            value = self.constant(0, type)
        self.builder.block, self.builder.before = saved_block, saved_before
        return value

    def live_after(self, name: str, node: ast.stmt) -> bool:
        """Whether the value `name` has after the statement `node` may be read (a cautious
        answer from the source: yes where unsure)."""
        while True:
            owner, statements = self.statement_places[id(node)]
            effect = _effect_of_statements(name, statements[statements.index(node) + 1:])
            if effect is not None:
                return effect == _LIVE
            if isinstance(owner, (ast.For, ast.While)) and \
                    not (isinstance(owner, ast.For) and name in _target_names(owner.target)):
                # The next iteration may read it.
                if any(_reads(name, part) for part in ast.iter_child_nodes(owner)):
                    return True
            if isinstance(owner, ast.FunctionDef):
                return False
            node = owner

    @functools.cached_property
    def statement_places(self) -> dict[int, tuple[ast.AST, list[ast.stmt]]]:
        """For each statement of the function (by id): the node whose list of statements
        holds it, and that list."""
        places = {}
        for owner in ast.walk(self.source.tree):
            for field_name in ("body", "orelse"):
                statements = getattr(owner, field_name, None)
                if isinstance(statements, list):
                    for statement in statements:
                        places[id(statement)] = (owner, statements)
        return places

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
            undefined = [v for v in values if isinstance(v, Undefined)]
            if undefined:
                merged[name] = undefined[0]
            elif all(v is first for v in values):
                merged[name] = first
            elif (joined := self.joined_struct_type(values)) is not None:
                merged[name] = (joined, join.add_param(flat_type(joined), name))
                for args, value in zip(incoming, values):
                    args.append((value, flat_type(joined)))
            elif any(isinstance(v, StructValue) for v in values):
                merged[name] = Undefined(
                    reason="it holds different dataclasses, or a dataclass and another value, "
                           "on different paths",
                    hint=f"read the fields you need into variables on each path, and use "
                         f"those after the if/loop instead of '{name}'")
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
            self.builder.br(join, [self.joined_value(v, t) for v, t in args])
        self.builder.position_at_end(join)
        for name, value in merged.items():
            if isinstance(value, tuple):    # a dataclass, from the tuple of its leaves
                merged[name] = self.unflattened(*value)
        self.env = merged

    def joined_value(self, value, type: T.IRType) -> Value:
        """`value` as a block parameter (or a result) of `type` takes it: a dataclass as
        the tuple of its leaves."""
        if isinstance(value, StructValue):
            leaves = self.scalar_leaves(value)
            return self.make_tuple([self.cast(leaf, t) for leaf, t in zip(leaves, type.elements)])
        return self.cast(value, type)

    def struct_coming_round(self, name: str, value, struct_type: T.StructType, node):
        """The tuple a dataclass variable comes round a loop as, or an error where the loop
        gave it a value of another kind."""
        if isinstance(value, StructValue) and T.unify(value.type, struct_type) is not None:
            return self.flattened(value)
        if isinstance(value, Undefined):
            return value
        raise self.error(f"'{name}' holds a dataclass {struct_type.qualname} before the loop "
                         f"and a {self.type_name(value)} at the end of its body", node,
                         hint="use a different variable name")

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
                self.assign(element, self.item(value, index))
        elif isinstance(target, ast.Subscript):
            array = self.expr(target.value)
            index = self.expr(target.slice)
            self.subscript_store(array, index, value, target)
        elif isinstance(target, ast.Attribute):
            self.assign_attribute(target, value)
        else:
            raise self.error(f"cannot assign to {describe(target)}", target)

    def assign_attribute(self, target: ast.Attribute, value) -> None:
        """`v.x = ...` on a vector (its element, as `v[0] = ...`); an error otherwise, and
        the one for a dataclass argument says what to do; `s[i].x = ...` of a dataclass
        of arrays, its field's element."""
        if self.assign_element_field(target, value):
            return
        base = self.expr(target.value)
        if isinstance(base, Value) and isinstance(base.type, T.VectorType):
            position = self.component_position(base, target)
            self.assign(target.value, self.vector_with(base, [position], value, target))
            return
        if isinstance(base, StructValue):
            raise self.error(f"{describe(target)} cannot be assigned: {describe(target.value)} is "
                             f"a {base.class_name}, a frozen dataclass, whose fields kernels "
                             f"only read", target,
                             hint=f"assign the new value to a variable of its own "
                                  f"({target.attr} = ...), or pass a {base.class_name} with "
                                  f"the value to the launch")
        raise self.error("attributes cannot be assigned in kernels", target)


def _assigned_names(statements: list[ast.stmt]) -> set[str]:
    names = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.For):
                names.add(f"$counter{node.lineno}:{node.col_offset}")
    return names


def _changed_in_place(statements: list[ast.stmt]) -> set[str]:
    """The names whose elements or attributes the statements assign (`v` in `v[0] = x`,
    `m[1][2] += y` and `v.x = z`)."""
    names = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and \
                    isinstance(node.ctx, ast.Store):
                while isinstance(node, (ast.Subscript, ast.Attribute)):
                    node = node.value
                if isinstance(node, ast.Name):
                    names.add(node.id)
    return names


def _target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


# What a statement makes of the value a name has before it: LIVE where it may read it;
# DEAD where no path reads it before assigning the name or returning; None: neither.
_LIVE, _DEAD = "live", "dead"


def _effect_of_statements(name: str, statements: list[ast.stmt]) -> str | None:
    for statement in statements:
        effect = _effect(name, statement)
        if effect is not None:
            return effect
    return None


def _effect(name: str, statement: ast.stmt) -> str | None:
    """What `statement` makes of the value `name` has before it (`_LIVE`, `_DEAD`, None)."""
    if isinstance(statement, ast.Return):
        return _LIVE if _reads(name, statement) else _DEAD   # nothing runs after it
    if isinstance(statement, (ast.Break, ast.Continue)):
        return _LIVE   # what runs next is elsewhere: unsure
    if isinstance(statement, ast.If):
        if _reads(name, statement.test):
            return _LIVE
        branches = {_effect_of_statements(name, statement.body),
                    _effect_of_statements(name, statement.orelse)}
        return _LIVE if _LIVE in branches else _DEAD if branches == {_DEAD} else None
    if isinstance(statement, ast.For) and name in _target_names(statement.target):
        # The loop assigns it before its body runs, and leaves it as it was if it does not run.
        if _reads(name, statement.iter):
            return _LIVE
        return _DEAD if _runs_at_least_once(statement.iter) else None
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        if _reads(name, statement):
            return _LIVE
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return _DEAD if any(name in _target_names(t) for t in targets) else None
    return _LIVE if _reads(name, statement) else None


def _reads(name: str, node: ast.AST) -> bool:
    """Whether `node` reads `name` (`x += 1` reads x)."""
    for parent in ast.walk(node):
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, ast.Name) and child.id == name and \
                    (isinstance(child.ctx, ast.Load) or isinstance(parent, ast.AugAssign)):
                return True
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)


def _runs_at_least_once(iterable: ast.expr) -> bool:
    """Whether `iterable` is a range(...) of integer literals that is not empty."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)
            and iterable.func.id == "range" and not iterable.keywords):
        return False
    try:
        bounds = [ast.literal_eval(argument) for argument in iterable.args]
        return all(isinstance(b, int) for b in bounds) and len(range(*bounds)) > 0
    except (ValueError, TypeError, SyntaxError):
        return False


def _position(node: ast.stmt) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _loop_heading(node: ast.stmt) -> str:
    """A loop's first line as written, for messages: `for j in range(n)`."""
    if isinstance(node, ast.For):
        return f"for {describe(node.target)} in {describe(node.iter)}"
    return f"while {describe(node.test)}"


def _depends_on(value, header: Block) -> bool:
    """Whether `value` is computed from a parameter of the block `header`."""
    seen, pending = set(), [value]
    while pending:
        current = pending.pop()
        if isinstance(current, BlockParam) and current.block is header:
            return True
        if isinstance(current, Op) and id(current) not in seen:
            seen.add(id(current))
            pending.extend(current.operands)
    return False
