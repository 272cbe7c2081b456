"""The scalar functions of `kernelkit.lang.scalars` in kernels (`kk.bitcast`, `kk.round`,
`kk.frac`, `kk.step`, `kk.nonzero`, `kk.smoothstep`, `kk.erfinv`, `kk.erfcinv`) and
Python's `round`: entries of the `intrinsics` table, each built from the IR's operations
(`bitcast`, selects, comparisons, arithmetic and `math.*`), so every backend computes
them the same way and automatic differentiation sees what they are made of.

`kk.erfinv` and `kk.erfcinv` are the host's algorithm (`lang.scalars._inverse`) written
out as straight-line IR: a closed-form start and two Halley steps, in float64."""
from __future__ import annotations

import builtins

from ..ir import types as T
from ..ir.definitions import BITCAST, MATH
from ..ir.ops import Value
from ..lang import scalars as kk
from .intrinsics import dtype_argument, handles, positional
from .values import PyConst


def float_type(value_type: T.ScalarType) -> T.ScalarType:
    """The type a function of a number of `value_type` gives: its own float type, a
    Python float for a Python number, float64 for other integers and bools."""
    if value_type.is_float:
        return value_type
    return T.weak_float if value_type.weak else T.float64


def number(tr, value, node, name: str) -> Value:
    if not tr.is_scalar(value):
        raise tr.error(f"{name} takes a number, got a {tr.type_name(value)}", node)
    return value


@handles(kk.bitcast)
def bitcast(tr, node):
    (value, dtype), _ = positional(tr, node, 2, 2, "kk.bitcast")
    value = number(tr, value, node, "kk.bitcast")
    target = dtype_argument(tr, dtype, node, "kk.bitcast")
    source = value.type.strong
    if source.is_bool or target.is_bool or source.bits != target.bits:
        same_kind = None if source.is_bool or target.is_bool else \
            T.from_numpy(f"{source.numpy_dtype.kind}{target.itemsize}")
        raise tr.error(f"kk.bitcast from {source.name} to {target.name}: the bits of a number "
                       f"are read as a number of their size, not a bool", node,
                       hint=f"convert first, as in kk.bitcast(np.{same_kind.numpy_dtype.name}(x), "
                            f"np.{target.numpy_dtype.name})" if same_kind else None)
    value = tr.cast(value, source)
    if source == target:
        return value
    return tr.emit(BITCAST, [value], target)


@handles(kk.round)
def round_(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "kk.round")
    value = number(tr, value, node, "kk.round")
    if value.type.is_bool:
        raise tr.error("kk.round takes numbers, not bools", node, hint="round int(x)")
    if value.type.is_integer:
        return value   # NumPy: a whole number already, in its type
    return tr.emit(MATH["rint"], [value], value.type)   # half to even


@handles(builtins.round)
def python_round(tr, node):
    """Python's `round(x)`: half to even, an int."""
    args, _ = positional(tr, node, 1, 2, "round")
    if len(args) == 2 and not (isinstance(args[1], PyConst) and args[1].value is None):
        raise tr.error("round(x, ndigits) is not supported in kernels", node,
                       hint="scale, round and scale back: kk.round(x * 100.0) / 100.0")
    value = number(tr, args[0], node, "round")
    if value.type.is_float:
        value = tr.emit(MATH["rint"], [value], value.type)
    return tr.cast(value, T.weak_int)


def float_argument(tr, value, node, name: str) -> Value:
    value = number(tr, value, node, name)
    return tr.cast(value, float_type(value.type))


@handles(kk.frac)
def frac(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "kk.frac")
    x = float_argument(tr, value, node, "kk.frac")
    return tr.binary("sub", x, tr.emit(MATH["trunc"], [x], x.type), node)


def indicator(name: str, comparison: str):
    """1.0 where `x <comparison> 0`, else 0.0, in x's float type."""
    def handler(tr, node):
        (value,), _ = positional(tr, node, 1, 1, name)
        value = number(tr, value, node, name)
        result = float_type(value.type)
        holds = tr.compare(comparison, value, tr.constant(0, T.weak_int), node)
        return tr.select(holds, tr.constant(1.0, result), tr.constant(0.0, result))
    return handler


handles(kk.step)(indicator("kk.step", "lt"))
handles(kk.nonzero)(indicator("kk.nonzero", "ne"))


@handles(kk.smoothstep)
def smoothstep(tr, node):
    args, _ = positional(tr, node, 3, 3, "kk.smoothstep")
    for arg in args:
        number(tr, arg, node, "kk.smoothstep")
    common = float_type(T.promote(T.promote(args[0].type, args[1].type), args[2].type))
    a, b, x = (tr.cast(arg, common) for arg in args)

    def op(name, left, right):
        return tr.binary(name, left, right, node)

    t = op("truediv", op("sub", x, a), op("sub", b, a))
    # Python's max and min keep a NaN first argument: NaN stays NaN, as on the host.
    t = op("min", op("max", t, tr.constant(0.0, common)), tr.constant(1.0, common))
    return op("mul", op("mul", t, t), op("sub", tr.constant(3.0, common),
                                          op("mul", tr.constant(2.0, common), t)))


# -- the inverse error functions --------------------------------------------------------------

class Float64:
    """Arithmetic in float64 at one source line, for the straight-line code below."""

    def __init__(self, tr, node):
        self.tr, self.node = tr, node

    def c(self, value: float) -> Value:
        return self.tr.constant(value, T.float64)

    def __call__(self, name: str, *operands: Value) -> Value:
        if name in MATH:
            return self.tr.emit(MATH[name], list(operands), T.float64)
        return self.tr.binary(name, operands[0], operands[1], self.node)

    def where(self, condition: Value, if_true: Value, if_false: Value) -> Value:
        return self.tr.select(condition, if_true, if_false)

    def compare(self, name: str, left: Value, right: Value) -> Value:
        return self.tr.compare(name, left, right, self.node)


def inverse(f: Float64, a: Value, q: Value, central: Value) -> Value:
    """x >= 0 with erf(x) = a, or erfc(x) = q where not `central` (a = 1 - q): the
    host's `lang.scalars._inverse`, operation by operation."""
    linear = f.compare("lt", a, f.c(kk.LINEAR_BELOW))
    # Where the start is linear, the closed form is taken of a constant: its square root
    # of nearly 0 would give forward mode an infinite tangent, which 0 times is NaN.
    start = f.where(linear, f.c(kk.LINEAR_BELOW), a)
    log_term = f.where(central, f("log1p", f("sub", f.c(0.0), f("mul", start, start))),
                       f("log", f("mul", q, f("sub", f.c(2.0), q))))
    half = f("add", f.c(kk.WINITZKI_OFFSET), f("mul", f.c(0.5), log_term))
    root = f("sqrt", f("sub", f("mul", half, half), f("truediv", log_term, f.c(kk.WINITZKI))))
    x = f("sqrt", f("sub", root, half))
    x = f.where(linear, f("truediv", a, f.c(kk.TWO_OVER_SQRT_PI)), x)
    for _ in range(kk.HALLEY_STEPS):
        slope = f("mul", f.c(kk.TWO_OVER_SQRT_PI),
                  f("exp", f("sub", f.c(0.0), f("mul", x, x))))
        t = f("truediv", f("sub", f("erf", x), a), slope)
        central_step = f("truediv", t, f("add", f.c(1.0), f("mul", x, t)))
        tail = f("erfc", x)
        g, r = f("log", f("truediv", tail, q)), f("truediv", slope, tail)
        tail_step = f("truediv", f("sub", f.c(0.0), g), f("sub", r, f("mul", f(
            "mul", f.c(0.5), g), f("sub", f("mul", f.c(2.0), x), r))))
        x = f("sub", x, f.where(central, central_step, tail_step))
    return x


@handles(kk.erfinv)
def erfinv(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "kk.erfinv")
    y = float_argument(tr, value, node, "kk.erfinv")
    f = Float64(tr, node)
    wide = tr.cast(y, T.float64)
    # y's sign, with no derivative: a = |y| and the result's sign from it differentiate
    # to sign * sign = 1 at -0.0 too.
    sign = f("copysign", f.c(1.0), wide)
    a = f("mul", wide, sign)
    x = inverse(f, a, f("sub", f.c(1.0), a), f.compare("le", a, f.c(0.5)))
    x = f.where(f.compare("eq", a, f.c(1.0)), f.c(float("inf")),
                f.where(f.compare("gt", a, f.c(1.0)), f.c(float("nan")), x))
    return tr.cast(f("mul", x, sign), y.type)


@handles(kk.erfcinv)
def erfcinv(tr, node):
    (value,), _ = positional(tr, node, 1, 1, "kk.erfcinv")
    z = float_argument(tr, value, node, "kk.erfcinv")
    f = Float64(tr, node)
    wide = tr.cast(z, T.float64)
    upper = f.compare("gt", wide, f.c(1.0))
    q = f.where(upper, f("sub", f.c(2.0), wide), wide)     # exact for z in [1, 2]
    x = inverse(f, f("sub", f.c(1.0), q), q, f.compare("ge", q, f.c(0.5)))
    outside = tr.binary("or", f.compare("lt", wide, f.c(0.0)), f.compare("gt", wide, f.c(2.0)),
                        node)
    x = f.where(f.compare("eq", q, f.c(0.0)), f.c(float("inf")),
                f.where(outside, f.c(float("nan")), x))
    return tr.cast(f.where(upper, tr.unary("neg", x, node), x), z.type)
