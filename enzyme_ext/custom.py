"""Custom derivative rules for device functions, shaped like JAX's.

    @custom_vjp
    def safe_norm(x, y):
        return kk.sqrt(x * x + y * y)

    def safe_norm_fwd(x, y):
        norm = kk.sqrt(x * x + y * y)
        return norm, (x, y, norm)                  # (result, residuals)

    def safe_norm_bwd(residuals, g):
        x, y, norm = residuals
        if norm == 0.0:
            return 0.0, 0.0
        return g * x / norm, g * y / norm          # one adjoint per argument

    safe_norm.defvjp(safe_norm_fwd, safe_norm_bwd)

`@custom_jvp` with `f.defjvp(jvp)`, `jvp(primals, tangents) -> (result, tangent)`, gives
forward mode's rule. The function itself may be called in its rules (`fwd` often computes
its result so): there it is a plain call.

A function may return several numbers (a tuple, vector or matrix of them): `bwd` then
takes their adjoints in that shape, and `jvp` gives their tangents so. In a kernel such a
call is one marker per number, each referring to functions of the module built here that
pick the number out (`f.output1`: `f(...)[1]`); a reverse pass calls `bwd` once per
number that carries an adjoint, with the others' zero, and adds what it gives (a vjp is
linear in the adjoint). Called outside a kernel, the function is itself. Called in a kernel,
it is the marker `enzyme.custom_vjp` (or `enzyme.custom_jvp`) holding `deferred`
references to the function and its rule; in a kernel that is not differentiated, the AD
plugin makes it a plain call. In a derivative kernel the residuals are values the
reverse pass asks for, so they become tape fields (`transform/custom.py`)."""
from __future__ import annotations

import functools

from kernelkit.ir import types as T
from kernelkit.ir.ops import Value

VJP_MARKER = "enzyme.custom_vjp"
JVP_MARKER = "enzyme.custom_jvp"


class _CustomRule:
    marker = ""

    def __init__(self, function):
        functools.update_wrapper(self, function)
        self.function = function

    def __call__(self, *args):
        return self.function(*args)

    def _arguments(self, site) -> list[Value]:
        if site.keywords:
            raise site.error(f"{self.function.__name__} takes no keyword arguments")
        values = [site.value(node) for node in site.arguments]
        for value, node in zip(values, site.arguments):
            if not (isinstance(value, Value) and isinstance(value.type, T.ScalarType)):
                raise site.error(f"a function with a custom derivative rule takes numbers; "
                                 f"this argument of {self.function.__name__} is not one", node)
        return values


class custom_vjp(_CustomRule):
    """A device function whose reverse-mode derivative is given: `f.defvjp(fwd, bwd)`."""

    marker = VJP_MARKER

    def __init__(self, function):
        super().__init__(function)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __kernelkit_call__(self, site) -> Value:
        if site.within(self.fwd, self.bwd):
            return site.plain_call(self.function)
        args = self._arguments(site)
        if self.fwd is None:
            raise site.error(f"{self.function.__name__} is a custom_vjp without its rule",
                             hint=f"define it with {self.function.__name__}.defvjp(fwd, bwd)")
        types = tuple(a.type for a in args)
        primal = site.reference(self.function, types)
        forward = site.reference(self.fwd, types)
        result = forward.type.result
        if not (isinstance(result, T.TupleType) and len(result.elements) == 2):
            raise site.error(f"{self.fwd.__name__} must return (result, residuals)")
        out, residuals = result.elements
        if out != primal.type.result:
            raise site.error(f"{self.fwd.__name__} returns a {out.name} result, but "
                             f"{self.function.__name__} returns {primal.type.result.name}")
        numbers = _numbers(site, out, self.function)
        backward = site.reference(self.bwd, (residuals, _derivative_type(out)))
        adjoints = backward.type.result
        count = len(adjoints.elements) if isinstance(adjoints, T.TupleType) else 1
        if count != len(args):
            raise site.error(f"{self.bwd.__name__} must return one adjoint per argument of "
                             f"{self.function.__name__} ({len(args)}), it returns {count}")
        if numbers is None:
            return site.marker(VJP_MARKER, [primal, forward, backward, *args], out, {})
        results = []
        for index, number in enumerate(numbers):
            results.append(site.marker(VJP_MARKER, [
                _output(site, primal, index),
                site.function(f"{_name(forward)}.output{index}", types,
                              lambda b, params, index=index: _forward_output(
                                  b, forward, params, index)),
                site.function(f"{_name(backward)}.output{index}", (residuals, number.strong),
                              lambda b, params, index=index: _backward_output(
                                  b, backward, out, params, index)),
                *args], number, {}))
        for reference in (primal, forward, backward):
            site.forget(reference)
        return site.builder.make_tuple(results, getattr(out, "shape", None))


class custom_jvp(_CustomRule):
    """A device function whose forward-mode derivative is given: `f.defjvp(jvp)`."""

    marker = JVP_MARKER

    def __init__(self, function):
        super().__init__(function)
        self.jvp = None

    def defjvp(self, jvp) -> None:
        self.jvp = jvp

    def __kernelkit_call__(self, site) -> Value:
        if site.within(self.jvp):
            return site.plain_call(self.function)
        args = self._arguments(site)
        if self.jvp is None:
            raise site.error(f"{self.function.__name__} is a custom_jvp without its rule",
                             hint=f"define it with {self.function.__name__}.defjvp(jvp)")
        types = tuple(a.type for a in args)
        primal = site.reference(self.function, types)
        out = primal.type.result
        numbers = _numbers(site, out, self.function)
        tangent_types = T.TupleType(tuple(t.strong if t.is_float else T.float64
                                          for t in types))
        jvp_types = (T.TupleType(types), tangent_types)
        jvp = site.reference(self.jvp, jvp_types)
        result = jvp.type.result
        if not (isinstance(result, T.TupleType) and len(result.elements) == 2 and
                T.unify(result.elements[0], out) is not None and
                T.unify(result.elements[1], _derivative_type(out)) is not None):
            raise site.error(f"{self.jvp.__name__} must return (result, tangent), shaped as "
                             f"{self.function.__name__}'s result ({out.name}); it returns "
                             f"{result.name}")
        if numbers is None:
            return site.marker(JVP_MARKER, [primal, jvp, *args], out, {})
        results = []
        for index, number in enumerate(numbers):
            results.append(site.marker(JVP_MARKER, [
                _output(site, primal, index),
                site.function(f"{_name(jvp)}.output{index}", jvp_types,
                              lambda b, params, index=index: _jvp_output(b, jvp, params,
                                                                        index)),
                *args], number, {}))
        for reference in (primal, jvp):
            site.forget(reference)
        return site.builder.make_tuple(results, getattr(out, "shape", None))


# -- functions of several numbers: one marker per number -------------------------------------

def _numbers(site, out: T.IRType, function) -> list[T.ScalarType] | None:
    """The numbers a function with a custom rule returns, where it returns several (a
    tuple, vector or matrix of them); None where it returns one."""
    if isinstance(out, T.ScalarType):
        return None
    if isinstance(out, T.TupleType) and \
            all(isinstance(t, T.ScalarType) for t in out.elements):
        return list(out.elements)
    raise site.error(f"a function with a custom derivative rule returns a number, or a "
                     f"tuple, vector or matrix of numbers; {function.__name__} returns "
                     f"{out.name}", hint="return the numbers as one flat tuple")


def _derivative_type(out: T.IRType) -> T.IRType:
    """The type of the adjoint or tangent of a result of type `out`: its numbers as
    their strong types, in its shape."""
    if isinstance(out, T.TupleType):
        elements = [t.strong for t in out.elements]
        return T.VectorType(tuple(elements), out.shape) if isinstance(out, T.VectorType) \
            else T.TupleType(tuple(elements))
    return out.strong


def _name(reference: Value) -> str:
    return reference.attrs["function"]


def _call(b, reference: Value, operands: list[Value]) -> Value:
    return b.op("call", operands, reference.type.result, {"callee": _name(reference)})


def _output(site, primal: Value, index: int) -> Value:
    """A reference to `f.output{index}(args) = f(args)[index]`."""
    return site.function(f"{_name(primal)}.output{index}", primal.type.params,
                         lambda b, params: b.extract(_call(b, primal, params), index))


def _forward_output(b, forward: Value, params: list[Value], index: int) -> Value:
    """`(fwd(args)[0][index], fwd(args)[1])`: one number's result, and the residuals."""
    result = _call(b, forward, params)
    return b.make_tuple([b.extract(b.extract(result, 0), index), b.extract(result, 1)])


def _backward_output(b, backward: Value, out: T.IRType, params: list[Value],
                     index: int) -> Value:
    """`bwd(residuals, adjoints)` where the adjoint of the number `index` is given and
    the others' are 0."""
    residuals, adjoint = params
    elements = [adjoint if position == index else b.constant(0.0, t.strong)
                for position, t in enumerate(out.elements)]
    return _call(b, backward, [residuals, b.make_tuple(elements, getattr(out, "shape", None))])


def _jvp_output(b, jvp: Value, params: list[Value], index: int) -> Value:
    """`(jvp(...)[0][index], jvp(...)[1][index])`: one number's result and tangent."""
    result = _call(b, jvp, params)
    return b.make_tuple([b.extract(b.extract(result, position), index) for position in (0, 1)])
