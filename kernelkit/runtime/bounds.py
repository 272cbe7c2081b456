"""The error record a kernel compiled with bounds checks fills when an access is out of
bounds (see `kernelkit.compiler.launch_record.record_out_of_bounds`) or an `assert` fails,
and the error a backend raises from it."""
from __future__ import annotations

import ast
import linecache

MAX_DIMENSIONS = 64
ERROR_RECORD_FIELDS = 4 + 2 * MAX_DIMENSIONS
"""int64 fields: flag, location id, axis, ndim, then the index and the extent per axis
(NumPy arrays have at most 64 axes)."""
ASSERTION_AXIS = -1
"""The axis of a record a failed `assert` filled: its index is the work-item's position in
the ndrange, its shape the ndrange."""


def out_of_bounds_error(kernel: str, compiled, record) -> IndexError | AssertionError:
    """The error a filled error record (a sequence of ints) describes: an IndexError, or
    an AssertionError for a failed `assert`."""
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
    if axis == ASSERTION_AXIS:
        message = _assertion_message(loc) if loc is not None else ""
        return AssertionError(f"in kernel '{kernel}'{where or ' '}assertion failed in "
                              f"work-item {shown} of the ndrange {shape}"
                              + (f": {message}" if message else ""))
    return IndexError(f"in kernel '{kernel}'{where or ' '}index {shown} is out of bounds for "
                      f"an array of shape {shape} (axis {axis} has size {shape[axis]})")


def _assertion_message(loc) -> str:
    """The message of the `assert` statement at `loc`, as its source writes it (a string
    literal's text), or '' where there is none or the source cannot be read."""
    try:
        tree = ast.parse("".join(linecache.getlines(loc.file)))
    except (SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.lineno == loc.line and node.msg is not None:
            if isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str):
                return node.msg.value
            return ast.unparse(node.msg)
    return ""
