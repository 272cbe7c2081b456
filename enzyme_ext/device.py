"""`autodiff` called inside a kernel: derivatives of a device function of scalars.

    dx, dc = autodiff(Reverse, f, Active(x), Const(c))       # a tuple, one per argument
    dy = autodiff(Forward, f, Duplicated(x, dx), Const(c))   # the tangent of f's result

The frontend hands the call to `translate_call` (the `__kernelkit_call__` hook of
`autodiff`), which compiles `f` into the module through a `deferred` reference and puts
the marker `enzyme.autodiff` in its place, with the mode and activities as attributes.
The AD plugin replaces the marker before the generic passes with calls of a tangent
function of `f` (`transform/device.py`)."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.ops import Value

from .activities import Activity, Mode, has_shadow, is_active

MARKER = "enzyme.autodiff"


def translate_call(site) -> Value:
    if site.keywords or len(site.arguments) < 2:
        raise site.error("autodiff in a kernel takes (Forward or Reverse, a device function, "
                         "annotated arguments...)")
    mode = site.value(site.arguments[0])
    function = site.value(site.arguments[1])
    if mode not in (Mode.FORWARD, Mode.REVERSE):
        raise site.error("autodiff in a kernel takes Forward or Reverse as its first argument",
                         site.arguments[0])
    if not callable(function) or isinstance(function, Value):
        raise site.error("autodiff's second argument must be a device function (a plain "
                         "Python function)", site.arguments[1])
    activities, operands = [], []
    for node in site.arguments[2:]:
        call = site.call_of(node)
        if call is None or not (isinstance(call[0], type) and issubclass(call[0], Activity)):
            raise site.error("each argument of autodiff in a kernel is annotated: Const(x), "
                             "Active(x) or Duplicated(x, dx)", node)
        activity, nodes = call
        values = [site.value(n) for n in nodes]
        expected = 2 if has_shadow(activity.name) else 1
        if len(values) != expected or not all(isinstance(v, Value) and
                                              isinstance(v.type, T.ScalarType) for v in values):
            raise site.error(f"{activity.__name__} takes {expected} number(s) here", node)
        if is_active(activity.name) and mode is Mode.FORWARD or \
                has_shadow(activity.name) and mode is Mode.REVERSE:
            raise site.error(f"{activity.__name__} is not an activity of {mode!r} mode in a "
                             f"kernel: Reverse takes Active and Const, Forward takes "
                             f"Duplicated and Const", node)
        activities.append(activity.name)
        operands.extend(values)
    primals = [operands[i] for i in _primal_positions(activities)]
    reference = site.reference(function, tuple(v.type for v in primals))
    result = reference.type.result
    if not isinstance(result, T.ScalarType):
        raise site.error(f"autodiff in a kernel differentiates functions returning a number; "
                         f"{getattr(function, '__name__', function)} returns {result.name}")
    if mode is Mode.FORWARD:
        result_type = result.strong
    else:
        result_type = T.TupleType(tuple(derivative_type(v.type) for v in primals))
    return site.marker(MARKER, [reference, *operands], result_type,
                       {"mode": mode.value, "activities": tuple(activities)})


def derivative_type(type: T.ScalarType) -> T.ScalarType:
    """The type of a derivative with respect to a number of `type`."""
    return type.strong if type.is_float else T.float64


def _primal_positions(activities) -> list[int]:
    positions, position = [], 0
    for activity in activities:
        positions.append(position)
        position += 2 if has_shadow(activity) else 1
    return positions

