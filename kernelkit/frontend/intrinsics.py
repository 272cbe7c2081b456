"""How each function a kernel may call is translated: a table from the Python object
(`kk.index`, `math.sqrt`, `min`, `np.float32` ...) to a handler that emits IR.

Adding a function to the language is one entry here (a new math function is one entry
in `ir/math_functions.py`, from which this table and every target's lowering derive)."""
from __future__ import annotations

import ast
import builtins
import functools
import math
import types

import numpy as np

from .. import lang
from ..analysis.work_groups import NOTE as WORK_GROUPS_OBSERVED
from ..ir import print_format
from ..ir import types as T
from ..ir.definitions import (ATOMICS, GROUP_ID, LOCAL_ID, LOCALMEM, MATH, NDRANGE, PRIVATE,
                              SUBGROUP, OpDefinition)
from ..ir.math_functions import MATH_FUNCTIONS, MathFunction
from ..ir.ops import constant_value
from ..ir.subgroups import REDUCTIONS, SUBGROUP_SIZE, VOTES
from ..lang import intrinsics as kk
from ..lang import subgroups
from .values import PyConst, StructValue, is_const

_HANDLERS: dict[int, object] = {}
_KEEPALIVE: list = []  # the objects whose ids key _HANDLERS


def lookup_intrinsic(obj):
    try:
        return _HANDLERS.get(id(obj))
    except TypeError:
        return None


def handles(*objects):
    def register(handler):
        for obj in objects:
            _HANDLERS[id(obj)] = handler
            _KEEPALIVE.append(obj)
        return handler
    return register


def positional(tr, node: ast.Call, minimum: int, maximum: int, name: str,
               keywords: tuple[str, ...] = ()):
    allowed = set(keywords)
    for keyword in node.keywords:
        if keyword.arg not in allowed:
            raise tr.error(f"{name}() got an unexpected keyword argument '{keyword.arg}'", node)
    args = tr.positional_arguments(node)
    if not minimum <= len(args) <= maximum:
        expected = str(minimum) if minimum == maximum else f"{minimum} to {maximum}"
        raise tr.error(f"{name}() takes {expected} arguments, got {len(args)}", node)
    kwargs = {k.arg: tr.expr(k.value) for k in node.keywords}
    return args, kwargs


# -- work-item geometry -------------------------------------------------------------------

def geometry(tr, position: OpDefinition, axis: int):
    return tr.builder.op(position, [], T.int64, {"axis": axis})


def group_sizes(tr):
    return tr.context.workgroupsize


def linearize(tr, indices, extents, node):
    """Row-major (C order) position of `indices` in a grid of `extents`."""
    result = indices[0]
    for index, extent in zip(indices[1:], extents[1:]):
        result = tr.binary("add", tr.binary("mul", result, extent, node), index, node)
    return result


@handles(kk.index)
def index_(tr, node):
    args, kwargs = positional(tr, node, 1, 2, "kk.index")
    kind = args[0]
    style = args[1] if len(args) > 1 else PyConst(kk.Linear)
    if not (isinstance(kind, PyConst) and isinstance(kind.value, kk.IndexKind)):
        raise tr.error("kk.index needs kk.Global, kk.Local or kk.Group as its first argument", node)
    if not (isinstance(style, PyConst) and isinstance(style.value, kk.IndexStyle)):
        raise tr.error("kk.index's second argument must be kk.Linear, kk.Cartesian or kk.NTuple",
                       node)
    sizes = group_sizes(tr)
    ndim = len(sizes)
    if kind.value is kk.Local:
        indices = [geometry(tr, LOCAL_ID, d) for d in range(ndim)]
        extents = [tr.constant(s, T.int64) for s in sizes]
    elif kind.value is kk.Group:
        indices = [geometry(tr, GROUP_ID, d) for d in range(ndim)]
        extents = [number_of_groups(tr, d, node) for d in range(ndim)]
    else:
        indices = global_position(tr, node)
        extents = [geometry(tr, NDRANGE, d) for d in range(ndim)]
    if style.value is kk.Linear:
        return linearize(tr, indices, extents, node)
    return tr.make_tuple(indices)


def global_position(tr, node) -> list:
    """The work-item's position in the ndrange, one int64 per axis."""
    return [tr.binary("add", tr.binary("mul", geometry(tr, GROUP_ID, d),
                                       tr.constant(size, T.int64), node),
                      geometry(tr, LOCAL_ID, d), node)
            for d, size in enumerate(group_sizes(tr))]


def number_of_groups(tr, axis, node):
    size = tr.constant(group_sizes(tr)[axis], T.int64)
    extent = geometry(tr, NDRANGE, axis)
    return tr.binary("floordiv", tr.binary("sub", tr.binary("add", extent, size, node),
                                           tr.constant(1, T.int64), node), size, node)


@handles(kk.groupsize)
def groupsize_(tr, node):
    positional(tr, node, 0, 0, "kk.groupsize")
    # Folded to constants, so the IR does not show that the kernel depends on it.
    tr.context.module.notes[WORK_GROUPS_OBSERVED] = True
    return tr.make_tuple([tr.constant(s, T.int64) for s in group_sizes(tr)])


@handles(kk.ngroups)
def ngroups_(tr, node):
    positional(tr, node, 0, 0, "kk.ngroups")
    # Computed from the group size as compiled: a backend must not change the groups' shape.
    tr.context.module.notes[WORK_GROUPS_OBSERVED] = True
    return tr.make_tuple([number_of_groups(tr, d, node) for d in range(len(group_sizes(tr)))])


@handles(kk.ndrange)
def ndrange_(tr, node):
    """The global size, as KernelAbstractions' `@ndrange()` gives it."""
    positional(tr, node, 0, 0, "kk.ndrange")
    return tr.make_tuple([geometry(tr, NDRANGE, d) for d in range(len(group_sizes(tr)))])


# -- memory -------------------------------------------------------------------------------

def dtype_argument(tr, value, node, name) -> T.ScalarType:
    if isinstance(value, PyConst):
        try:
            scalar = T.from_numpy(value.value) if value.value not in (int, float, bool) else \
                {int: T.int64, float: T.float64, bool: T.bool_}[value.value]
        except TypeError:
            scalar = None
        if scalar is not None:
            return scalar
    raise tr.error(f"{name} needs a NumPy dtype such as np.float32 as its first argument", node)


def static_shape(tr, value, node, name) -> tuple[int, ...]:
    elements = []
    if tr.is_scalar(value):
        elements = [value]
    elif isinstance(value, PyConst) and isinstance(value.value, tuple):
        elements = [tr.python_value(v, node) for v in value.value]
    elif hasattr(value, "type") and isinstance(value.type, T.TupleType):
        elements = [tr.extract(value, i) for i in range(len(value.type.elements))]
    shape = []
    for element in elements:
        if not (is_const(element) and isinstance(constant_value(element), int)
                and not isinstance(constant_value(element), bool)):
            raise tr.error(f"the shape of {name} must be known when the kernel is compiled", node,
                           hint="use integer literals, module-level or closure constants, or "
                                "kk.groupsize() with a static workgroupsize")
        shape.append(constant_value(element))
    if not shape or any(s <= 0 for s in shape):
        raise tr.error(f"the shape of {name} must be positive integers, got {tuple(shape)}", node)
    return tuple(shape)


def allocation(definition: OpDefinition, space: str, name: str):
    def handler(tr, node):
        args, _ = positional(tr, node, 2, 2, name)
        dtype = dtype_argument(tr, args[0], node, name)
        shape = static_shape(tr, args[1], node, name)
        array = T.ArrayType(dtype, len(shape), "C", space=space, shape=shape)
        return tr.builder.op(definition, [], array)
    return handler


handles(kk.localmem)(allocation(LOCALMEM, "local", "kk.localmem"))
handles(kk.private)(allocation(PRIVATE, "private", "kk.private"))


@handles(kk.synchronize)
def barrier(tr, node):
    if node.args or node.keywords:
        raise tr.error("inside a kernel, kk.synchronize() takes no arguments: it is the "
                       "work-group barrier", node)
    tr.builder.op("barrier", [])
    return PyConst(None)


@handles(kk.synchronize_any)
def barrier_any(tr, node):
    """`kk.synchronize_any(condition)`: a work-group barrier that returns, on every
    work-item, whether `condition` was true on any work-item of the group."""
    args, _ = positional(tr, node, 1, 1, "kk.synchronize_any")
    return tr.builder.op("barrier_any", [tr.truth(args[0], node)], T.bool_)


# -- subgroups (`ir/subgroups.py`) ------------------------------------------------------------

@handles(subgroups.subgroup_size)
def subgroup_size_(tr, node):
    positional(tr, node, 0, 0, "kk.subgroup_size")
    return tr.constant(SUBGROUP_SIZE, T.int64)


@handles(subgroups.subgroup_index)
def subgroup_index_(tr, node):
    positional(tr, node, 0, 0, "kk.subgroup_index")
    return lane(tr, node)


def lane(tr, node):
    """The work-item's lane: its linear local index modulo the subgroup size."""
    sizes = group_sizes(tr)
    item = linearize(tr, [geometry(tr, LOCAL_ID, d) for d in range(len(sizes))],
                     [tr.constant(s, T.int64) for s in sizes], node)
    return tr.binary("mod", item, tr.constant(SUBGROUP_SIZE, T.int64), node)


def subgroup_value(tr, value, node, name):
    """A shuffle's or reduction's value: a number (a Python number as its NumPy type)."""
    value = tr.python_value(value.value, node) if isinstance(value, PyConst) else value
    if not tr.is_scalar(value):
        raise tr.error(f"{name} takes a number, got a {tr.type_name(value)}", node,
                       hint="exchange a vector's or a tuple's elements one by one")
    return tr.cast(value, value.type.strong)


def subgroup_op(tr, kind: str, operands):
    return tr.builder.op(SUBGROUP[kind], operands, SUBGROUP[kind].result(
        [v.type for v in operands], {}), {"group": tuple(group_sizes(tr))})


def shuffle(name: str, source_lane):
    """`name(value, n)`: a shuffle from the lane `source_lane(tr, n, node)`."""
    def handler(tr, node):
        args, _ = positional(tr, node, 2, 2, name)
        value = subgroup_value(tr, args[0], node, name)
        amount = subgroup_value(tr, args[1], node, name)
        if not amount.type.is_integer:
            raise tr.error(f"{name}'s second argument must be an integer, got "
                           f"{amount.type.name}", node)
        source = source_lane(tr, tr.cast(amount, T.int64), node)
        return subgroup_op(tr, "shuffle", [value, source])
    return handler


handles(subgroups.shuffle)(shuffle("kk.shuffle", lambda tr, source, node: source))
handles(subgroups.shuffle_down)(shuffle(
    "kk.shuffle_down", lambda tr, delta, node: tr.binary("add", lane(tr, node), delta, node)))
handles(subgroups.shuffle_up)(shuffle(
    "kk.shuffle_up", lambda tr, delta, node: tr.binary("sub", lane(tr, node), delta, node)))
handles(subgroups.shuffle_xor)(shuffle(
    "kk.shuffle_xor", lambda tr, mask, node: tr.binary("xor", lane(tr, node), mask, node)))


def subgroup_reduction(kind: str):
    def handler(tr, node):
        name = f"kk.subgroup_{kind}"
        args, _ = positional(tr, node, 1, 1, name)
        value = subgroup_value(tr, args[0], node, name)
        if value.type.is_bool:
            raise tr.error(f"{name} takes a number, got a bool", node,
                           hint="use kk.subgroup_any or kk.subgroup_all for conditions, or "
                                "convert with int(...) to count")
        return subgroup_op(tr, kind, [value])
    return handler


def subgroup_vote(kind: str):
    def handler(tr, node):
        args, _ = positional(tr, node, 1, 1, f"kk.subgroup_{kind}")
        return subgroup_op(tr, kind, [tr.truth(args[0], node)])
    return handler


for _kind in REDUCTIONS:
    handles(getattr(subgroups, f"subgroup_{_kind}"))(subgroup_reduction(_kind))
for _kind in VOTES:
    handles(getattr(subgroups, f"subgroup_{_kind}"))(subgroup_vote(_kind))


# -- atomics ------------------------------------------------------------------------------

def atomic_array(tr, args, node, name):
    array = args[0]
    if not (hasattr(array, "type") and isinstance(array.type, T.ArrayType)):
        raise tr.error(f"{name} needs an array as its first argument", node)
    if array.type.const:
        raise tr.error(f"{name} cannot update a kk.Const array", node,
                       hint="remove the kk.Const annotation")
    return array


def atomic_target(tr, args, node, name):
    array = atomic_array(tr, args, node, name)
    return array, tr.array_indices(array, args[1], node)


def atomic(op_name):
    def handler(tr, node):
        name = f"kk.atomic_{op_name}" + ("_" if op_name in ("and", "or") else "")
        args, _ = positional(tr, node, 3, 3, name)
        array = atomic_array(tr, args, node, name)
        dtype = array.type.dtype
        if dtype.is_bool or dtype.bits < 32 and not (dtype.is_float and op_name in ("add", "sub")):
            raise tr.error(f"{name} needs an array of 32- or 64-bit numbers, got {dtype.name}",
                           node)
        if op_name in ("and", "or", "xor") and not dtype.is_integer:
            raise tr.error(f"{name} needs an integer array, got {dtype.name}", node)
        if isinstance(getattr(args[2], "type", None), T.VectorType):
            # Each element along the trailing axes, atomically (the vector is not one step).
            return tr.vector_atomic(ATOMICS[op_name], array, args[1], args[2], node, name)
        indices = tr.array_indices(array, args[1], node)
        tr.require_scalar(args[2], node)
        value = tr.cast(args[2], dtype)
        return tr.builder.op(ATOMICS[op_name], [array, *indices, value], dtype)
    return handler


for _function, _op in kk.ATOMICS.items():
    handles(_function)(atomic(_op))


@handles(kk.atomic_cas)
def atomic_cas(tr, node):
    args, _ = positional(tr, node, 4, 4, "kk.atomic_cas")
    array, indices = atomic_target(tr, args, node, "kk.atomic_cas")
    dtype = array.type.dtype
    if dtype.bits < 32 or dtype.is_bool:
        raise tr.error(f"kk.atomic_cas needs an array of 32- or 64-bit numbers, got {dtype.name}",
                       node)
    expected, new = (tr.cast(v, dtype) for v in args[2:])
    return tr.builder.op("atomic_cas", [array, *indices, expected, new], dtype)


# -- printing -----------------------------------------------------------------------------

@handles(kk.print_, builtins.print)
def print_(tr, node):
    """`kk.print(...)` (and `print`): strings, numbers, f-strings with format
    specifications (`f"{x:.3f}"`) and printf-style formatting (`"%.3f" % x`), joined by
    `sep`; one `print` operation whose format says where each value goes."""
    for keyword in node.keywords:
        if keyword.arg not in ("sep", "end"):
            raise tr.error(f"kk.print() got an unexpected keyword argument '{keyword.arg}'",
                           node)
    kwargs = {k.arg: tr.expr(k.value) for k in node.keywords}
    options = {}
    for key, default in (("sep", " "), ("end", "\n")):
        value = kwargs.get(key, PyConst(default))
        if not (isinstance(value, PyConst) and isinstance(value.value, str)):
            raise tr.error(f"kk.print's {key}= must be a string constant", node)
        options[key] = value.value
    pieces, values = [], []
    for argument in node.args:
        if isinstance(argument, ast.JoinedStr):
            pieces.append(formatted(tr, argument, values))
        elif _is_printf_style(argument):
            pieces.append(printf_style(tr, argument, values))
        else:
            items = tr.positional_arguments(ast.Call(node.func, [argument], [])) \
                if isinstance(argument, ast.Starred) else [tr.expr(argument)]
            for value in items:
                if isinstance(value, PyConst):
                    pieces.append(print_format.escaped(str(value.value)))
                else:
                    pieces.append(field(tr, value, "", argument, values))
    if len(values) > 64:
        raise tr.error(f"kk.print prints at most 64 values, got {len(values)}", node)
    text = options["sep"].join(pieces) + options["end"]
    tr.builder.op("print", values, T.void, {"format": text})
    return PyConst(None)


def field(tr, value, spec: str, node, values: list) -> str:
    """`{:spec}` for `value` (a number), checked; the value joins `values`."""
    if not tr.is_scalar(value):
        raise tr.error(f"kk.print can print numbers and strings, not a {tr.type_name(value)}",
                       node, hint="print a vector's elements: kk.print(v[0], v[1], v[2])"
                       if isinstance(getattr(value, "type", None), T.VectorType) else None)
    try:
        print_format.conversion(spec, value.type)
    except print_format.FormatError as error:
        raise tr.error(f"kk.print cannot format a {value.type.name} with {error}", node,
                       hint="use a specification printf has: width, '<', '+', '0', "
                            "precision and one of d x X o c e f g") from None
    values.append(value)
    return "{:" + spec + "}" if spec else "{}"


def formatted(tr, node: ast.JoinedStr, values: list) -> str:
    """An f-string's text, with a field per value."""
    text = ""
    for part in node.values:
        if isinstance(part, ast.Constant):
            text += print_format.escaped(part.value)
            continue
        if part.conversion != -1:
            raise tr.error(f"!{chr(part.conversion)} is not supported in a kernel's f-string",
                           part, hint="leave it out: numbers print as str() prints them")
        spec = ""
        if part.format_spec is not None:
            if not all(isinstance(p, ast.Constant) for p in part.format_spec.values):
                raise tr.error("a kernel's format specification is a constant", part,
                               hint="write the width and precision into the f-string")
            spec = "".join(p.value for p in part.format_spec.values)
        value = tr.expr(part.value)
        if isinstance(value, PyConst):
            try:
                text += print_format.escaped(format(value.value, spec))
            except (ValueError, TypeError) as error:
                raise tr.error(str(error), part) from None
        else:
            text += field(tr, value, spec, part, values)
    return text


def _is_printf_style(node) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and \
        isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)


def printf_style(tr, node: ast.BinOp, values: list) -> str:
    """`"x = %.3f" % x` (or a tuple of values), as Python's `%` formats it."""
    try:
        pieces = print_format.from_printf(node.left.value)
    except print_format.FormatError as error:
        raise tr.error(f"kk.print: {error}", node) from None
    arguments = [tr.expr(e) for e in node.right.elts] if isinstance(node.right, ast.Tuple) \
        else [tr.expr(node.right)]
    specs = [spec for _, spec in pieces if spec is not None]
    if len(specs) != len(arguments):
        raise tr.error(f"the format takes {len(specs)} values, got {len(arguments)}", node)
    text, arguments = "", iter(arguments)
    for literal, spec in pieces:
        if spec is None:
            text += print_format.escaped(literal)
            continue
        value = next(arguments)
        if isinstance(value, PyConst):
            text += print_format.escaped(str(value.value) if not spec else
                                         format(value.value, spec))
            continue
        if spec and spec[-1] in "dc" and tr.is_scalar(value) and value.type.is_float:
            value = tr.cast(value, T.int64)   # %d of a float: Python's int(x)
        text += field(tr, value, spec, node, values)
    return text


# -- Python builtins and casts ------------------------------------------------------------

@handles(builtins.min, builtins.max)
def min_max(tr, node):
    name = "min" if lookup_name(tr, node) is builtins.min else "max"
    args, _ = positional(tr, node, 1, 64, name)
    if len(args) == 1:
        args = [tr.item(args[0], i) for i in range(tr.tuple_length(args[0], node))]
    if len(args) < 2:
        raise tr.error(f"{name}() needs at least two values", node)
    return functools.reduce(lambda a, b: tr.binary(name, a, b, node), args)


@handles(builtins.divmod, np.divmod)
def divmod_(tr, node):
    """`(x // y, x % y)`, as Python and NumPy give it (`%` of floats is exact on every
    target, and `//` is computed from it)."""
    (x, y), _ = positional(tr, node, 2, 2, "divmod")
    return tr.make_tuple([tr.binary("floordiv", x, y, node), tr.binary("mod", x, y, node)])


def lookup_name(tr, node):
    value = tr.expr(node.func)
    return value.value if isinstance(value, PyConst) else None


@handles(builtins.abs, np.abs, np.absolute)
def abs_(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "abs")
    if hasattr(value, "type") and isinstance(value.type, T.VectorType):
        return tr.vector_unary("abs", value, node)   # elementwise, as np.abs
    tr.require_scalar(value, node)
    if value.type.is_bool:
        return value  # NumPy: abs(np.True_) is np.True_
    return tr.unary("abs", value, node)


def cast_to(target: T.ScalarType, name: str):
    def handler(tr, node):
        args, _ = positional(tr, node, 0, 1, name)
        if not args:
            return tr.constant(0, target)
        tr.require_scalar(args[0], node)
        return tr.cast(args[0], target)
    return handler


handles(builtins.int)(cast_to(T.weak_int, "int"))
handles(builtins.float)(cast_to(T.weak_float, "float"))
handles(builtins.bool)(cast_to(T.bool_, "bool"))
for _scalar in T.SCALAR_TYPES:
    handles(_scalar.numpy_dtype.type)(cast_to(_scalar, _scalar.numpy_dtype.name))


@handles(builtins.len)
def len_(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "len")
    if hasattr(value, "type") and isinstance(value.type, T.ArrayType):
        return tr.array_dim(value, 0)
    return tr.constant(tr.tuple_length(value, node), T.weak_int)


@handles(builtins.range)
def range_(tr, node):
    raise tr.error("range() can only be used as the iterable of a for loop", node)


# -- math ---------------------------------------------------------------------------------

def math_function(function: MathFunction, python: bool, rounds_to_int: bool = False):
    """`python`: Python's `math.name`, which computes in float64 and gives a Python
    float (weak: math.sqrt(x) * a float32 stays float32). Otherwise `kk.name` or
    `np.name`, which keep a float argument's precision (float32 in, float32 out)."""
    name, definition = function.name, MATH[function.name]

    def handler(tr, node):
        args, _ = positional(tr, node, function.arity, function.arity,
                             f"math.{name}" if python else name)
        for arg in args:
            tr.require_scalar(arg, node)
        operand_type = functools.reduce(T.promote, [a.type for a in args])
        if python:
            operand_type = T.weak_float
        elif not operand_type.is_float:
            operand_type = T.weak_float if operand_type.weak else T.float64
        operands = [tr.cast(a, operand_type) for a in args]
        result = tr.emit(definition, operands, T.bool_ if function.predicate else operand_type)
        if rounds_to_int:
            return tr.cast(result, T.weak_int)
        return result
    return handler


for _function in MATH_FUNCTIONS.values():
    if hasattr(math, _function.name):
        handles(getattr(math, _function.name))(
            math_function(_function, python=True,
                          rounds_to_int=_function.name in ("floor", "ceil", "trunc")))
    handles(getattr(lang.math, _function.name))(math_function(_function, python=False))
    if isinstance(_function.host, np.ufunc):
        handles(_function.host)(math_function(_function, python=False))


@handles(math.degrees, math.radians)
def degrees_radians(tr, node):
    degrees = lookup_name(tr, node) is math.degrees
    args, _ = positional(tr, node, 1, 1, "math.degrees" if degrees else "math.radians")
    factor = 180.0 / math.pi if degrees else math.pi / 180.0
    value = args[0]
    tr.require_scalar(value, node)
    # Python's math: computed in float64, a Python float.
    return tr.binary("mul", tr.cast(value, T.weak_float), tr.constant(factor, T.weak_float), node)



# -- deferred functions -------------------------------------------------------------------

@handles(kk.deferred)
def deferred(tr, node):
    """`kk.deferred(fn, *args)`: a reference to `fn` compiled for the types of `args`,
    which the driver's worklist translates into the module after the kernel is typed."""
    args, _ = positional(tr, node, 1, 64, "kk.deferred")
    function, values = args[0], args[1:]
    if not (isinstance(function, PyConst) and isinstance(function.value, types.FunctionType)):
        raise tr.error(f"kk.deferred needs a plain Python function first, got "
                       f"{tr.type_name(function)}", node.args[0])
    for value, argument in zip(values, node.args[1:]):
        if isinstance(value, (PyConst, StructValue)):
            raise tr.error(f"kk.deferred takes numbers and arrays after the function, got "
                           f"{tr.type_name(value)}", argument)
    return tr.defer(function.value, tuple(v.type for v in values), node)
