"""The derivative of each arithmetic operation: one table, `PARTIALS`, keyed by the
operation's definition, that both modes read.

An entry is `partials(b, operands, result) -> [partial, ...]`: the partial derivative of
the result with respect to each operand, built with the builder `b` from the primal
operands and `result()` (a thunk: the result is recomputed only by rules that need it).
A partial is a value, `ONE`, `MINUS_ONE`, None where the operand does not change the
result (or is not a number), or a thunk giving one of those, called only when the
operand is active. Forward mode multiplies the operands' tangents by the
partials and adds them; reverse mode multiplies the result's adjoint by each partial
and adds it to the operand's adjoint. Adding the derivative of an operation is one
entry here; an operation with no entry is an error naming it and its line.

Subgroup operations, whose derivatives are exchanges between lanes rather than partials,
have two tables of their own: `SUBGROUP_TANGENTS` and `SUBGROUP_TRANSPOSES`."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Callable

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (ARITHMETIC, BARRIER_ANY, CAST, CONST, MATH, SELECT,
                                      SUBGROUP, UNARY, OpDefinition)
from kernelkit.ir.ops import Op, Value, constant_value, is_op
from kernelkit.ir.subgroups import SUBGROUP_SIZE

from .positions import linear_local_item

ONE = "one"
MINUS_ONE = "minus_one"

Partials = Callable[[Builder, list[Value], Callable[[], Value]], list]
PARTIALS: dict[OpDefinition, Partials] = {}


def _registering(table: dict):
    """The decorator maker of a rule table: `@maker(d1, d2)` enters the rule it decorates
    for each of the definitions."""
    def of(*definitions: OpDefinition):
        def register(rule):
            for definition in definitions:
                table[definition] = rule
            return rule
        return register
    return of


partials_of = _registering(PARTIALS)


def _c(b: Builder, value: float, like: Value) -> Value:
    return b.constant(value, like.type)


def _mul(b, x, y):
    return b.binary("mul", x, y)


def _div(b, x, y):
    return b.binary("truediv", x, y)


def _add(b, x, y):
    return b.binary("add", x, y)


def _sub(b, x, y):
    return b.binary("sub", x, y)


def _square(b, x):
    return _mul(b, x, x)


def _chosen(b: Builder, condition: Value, like: Value) -> list[Value]:
    """Partials of a choice between two operands: 1 for the chosen one, 0 for the other."""
    one, zero = _c(b, 1.0, like), _c(b, 0.0, like)
    return [b.select(condition, one, zero), b.select(condition, zero, one)]


# -- arithmetic -------------------------------------------------------------------------------

@partials_of(ARITHMETIC["add"])
def _add_partials(b, operands, result):
    return [ONE, ONE]


@partials_of(ARITHMETIC["sub"])
def _sub_partials(b, operands, result):
    return [ONE, MINUS_ONE]


@partials_of(ARITHMETIC["mul"])
def _mul_partials(b, operands, result):
    x, y = operands
    return [y, x]


@partials_of(ARITHMETIC["truediv"])
def _truediv_partials(b, operands, result):
    x, y = operands
    reciprocal = _div(b, _c(b, 1.0, y), y)
    return [reciprocal, b.unary("neg", _mul(b, x, _square(b, reciprocal)))]


@partials_of(ARITHMETIC["pow"], MATH["pow"])
def _pow_partials(b, operands, result):
    x, y = operands
    # d/dx x**y = y * x**(y - 1), 0 where y is 0 (x**0 is 1 for every x; the product
    # would be 0 * inf at x = 0); d/dy = x**y * log(x), a thunk: built only when y is
    # active (log of a negative base is nan, and a constant exponent is the usual case).
    def d_x():
        product = _mul(b, y, b.binary("pow", x, _sub(b, y, _c(b, 1.0, y))))
        return b.select(b.compare("eq", y, _c(b, 0, y)), _c(b, 0.0, product), product)
    return [d_x, lambda: _mul(b, result(), b.math("log", x))]


@partials_of(ARITHMETIC["min"])
def _min_partials(b, operands, result):
    x, y = operands            # min keeps x unless y < x (a nan y too, as Python's does)
    return _chosen(b, _not(b, b.compare("lt", y, x)), x)


@partials_of(ARITHMETIC["max"])
def _max_partials(b, operands, result):
    x, y = operands            # max keeps x unless y > x (a nan y too, as Python's does)
    return _chosen(b, _not(b, b.compare("gt", y, x)), x)


def _not(b: Builder, condition: Value) -> Value:
    """Not `condition`: where a comparison with nan is false, its negation is true (so
    `not y > x` and `y <= x` differ)."""
    return b.compare("eq", condition, b.constant(False, T.bool_))


@partials_of(ARITHMETIC["floordiv"])
def _floordiv_partials(b, operands, result):
    return [None, None]        # piecewise constant


@partials_of(ARITHMETIC["mod"])
def _mod_partials(b, operands, result):
    x, y = operands            # x - y * floor(x / y)
    return [ONE, b.unary("neg", b.math("floor", _div(b, x, y)))]


@partials_of(UNARY["neg"])
def _neg_partials(b, operands, result):
    return [MINUS_ONE]


@partials_of(UNARY["abs"], MATH["fabs"])
def _abs_partials(b, operands, result):
    (x,) = operands
    return [b.select(b.compare("lt", x, _c(b, 0.0, x)), _c(b, -1.0, x), _c(b, 1.0, x))]


@partials_of(CAST)
def _cast_partials(b, operands, result):
    return [ONE]               # float to float; the rules cast the adjoint's type


@partials_of(SELECT)
def _select_partials(b, operands, result):
    condition, x, _ = operands
    return [None, *_chosen(b, condition, x)]


# -- math functions ---------------------------------------------------------------------------

def _unary_math(name: str):
    def register(rule: Callable[[Builder, Value, Callable[[], Value]], Value | None]):
        PARTIALS[MATH[name]] = lambda b, operands, result: [rule(b, operands[0], result)]
        return rule
    return register


def _reciprocal_sqrt(b, value):
    return _div(b, _c(b, 1.0, value), b.math("sqrt", value))


_unary_math("sqrt")(lambda b, x, r: _div(b, _c(b, 0.5, x), r()))
_unary_math("exp")(lambda b, x, r: r())
_unary_math("exp2")(lambda b, x, r: _mul(b, r(), _c(b, math.log(2.0), x)))
_unary_math("expm1")(lambda b, x, r: _add(b, r(), _c(b, 1.0, x)))
_unary_math("log")(lambda b, x, r: _div(b, _c(b, 1.0, x), x))
_unary_math("log2")(lambda b, x, r: _div(b, _c(b, 1.0, x), _mul(b, x, _c(b, math.log(2.0), x))))
_unary_math("log10")(lambda b, x, r: _div(b, _c(b, 1.0, x),
                                          _mul(b, x, _c(b, math.log(10.0), x))))
_unary_math("log1p")(lambda b, x, r: _div(b, _c(b, 1.0, x), _add(b, x, _c(b, 1.0, x))))
_unary_math("sin")(lambda b, x, r: b.math("cos", x))
_unary_math("cos")(lambda b, x, r: b.unary("neg", b.math("sin", x)))
_unary_math("tan")(lambda b, x, r: _add(b, _c(b, 1.0, x), _square(b, r())))
_unary_math("asin")(lambda b, x, r: _reciprocal_sqrt(b, _sub(b, _c(b, 1.0, x), _square(b, x))))
_unary_math("acos")(lambda b, x, r: b.unary("neg", _reciprocal_sqrt(
    b, _sub(b, _c(b, 1.0, x), _square(b, x)))))
_unary_math("atan")(lambda b, x, r: _div(b, _c(b, 1.0, x), _add(b, _c(b, 1.0, x), _square(b, x))))
_unary_math("sinh")(lambda b, x, r: b.math("cosh", x))
_unary_math("cosh")(lambda b, x, r: b.math("sinh", x))
_unary_math("tanh")(lambda b, x, r: _sub(b, _c(b, 1.0, x), _square(b, r())))
_unary_math("asinh")(lambda b, x, r: _reciprocal_sqrt(b, _add(b, _square(b, x), _c(b, 1.0, x))))
_unary_math("acosh")(lambda b, x, r: _reciprocal_sqrt(b, _sub(b, _square(b, x), _c(b, 1.0, x))))
_unary_math("atanh")(lambda b, x, r: _div(b, _c(b, 1.0, x), _sub(b, _c(b, 1.0, x), _square(b, x))))
for _name in ("floor", "ceil", "trunc", "rint"):
    _unary_math(_name)(lambda b, x, r: None)
_unary_math("erf")(lambda b, x, r: _mul(b, _c(b, 2.0 / math.sqrt(math.pi), x),
                                        b.math("exp", b.unary("neg", _square(b, x)))))
_unary_math("erfc")(lambda b, x, r: _mul(b, _c(b, -2.0 / math.sqrt(math.pi), x),
                                         b.math("exp", b.unary("neg", _square(b, x)))))
_unary_math("cbrt")(lambda b, x, r: _div(b, _c(b, 1.0, x), _mul(b, _c(b, 3.0, x), _square(b, r()))))
_unary_math("gamma")(lambda b, x, r: _mul(b, r(), digamma(b, x)))
_unary_math("lgamma")(lambda b, x, r: digamma(b, x))


def digamma(b: Builder, x: Value) -> Value:
    """psi(x), the derivative of lgamma, which the language has no function for: shifted
    up by six with psi(x) = psi(x + 6) - sum 1/(x + k), then the asymptotic series;
    reflected for x <= 0 with psi(x) = psi(1 - x) - pi / tan(pi x). Straight-line code,
    accurate to about 1e-12 relative for float64."""
    def positive(z):
        total = _c(b, 0.0, z)
        for k in range(6):
            total = _add(b, total, _div(b, _c(b, 1.0, z), _add(b, z, _c(b, float(k), z))))
        w = _add(b, z, _c(b, 6.0, z))
        inverse_square = _div(b, _c(b, 1.0, w), _square(b, w))
        # log(w) - 1/(2w) - 1/(12w^2) + 1/(120w^4) - 1/(252w^6) + 1/(240w^8) - 1/(132w^10)
        series = _c(b, -1.0 / 132.0, z)
        for coefficient in (1.0 / 240.0, -1.0 / 252.0, 1.0 / 120.0, -1.0 / 12.0):
            series = _add(b, _mul(b, series, inverse_square), _c(b, coefficient, z))
        series = _mul(b, series, inverse_square)
        value = _sub(b, b.math("log", w), _div(b, _c(b, 0.5, z), w))
        return _sub(b, _add(b, value, series), total)
    reflected = _sub(b, positive(_sub(b, _c(b, 1.0, x), x)),
                     _div(b, _c(b, math.pi, x), b.math("tan", _mul(b, _c(b, math.pi, x), x))))
    return b.select(b.compare("gt", x, _c(b, 0.0, x)), positive(x), reflected)


@partials_of(MATH["atan2"])
def _atan2_partials(b, operands, result):
    y, x = operands
    norm = _add(b, _square(b, x), _square(b, y))
    return [_div(b, x, norm), b.unary("neg", _div(b, y, norm))]


@partials_of(MATH["hypot"])
def _hypot_partials(b, operands, result):
    x, y = operands
    return [_div(b, x, result()), _div(b, y, result())]


@partials_of(MATH["fmod"])
def _fmod_partials(b, operands, result):
    x, y = operands
    return [ONE, b.unary("neg", b.math("trunc", _div(b, x, y)))]


@partials_of(MATH["copysign"])
def _copysign_partials(b, operands, result):
    x, _ = operands
    one = _c(b, 1.0, x)
    return [_mul(b, b.math("copysign", one, x), b.math("copysign", one, result())), None]


@partials_of(MATH["fmin"], MATH["fmax"])
def _fmin_fmax_partials(b, operands, result):
    x, _ = operands            # the result is x, or y when x is not kept
    return _chosen(b, b.compare("eq", result(), x), x)


def scaled(b: Builder, derivative: Value, partial: Value, finite=frozenset()) -> Value:
    """`derivative * partial`, and 0 where `derivative` is 0 whatever the partial (a strong
    zero): an adjoint or tangent that is zero carries nothing, even through the infinite
    partial of x / 0 or sqrt(0) on a path whose result is overwritten or not selected. A
    finite partial needs no test, the product being a zero too: a finite constant, or one
    of the values `finite` (a kernel's float scalar parameters, in the version of a
    derivative kernel that launches run where every one of them is finite: a step's
    coefficient, the `a` of saxpy)."""
    product = b.binary("mul", derivative, partial)
    if _finite(partial, finite) or \
            is_op(partial, CONST) and math.isfinite(constant_value(partial)):
        return product
    zero = b.constant(0.0, product.type)
    return b.select(b.compare("eq", derivative, b.constant(0.0, derivative.type)), zero,
                    product)


# -- subgroup operations ----------------------------------------------------------------------
# A subgroup operation exchanges values between the lanes (`kernelkit/ir/subgroups.py`), so
# its derivative is an exchange too, built from subgroup operations at the same place (the
# whole group reaches it, as it reaches the operation), and so the same on every target.
# An entry is `rule(b, op, derivative, operands, result) -> Value`: from the builder `b`,
# the primal operation `op` (its group's shape), the tangent of its value (forward) or the
# adjoint of its result (reverse), its primal operands and `result()` (a thunk giving its
# primal result), the tangent of the result (`SUBGROUP_TANGENTS`) or the adjoint the lane's
# value receives (`SUBGROUP_TRANSPOSES`). A rule may leave `b` in a block of its own (a
# loop it built); what follows is built there.
SubgroupRule = Callable[[Builder, Op, Value, Sequence[Value], Callable[[], Value]], Value]
SUBGROUP_TANGENTS: dict[OpDefinition, SubgroupRule] = {}
SUBGROUP_TRANSPOSES: dict[OpDefinition, SubgroupRule] = {}
LANE_BITS = SUBGROUP_SIZE.bit_length() - 1      # a lane's number has 5 bits


subgroup_tangent_of = _registering(SUBGROUP_TANGENTS)
subgroup_transpose_of = _registering(SUBGROUP_TRANSPOSES)


def _exchange(b: Builder, op: Op, kind: str, operands: list[Value]) -> Value:
    """The subgroup operation `kind` on `operands`, over the lanes of `op`'s group."""
    definition = SUBGROUP[kind]
    return b.op(definition, operands, definition.result([v.type for v in operands], {}),
                {"group": op.attrs["group"]})


def _lane(b: Builder, op: Op) -> Value:
    """The work-item's lane (an int64), in `op`'s group."""
    item = linear_local_item(b, tuple(op.attrs["group"]))
    return b.binary("mod", item, b.constant(SUBGROUP_SIZE, T.int64))


def _lanes_where(b: Builder, op: Op, condition: Value) -> Value:
    """The member lanes where `condition` holds, one bit each (bit k for lane k), as an
    int64 the same on every lane."""
    return b.cast(_exchange(b, op, "ballot", [condition]), T.int64)


def _has_bit(b: Builder, bits: Value, position: Value) -> Value:
    """Whether bit `position` of the int64 `bits` is set."""
    bit = b.binary("and", b.binary("shr", bits, position), b.constant(1, T.int64))
    return b.compare("ne", bit, b.constant(0, T.int64))


def _lowest_bit(b: Builder, bits: Value) -> Value:
    """The position of the lowest set bit of the int64 `bits` (below 2**32, not 0): a
    binary search, halving the window each step."""
    position = b.constant(0, T.int64)
    width = SUBGROUP_SIZE // 2
    while width:
        window = b.binary("and", b.binary("shr", bits, position),
                          b.constant((1 << width) - 1, T.int64))
        empty = b.compare("eq", window, b.constant(0, T.int64))
        position = b.binary("add", position, b.select(empty, b.constant(width, T.int64),
                                                      b.constant(0, T.int64)))
        width //= 2
    return position


def _loop(b: Builder, initial: list[Value], condition, body) -> list[Value]:
    """`values = initial; while condition(*values): values = body(*values)`, built at
    `b`, which is left after the loop; the values after it."""
    types = tuple(v.type for v in initial)
    header, rounds, done = b.new_block(types), b.new_block(types), b.new_block(types)
    b.br(header, initial)
    b.position_at_end(header)
    b.cbr(condition(*header.params), rounds, list(header.params), done, list(header.params))
    b.position_at_end(rounds)
    b.br(header, body(*rounds.params))
    b.position_at_end(done)
    return list(done.params)


@subgroup_tangent_of(SUBGROUP["sum"], SUBGROUP["shuffle"])
def _linear_tangent(b, op, tangent, operands, result):
    # Linear in its value: the operation itself on the tangents, from the same lanes.
    return _exchange(b, op, op.definition.member, [tangent, *operands[1:]])


@subgroup_transpose_of(SUBGROUP["sum"])
def _sum_transpose(b, op, adjoint, operands, result):
    # Every lane receives the sum of the members' values: each value's adjoint is the
    # sum of every lane's adjoint.
    return _exchange(b, op, "sum", [adjoint])


@subgroup_transpose_of(SUBGROUP["shuffle"])
def _shuffle_transpose(b, op, adjoint, operands, result):
    """Each lane's adjoint goes back to the lane it read, where several may meet: lane s
    receives the adjoints of the member lanes t that read it (their source, or t itself
    where the source is not a member), added in the order of t.

    Which lanes read lane s comes from six ballots: one per bit of the lane each lane
    read, and one of the members. Then in rounds, each lane takes the adjoint of its
    lowest reader not yet taken, until no lane of the group has one left: one round for
    shuffle_xor, two for shuffle_down and up (a lane at the end is read by its neighbour
    and by itself), 32 where all read one lane.
    The ballots, as the rounds, are a loop: on a CPU each subgroup operation is long to
    compile (two unrolled ballots per shuffle took a reverse kernel's build from 1.6 s
    to 3.8 s)."""
    lane = _lane(b, op)
    # The lane each lane read: a source that is not a member gives the lane's own.
    read = _exchange(b, op, "shuffle", [lane, operands[1]])

    def add_bit(position, readers):
        # Rounds 0..4 keep the lanes whose read lane agrees with this lane's in bit
        # `position`; round 5 the members.
        last = b.compare("eq", position, b.constant(LANE_BITS, T.int64))
        with_bit = _lanes_where(b, op, b.select(last, b.constant(True, T.bool_),
                                                _has_bit(b, read, position)))
        agreeing = b.select(b.binary("or", last, _has_bit(b, lane, position)), with_bit,
                            b.unary("invert", with_bit))
        return [b.binary("add", position, b.constant(1, T.int64)),
                b.binary("and", readers, agreeing)]
    _, readers = _loop(b, [b.constant(0, T.int64), b.constant(-1, T.int64)],
                       lambda position, readers: b.compare(
                           "le", position, b.constant(LANE_BITS, T.int64)), add_bit)

    def take_lowest(remaining, total):
        left = b.compare("ne", remaining, b.constant(0, T.int64))
        theirs = _exchange(b, op, "shuffle", [adjoint, b.select(
            left, _lowest_bit(b, remaining), lane)])
        total = b.select(left, b.binary("add", total, theirs), total)
        return [b.binary("and", remaining, b.binary("sub", remaining, b.constant(1, T.int64))),
                total]
    _, total = _loop(b, [readers, b.constant(0.0, adjoint.type)],
                     lambda remaining, total: b.op(BARRIER_ANY, [b.compare(
                         "ne", remaining, b.constant(0, T.int64))], T.bool_), take_lowest)
    return total


def _result_lane(b: Builder, op: Op, value: Value, result: Value) -> Value:
    """The lane a subgroup max or min took its result from: the lowest member lane whose
    value equals it (ties: the first), or, where it is nan, the lowest holding a nan."""
    nan = b.binary("and", b.compare("ne", result, result), b.compare("ne", value, value))
    holds = b.binary("or", b.compare("eq", value, result), nan)
    return _exchange(b, op, "min", [b.select(holds, _lane(b, op),
                                             b.constant(SUBGROUP_SIZE, T.int64))])


@subgroup_tangent_of(SUBGROUP["max"], SUBGROUP["min"])
def _extremum_tangent(b, op, tangent, operands, result):
    # The result is one lane's value: its tangent is that lane's.
    return _exchange(b, op, "shuffle", [tangent, _result_lane(b, op, operands[0], result())])


@subgroup_transpose_of(SUBGROUP["max"], SUBGROUP["min"])
def _extremum_transpose(b, op, adjoint, operands, result):
    # Every lane receives the one lane's value: that lane's adjoint is every lane's sum.
    total = _exchange(b, op, "sum", [adjoint])
    chosen = b.compare("eq", _lane(b, op), _result_lane(b, op, operands[0], result()))
    return b.select(chosen, total, b.constant(0.0, adjoint.type))


def _finite(value: Value, finite) -> bool:
    """Whether `value` is one of the values `finite`, or one of them converted to a float
    type of 32 bits or more (a Python float argument made a float64, or a float32 next to
    float32 arrays: the launches of that version have scalars in float32's range)."""
    if value in finite:
        return True
    if not is_op(value, CAST) or value.operands[0] not in finite:
        return False
    source, target = value.operands[0].type, value.type
    return isinstance(target, T.ScalarType) and target.is_float and source.is_float and \
        target.bits >= min(source.bits, 32)


def times(b: Builder, derivative: Value, partial, finite=frozenset()) -> Value | None:
    """`derivative` (a tangent or an adjoint) times a partial as `PARTIALS` gives it
    (a thunk is called here), or None where the partial is zero; `finite` as `scaled`
    takes it."""
    if callable(partial):
        partial = partial()
    if partial is None:
        return None
    if partial is ONE:
        return derivative
    if partial is MINUS_ONE:
        return b.unary("neg", derivative)
    choice = _choice(partial)
    if choice is not None:
        # A choice's partial (1 for the chosen operand, 0 for the other): the derivative
        # where chosen, else 0, even where it is infinite (x / 0 on the branch not taken,
        # clamped away), which times 0 would make nan.
        condition, chosen = choice
        zero = b.constant(0.0, derivative.type)
        return b.select(condition, derivative, zero) if chosen else \
            b.select(condition, zero, derivative)
    return scaled(b, derivative, partial, finite)


def _choice(partial) -> tuple[Value, bool] | None:
    """(condition, whether it picks this operand) of a partial `_chosen` made: a select
    of the constants 1 and 0."""
    if not is_op(partial, SELECT):
        return None
    condition, if_true, if_false = partial.operands
    values = (constant_value(if_true), constant_value(if_false))
    if values == (1.0, 0.0):
        return condition, True
    if values == (0.0, 1.0):
        return condition, False
    return None


def has_partials(definition: OpDefinition) -> bool:
    return definition in PARTIALS


def is_float(value: Value) -> bool:
    return isinstance(value.type, T.ScalarType) and value.type.is_float
