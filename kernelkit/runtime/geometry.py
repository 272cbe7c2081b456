"""ndrange and work-group sizes: validation, defaults, and the number of groups."""
from __future__ import annotations

import math

from ..errors import LaunchError


def as_sizes(value, what: str, kernel: str) -> tuple[int, ...]:
    """An int or a tuple of 1 to 3 positive ints, as a tuple."""
    sizes = (value,) if isinstance(value, int) else value
    try:
        sizes = tuple(int(s) for s in sizes)
        valid = 1 <= len(sizes) <= 3 and all(
            not isinstance(s, bool) and s == int(s) for s in (value if isinstance(value, tuple)
                                                              else (value,)))
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise LaunchError(f"kernel '{kernel}': {what} must be an int or a tuple of 1 to 3 ints, "
                          f"got {value!r}")
    if any(s < 0 for s in sizes) or (what == "workgroupsize" and any(s == 0 for s in sizes)):
        raise LaunchError(f"kernel '{kernel}': {what} must be positive, got {value!r}")
    return sizes


def number_of_groups(ndrange: tuple[int, ...], workgroupsize: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-n // g) for n, g in zip(ndrange, workgroupsize))


def default_workgroupsize(ndim: int, items: int) -> tuple[int, ...]:
    """A group of about `items` work-items whose last (fastest) axis is the longest."""
    if ndim == 1:
        return (items,)
    last = min(items, 256) if ndim == 2 else 64
    rest = items // last
    if ndim == 2:
        return (rest, last)
    middle = int(math.sqrt(rest))
    return (rest // middle, middle, last)
