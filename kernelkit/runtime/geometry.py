"""ndrange and work-group sizes: validation, defaults, and the number of groups."""
from __future__ import annotations

import math
import numbers

from ..errors import LaunchError


MAX_DIMENSIONS = 4
"""The most dimensions an ndrange (and a work-group) has, as in Warp; KernelAbstractions
allows more, CUDA's grids have three (a fourth is folded into one of them)."""


def as_sizes(value, what: str, kernel: str) -> tuple[int, ...]:
    """An integer (any `numbers.Integral`: NumPy's too) or a tuple of 1 to 4 of them, as a
    tuple of ints."""
    sizes = (value,) if isinstance(value, numbers.Integral) else value
    valid = isinstance(sizes, tuple) and 1 <= len(sizes) <= MAX_DIMENSIONS and all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in sizes)
    if not valid:
        raise LaunchError(f"kernel '{kernel}': {what} must be an int or a tuple of 1 to "
                          f"{MAX_DIMENSIONS} ints, got {value!r}")
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes) or (what == "workgroupsize" and any(s == 0 for s in sizes)):
        raise LaunchError(f"kernel '{kernel}': {what} must be positive, got {value!r}")
    return sizes


def fit_workgroupsize(workgroupsize: tuple[int, ...], ndrange: tuple[int, ...],
                      kernel: str) -> tuple[int, ...]:
    """`workgroupsize` for an ndrange of `ndrange`'s dimensions: a size of fewer
    dimensions is padded with ones, as in KernelAbstractions ((8,) for a 2-d ndrange is
    (8, 1)); one of more dimensions is an error."""
    missing = len(ndrange) - len(workgroupsize)
    if missing < 0:
        raise LaunchError(f"kernel '{kernel}': ndrange {ndrange} has {len(ndrange)} "
                          f"dimensions but workgroupsize {workgroupsize} has "
                          f"{len(workgroupsize)}")
    return workgroupsize + (1,) * missing if missing else workgroupsize


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
    if ndim == 4:   # the first two axes share what three axes' first would have
        first, middle = default_workgroupsize(3, items)[:2]
        return (max(first // 2, 1), 2 if first > 1 else 1, middle, last)
    middle = int(math.sqrt(rest))
    return (rest // middle, middle, last)
