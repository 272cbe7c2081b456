"""What a subgroup is, and what each subgroup operation gives, defined once for every
target (the operations themselves are the `subgroup.*` family of `definitions.py`).

A subgroup is `SUBGROUP_SIZE` consecutive work-items of a work-group by linear local
index (C order: the last axis fastest); a work-item's lane is its linear local index
modulo `SUBGROUP_SIZE`. On CUDA a subgroup is a warp. Its members are the work-items of
those lanes that exist: the last subgroup of a group whose size is not a multiple of
`SUBGROUP_SIZE` has fewer lanes, and the work-items of a group cut short by the
ndrange's end that lie outside the ndrange are not members.

- `subgroup.shuffle(value, source)`: the value of lane `source` (an int64); where that
  lane is not a member (outside 0..31, or no work-item there) the caller's own value.
  `kk.shuffle_down(v, d)`, `shuffle_up` and `shuffle_xor` are this with `source` being
  `lane + d`, `lane - d` and `lane ^ d`.
- `subgroup.sum`, `max`, `min`: the members' values combined along a fixed tree over
  the lanes: pairs (0, 1), (2, 3) ..., then pairs of those pairs, the lower lanes'
  value always the left operand; a lane that is not a member counts as the operation's
  `identity` (which leaves the other operand as it is, bit for bit). Every target
  computes this tree, so floating-point sums agree bit for bit. Integer sums wrap as
  the type does; `max` and `min` propagate NaN as NumPy's do (`propagates_nan`).
- `subgroup.any`, `all`: whether the condition held on any (all) member;
  `subgroup.ballot`: a uint32 whose bit k says it held on lane k (0 where lane k is
  not a member).

Every work-item of the group must reach a subgroup operation (`Trait.SUBGROUP`), as
it must a barrier: `passes/check_barriers.py` rejects one it can tell is not."""
from __future__ import annotations

import numpy as np

from . import types as T

SUBGROUP_SIZE = 32
"""Work-items per subgroup, on every target."""

REDUCTIONS = ("sum", "max", "min")
"""The subgroup operations that combine the members' values along the tree."""

VOTES = ("any", "all", "ballot")
"""The subgroup operations on a condition."""

# The arithmetic operation (`definitions.ARITHMETIC`) each reduction combines two
# values with.
COMBINE = {"sum": "add", "max": "max", "min": "min"}


def identity(reduction: str, type: T.ScalarType):
    """The value a lane that is not a member counts as in `reduction` over `type`: -0.0
    for a float sum (x + -0.0 is x for every x, +0.0 included), the lowest value for
    max and the highest for min (infinities for floats)."""
    if reduction == "sum":
        return -0.0 if type.is_float else 0
    if type.is_float:
        return -np.inf if reduction == "max" else np.inf
    info = np.iinfo(type.numpy_dtype)
    return int(info.min) if reduction == "max" else int(info.max)


def propagates_nan(reduction: str, type: T.ScalarType) -> bool:
    """Whether the tree's combination must pick a NaN right operand itself: the
    arithmetic `max` and `min` keep their left operand when the right one is NaN
    (Python's rule), the subgroup reductions give NaN (NumPy's)."""
    return type.is_float and reduction in ("max", "min")


def user_name(definition) -> str:
    """How a kernel spells the operation of `definition`, for messages."""
    member = definition.member
    return "kk.shuffle" if member == "shuffle" else f"kk.subgroup_{member}"
