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
forward mode's rule. Called outside a kernel, the function is itself. Called in a kernel,
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
        backward = site.reference(self.bwd, (residuals, out.strong))
        adjoints = backward.type.result
        count = len(adjoints.elements) if isinstance(adjoints, T.TupleType) else 1
        if count != len(args):
            raise site.error(f"{self.bwd.__name__} must return one adjoint per argument of "
                             f"{self.function.__name__} ({len(args)}), it returns {count}")
        return site.marker(VJP_MARKER, [primal, forward, backward, *args], out, {})


class custom_jvp(_CustomRule):
    """A device function whose forward-mode derivative is given: `f.defjvp(jvp)`."""

    marker = JVP_MARKER

    def __init__(self, function):
        super().__init__(function)
        self.jvp = None

    def defjvp(self, jvp) -> None:
        self.jvp = jvp

    def __kernelkit_call__(self, site) -> Value:
        args = self._arguments(site)
        if self.jvp is None:
            raise site.error(f"{self.function.__name__} is a custom_jvp without its rule",
                             hint=f"define it with {self.function.__name__}.defjvp(jvp)")
        types = tuple(a.type for a in args)
        primal = site.reference(self.function, types)
        tangent_types = T.TupleType(tuple(t.strong if t.is_float else T.float64
                                          for t in types))
        jvp = site.reference(self.jvp, (T.TupleType(types), tangent_types))
        return site.marker(JVP_MARKER, [primal, jvp, *args], primal.type.result, {})
