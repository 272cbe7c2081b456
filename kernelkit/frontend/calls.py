"""Calls: to the language's functions (the `intrinsics` table), to device functions
(arguments bound to parameters as Python binds them, with keywords, `*`-unpacking of
tuples, vectors and matrices, and constant defaults;
each function translated once per argument types; a dataclass passed as its scalar
leaves), to plugins' markers, through function references made by `kk.deferred`, and to
objects that give their calls a meaning of their own (`__kernelkit_call__(site)`, with a
`CallSite`: how enzyme_ext's `autodiff` and custom derivative rules are called inside
kernels).

`Calls` is mixed into `translate.FunctionTranslator`; a callee is translated through
`specialize.translate_function`, with the shared `TranslationContext`."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import types as pytypes
from collections.abc import Callable

import numpy as np

from ..ir import types as T
from ..ir.builder import Builder
from ..ir.definitions import DEFERRED
from ..ir.function import Function, Module
from ..ir.ops import Value
from ..lang.markers import Marker
from .intrinsics import lookup_intrinsic
from .source import describe
from .specialize import TranslationContext, translate_function
from .values import PyConst, StructValue


class Calls:
    def expr_Call(self, node: ast.Call):
        function = self.expr(node.func)
        if isinstance(function, Value) and isinstance(function.type, T.FunctionRefType):
            return self.call_reference(function, node)
        if not isinstance(function, PyConst):
            raise self.error(f"a {self.type_name(function)} is not callable", node)
        handler = lookup_intrinsic(function.value)
        if handler is not None:
            return handler(self, node)
        target = function.value
        hook = getattr(target, "__kernelkit_call__", None)
        if hook is not None:
            return hook(CallSite(self, node))
        if isinstance(target, pytypes.FunctionType):
            return self.call_device_function(target, node)
        if isinstance(target, type) and dataclasses.is_dataclass(target):
            return self.construct(target, node)
        if isinstance(target, Marker):
            return self.call_marker(target, node)
        if getattr(target, "__kernelkit_kernel__", False):
            raise self.error("a kernel cannot be called from a kernel", node,
                             hint="move the shared code into a plain function and call that")
        raise self.error(f"{describe(node.func)} cannot be called in kernels", node)

    def call_marker(self, marker: Marker, node: ast.Call) -> Value:
        """A plugin's marker: an `intrinsic` operation the plugin rewrites."""
        if node.keywords:
            raise self.error(f"'{marker.name}' takes no keyword arguments", node)
        args = self.positional_arguments(node)
        for value in args:
            if isinstance(value, (PyConst, StructValue)):
                raise self.error(f"'{marker.name}' takes numbers and arrays, got "
                                 f"{self.type_name(value)}", node)
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
                                     stack=self.context.stack + [target],
                                     debug=self.context.debug)
        result = translate_function(scratch, target, list(argtypes), is_kernel=False,
                                    name=name).return_type
        if scratch.struct_results:
            raise self.error(f"{target.__name__} returns a dataclass, which a kk.deferred "
                             f"reference cannot", node,
                             hint="call the function directly, or return the fields as a tuple")
        reference = T.FunctionRefType(argtypes, result)
        return self.builder.op("deferred", [], reference,
                               {"function": name, "argtypes": argtypes})

    def call_reference(self, reference: Value, node: ast.Call) -> Value:
        if node.keywords:
            raise self.error("keyword arguments are not supported in calls", node)
        args = self.positional_arguments(node)
        types = tuple(None if isinstance(a, PyConst) else a.type for a in args)
        if types != reference.type.params:
            expected = ", ".join(t.name for t in reference.type.params)
            got = ", ".join("a Python object" if t is None else t.name for t in types)
            raise self.error(f"this function reference takes ({expected}), got ({got})", node,
                             hint="call it with arguments of the types given to kk.deferred")
        return self.builder.op("call_ref", [reference, *args], reference.type.result)

    def call_device_function(self, target, node: ast.Call) -> Value:
        args = self.bind_arguments(target, node)
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
        operands = [leaf for a in args if not isinstance(a, PyConst)
                    for leaf in (self.scalar_leaves(a) if isinstance(a, StructValue) else [a])]
        result = self.builder.op("call", operands, callee.return_type, {"callee": callee.name})
        struct_type = self.context.struct_results.get(callee.name)
        return result if struct_type is None else self.unflattened(struct_type, result)

    def scalar_leaves(self, value) -> list[Value]:
        """The values of a struct's leaves (`T.leaves`), as the parameters of a function
        it is passed to take them."""
        if isinstance(value, StructValue):
            return [leaf for field in value.fields.values() for leaf in self.scalar_leaves(field)]
        if isinstance(value.type, T.TupleType):
            return [leaf for position in range(len(value.type.elements))
                    for leaf in self.scalar_leaves(self.extract(value, position))]
        return [value]

    def bind_arguments(self, target, node: ast.Call) -> list:
        """The values of `target`'s parameters at the call `node`, in the order of its
        parameters, bound as Python binds them: the positional arguments in order, the
        keywords by name, and the defaults of the parameters left."""
        called = f"{target.__name__}()"
        signature = inspect.signature(target)
        parameters = list(signature.parameters.values())
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            raise self.error(f"{called} takes *args or **kwargs, which device functions cannot",
                             node, hint=f"name each parameter of {target.__name__}")
        positional = [p for p in parameters if p.kind is not p.KEYWORD_ONLY]
        arguments = self.positional_arguments(node)
        listing = ", ".join(p.name for p in parameters)
        if len(arguments) > len(positional):
            raise self.error(f"{called} takes {_count(len(positional), 'positional argument')} "
                             f"but {len(arguments)} were given", node,
                             hint=f"its parameters are {listing}")
        given = {p.name: argument for p, argument in zip(positional, arguments)}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise self.error("**-unpacking is not supported in calls in kernels", node,
                                 hint="pass the arguments by name one by one")
            parameter = signature.parameters.get(keyword.arg)
            if parameter is None:
                raise self.error(f"{called} got an unexpected keyword argument '{keyword.arg}'",
                                 node, hint=f"its parameters are {listing}")
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise self.error(f"{called} got the positional-only argument '{keyword.arg}' "
                                 "as a keyword", node, hint="pass it by position")
            if keyword.arg in given:
                raise self.error(f"{called} got multiple values for argument '{keyword.arg}'",
                                 node, hint=f"pass '{keyword.arg}' once, by position or by name")
            given[keyword.arg] = keyword.value
        missing = [p.name for p in parameters if p.name not in given and p.default is p.empty]
        if missing:
            listed = " and ".join(f"'{m}'" for m in missing)
            raise self.error(f"{called} missing {_count(len(missing), 'required argument')}: "
                             f"{listed}", node, hint=f"pass {listed} in the call")
        values = {name: self.expr(argument) if isinstance(argument, ast.expr) else argument
                  for name, argument in given.items()}
        return [values[p.name] if p.name in values else self.default_value(target, p, node)
                for p in parameters]

    def positional_arguments(self, node: ast.Call) -> list:
        """The values of a call's positional arguments, in order; `*t` gives the items of
        a tuple, vector or matrix (its rows), as Python unpacks them."""
        values = []
        for argument in node.args:
            if not isinstance(argument, ast.Starred):
                values.append(self.expr(argument))
                continue
            sequence = self.expr(argument.value)
            if isinstance(sequence, Value) and isinstance(sequence.type, T.TupleType) or \
                    isinstance(sequence, PyConst) and isinstance(sequence.value, tuple):
                values.extend(self.item(sequence, i)
                              for i in range(self.tuple_length(sequence, argument)))
            else:
                raise self.error(f"*-unpacking takes a tuple, vector or matrix, got a "
                                 f"{self.type_name(sequence)}", argument,
                                 hint="pass the arguments one by one")
        return values

    def default_value(self, target, parameter: inspect.Parameter, node: ast.Call):
        """A parameter's default as the call passes it: a number, a bool or a tuple of them
        becomes a constant; None stays the Python object."""
        value = parameter.default
        if value is None:
            return PyConst(None)
        if isinstance(value, (bool, int, float, np.number, np.bool_, tuple)):
            folded = self.python_value(value, node)
            if not isinstance(folded, PyConst):
                return folded
        shown = repr(value) if len(repr(value)) <= 40 else type(value).__name__
        raise self.error(f"the default value of '{parameter.name}' in {target.__name__}() is "
                         f"{shown}: a default must be a number, a bool, None or a tuple of "
                         "numbers", node,
                         hint=f"pass '{parameter.name}' in the call, or give it a number as "
                              "its default")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


class CallSite:
    """A call in a kernel, as an object's `__kernelkit_call__(site)` sees it: it reads the
    arguments, asks for functions to be compiled into the module, and builds the
    operation the call stands for (a plugin's marker, usually)."""

    def __init__(self, translator, node: ast.Call):
        self.translator = translator
        self.node = node
        self.arguments: list[ast.expr] = list(node.args)
        self.keywords: dict[str, ast.expr] = {k.arg: k.value for k in node.keywords}

    @property
    def builder(self):
        return self.translator.builder

    def value(self, node: ast.expr):
        """An argument's value: an IR value, or the Python object it names."""
        value = self.translator.expr(node)
        return value.value if isinstance(value, PyConst) else value

    def call_of(self, node: ast.expr):
        """(the Python object called, the argument nodes) for an argument that is itself
        a call of a Python object (`Active(x)`), or None."""
        if not isinstance(node, ast.Call) or node.keywords:
            return None
        callee = self.translator.expr(node.func)
        return (callee.value, list(node.args)) if isinstance(callee, PyConst) else None

    def reference(self, function, argtypes: tuple) -> Value:
        """A `deferred` reference to the device function `function` compiled for
        `argtypes` into this module; its type gives the result type."""
        return self.translator.defer(function, tuple(argtypes), self.node)

    def marker(self, name: str, operands: list[Value], result: T.IRType, attrs: dict) -> Value:
        return self.builder.op("intrinsic", operands, result, dict(attrs, name=name))

    def within(self, *functions) -> bool:
        """Whether this call is in the body of one of `functions`, or of a function one of
        them calls."""
        translator = self.translator
        return any(f is translator.pyfunc or f in translator.context.stack
                   for f in functions if f is not None)

    def plain_call(self, function) -> Value:
        """This call, as a call of the device function `function`."""
        return self.translator.call_device_function(function, self.node)

    def function(self, name: str, param_types: tuple[T.IRType, ...],
                 body: Callable[[Builder, list[Value]], Value]) -> Value:
        """A `deferred` reference to a function of the module built here, in IR: it takes
        `param_types`, and `body(builder, parameters)` builds its code and gives the value
        it returns (its calls name functions of the module, such as those `reference`
        asks for: `reference.attrs["function"]`)."""
        module = self.translator.context.module
        if name not in module.functions:
            function = Function(name, [f"arg{i}" for i in range(len(param_types))],
                                source_file=self.translator.source.file)
            builder = Builder(function, self.builder.loc)
            builder.position_at_end(builder.new_block(tuple(param_types)))
            result = body(builder, list(function.params))
            builder.ret(result)
            function.return_type = result.type
            module.add(function)
        reference = T.FunctionRefType(tuple(param_types), module.functions[name].return_type)
        return self.builder.op(DEFERRED, [], reference,
                               {"function": name, "argtypes": tuple(param_types)})

    def forget(self, reference: Value) -> None:
        """Takes back a reference this call made and did not use (`reference` or
        `function`); the function it names stays in the module."""
        reference.block.ops.remove(reference)

    def error(self, message: str, node: ast.AST | None = None, hint: str | None = None):
        return self.translator.error(message, node if node is not None else self.node, hint)
