"""The error record a kernel compiled with bounds checks fills when an access is out of
bounds (see `kernelkit.compiler.launch_record.record_out_of_bounds`), and the error a backend
raises from it."""
from __future__ import annotations

import linecache

MAX_DIMENSIONS = 64
ERROR_RECORD_FIELDS = 4 + 2 * MAX_DIMENSIONS
"""int64 fields: flag, location id, axis, ndim, then the index and the extent per axis
(NumPy arrays have at most 64 axes)."""


def out_of_bounds_error(kernel: str, compiled, record) -> IndexError:
    """The IndexError a filled error record (a sequence of ints) describes."""
    _, location, axis, ndim = (int(v) for v in record[:4])
    index = tuple(int(v) for v in record[4:4 + ndim])
    shape = tuple(int(v) for v in record[4 + ndim:4 + 2 * ndim])
    locations = compiled.info.get("locations", [])
    loc = locations[location] if 0 <= location < len(locations) else None
    where = ""
    if loc is not None:
        line = linecache.getline(loc.file, loc.line).strip()
        where = f" at {loc.file}:{loc.line}:\n    {line}\n"
    shown = index[0] if ndim == 1 else index
    return IndexError(f"in kernel '{kernel}'{where or ' '}index {shown} is out of bounds for "
                      f"an array of shape {shape} (axis {axis} has size {shape[axis]})")
