"""Frozen dataclasses in kernels: made (`State(x, v)`, `dataclasses.replace(s, v=w)`),
read (`s.x`), passed to device functions and returned from them, carried through `if`s
and loops.

A dataclass is a `StructValue`, the values of its fields, while the kernel is
translated; the IR has no structs. Where one must cross an IR boundary (a device
function's result, a block parameter where paths join or a loop comes round) it travels
as the tuple of its leaves (`T.leaves`, depth first) and is rebuilt on the other side
from its `StructType`. So the passes, every backend and automatic differentiation see
only scalars, tuples and `extract`.

`Structs` is mixed into `translate.FunctionTranslator`."""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect

from ..ir import types as T
from ..ir.ops import Value
from ..runtime.arguments import remember_struct_class, struct_class
from .intrinsics import handles
from .values import PyConst, StructValue


def is_frozen_dataclass(target) -> bool:
    return isinstance(target, type) and dataclasses.is_dataclass(target) and \
        target.__dataclass_params__.frozen


def with_leaf_types(struct_type: T.IRType, types) -> T.IRType:
    """`struct_type` with its leaves' types taken in order from the iterator `types`."""
    if isinstance(struct_type, T.StructType):
        return dataclasses.replace(struct_type, fields=tuple(
            (name, with_leaf_types(field, types)) for name, field in struct_type.fields))
    if isinstance(struct_type, T.VectorType):
        elements = tuple(next(types) for _ in struct_type.elements)
        return T.VectorType(elements, struct_type.shape)
    if isinstance(struct_type, T.TupleType):
        return T.TupleType(tuple(with_leaf_types(e, types) for e in struct_type.elements))
    return next(types)


def flat_type(struct_type: T.StructType) -> T.TupleType:
    """The IR type a struct of `struct_type` travels as: the tuple of its leaves."""
    return T.TupleType(tuple(leaf for _, leaf in T.leaves(struct_type)))


class Structs:
    def construct(self, cls: type, node: ast.Call) -> StructValue:
        """`State(x, v=...)`: the fields bound as the dataclass's `__init__` binds them,
        defaults included."""
        name = cls.__qualname__
        if not is_frozen_dataclass(cls):
            raise self.error(f"{name} is a dataclass that is not frozen; kernels make frozen "
                             f"dataclasses, whose fields cannot change once made", node,
                             hint=f"declare it @dataclasses.dataclass(frozen=True)")
        if "__post_init__" in vars(cls) or any("__post_init__" in vars(base)
                                                for base in cls.__mro__[1:-1]):
            raise self.error(f"{name} has a __post_init__, which kernels do not run", node,
                             hint="compute the derived fields before making it, or in a "
                                  "device function that makes it")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        values = self.bind_arguments(cls, node)
        made = {}
        for parameter, value in zip(inspect.signature(cls).parameters, values):
            made[parameter] = self.field_value(cls, parameter, value, node)
        for field_name, field in fields.items():
            if not field.init:
                if field.default is dataclasses.MISSING:
                    raise self.error(f"{name}.{field_name} is not set by __init__ and has no "
                                     f"default, so kernels cannot make it", node)
                made[field_name] = self.field_value(cls, field_name,
                                                    self.python_value(field.default, node), node)
        return self.struct_of(cls, {field_name: made[field_name] for field_name in fields})

    def field_value(self, cls: type, field_name: str, value, node):
        """A field's value as a dataclass made in a kernel holds it: a number, a tuple, a
        vector or matrix, or another dataclass."""
        if isinstance(value, StructValue):
            return value
        if isinstance(value, PyConst) and isinstance(value.value, (bool, int, float, tuple)):
            value = self.python_value(value.value, node)
        if isinstance(value, Value) and isinstance(value.type, (T.ScalarType, T.TupleType)):
            return value
        held = "an array" if isinstance(value, Value) and isinstance(value.type, T.ArrayType) \
            else f"a {self.type_name(value)}"
        raise self.error(f"{cls.__qualname__}.{field_name} would hold {held}; a dataclass made "
                         f"in a kernel holds numbers, tuples, vectors and dataclasses", node,
                         hint="pass the array to the kernel or device function as an argument "
                              "of its own")

    def struct_of(self, cls: type, fields: dict) -> StructValue:
        remember_struct_class(cls)
        struct_type = T.StructType(cls.__module__, cls.__qualname__, tuple(
            (name, value.type) for name, value in fields.items()))
        return StructValue(struct_type, fields)

    def replace_fields(self, node: ast.Call) -> StructValue:
        """`dataclasses.replace(s, x=...)`: a copy of `s` with the named fields changed."""
        if len(node.args) != 1 or any(k.arg is None for k in node.keywords):
            raise self.error("dataclasses.replace takes one dataclass and the fields to change "
                             "by name", node)
        struct = self.expr(node.args[0])
        if not isinstance(struct, StructValue):
            raise self.error(f"dataclasses.replace takes a dataclass, got a "
                             f"{self.type_name(struct)}", node)
        cls = self.struct_class(struct, node)
        fields = dict(struct.fields)
        for keyword in node.keywords:
            if keyword.arg not in fields:
                raise self.error(f"{struct.class_name} has no field '{keyword.arg}'; its fields "
                                 f"are {', '.join(fields)}", node)
            fields[keyword.arg] = self.field_value(cls, keyword.arg, self.expr(keyword.value),
                                                   node)
        return self.struct_of(cls, fields)

    def struct_class(self, struct: StructValue, node) -> type:
        """The class of `struct`: one a kernel was given or made."""
        target = struct_class(struct.type)
        if target is None:
            raise self.error(f"the class {struct.type.qualname} cannot be found from its "
                             f"module to make another", node,
                             hint="define the dataclass at the top level of a module")
        return target

    # -- a dataclass of arrays, indexed as one array of dataclasses -----------------------

    def arrays_of(self, struct: StructValue, node) -> dict[str, Value]:
        """The fields of a dataclass that holds arrays of one rank, every field one (a
        struct of arrays, which `s[i]` reads as one dataclass); else an error."""
        fields = struct.fields
        if not fields or not all(isinstance(v, Value) and isinstance(v.type, T.ArrayType)
                                 for v in fields.values()) or \
                len({v.type.ndim for v in fields.values()}) != 1:
            raise self.error(f"a {struct.class_name} cannot be indexed: only a dataclass "
                             f"whose fields are all arrays of one rank is (its element "
                             f"s[i] is the dataclass of the fields' elements)", node,
                             hint="index one of its fields (s.x[i])")
        return fields

    def element_of(self, struct: StructValue, index, node) -> StructValue:
        """`s[i]` of a struct of arrays: its fields' elements at `i`, as a dataclass of
        the same class holding numbers."""
        loads = {name: self.subscript_load(array, index, node)
                 for name, array in self.arrays_of(struct, node).items()}
        return StructValue(T.StructType(struct.type.module, struct.type.qualname, tuple(
            (name, value.type) for name, value in loads.items())), loads)

    def store_element(self, struct: StructValue, index, value, node) -> None:
        """`s[i] = p` of a struct of arrays: each field of `p` (a dataclass with the same
        fields) into its array's element at `i`."""
        arrays = self.arrays_of(struct, node)
        if not isinstance(value, StructValue) or list(value.fields) != list(arrays):
            raise self.error(f"an element of a {struct.class_name} is a dataclass with the "
                             f"fields {', '.join(arrays)}, not a {self.type_name(value)}",
                             node, hint=f"store {struct.class_name}(...) or a field at a "
                                        f"time (s.x[i] = ...)")
        for name, array in arrays.items():
            self.subscript_store(array, index, value.fields[name], node)

    def assign_element_field(self, target: ast.Attribute, value) -> bool:
        """`s[i].x = v` of a struct of arrays (its field's array at `i`); False where
        `target` is not that."""
        element = target.value
        if not isinstance(element, ast.Subscript):
            return False
        struct = self.expr(element.value)
        if not isinstance(struct, StructValue):
            return False
        array = self.arrays_of(struct, target).get(target.attr)
        if array is None:
            raise self.error(f"{struct.class_name} has no field '{target.attr}'; its fields "
                             f"are {', '.join(struct.fields)}", target)
        self.subscript_store(array, self.expr(element.slice), value, target)
        return True

    # -- across IR boundaries -----------------------------------------------------------

    def flattened(self, struct: StructValue) -> Value:
        """`struct` as the tuple of its leaves."""
        return self.make_tuple(self.scalar_leaves(struct))

    def unflattened(self, struct_type: T.StructType, value: Value) -> StructValue:
        """The struct of `struct_type`'s shape made of the leaves in the tuple `value`,
        whose types may be wider than `struct_type`'s."""
        leaves = [self.extract(value, index) for index in range(len(value.type.elements))]
        retyped = with_leaf_types(struct_type, iter(leaf.type for leaf in leaves))
        return self.rebuilt(retyped, iter(leaves))

    def joined_struct_type(self, values: list) -> T.StructType | None:
        """The struct type that holds every one of `values` where they are dataclasses of
        one class, or None."""
        if not all(isinstance(v, StructValue) for v in values):
            return None
        return functools.reduce(lambda a, b: a and T.unify(a, b.type), values[1:],
                                values[0].type)


@handles(dataclasses.replace)
def _replace(tr, node):
    return tr.replace_fields(node)
