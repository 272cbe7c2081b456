"""Activities (what to differentiate an argument for) and modes (which way).

An activity wraps one argument of a differentiated launch: `Const(x)` is not
differentiated; `Active(a)` is a scalar whose derivative the reverse pass returns;
`Duplicated(x, dx)` is an array (or, in forward mode, a scalar) with its shadow, which
carries the adjoint (reverse) or the tangent (forward); `DuplicatedNoNeed` is
`Duplicated` whose primal result the caller does not need. The classes themselves are
what `autodiff_thunk` and `tape_type` take to name activities before any value exists."""
from __future__ import annotations

import enum
from typing import Any


class Activity:
    """An argument of a differentiated launch, with its activity."""

    name: str = "activity"
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class Const(Activity):
    """Not differentiated: its derivative is taken as zero, and it is never taped."""
    name = "const"
    __slots__ = ()


class Active(Activity):
    """A scalar argument the reverse pass returns the derivative of."""
    name = "active"
    __slots__ = ()


class Duplicated(Activity):
    """An argument with a shadow of the same shape and type: the adjoint of its final
    contents on entry to a reverse pass and of its initial contents after it; the
    tangent in forward mode."""
    name = "duplicated"
    __slots__ = ("shadow",)

    def __init__(self, value: Any, shadow: Any):
        super().__init__(value)
        self.shadow = shadow

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r}, {self.shadow!r})"


class DuplicatedNoNeed(Duplicated):
    """`Duplicated` whose primal result the caller does not read."""
    name = "duplicated_no_need"
    __slots__ = ()


ACTIVITIES: dict[str, type[Activity]] = {
    cls.name: cls for cls in (Const, Active, Duplicated, DuplicatedNoNeed)}
"""The activities by the names the IR text gives them (a derivative marker's attribute)."""


def has_shadow(name: str) -> bool:
    """Whether an argument of the activity named `name` comes with a shadow."""
    return issubclass(ACTIVITIES[name], Duplicated)


def is_differentiated(name: str) -> bool:
    return ACTIVITIES[name] is not Const


def is_active(name: str) -> bool:
    return ACTIVITIES[name] is Active


class Mode(enum.Enum):
    FORWARD = "forward"
    REVERSE = "reverse"
    REVERSE_SPLIT = "reverse_split"

    def __repr__(self) -> str:
        return {"forward": "Forward", "reverse": "Reverse",
                "reverse_split": "ReverseSplit"}[self.value]


Forward = Mode.FORWARD
Reverse = Mode.REVERSE
ReverseSplit = Mode.REVERSE_SPLIT


def activity_class(activity) -> type[Activity]:
    """The activity class of `activity`, given as a class or as an argument wrapped in
    one."""
    if isinstance(activity, type) and issubclass(activity, Activity):
        return activity
    if isinstance(activity, Activity):
        return type(activity)
    raise TypeError(f"expected an activity (Const, Active, Duplicated or DuplicatedNoNeed), "
                    f"got {activity!r}")
