"""`FunctionTranslator`: one Python function, for given argument types, into one typed
IR `Function`.

It combines the statements (`statements`), expressions (`expressions`), calls (`calls`)
and small vectors and matrices (`vectors`) of the language, and owns what they share:
the translator's state, errors at the source line, the function's entry (parameters,
the return at its end) and the checks on values.
Which types it is translated for, and again when a variable's type widens, is
`specialize`'s. It knows the kernel language (through `intrinsics`) but no backend."""
from __future__ import annotations

import ast

from ..errors import CompileError
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.function import Function
from ..ir.ops import Location, Value
from .calls import Calls
from .expressions import Expressions
from .source import closure_values, last_line, parse_function
from .specialize import TranslationContext, TypeHints
from .statements import Loop, Statements
from .structs import Structs, flat_type
from .values import PyConst, StructValue
from .vectors import Vectors
from . import scalars  # noqa: F401 - registers kk.erfinv, kk.round ... in the intrinsics table


class FunctionTranslator(Statements, Expressions, Calls, Vectors, Structs):
    def __init__(self, context: TranslationContext, pyfunc, args: list, is_kernel: bool,
                 name: str, hints: TypeHints):
        self.context = context
        self.pyfunc = pyfunc
        self.source = parse_function(pyfunc)
        self.args = args
        self.is_kernel = is_kernel
        self.hints = hints
        self.globals = pyfunc.__globals__
        self.closure = closure_values(pyfunc)
        self.function = Function(name, [a.arg for a in parameters(self.source.tree)],
                                 is_kernel=is_kernel, source_file=self.source.file)
        self.builder = Builder(self.function)
        self.env: dict[str, object] = {}
        self.loops: list[Loop] = []
        self.return_type: T.IRType | None = hints.return_type
        self.node: ast.AST = self.source.tree

    # -- errors ---------------------------------------------------------------------------

    def error(self, message: str, node: ast.AST | None = None, hint: str | None = None):
        node = node if node is not None else self.node
        line = getattr(node, "lineno", self.source.first_line)
        source_line = self.source.lines[line - 1] if 0 < line <= len(self.source.lines) else None
        return CompileError(message, kernel=self.context.kernel_name, function=self.pyfunc.__name__,
                            file=self.source.file, line=line, source_line=source_line, hint=hint)

    def unsupported(self, message: str, node: ast.AST):
        """The error for Python syntax kernels do not have, with a hint where one is known."""
        return self.error(message, node, hint=_SYNTAX_HINTS.get(type(node).__name__))

    # -- entry ----------------------------------------------------------------------------

    def translate(self) -> Function:
        tree = self.source.tree
        arguments = tree.args
        if arguments.vararg or arguments.kwarg:
            raise self.error("*args and **kwargs are not supported in kernels and device "
                             "functions", tree, hint="name each parameter")
        if self.is_kernel and (arguments.kwonlyargs or arguments.posonlyargs):
            raise self.error("a kernel's parameters cannot be keyword-only or positional-only",
                             tree, hint="remove the '*' and '/' from the parameter list")
        names = parameters(tree)
        if len(names) != len(self.args):
            raise self.error(f"{tree.name} takes {len(names)} arguments but "
                             f"{len(self.args)} were given", tree)
        entry = self.builder.new_block()
        self.builder.position_at_end(entry)
        arg_names = []
        for parameter, arg in zip(names, self.args):
            name = parameter.arg
            if isinstance(arg, PyConst):
                self.env[name] = arg
                arg_names.append(name)
            elif isinstance(arg, T.StructType) or \
                    (self.is_kernel and isinstance(arg, T.TupleType)):
                # A struct, and a kernel's tuple, come as their scalar leaves.
                leaves = []
                for path, leaf in T.leaves(arg):
                    arg_names.append(name + T.path_text(path))
                    leaves.append(entry.add_param(leaf, arg_names[-1]))
                self.env[name] = self.rebuilt(arg, iter(leaves))
            else:
                self.env[name] = entry.add_param(arg, name)
                arg_names.append(name)
        self.function.arg_names[:] = arg_names
        self.statements(tree.body)
        if self.builder.block is not None:
            if self.is_kernel or self.return_type in (None, T.void):
                self.return_type = T.void
                self.builder.loc = Location(last_line(tree), 0, self.source.file)
                self.builder.ret()
            else:
                raise self.error(f"{tree.name} returns a value on some paths but not at its end",
                                 tree.body[-1], hint="add a return statement at the end")
        self.function.return_type = self.return_type or T.void
        if isinstance(self.return_type, T.StructType):   # it travels as its leaves
            self.function.return_type = flat_type(self.return_type)
            self.context.struct_results[self.function.name] = self.return_type
        return self.function

    def rebuilt(self, argtype: T.IRType, leaves) -> Value | StructValue:
        """The struct, tuple or scalar of `argtype` made of the next of `leaves`, the
        values of its leaves (`T.leaves`) in order."""
        if isinstance(argtype, T.StructType):
            return StructValue(argtype, {field: self.rebuilt(field_type, leaves)
                                         for field, field_type in argtype.fields})
        if isinstance(argtype, T.TupleType):
            return self.builder.make_tuple([self.rebuilt(element, leaves)
                                            for element in argtype.elements],
                                           getattr(argtype, "shape", None))
        return next(leaves)

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
        if isinstance(value, StructValue):
            return f"dataclass {value.class_name}"
        return value.type.name


def parameters(tree: ast.FunctionDef) -> list[ast.arg]:
    """A function's parameters in the order it is given its arguments (see
    `Calls.bind_arguments`): positional-only, then the others, then keyword-only."""
    arguments = tree.args
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]


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
    "JoinedStr": "format strings are strings, which kernels have only in kk.print: "
                 "kk.print(f\"{x:.3f}\")",
}
