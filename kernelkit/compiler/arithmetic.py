"""NumPy's arithmetic in LLVM: conversions between scalar types (`convert`), the binary
operations (`binary`: Python's floor division and remainder, integer powers, min/max
...) and comparisons (`compare`), each by the operand type. One entry per operation
definition (`ir/definitions.py`); math functions are `math_lowering`'s."""
from __future__ import annotations

from llvmlite import ir

from ..ir import definitions as D
from ..ir import types as T
from ..ir.definitions import OpDefinition
from .llvm_types import i1, llvm_type
from .math_lowering import call_intrinsic, narrow_float


def convert(builder: ir.IRBuilder, value: ir.Value, source: T.ScalarType,
            target: T.ScalarType) -> ir.Value:
    """`value`, of type `source`, as a `target`: floats to integers saturate (NaN to 0),
    narrower floats keep a NaN's sign, and anything to bool is whether it differs from 0."""
    if source.strong == target.strong:
        return value
    to = llvm_type(target)
    if target.is_bool:
        if source.is_float:
            return builder.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
        return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
    if source.is_float and target.is_float:
        return builder.fpext(value, to) if target.bits > source.bits else \
            narrow_float(builder, value, to)
    if source.is_float:
        if source.bits == 16:
            # Every float16 is a float32: convert that (LLVM 22's x86 code for a float16
            # NaN saturated to an integer gives the lowest integer, not 0).
            value = builder.fpext(value, ir.FloatType())
        name = "llvm.fptosi.sat" if target.is_signed else "llvm.fptoui.sat"
        return call_intrinsic(builder, name, [value], to)
    if target.is_float:
        if source.is_signed:
            return builder.sitofp(value, to)
        return builder.uitofp(value, to)
    if target.bits == source.bits:
        return value
    if target.bits < source.bits:
        return builder.trunc(value, to)
    return builder.sext(value, to) if source.is_signed else builder.zext(value, to)


def _add(b, x, y, t, env):
    if t.is_float:
        return _numpy_nan(b, b.fadd(x, y), y, x) if t.bits == 16 else b.fadd(x, y)
    return b.add(x, y)


def _sub(b, x, y, t, env):
    if t.is_float:
        return _numpy_nan(b, b.fsub(x, y), x, y) if t.bits == 16 else b.fsub(x, y)
    return b.sub(x, y)


def _mul(b, x, y, t, env):
    if t.is_float:
        return _numpy_nan(b, b.fmul(x, y), y, x) if t.bits == 16 else b.fmul(x, y)
    return b.mul(x, y)


def _truediv(b, x, y, t, env):
    return _numpy_nan(b, b.fdiv(x, y), x, y) if t.bits == 16 else b.fdiv(x, y)


def _numpy_nan(b, result, first, second):
    """A float16 `result` whose NaN is the one NumPy gives on x86, bit for bit, where
    PTX's f16 instructions give one positive canonical NaN: the NaN operand (`first`
    where both are), quieted, or the negative default NaN of an invalid operation
    (`inf - inf`, `0 / 0`). float32 and float64 NaNs made by arithmetic keep the
    hardware's sign; float16 is computed through float32 anyway, so this costs little."""
    bits = ir.IntType(16)

    def quieted(value):
        return b.or_(b.bitcast(value, bits), ir.Constant(bits, 0x0200))

    def is_nan(value):
        return b.fcmp_unordered("uno", value, value)

    nan = b.select(is_nan(first), quieted(first),
                   b.select(is_nan(second), quieted(second), ir.Constant(bits, 0xFE00)))
    return b.select(is_nan(result), b.bitcast(nan, result.type), result)


def _float_divmod(b, x, y, t, env):
    """NumPy's floor division and remainder for floats, from the exact remainder that C's
    `fmod` computes: never LLVM's `frem`, which NVPTX expands to `x - trunc(x / y) * y`,
    wrong wherever the quotient is not exact. float16 is computed in float32 and rounded
    once at the end, as NumPy does."""
    if t.bits == 16:
        single = ir.FloatType()
        quotient, remainder = _float_divmod(b, b.fpext(x, single), b.fpext(y, single),
                                            T.float32, env)
        return narrow_float(b, quotient, x.type), narrow_float(b, remainder, x.type)
    zero = ir.Constant(x.type, 0.0)
    mod = env.math(b, "fmod", [x, y], t)
    div = b.fdiv(b.fsub(x, mod), y)
    adjust = b.and_(b.fcmp_unordered("!=", mod, zero),
                    b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
    mod = b.select(adjust, b.fadd(mod, y), mod)
    div = b.select(adjust, b.fsub(div, ir.Constant(x.type, 1.0)), div)
    floored = call_intrinsic(b, "llvm.floor", [div])
    floored = b.select(b.fcmp_ordered(">", b.fsub(div, floored), ir.Constant(x.type, 0.5)),
                       b.fadd(floored, ir.Constant(x.type, 1.0)), floored)
    quotient = b.fdiv(x, y)
    floordiv = b.select(b.fcmp_ordered("==", div, zero),
                        call_intrinsic(b, "llvm.copysign", [zero, quotient]), floored)
    floordiv = b.select(b.fcmp_ordered("==", y, zero), quotient, floordiv)
    mod = b.select(b.fcmp_ordered("==", mod, zero),
                   call_intrinsic(b, "llvm.copysign", [zero, y]), mod)
    return floordiv, mod


def _int_divmod(b, x, y, t):
    """Python's floor division and remainder for integers; division by zero gives 0 (as
    NumPy does) instead of a hardware trap."""
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    is_zero = b.icmp_unsigned("==", y, zero)
    if t.is_signed:
        # INT_MIN // -1 also traps on x86; dividing by 1 and negating gives NumPy's answer.
        minus_one = b.icmp_signed("==", y, ir.Constant(x.type, -1))
        safe = b.select(b.or_(is_zero, minus_one), one, y)
        quotient, remainder = b.sdiv(x, safe), b.srem(x, safe)
        quotient = b.select(minus_one, b.neg(x), quotient)
        adjust = b.and_(b.icmp_signed("!=", remainder, zero),
                        b.icmp_signed("<", b.xor(remainder, y), zero))
        quotient = b.select(adjust, b.sub(quotient, one), quotient)
        remainder = b.select(adjust, b.add(remainder, y), remainder)
    else:
        safe = b.select(is_zero, one, y)
        quotient, remainder = b.udiv(x, safe), b.urem(x, safe)
    return b.select(is_zero, zero, quotient), b.select(is_zero, zero, remainder)


def _floordiv(b, x, y, t, env):
    return (_float_divmod(b, x, y, t, env) if t.is_float else _int_divmod(b, x, y, t))[0]


def _mod(b, x, y, t, env):
    return (_float_divmod(b, x, y, t, env) if t.is_float else _int_divmod(b, x, y, t))[1]


def _pow(b, x, y, t, env):
    if t.is_float:
        if isinstance(y, ir.Constant) and y.constant == 2.0:
            # x ** 2 as the correctly rounded square that pow gives, on every target and
            # in every lane (a vector pow may be a few ulps off).
            return b.fmul(x, x)
        return env.math(b, "pow", [x, y], t)
    # Exponentiation by squaring; a negative exponent gives 0 (NumPy raises instead).
    function = b.function
    start = b.block
    loop = function.append_basic_block("ipow")
    done = function.append_basic_block("ipow_done")
    one = ir.Constant(x.type, 1)
    b.branch(loop)
    b.position_at_end(loop)
    result = b.phi(x.type)
    base = b.phi(x.type)
    exponent = b.phi(x.type)
    result.add_incoming(one, start)
    base.add_incoming(x, start)
    exponent.add_incoming(y, start)
    odd = b.trunc(exponent, i1)
    new_result = b.select(odd, b.mul(result, base), result)
    new_base = b.mul(base, base)
    new_exponent = b.lshr(exponent, one) if not t.is_signed else b.ashr(exponent, one)
    body_end = b.block
    result.add_incoming(new_result, body_end)
    base.add_incoming(new_base, body_end)
    exponent.add_incoming(new_exponent, body_end)
    positive = b.icmp_signed(">", new_exponent, ir.Constant(x.type, 0)) if t.is_signed else \
        b.icmp_unsigned("!=", new_exponent, ir.Constant(x.type, 0))
    b.cbranch(positive, loop, done)
    b.position_at_end(done)
    if t.is_signed:
        negative = b.icmp_signed("<", y, ir.Constant(x.type, 0))
        return b.select(negative, ir.Constant(x.type, 0),
                        b.select(b.icmp_signed("==", y, ir.Constant(x.type, 0)), one, new_result))
    return b.select(b.icmp_unsigned("==", y, ir.Constant(x.type, 0)), one, new_result)


def _min(b, x, y, t, env):
    if t.is_float:
        return b.select(b.fcmp_ordered("<", y, x), y, x)
    less = b.icmp_signed("<", y, x) if t.is_signed else b.icmp_unsigned("<", y, x)
    return b.select(less, y, x)


def _max(b, x, y, t, env):
    if t.is_float:
        return b.select(b.fcmp_ordered(">", y, x), y, x)
    greater = b.icmp_signed(">", y, x) if t.is_signed else b.icmp_unsigned(">", y, x)
    return b.select(greater, y, x)


def _and(b, x, y, t, env):
    return b.and_(x, y)


def _or(b, x, y, t, env):
    return b.or_(x, y)


def _xor(b, x, y, t, env):
    return b.xor(x, y)


def _shift_amount(b, x, y):
    """The shift amount `y` in `x`'s type, and whether it is below `x`'s width (a
    negative amount is not). LLVM leaves a shift by the width or more undefined (x86
    shifts by the amount modulo the width, PTX by the width)."""
    width = x.type.width
    in_range = b.icmp_unsigned("<", y, ir.Constant(y.type, width))
    if y.type.width > width:
        y = b.trunc(y, x.type)
    elif y.type.width < width:
        y = b.zext(y, x.type)
    return y, in_range


def _shl(b, x, y, t, env):
    """NumPy's `<<`: 0 where the amount is the width or more."""
    y, in_range = _shift_amount(b, x, y)
    return b.select(in_range, b.shl(x, y), ir.Constant(x.type, 0))


def _shr(b, x, y, t, env):
    """NumPy's `>>`: by the width or more, -1 for a negative signed `x`, else 0."""
    y, in_range = _shift_amount(b, x, y)
    if t.is_signed:
        return b.ashr(x, b.select(in_range, y, ir.Constant(x.type, x.type.width - 1)))
    return b.select(in_range, b.lshr(x, y), ir.Constant(x.type, 0))


_BINARY_HANDLERS = {D.ARITHMETIC[name]: handler for name, handler in {
    "add": _add, "sub": _sub, "mul": _mul, "truediv": _truediv, "floordiv": _floordiv,
    "mod": _mod, "pow": _pow, "min": _min, "max": _max, "and": _and, "or": _or, "xor": _xor,
    "shl": _shl, "shr": _shr}.items()}

_INT_COMPARE = {D.COMPARISONS[name]: symbol for name, symbol in
                {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items()}
_FLOAT_COMPARE = {D.COMPARISONS[name]: symbol for name, symbol in
                  {"eq": ("==", True), "ne": ("!=", False), "lt": ("<", True),
                   "le": ("<=", True), "gt": (">", True), "ge": (">=", True)}.items()}


def binary(builder: ir.IRBuilder, definition: OpDefinition, a: ir.Value, b: ir.Value,
           type: T.ScalarType, env) -> ir.Value:
    """`a <definition> b` for operands of `type`; `env` (the `KernelEnvironment`) lowers
    float powers."""
    return _BINARY_HANDLERS[definition](builder, a, b, type, env)


def compare(builder: ir.IRBuilder, definition: OpDefinition, a: ir.Value, b: ir.Value,
            type: T.ScalarType) -> ir.Value:
    """`a <definition> b` for operands of `type`, as an i1 (false where a float is NaN,
    but for `!=`)."""
    if type.is_float:
        symbol, ordered = _FLOAT_COMPARE[definition]
        instruction = builder.fcmp_ordered if ordered else builder.fcmp_unordered
        return instruction(symbol, a, b)
    instruction = builder.icmp_signed if type.is_signed else builder.icmp_unsigned
    return instruction(_INT_COMPARE[definition], a, b)
