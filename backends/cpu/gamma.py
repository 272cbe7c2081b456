"""gamma and lgamma in vector code, for the vectorized work-item loop: libmvec has
neither, and the C library's `tgamma` and `lgamma` would be called once per work-item.

Both are written over vectors of float64 lanes (`_Lanes`): float32 arguments are widened,
computed in float64 and rounded once at the end, which makes them correctly rounded but
where the exact result is within a float64 error of a tie. The code is arithmetic, fma,
selects, `llvm.rint`/`llvm.floor` and libmvec's vector `pow` and `log`; work that no lane
of a vector needs is skipped (`_where_any`), which changes no lane's result. The vector
function is plugged in as `vector_math.vectorizable_fmod` is, so a work-item of the vector
loop and one of its scalar remainder run the same code and give the same bits.

gamma:
- x >= 8: Stirling's formula, gamma(x) = sqrt(2 pi / e) (x / e)**(x - 1/2) S(1/x), with S
  (1 + z/12 + z**2/288 + ...) a polynomial. x / e is a double-float: libmvec's pow of its
  high part, corrected by (1 + (x - 1/2) low / high), is the only call. The rounding of
  x / e would otherwise be multiplied by the exponent (up to 170 ulps).
- -1/2 < x < 8: x = n + y, n = rint(x), |y| <= 1/2 exactly; gamma(2 + y) = 1 + y p(y),
  times (x - 1) ... (x - n + 2) (each factor exact, their product carried as a
  double-float), or divided by x (n = 1) or by x (x + 1) (n = 0, one fma): no pow.
- x <= -1/2: gamma(x) = -pi / (x sinpi(x) gamma(-x)), sinpi reduced exactly (x - rint(x))
  and x sinpi(x) kept exactly as a double-float, so the denominator is rounded once. It is
  scaled down by 2**-64 and the quotient up again (exact), so that it is finite where
  gamma(-x) nears the largest float; where gamma(-x) overflows (-x > 171.62) the pow is
  taken to half the exponent, and the quotient divided by it last, which gives the right
  subnormals and zeros of very negative x.
- |x| < 2**-54: 1/x. The positive integers 1 .. 23 give the factorials exactly (all
  representable): a lane that holds one takes the product of the integers below it.

lgamma, log|gamma(x)|, for u = |x|:
- 3/4 <= u < 9/4: lgamma(u) = (u - 1)(u - 2) q(u), so the error is relative near the zeros
  1 and 2, which give +0.
- u < 3/4: lgamma(u + 1) - log(u), lgamma(u + 1) = u (u - 1) q(u + 1) with u exact;
  9/4 <= u < 8: u = n + y, n integer, lgamma(2 + y) + log((2 + y) ... (n - 1 + y)), every
  factor exact. One libmvec log a lane, of u or of that product.
- u >= 8: Stirling's series, (u - 1/2)(log(u) - 1) + log(2 pi)/2 - 1/2 plus nine
  Bernoulli terms B(2k) / (2k (2k - 1) u**(2k - 1)).
- x < 0: log(pi / |x sinpi(x)|) - lgamma(-x), a second log. Near the zeros of lgamma
  below -2 (two in every unit interval) the two terms cancel: there the error is bounded
  relative to lgamma(-x), not to the result.

The polynomials (S, p, q and those of sinpi) are Chebyshev interpolants computed with
mpmath (`chebyfit`, 50 digits), their error below the rounding of their coefficients;
they are evaluated by Estrin's scheme but for their last two terms (`_Lanes.polynomial`).

Special values are the C library's: gamma(nan) = nan, gamma(+inf) = +inf,
gamma(-inf) = nan, gamma(+-0) = +-inf, nan at the negative integers, +inf from 171.62437
on, +-0 with the sign of the true value where that underflows; lgamma(nan) = nan,
lgamma(+-inf) = +inf, +inf at 0 and the negative integers and from about 2.5e305 on."""
from __future__ import annotations

from llvmlite import ir

from kernelkit.compiler.llvm_types import declared
from kernelkit.compiler.math_lowering import call_intrinsic

from .vector_math import vector_lanes, vector_symbol, vectorizable_function

_GAMMA_STIRLING_FROM = 8.0
"""From here on gamma is Stirling's formula; below, a recurrence down to 2 + y."""

_GAMMA_STIRLING = [
    -0.0005566889036058788, -0.0004908092161333493, 0.0009537812579867043,
    -6.582134619723229e-05, -0.0005910351676573141, 6.966804482829968e-05,
    0.0007840413151876002, -0.00022947213975775733, -0.002681327159894684,
    0.0034722222222182057, 0.08333333333333334, 1.0]
"""gamma(x) / (sqrt(2 pi) x**(x - 1/2) e**-x) in z = 1/x, 0 <= z <= 1/8 (1 + z/12 +
z**2/288 + ...)."""

_GAMMA_NEAR_TWO = [
    6.566145752712689e-07, -1.3131191509664216e-06, 1.8051430716886604e-06,
    -3.609421076900372e-06, 7.652457677804413e-06, -1.5296289519910945e-05,
    3.0448012248631827e-05, -6.078180215145502e-05, 0.00012167442301820698,
    -0.00024094266875000244, 0.0004903884092456326, -0.0009195737556751735,
    0.002103933342304082, -0.0028526458243686085, 0.011154045718099517,
    -0.00026698206868206766, 0.07424901075351413, 0.0815769192470858, 0.4118403304264397,
    0.42278433509846713]
"""(gamma(2 + y) - 1) / y, |y| <= 1/2."""

_SQRT_TWO_PI_OVER_E = (1.520346901066281, -9.239528122039697e-17)
"""sqrt(2 pi / e) as a double-float: high part, low part."""

_INVERSE_E = (0.36787944117144233, -1.2428753672788363e-17)
"""1/e as a double-float: high part, low part."""

_SPLIT_POWER_ABOVE = 171.62
"""Up to here gamma(x) is finite (to 171.62437), and so is (x / e)**(x - 1/2), which is
gamma(x) / 1.52...; above it, the reflection needs gamma(x) as a product."""

_REFLECTION_SCALE = 2.0 ** -64
"""x sinpi(x) gamma(-x) is computed this much smaller (exactly), so that it is finite
where gamma(-x) is near the largest float."""

_TINY = 2.0 ** -54
"""Below this |x|, gamma(x) = 1/x - 0.577... rounds as 1/x does; lgamma(-x) = lgamma(x)
to well within an ulp."""

_LARGEST_REFLECTED = 200.0
"""gamma of larger arguments is computed as gamma(200): infinite, and past -200 the
reflection of it is zero (with the sign of the true value), as it is of gamma(-x)."""

_FACTORIALS_UP_TO = 23
"""gamma(23) = 22!, the largest factorial float64 holds exactly."""

_SINPI = [0.000461531855383581, -0.007370021586907771, 0.08214586918000175,
          -0.5992645289396449, 2.5501640398733763, -5.167712780049954, 3.141592653589793]
"""sin(pi r) / r in r**2, |r| <= 1/4."""

_COSPI = [-0.00010356747255199479, 0.0019294657440800042, -0.025806885652951306,
          0.23533063019088787, -1.3352627688519174, 4.058712126416747, -4.934802200544679,
          1.0]
"""cos(pi r) in r**2, |r| <= 1/4."""

_LGAMMA_BETWEEN_ZEROS = [
    -1.843559234266898e-06, 2.851858796520761e-06, 2.842983219861469e-06,
    -4.3837917597678385e-06, -5.995206585154059e-06, 9.291555092510209e-06,
    -1.210633406455607e-06, 1.9690703261124644e-06, -1.2149438649681043e-05,
    1.908101021747105e-05, -2.588360371968019e-05, 4.097992923565808e-05,
    -6.643543182433097e-05, 0.0001058118613273647, -0.00016887441283653583,
    0.00027124635055956466, -0.000437997317021582, 0.00071152564920264,
    -0.001164414317864566, 0.0019229158990368815, -0.0032120740838296074,
    0.005446457854796472, -0.009425622448323203, 0.016797098630960485,
    -0.03130848750101227, 0.0629114010745669, -0.14595989591430608, 0.4831289505409809]
"""lgamma(w) / ((w - 1)(w - 2)) in w - 3/2, 3/4 <= w <= 9/4."""

_LGAMMA_STIRLING = [0.17964437236883057, -0.029550653594771242, 0.00641025641025641,
             -0.0019175269175269176, 0.0008417508417508417, -0.0005952380952380953,
             0.0007936507936507937, -0.002777777777777778, 0.08333333333333333]
"""B(2k) / (2k (2k - 1)), k = 9 .. 1: the series in 1/u is 1/u times this in 1/u**2."""

_LGAMMA_STIRLING_CONSTANT = 0.4189385332046727
"""log(2 pi) / 2 - 1/2."""

_LGAMMA_STIRLING_FROM = 8.0
"""From here on, Stirling's series to nine terms is within 1e-18 of lgamma."""


def vectorizable_gamma(builder: ir.IRBuilder, library: str, name: str, args: list
                       ) -> ir.Value | None:
    """gamma(x) or lgamma(x) (`name`) by a function the loop vectorizer calls a vector
    version of, or None where the host has no vector library."""
    scalar = args[0].type
    lanes = vector_lanes(library, scalar)
    if not lanes or any(vector_symbol(library, symbol, arity, 64) is None
                        for symbol, arity in (("pow", 2), ("log", 1))):
        return None
    module = builder.module
    symbol = name + ("f" if isinstance(scalar, ir.FloatType) else "")
    function_name = f"kk_{symbol}"
    function = module.globals.get(function_name)
    if function is None:
        vector_name = f"kk_{symbol}_x{lanes}"
        _vector_function(module, vector_name, name, scalar, lanes, library)
        function = vectorizable_function(module, function_name, vector_name, lanes, scalar, 1)
    return builder.call(function, args)


def _vector_function(module: ir.Module, name: str, math_name: str, scalar: ir.Type,
                     lanes: int, library: str) -> ir.Function:
    """`math_name` (gamma or lgamma) on `lanes` lanes of `scalar`, computed in float64."""
    vector = ir.VectorType(scalar, lanes)
    vector_function = ir.Function(module, ir.FunctionType(vector, [vector]), name)
    vector_function.linkage = "internal"
    vector_function.attributes.add("nounwind")
    builder = ir.IRBuilder(vector_function.append_basic_block("entry"))
    arithmetic = _Lanes(builder, lanes, library)
    x = vector_function.args[0]
    wide = builder.fpext(x, arithmetic.type) if scalar != ir.DoubleType() else x
    result = (_gamma if math_name == "gamma" else _lgamma)(arithmetic, wide)
    builder.ret(builder.fptrunc(result, vector) if scalar != ir.DoubleType() else result)
    return vector_function


class _Lanes:
    """Arithmetic on vectors of float64 lanes through one IR builder, with a Python
    float standing for that constant in every lane: what gamma and lgamma are written
    in."""

    def __init__(self, builder: ir.IRBuilder, lanes: int, library: str):
        self.builder = builder
        self.lanes = lanes
        self.library = library
        self.type = ir.VectorType(ir.DoubleType(), lanes)

    def constant(self, value: float) -> ir.Constant:
        return ir.Constant(self.type, [float(value)] * self.lanes)

    def _value(self, operand) -> ir.Value:
        return operand if isinstance(operand, ir.Value) else self.constant(operand)

    def add(self, a, b) -> ir.Value:
        return self.builder.fadd(self._value(a), self._value(b))

    def subtract(self, a, b) -> ir.Value:
        return self.builder.fsub(self._value(a), self._value(b))

    def multiply(self, a, b) -> ir.Value:
        return self.builder.fmul(self._value(a), self._value(b))

    def divide(self, a, b) -> ir.Value:
        return self.builder.fdiv(self._value(a), self._value(b))

    def fma(self, a, b, c) -> ir.Value:
        """a * b + c, rounded once."""
        return call_intrinsic(self.builder, "llvm.fma",
                              [self._value(a), self._value(b), self._value(c)])

    def negate(self, a) -> ir.Value:
        return self.builder.fneg(a)

    def fabs(self, a) -> ir.Value:
        return call_intrinsic(self.builder, "llvm.fabs", [a])

    def floor(self, a) -> ir.Value:
        return call_intrinsic(self.builder, "llvm.floor", [a])

    def rint(self, a) -> ir.Value:
        """The nearest integer, ties to even."""
        return call_intrinsic(self.builder, "llvm.rint", [a])

    def copysign(self, magnitude, sign) -> ir.Value:
        return call_intrinsic(self.builder, "llvm.copysign", [magnitude, sign])

    def compare(self, operator: str, a, b) -> ir.Value:
        """a `operator` b in each lane; false where either is nan."""
        return self.builder.fcmp_ordered(operator, self._value(a), self._value(b))

    def sign_bit(self, a) -> ir.Value:
        """Whether the sign bit is set, in each lane."""
        integers = ir.VectorType(ir.IntType(64), self.lanes)
        return self.builder.icmp_signed("<", self.builder.bitcast(a, integers),
                                        ir.Constant(integers, [0] * self.lanes))

    def is_nan(self, a) -> ir.Value:
        return self.builder.fcmp_unordered("uno", a, a)

    def select(self, condition, if_true, if_false) -> ir.Value:
        return self.builder.select(condition, self._value(if_true), self._value(if_false))

    def polynomial(self, y, coefficients: list[float]) -> ir.Value:
        """The polynomial with these coefficients (highest power first) at y: the terms of
        degree 2 and up by Estrin's scheme (pairs c + c' y, then pairs of those with
        y**2, y**4 ...: a chain of log2(degree) fmas where Horner's rule has one of
        `degree`), then the last two, the largest, by Horner's rule, which rounds them
        best."""
        terms = list(reversed(coefficients[:-2]))
        terms = [self.fma(terms[i + 1], y, terms[i]) if i + 1 < len(terms)
                 else self.constant(terms[i]) for i in range(0, len(terms), 2)]
        power = y
        while len(terms) > 1:
            power = self.multiply(power, power)
            terms = [self.fma(terms[i + 1], power, terms[i]) if i + 1 < len(terms)
                     else terms[i] for i in range(0, len(terms), 2)]
        result = terms[0]
        for coefficient in coefficients[-2:]:
            result = self.fma(result, y, coefficient)
        return result

    def any(self, condition) -> ir.Value:
        """Whether the condition holds in some lane."""
        return call_intrinsic(self.builder, "llvm.vector.reduce.or", [condition],
                              return_type=ir.IntType(1))

    def library_call(self, symbol: str, *args) -> ir.Value:
        """libmvec's vector version of the float64 C function `symbol` on every lane: one
        call for each piece of its width (float32 lanes are twice as many)."""
        vector_name, width = vector_symbol(self.library, symbol, len(args), 64)
        module = self.builder.module
        piece_type = ir.VectorType(ir.DoubleType(), width)
        function = declared(module, vector_name, piece_type, [piece_type] * len(args))
        if width == self.lanes:
            return self.builder.call(function, list(args))
        pieces = [self.builder.call(function, [self._lanes(a, start, width) for a in args])
                  for start in range(0, self.lanes, width)]
        while len(pieces) > 1:
            pieces = [self._concatenate(pieces[i], pieces[i + 1])
                      for i in range(0, len(pieces), 2)]
        return pieces[0]

    def _lanes(self, vector, start: int, count: int) -> ir.Value:
        return self.builder.shuffle_vector(vector, ir.Constant(vector.type, ir.Undefined),
                                           _indices(range(start, start + count)))

    def _concatenate(self, first, second) -> ir.Value:
        return self.builder.shuffle_vector(first, second,
                                           _indices(range(2 * first.type.count)))


def _indices(indices) -> ir.Constant:
    indices = list(indices)
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), indices)


def _sinpi(lanes: _Lanes, x: ir.Value) -> ir.Value:
    """sin(pi x): x = n + r exactly, n = rint(x), |r| <= 1/2; sin(pi r) for |r| <= 1/4,
    else cos(pi (1/2 - |r|)) with the sign of r; negated for odd n."""
    nearest = lanes.rint(x)
    reduced = lanes.subtract(x, nearest)
    magnitude = lanes.fabs(reduced)
    near = lanes.multiply(reduced, lanes.polynomial(lanes.multiply(reduced, reduced), _SINPI))
    complement = lanes.subtract(0.5, magnitude)
    far = lanes.copysign(
        lanes.polynomial(lanes.multiply(complement, complement), _COSPI), reduced)
    sine = lanes.select(lanes.compare("<=", magnitude, 0.25), near, far)
    half = lanes.multiply(nearest, 0.5)
    odd = lanes.compare("!=", half, lanes.rint(half))
    return lanes.select(odd, lanes.negate(sine), sine)


def _stirling(lanes: _Lanes, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """gamma(v) for 8 <= v <= 200 as a product `body * scale` (scale is 1 up to
    _SPLIT_POWER_ABOVE), neither of which overflows: sqrt(2 pi / e) (v / e)**(v - 1/2)
    S(1/v), v / e a double-float whose low part corrects the pow of its high part."""
    inverse_high, inverse_low = _INVERSE_E
    base = lanes.multiply(v, inverse_high)
    base_low = lanes.fma(v, inverse_high, lanes.negate(base))
    base_low = lanes.fma(v, inverse_low, base_low)
    exponent = lanes.subtract(v, 0.5)
    split = lanes.compare(">", v, _SPLIT_POWER_ABOVE)
    power = lanes.library_call(
        "pow", base, lanes.select(split, lanes.multiply(exponent, 0.5), exponent))
    # sqrt(2 pi / e) S (1 + (v - 1/2) low / high), rounded once
    series = lanes.polynomial(lanes.divide(1.0, v), _GAMMA_STIRLING)
    constant_high, constant_low = _SQRT_TWO_PI_OVER_E
    correction = lanes.multiply(exponent, lanes.divide(base_low, base))
    small = lanes.fma(constant_high, correction, constant_low)
    factor = lanes.fma(constant_high, series, lanes.multiply(series, small))
    return lanes.multiply(power, factor), lanes.select(split, power, 1.0)


def _recurrence(lanes: _Lanes, v: ir.Value) -> ir.Value:
    """gamma(v) for -1/2 < v < 8, |v| >= 2**-54: v = n + y, n = rint(v), |y| <= 1/2 exactly;
    gamma(2 + y) = 1 + y p(y) times (v - 1) ... (v - n + 2), every factor exact and their
    product carried as a double-float; for n = 1 divided by v, for n = 0 by v (v + 1)."""
    nearest = lanes.rint(v)
    y = lanes.subtract(v, nearest)
    base = lanes.fma(y, lanes.polynomial(y, _GAMMA_NEAR_TWO), 1.0)
    product, error = lanes.constant(1.0), lanes.constant(0.0)
    for k in range(1, int(_GAMMA_STIRLING_FROM) - 1):
        factor = lanes.select(lanes.compare("<=", float(k + 2), nearest),
                              lanes.subtract(v, float(k)), 1.0)
        next_product = lanes.multiply(product, factor)
        error = lanes.fma(error, factor, lanes.fma(product, factor, lanes.negate(next_product)))
        product = next_product
    value = lanes.fma(product, base, lanes.multiply(error, base))
    divisor = lanes.select(lanes.compare("==", nearest, 1.0), v,
                           lanes.select(lanes.compare("==", nearest, 0.0),
                                        lanes.fma(v, v, v), 1.0))
    return lanes.divide(value, divisor)


def _gamma(lanes: _Lanes, x: ir.Value) -> ir.Value:
    """gamma(x) in every lane (the module's docstring says how)."""
    tiny = lanes.compare("<", lanes.fabs(x), _TINY)
    reflect = lanes.compare("<=", x, -0.5)
    # gamma(v) for v = x from -1/2 up (the recurrence takes -1/2 < v < 0 too), else -x
    v = lanes.select(reflect, lanes.negate(x), x)
    v = lanes.select(lanes.compare("<", v, _LARGEST_REFLECTED), v, _LARGEST_REFLECTED)
    v = lanes.select(tiny, 1.0, v)
    large = lanes.compare(">=", v, _GAMMA_STIRLING_FROM)
    small_value, = _where_any(
        lanes, lanes.builder.not_(large),
        lambda: [_recurrence(lanes, lanes.select(large, 1.0, v))], [0.0])
    large_body, large_scale = _where_any(
        lanes, large, lambda: _stirling(lanes, lanes.select(large, v, _GAMMA_STIRLING_FROM)),
        [0.0, 1.0])
    body = lanes.select(large, large_body, small_value)
    scale = lanes.select(large, large_scale, 1.0)

    def reflection():
        # Divided by 1 where x >= 0, where the quotients would be 1/gamma(x), subnormal
        # from x = 165 on, which is slow. (The test is of the sign bit: x <= -1/2, the
        # condition of the select below, would be folded into it, and these selects
        # with it.)
        sign = lanes.sign_bit(x)
        # x sinpi(x) gamma(-x) rounded once (x sinpi(x) exactly as high + low), scaled
        # down by a power of two before the division and up after it, both exact
        sine = _sinpi(lanes, x)
        high = lanes.multiply(x, sine)
        low = lanes.fma(x, sine, lanes.negate(high))
        scaled = lanes.multiply(body, _REFLECTION_SCALE)
        denominator = lanes.fma(high, scaled, lanes.multiply(low, scaled))
        quotient = lanes.divide(-3.141592653589793, lanes.select(sign, denominator, 1.0))
        return [lanes.divide(lanes.multiply(quotient, _REFLECTION_SCALE),
                             lanes.select(sign, scale, 1.0))]

    reflected, = _where_any(lanes, reflect, reflection, [0.0])
    result = lanes.select(reflect, reflected, lanes.multiply(body, scale))
    negative = lanes.compare("<", x, 0.0)
    integer = lanes.compare("==", x, lanes.rint(x))
    result = lanes.select(lanes.builder.and_(negative, integer), float("nan"), result)
    result = lanes.select(tiny, lanes.divide(1.0, x), result)
    result = lanes.select(lanes.is_nan(x), x, result)
    factorial = lanes.builder.and_(integer, lanes.builder.and_(
        lanes.compare(">=", x, 1.0), lanes.compare("<=", x, float(_FACTORIALS_UP_TO))))

    def factorials():
        # (x - 1)!, the product of the integers k < x: every partial product divides 22!,
        # so is exact
        factors = [lanes.select(lanes.compare("<", float(k), x), float(k), 1.0)
                   for k in range(2, _FACTORIALS_UP_TO)]
        while len(factors) > 1:
            factors = [lanes.multiply(factors[i], factors[i + 1]) if i + 1 < len(factors)
                       else factors[i] for i in range(0, len(factors), 2)]
        return factors

    exact, = _where_any(lanes, factorial, factorials, [1.0])
    return lanes.select(factorial, exact, result)


def _where_any(lanes: _Lanes, condition: ir.Value, compute, otherwise: list[float]
               ) -> list[ir.Value]:
    """The vectors `compute()` gives, computed only where `condition` holds in some lane
    (in the others they are `otherwise`'s constants): work most vectors need not do."""
    builder = lanes.builder
    entry = builder.block
    taken = builder.function.append_basic_block("some_lane")
    done = builder.function.append_basic_block("after")
    builder.cbranch(lanes.any(condition), taken, done)
    builder.position_at_end(taken)
    values = compute()
    end = builder.block
    builder.branch(done)
    builder.position_at_end(done)
    merged = []
    for value, constant in zip(values, otherwise):
        phi = builder.phi(lanes.type)
        phi.add_incoming(lanes.constant(constant), entry)
        phi.add_incoming(value, end)
        merged.append(phi)
    return merged


def _lgamma(lanes: _Lanes, x: ir.Value) -> ir.Value:
    """log|gamma(x)| in every lane (the module's docstring says how)."""
    u = lanes.fabs(x)
    below_one = lanes.compare("<", u, 0.75)
    above_two = lanes.compare(">=", u, 2.25)
    stirling = lanes.compare(">=", u, _LGAMMA_STIRLING_FROM)

    def between_zeros():
        # lgamma(w) = (w - 1)(w - 2) q(w) for 3/4 <= w <= 9/4, the factor that vanishes
        # near a zero exact: w = u + 1 below 3/4 (less log(u)); w = 2 + y above 9/4,
        # u = n + y, n integer (plus log((2 + y) ... (n - 1 + y)), every factor exact)
        shift = lanes.floor(lanes.add(u, 0.75))
        y = lanes.subtract(u, shift)
        w = lanes.select(below_one, lanes.add(u, 1.0),
                         lanes.select(above_two, lanes.add(y, 2.0), u))
        first = lanes.select(below_one, u,
                             lanes.select(above_two, lanes.add(y, 1.0), lanes.subtract(u, 1.0)))
        second = lanes.select(below_one, lanes.subtract(u, 1.0),
                              lanes.select(above_two, y, lanes.subtract(u, 2.0)))
        value = lanes.multiply(lanes.multiply(first, second),
                               lanes.polynomial(lanes.subtract(w, 1.5), _LGAMMA_BETWEEN_ZEROS))
        product = lanes.constant(1.0)
        for k in range(2, int(_LGAMMA_STIRLING_FROM)):
            factor = lanes.select(lanes.compare("<", float(k), shift), lanes.add(y, float(k)),
                                  1.0)
            product = lanes.multiply(product, factor)
        return [value, product]

    value, product = _where_any(lanes, lanes.builder.not_(stirling), between_zeros, [0.0, 1.0])
    # one logarithm for every lane: log(1) = +0 from 3/4 to 9/4, so lgamma(1) = +0
    logarithm = lanes.library_call(
        "log", lanes.select(lanes.builder.or_(below_one, stirling), u, product))

    def series():
        # past 2**60 the terms are far below an ulp; their squares would be subnormal
        inverse = lanes.divide(1.0, lanes.select(lanes.compare("<", u, 2.0 ** 60), u, 2.0 ** 60))
        terms = lanes.multiply(
            inverse, lanes.polynomial(lanes.multiply(inverse, inverse), _LGAMMA_STIRLING))
        return [lanes.fma(lanes.subtract(u, 0.5), lanes.subtract(logarithm, 1.0),
                          lanes.add(_LGAMMA_STIRLING_CONSTANT, terms))]

    large, = _where_any(lanes, stirling, series, [0.0])
    positive = lanes.select(stirling, large,
                            lanes.select(below_one, lanes.subtract(value, logarithm),
                                         lanes.add(value, logarithm)))
    # x < 0: log(pi / |x sinpi(x)|) - lgamma(-x)
    pole = lanes.builder.and_(lanes.compare("<=", x, 0.0),
                              lanes.compare("==", x, lanes.rint(x)))
    reflected = lanes.builder.and_(lanes.compare("<=", x, -_TINY),
                                   lanes.builder.not_(pole))

    def reflection():
        ratio = lanes.divide(3.141592653589793,
                             lanes.fabs(lanes.multiply(x, _sinpi(lanes, x))))
        return [lanes.library_call("log", lanes.select(reflected, ratio, 1.0))]

    logarithm_of_ratio, = _where_any(lanes, reflected, reflection, [0.0])
    result = lanes.select(reflected, lanes.subtract(logarithm_of_ratio, positive), positive)
    return lanes.select(pole, float("inf"), result)      # a nan goes through as nan
