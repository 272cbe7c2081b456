"""The parameters of the derivative kernels, in order: what the AD transform gives the
kernels it makes, and what the launch rules pass them. One list, so the two agree.

- forward: each primal parameter, followed by its shadow (the tangent) when it is
  `Duplicated`;
- augmented (the forward half of reverse mode): the primal parameters, then the tape;
- reverse: each primal parameter, followed by its shadow (the adjoint) when it is a
  `Duplicated` array, or by its partials (one float64 per work-group, the sum of its
  work-items' shares, summed by the rule) when it is an `Active` scalar; then the tape;
- combined (the primal and its reverse in one kernel, where nothing needs taping): the
  reverse kernel's, without the tape.

The tape is three 2-D arrays indexed [slot, work-item]: floats (float32 where every
float the kernel tapes has at most 32 bits, else float64: `tape_float_type`), integers
(int64) and counts (how many slots of each a work-item used), so that consecutive
work-items touch consecutive addresses."""
from __future__ import annotations

from dataclasses import dataclass

from kernelkit.ir import types as T

from .activities import has_shadow, is_active

FORWARD, AUGMENTED, REVERSE = "forward", "augmented", "reverse"
GATHER = "gather"   # the reverse kernel's neighbours' updates, gathered (transform/gather.py)
COMBINED = "combined"   # the primal, then its reverse, in one kernel (transform/combined.py)
# In a program's reverse pass (program.py), where shadows are known to be zero: the gather
# kernel storing into them, and the reverse kernel leaving the shadows of the arrays the
# kernel overwrites whole unzeroed (transform/outputs.py).
GATHER_STORED, REVERSE_UNZEROED = "gather-stored", "reverse-unzeroed"
MODES = (FORWARD, AUGMENTED, REVERSE, GATHER, COMBINED, GATHER_STORED, REVERSE_UNZEROED)

TAPE_FIELDS: tuple[tuple[str, T.ScalarType], ...] = (
    ("tape_floats", T.float64), ("tape_integers", T.int64), ("tape_counts", T.int64))
"""The tape's fields and their types, the floats' at their widest (`tape_fields`)."""


def tape_fields(float_type: T.ScalarType = T.float64) -> tuple[tuple[str, T.ScalarType], ...]:
    """The tape's fields, its floats of `float_type`."""
    (floats, _), *rest = TAPE_FIELDS
    return ((floats, float_type), *rest)


def tape_float_type(types) -> T.ScalarType:
    """The type of a tape's float slots for floats of `types`: float32 where none has
    more than 32 bits (float16 and float32 are exact in it), else float64."""
    types = list(types)
    return T.float32 if types and all(t.bits <= 32 for t in types) else T.float64

PARTIALS_TYPE = T.ArrayType(T.float64, 1, "C")


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: T.IRType
    role: str          # "primal", "shadow", "partials" or "tape"
    index: int = -1    # the primal parameter it belongs to (not for the tape)
    field: str = ""    # the tape field


def shadow_type(primal: T.IRType) -> T.IRType:
    """The type a shadow of `primal` is given when the caller's is not known."""
    if isinstance(primal, T.ArrayType):
        return T.ArrayType(primal.dtype, primal.ndim, primal.layout)
    return primal.strong if isinstance(primal, T.ScalarType) else primal


def derivative_parameters(mode: str, activities: list[str], names: list[str],
                          types: list[T.IRType], shadow_types: list[T.IRType | None],
                          tape_floats: T.ScalarType = T.float64) -> list[Parameter]:
    """The parameters of the `mode` kernel (see the module), its tape's float slots of
    type `tape_floats`."""
    if mode in (GATHER, GATHER_STORED, REVERSE_UNZEROED):   # the reverse kernel's arguments
        mode = REVERSE
    if mode == COMBINED:
        return [p for p in derivative_parameters(REVERSE, activities, names, types,
                                                 shadow_types) if p.role != "tape"]
    parameters = []
    for index, (activity, name, primal_type) in enumerate(zip(activities, names, types)):
        parameters.append(Parameter(name, primal_type, "primal", index))
        duplicated = has_shadow(activity)
        if mode == FORWARD and duplicated:
            parameters.append(Parameter(f"d_{name}", shadow_types[index], "shadow", index))
        elif mode == REVERSE and duplicated and isinstance(primal_type, T.ArrayType):
            parameters.append(Parameter(f"d_{name}", shadow_types[index], "shadow", index))
        elif mode == REVERSE and is_active(activity):
            parameters.append(Parameter(f"d_{name}", PARTIALS_TYPE, "partials", index))
    if mode in (AUGMENTED, REVERSE):
        parameters.extend(Parameter(field, T.ArrayType(dtype, 2, "C"), "tape", field=field)
                          for field, dtype in tape_fields(tape_floats))
    return parameters
