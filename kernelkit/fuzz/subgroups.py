"""The subgroup operations of the reference: what `kk.shuffle`, `kk.subgroup_sum` ...
give every work-item of a group, computed with NumPy from the language's definition
(the docstrings of `kk.shuffle` ... and `kernelkit/ir/subgroups.py`), written here a
second time on purpose: the fuzzer checks the compiler's lowering against it, so it
shares no code with that lowering.

A subgroup is `SUBGROUP_SIZE` consecutive work-items of a group by linear local index
(the last axis fastest); a work-item's lane is that index modulo the size. Its members
are the work-items that exist: a partial last subgroup has fewer, and the items of a
group cut short by the ndrange's end are not members (the reference never runs them).

- shuffles give the value of the source lane, or the caller's own where the source is
  not a member (outside 0..31, or no work-item there); the source is an int64 (`lane +
  delta`, `lane - delta`, `lane ^ mask` wrap as int64 do);
- `sum`, `max`, `min` combine the 32 lanes along a fixed tree (lanes (0, 1), (2, 3)
  ..., then pairs of pairs, the lower lanes on the left), a lane that is not a member
  counting as the identity (-0.0 or 0 for a sum, the lowest or highest value for max
  and min); max and min keep the left operand unless the right one is larger
  (smaller) or NaN;
- `any`, `all` over the members' conditions; `ballot`, a uint32 with bit k set where
  the condition held on lane k.

The scheduler (`reference`) hands over one `SubgroupCall` per work-item of a group,
all at the same operation, and gets each one's answer back (`answers`)."""
from __future__ import annotations

import numpy as np

SUBGROUP_SIZE = 32

SHUFFLES = ("shuffle", "shuffle_down", "shuffle_up", "shuffle_xor")
REDUCTIONS = ("sum", "max", "min")
VOTES = ("any", "all", "ballot")

# How a kernel spells each operation.
FUNCTIONS = {**{name: name for name in SHUFFLES},
             **{name: f"subgroup_{name}" for name in REDUCTIONS + VOTES}}


class SubgroupCall:
    """What a work-item hands the scheduler at a subgroup operation: the operation, its
    operands and the place in the source (items at the same place meet)."""

    def __init__(self, operation: str, site: str, operands: tuple):
        assert operation in FUNCTIONS, operation
        self.operation = operation
        self.site = site
        self.operands = operands

    def __eq__(self, other):
        return isinstance(other, SubgroupCall) and other.site == self.site

    def __hash__(self):
        return hash(self.site)


def strong(value) -> np.generic:
    """A Python number as its NumPy type (an int as int64, a float as float64), as the
    operations take it."""
    if isinstance(value, np.generic):
        return value
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    raise TypeError(f"a subgroup operation of a {type(value).__name__}")


def as_int64(value) -> int:
    """An integer operand converted to int64, wrapping."""
    return (int(value) + 2**63) % 2**64 - 2**63


def answers(calls: list[SubgroupCall], linear_locals: list[int]) -> list:
    """Each work-item's result of the operation `calls` (one per running work-item of
    a group, in any order) perform; `linear_locals[k]` is call k's linear local index."""
    answer = _ANSWER[calls[0].operation]
    results = [None] * len(calls)
    subgroups: dict[int, dict[int, int]] = {}       # subgroup -> lane -> call
    for k, linear in enumerate(linear_locals):
        subgroups.setdefault(linear // SUBGROUP_SIZE, {})[linear % SUBGROUP_SIZE] = k
    for lanes in subgroups.values():
        given = answer({lane: calls[k].operands for lane, k in lanes.items()})
        for lane, k in lanes.items():
            results[k] = given[lane]
    return results


# Each operation: the members' operands by lane -> the members' results by lane.

def _shuffle(operation: str):
    def answer(operands: dict) -> dict:
        results = {}
        for lane, (value, amount) in operands.items():
            amount = as_int64(amount)
            source = as_int64({"shuffle": amount, "shuffle_down": lane + amount,
                               "shuffle_up": lane - amount,
                               "shuffle_xor": lane ^ amount}[operation])
            # a lane outside 0..31 is never among the members
            results[lane] = strong(operands[source][0] if source in operands else value)
        return results
    return answer


def identity(reduction: str, dtype: np.dtype) -> np.generic:
    if reduction == "sum":
        return dtype.type(-0.0) if dtype.kind == "f" else dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-np.inf if reduction == "max" else np.inf)
    limits = np.iinfo(dtype)
    return dtype.type(limits.min if reduction == "max" else limits.max)


def _combine(reduction: str, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Pairwise, elementwise: `left` holds the lower lanes' values."""
    if reduction == "sum":
        return left + right
    takes_right = right > left if reduction == "max" else right < left
    if left.dtype.kind == "f":
        takes_right = takes_right | np.isnan(right)
    return np.where(takes_right, right, left)


def _reduction(reduction: str):
    def answer(operands: dict) -> dict:
        values = {lane: strong(value) for lane, (value,) in operands.items()}
        dtype = next(iter(values.values())).dtype
        leaves = np.full(SUBGROUP_SIZE, identity(reduction, dtype), dtype)
        for lane, value in values.items():
            leaves[lane] = value
        while leaves.size > 1:
            leaves = _combine(reduction, leaves[0::2], leaves[1::2])
        return dict.fromkeys(operands, leaves[0])
    return answer


def _vote(vote: str):
    def answer(operands: dict) -> dict:
        held = {lane: bool(condition) for lane, (condition,) in operands.items()}
        if vote == "any":
            result = np.bool_(any(held.values()))
        elif vote == "all":
            result = np.bool_(all(held.values()))
        else:
            result = np.uint32(sum(1 << lane for lane, value in held.items() if value))
        return dict.fromkeys(operands, result)
    return answer


_ANSWER = {**{name: _shuffle(name) for name in SHUFFLES},
           **{name: _reduction(name) for name in REDUCTIONS},
           **{name: _vote(name) for name in VOTES}}
