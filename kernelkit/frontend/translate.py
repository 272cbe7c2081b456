"""Python AST -> typed SSA IR.

Types are inferred by specialization: the argument types are known, so every
expression is typed as it is translated. A variable that takes values of several
types is given their unified type (NumPy promotion); when a loop reveals this only
after its body was translated, the function is translated again with that hint.

The translator knows the kernel language (through `intrinsics`) but no backend.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import inspect
import textwrap
import types as pytypes
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import CompileError
from ..ir import types as T
from ..ir.builder import Builder, TypingError, integer_range
from ..ir.definitions import OpDefinition
from ..ir.function import Block, Function, Module
from ..ir.ops import Location, Value
from ..lang.markers import Marker
from .values import UNDEFINED, PyConst, const_value, is_const


@dataclass(frozen=True)
class ParsedSource:
    tree: ast.FunctionDef
    file: str
    first_line: int
    lines: tuple[str, ...]


@functools.lru_cache(maxsize=512)
def parse_function(pyfunc) -> ParsedSource:
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError) as error:
        raise CompileError(f"cannot read the source of {pyfunc.__qualname__}: {error}",
                           function=pyfunc.__name__,
                           hint="kernels and device functions must be defined in a file, "
                                "not typed at an interactive prompt") from None
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{pyfunc.__qualname__} is not a plain function definition",
                           function=pyfunc.__name__, file=inspect.getsourcefile(pyfunc),
                           line=first_line, source_line=lines[0],
                           hint="lambdas and async functions cannot be compiled; use a def")
    ast.increment_lineno(tree, first_line - 1)
    file = inspect.getsourcefile(pyfunc) or "<unknown>"
    all_lines = tuple(_read_lines(file))
    return ParsedSource(tree, file, first_line, all_lines)


def _read_lines(file: str) -> list[str]:
    import linecache
    return linecache.getlines(file)


class Retype(Exception):
    """Raised when a variable turned out to need a wider type than it was given."""


@dataclass
class TypeHints:
    variables: dict[str, T.IRType] = field(default_factory=dict)
    return_type: T.IRType | None = None


@dataclass
class TranslationContext:
    """State shared by the translation of a kernel and every device function it calls."""

    module: Module
    kernel_name: str
    workgroupsize: tuple[int, ...]
    specializations: dict = field(default_factory=dict)
    stack: list = field(default_factory=list)


@dataclass
class Loop:
    continues: list = field(default_factory=list)   # (block, env) that jump back to the header
    breaks: list = field(default_factory=list)      # (block, env) that leave the loop


MAX_RETYPES = 8


def translate_kernel(pyfunc, argtypes: tuple[T.IRType, ...],
                     workgroupsize: tuple[int, ...]) -> Module:
    module = Module()
    context = TranslationContext(module, pyfunc.__name__, workgroupsize)
    translate_function(context, pyfunc, list(argtypes), is_kernel=True, name=pyfunc.__name__)
    # The kernel must come first in the module.
    kernel = module.functions.pop(pyfunc.__name__)
    module.functions = {kernel.name: kernel, **module.functions}
    return module


def resolve_deferred(module: Module, workgroupsize: tuple[int, ...]) -> None:
    """The worklist of `kk.deferred` requests: translate each requested function into the
    module (a translated function may ask for more)."""
    context = TranslationContext(module, module.kernel.name, workgroupsize)
    while True:
        pending = [(name, request) for name, request in module.deferred.items()
                   if name not in module.functions]
        if not pending:
            return
        for name, (pyfunc, argtypes) in pending:
            translate_function(context, pyfunc, list(argtypes), is_kernel=False, name=name)


def translate_function(context: TranslationContext, pyfunc, args: list, *, is_kernel: bool,
                       name: str) -> Function:
    hints = TypeHints()
    for _ in range(MAX_RETYPES):
        translator = FunctionTranslator(context, pyfunc, args, is_kernel, name, hints)
        try:
            function = translator.translate()
        except Retype:
            continue
        context.module.add(function)
        return function
    raise CompileError("the types of the variables do not settle", kernel=context.kernel_name,
                       function=pyfunc.__name__)


class FunctionTranslator:
    def __init__(self, context: TranslationContext, pyfunc, args: list, is_kernel: bool,
                 name: str, hints: TypeHints):
        self.context = context
        self.pyfunc = pyfunc
        self.source = parse_function(pyfunc)
        self.args = args
        self.is_kernel = is_kernel
        self.hints = hints
        self.globals = pyfunc.__globals__
        self.closure = _closure_values(pyfunc)
        self.function = Function(name, [a.arg for a in self.source.tree.args.args],
                                 is_kernel=is_kernel, source_file=self.source.file)
        self.builder = Builder(self.function)
        self.env: dict[str, object] = {}
        self.loops: list[Loop] = []
        self.return_type: T.IRType | None = hints.return_type
        self.node: ast.AST = self.source.tree

    # -- errors -------------------------------------------------------------------------

    def error(self, message: str, node: ast.AST | None = None, hint: str | None = None):
        node = node if node is not None else self.node
        line = getattr(node, "lineno", self.source.first_line)
        source_line = self.source.lines[line - 1] if 0 < line <= len(self.source.lines) else None
        return CompileError(message, kernel=self.context.kernel_name, function=self.pyfunc.__name__,
                            file=self.source.file, line=line, source_line=source_line, hint=hint)

    # -- entry ----------------------------------------------------------------------------

    def translate(self) -> Function:
        tree = self.source.tree
        arguments = tree.args
        if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.posonlyargs:
            raise self.error("*args, **kwargs and keyword-only parameters are not supported "
                             "in kernels and device functions", tree)
        if len(arguments.args) != len(self.args):
            raise self.error(f"{tree.name} takes {len(arguments.args)} arguments but "
                             f"{len(self.args)} were given", tree)
        entry = self.builder.new_block()
        self.builder.position_at_end(entry)
        for parameter, arg in zip(arguments.args, self.args):
            if isinstance(arg, PyConst):
                self.env[parameter.arg] = arg
            else:
                param = entry.add_param(arg, parameter.arg)
                self.env[parameter.arg] = param
        self.statements(tree.body)
        if self.builder.block is not None:
            if self.is_kernel or self.return_type in (None, T.void):
                self.return_type = T.void
                self.builder.loc = Location(_last_line(tree), 0, self.source.file)
                self.builder.ret()
            else:
                raise self.error(f"{tree.name} returns a value on some paths but not at its end",
                                 tree.body[-1], hint="add a return statement at the end")
        self.function.return_type = self.return_type or T.void
        return self.function

    # -- statements -----------------------------------------------------------------------

    def statements(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.builder.block is None:
                return  # unreachable code after return/break/continue
            self.node = statement
            self.builder.loc = Location(statement.lineno, statement.col_offset, self.source.file)
            method = getattr(self, "stmt_" + type(statement).__name__, None)
            if method is None:
                raise self.error(f"'{_describe(statement)}' is not supported in kernels", statement,
                                 hint=_SYNTAX_HINTS.get(type(statement).__name__))
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
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(f"operator {_describe(node.op)} is not supported", node)
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

    def stmt_If(self, node: ast.If) -> None:
        condition = self.truth(self.expr(node.test), node.test)
        if is_const(condition):
            self.statements(node.body if const_value(condition) else node.orelse)
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
        if is_const(step) and const_value(step) == 0:
            raise self.error("range() step must not be zero", call)
        counter = f"$counter{node.lineno}:{node.col_offset}"
        self.env[counter] = start

        def test():
            current = self.env[counter]
            if is_const(step):
                return self.compare("lt" if const_value(step) > 0 else "gt", current, stop, call)
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
            if not (is_const(bound) and low <= const_value(bound) <= high):
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
            if not const_value(condition):
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

    def stmt_FunctionDef(self, node) -> None:
        raise self.error("functions cannot be defined inside a kernel", node,
                         hint="define the helper function outside the kernel and call it")

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
            raise self.error(f"cannot assign to {_describe(target)}", target)

    # -- expressions ----------------------------------------------------------------------

    def expr(self, node: ast.expr):
        saved = self.node
        self.node = node
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(f"{_describe(node)} is not supported in kernels", node,
                             hint=_SYNTAX_HINTS.get(type(node).__name__))
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
            if value is UNDEFINED:
                raise self.error(f"'{name}' may be undefined here: it is not assigned on every "
                                 "path, or holds values of incompatible types on different paths",
                                 node, hint=f"assign '{name}' before the if/loop")
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
                raise self.error(f"{_describe(node.value)} has no attribute '{node.attr}'",
                                 node) from None
            return self.python_value(value, node)
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

    def expr_Tuple(self, node: ast.Tuple):
        elements = [self.expr(e) for e in node.elts]
        if any(isinstance(e, PyConst) for e in elements):
            if all(isinstance(e, PyConst) for e in elements):
                return PyConst(tuple(e.value for e in elements))
            raise self.error("a tuple cannot mix run-time values with "
                             "compile-time objects", node)
        return self.make_tuple(elements)

    def expr_BinOp(self, node: ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(f"operator {_describe(node.op)} is not supported", node)
        return self.binary(op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return self.unary("not", self.truth(operand, node.operand), node)
        if isinstance(node.op, ast.UAdd):
            return operand
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
        raise self.error(f"operator {_describe(node.op)} is not supported", node)

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
            if bool(const_value(condition)) == is_and:
                return self.expr(right_node)
            return left
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

    def expr_Compare(self, node: ast.Compare):
        return self.compare_chain(self.expr(node.left), list(zip(node.ops, node.comparators)),
                                  node)

    def compare_chain(self, left, rest: list, node) -> Value:
        """a < b < c: b is evaluated once, and c only if a < b holds."""
        op, right_node = rest[0]
        name = _COMPARES.get(type(op))
        if name is None:
            raise self.error(f"comparison '{_describe(op)}' is not supported", node)
        right = self.expr(right_node)
        result = self.compare(name, left, right, node)
        if len(rest) == 1:
            return result
        return self.short_circuit_thunk(result, lambda: self.compare_chain(right, rest[1:], node))

    def short_circuit_thunk(self, condition: Value, evaluate: Callable[[], Value]) -> Value:
        if is_const(condition):
            return evaluate() if const_value(condition) else condition
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
            return self.expr(node.body if const_value(condition) else node.orelse)
        then_block, else_block = self.builder.new_block(), self.builder.new_block()
        self.builder.cbr(condition, then_block, [], else_block, [])
        results = []
        for block, branch in ((then_block, node.body), (else_block, node.orelse)):
            self.builder.position_at_end(block)
            value = self.expr(branch)
            if isinstance(value, PyConst) or isinstance(value.type, T.ArrayType):
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

    def expr_Call(self, node: ast.Call):
        function = self.expr(node.func)
        if isinstance(function, Value) and isinstance(function.type, T.FunctionRefType):
            return self.call_reference(function, node)
        if not isinstance(function, PyConst):
            raise self.error(f"a {self.type_name(function)} is not callable", node)
        from .intrinsics import lookup_intrinsic
        handler = lookup_intrinsic(function.value)
        if handler is not None:
            return handler(self, node)
        target = function.value
        if isinstance(target, pytypes.FunctionType):
            return self.call_device_function(target, node)
        if isinstance(target, Marker):
            return self.call_marker(target, node)
        if getattr(target, "__kernelkit_kernel__", False):
            raise self.error("a kernel cannot be called from a kernel", node,
                             hint="move the shared code into a plain function and call that")
        raise self.error(f"{_describe(node.func)} cannot be called in kernels", node)

    def call_marker(self, marker: Marker, node: ast.Call) -> Value:
        """A plugin's marker: an `intrinsic` operation the plugin rewrites."""
        if node.keywords:
            raise self.error(f"'{marker.name}' takes no keyword arguments", node)
        args = [self.expr(argument) for argument in node.args]
        for value, argument in zip(args, node.args):
            if isinstance(value, PyConst):
                raise self.error(f"'{marker.name}' takes numbers and arrays, got "
                                 f"{self.type_name(value)}", argument)
        result = marker.result_type(tuple(a.type for a in args))
        return self.builder.op("intrinsic", args, result, {"name": marker.name})

    def defer(self, target, argtypes: tuple, node) -> Value:
        """A `deferred` reference to `target` compiled for `argtypes`. Its result type is
        found by translating `target` on the side now; the driver translates it into the
        module after typing (`resolve_deferred`)."""
        key = (target, argtypes)
        module = self.context.module
        name = next((n for n, request in module.deferred.items() if request == key), None)
        if name is None:
            name = f"{target.__qualname__}.deferred{len(module.deferred)}".replace(
                "<locals>.", "")
            module.deferred[name] = key
        if target in self.context.stack:
            chain = " -> ".join(f.__name__ for f in self.context.stack + [target])
            raise self.error(f"recursion is not supported: {chain}", node)
        scratch = TranslationContext(Module(), self.context.kernel_name,
                                     self.context.workgroupsize,
                                     stack=self.context.stack + [target])
        result = translate_function(scratch, target, list(argtypes), is_kernel=False,
                                    name=name).return_type
        reference = T.FunctionRefType(argtypes, result)
        return self.builder.op("deferred", [], reference,
                               {"function": name, "argtypes": argtypes})

    def call_reference(self, reference: Value, node: ast.Call) -> Value:
        if node.keywords:
            raise self.error("keyword arguments are not supported in calls", node)
        args = [self.expr(a) for a in node.args]
        types = tuple(None if isinstance(a, PyConst) else a.type for a in args)
        if types != reference.type.params:
            expected = ", ".join(t.name for t in reference.type.params)
            got = ", ".join("a Python object" if t is None else t.name for t in types)
            raise self.error(f"this function reference takes ({expected}), got ({got})", node,
                             hint="call it with arguments of the types given to kk.deferred")
        return self.builder.op("call_ref", [reference, *args], reference.type.result)

    def call_device_function(self, target, node: ast.Call) -> Value:
        if node.keywords:
            raise self.error("keyword arguments are not supported in device function calls", node)
        args = [self.expr(a) for a in node.args]
        key = (target, tuple(a if isinstance(a, PyConst) else a.type for a in args))
        if target in self.context.stack:
            chain = " -> ".join(f.__name__ for f in self.context.stack + [target])
            raise self.error(f"recursion is not supported: {chain}", node,
                             hint="rewrite the recursion as a loop")
        callee = self.context.specializations.get(key)
        if callee is None:
            name = f"{target.__qualname__}.{len(self.context.specializations)}".replace(
                "<locals>.", "")
            signature = [a if isinstance(a, PyConst) else a.type for a in args]
            self.context.stack.append(target)
            try:
                callee = translate_function(self.context, target, signature, is_kernel=False,
                                            name=name)
            finally:
                self.context.stack.pop()
            self.context.specializations[key] = callee
        operands = [a for a in args if not isinstance(a, PyConst)]
        return self.builder.op("call", operands, callee.return_type, {"callee": callee.name})

    # -- typed building blocks: the builder's rules, errors at the source line ------------

    @contextlib.contextmanager
    def typing_rules(self, node=None):
        try:
            yield
        except TypingError as error:
            raise self.error(str(error), node, hint=error.hint) from None

    def constant(self, value, type: T.ScalarType) -> Value:
        return self.builder.constant(value, type)

    def emit(self, kind: OpDefinition | str, operands: list[Value], type: T.IRType,
             attrs=None) -> Value:
        return self.builder.emit(kind, operands, type, attrs)

    def cast(self, value: Value, type: T.IRType) -> Value:
        with self.typing_rules():
            return self.builder.cast(value, type)

    def truth(self, value, node) -> Value:
        if isinstance(value, PyConst):
            return self.constant(bool(value.value), T.bool_)
        self.require_scalar(value, node)
        return self.builder.truth(value)

    def binary(self, op: str, left, right, node) -> Value:
        self.require_scalar(left, node)
        self.require_scalar(right, node)
        with self.typing_rules(node):
            return self.builder.binary(op, left, right)

    def compare(self, op: str, left, right, node) -> Value:
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

    def tuple_length(self, value, node) -> int:
        if isinstance(value, PyConst) and isinstance(value.value, tuple):
            return len(value.value)
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
        if isinstance(base, PyConst) and isinstance(base.value, tuple):
            position = self.constant_index(index, len(base.value), node)
            return self.python_value(base.value[position], node)
        if isinstance(base, Value) and isinstance(base.type, T.TupleType):
            position = self.constant_index(index, len(base.type.elements), node)
            return self.extract(base, position)
        array = self.require_array(base, node)
        indices = self.array_indices(array, index, node)
        return self.builder.op("load", [array, *indices], array.type.dtype)

    def subscript_store(self, base, index, value, node) -> None:
        array = self.require_array(base, node)
        if array.type.const:
            raise self.error(f"'{_describe(node.value)}' is read-only (annotated kk.Const)",
                             node, hint="remove the kk.Const annotation to write to it")
        indices = self.array_indices(array, index, node)
        if isinstance(value, PyConst) or not isinstance(value.type, T.ScalarType):
            raise self.error(f"cannot store a {self.type_name(value)} into an array of "
                             f"{array.type.dtype.name}", node)
        self.builder.op("store", [array, *indices, self.cast(value, array.type.dtype)])

    def constant_index(self, index, length: int, node) -> int:
        if not is_const(index) or not isinstance(const_value(index), int) or \
                isinstance(const_value(index), bool):
            raise self.error("a tuple can only be indexed with a constant integer", node)
        position = const_value(index)
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

    # -- checks ---------------------------------------------------------------------------

    def is_scalar(self, value) -> bool:
        return isinstance(value, Value) and isinstance(value.type, T.ScalarType)

    def require_scalar(self, value, node) -> None:
        if not self.is_scalar(value):
            raise self.error(f"expected a number, got {self.type_name(value)}", node)

    def require_array(self, value, node) -> Value:
        if not (isinstance(value, Value) and isinstance(value.type, T.ArrayType)):
            raise self.error(f"a {self.type_name(value)} cannot be indexed", node)
        return value

    @staticmethod
    def type_name(value) -> str:
        if isinstance(value, PyConst):
            return f"Python object {value.value!r}"
        return value.type.name


def _closure_values(pyfunc) -> dict:
    if not pyfunc.__closure__:
        return {}
    values = {}
    for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            pass
    return values


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


def _last_line(tree: ast.FunctionDef) -> int:
    return getattr(tree.body[-1], "end_lineno", tree.body[-1].lineno)


def _describe(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return type(node).__name__


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and",
           ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_COMPARES = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
             ast.GtE: "ge"}
_SYNTAX_HINTS = {
    "With": "'with' blocks cannot run on a device; remove it from the kernel",
    "Try": "exceptions cannot be raised or caught on a device; check conditions with 'if'",
    "Raise": "exceptions cannot be raised on a device; write an error flag into an array",
    "Lambda": "define a named function outside the kernel and call it",
    "ListComp": "lists cannot be built on a device; use kk.private(dtype, shape) or a tuple",
    "List": "lists cannot be built on a device; use a tuple or kk.private(dtype, shape)",
    "Dict": "dicts cannot be built on a device",
    "Global": "kernels can read module-level constants but not assign them",
    "Nonlocal": "kernels can read closure constants but not assign them",
    "Import": "import modules at the top of the file, outside the kernel",
    "ImportFrom": "import modules at the top of the file, outside the kernel",
    "JoinedStr": "format strings are not supported; pass the values to kk.print(...)",
}
