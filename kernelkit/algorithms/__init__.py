"""Reductions, scans, sorts and searches over arrays on any backend, written in kernelkit
itself: each is a few kernel launches on the backend that owns its input
(`kk.get_backend`), so it runs wherever a kernel runs, and a program that calls one is
differentiated by enzyme_ext like any other launches.

    import kernelkit.algorithms as ka
    total = ka.sum(x)             # a device array of shape (), x's backend
    order = ka.argsort(keys)      # stable

The functions follow NumPy's names, arguments, result dtypes (NEP 50) and NaN rules:

- reductions (`reductions.py`): `reduce(op, x)`, `mapreduce(f, op, x)`, `sum`, `min`,
  `max`, `argmin`, `argmax`, `any`, `all`
- scans (`scans.py`): `cumsum`, `accumulate` (inclusive or exclusive)
- sorting (`sorting.py`): `sort`, `argsort` (stable radix sorts for numbers)
- searching (`searching.py`): `searchsorted`, `histogram`

Each module is imported when one of its functions is first named, so that `import
kernelkit` compiles and imports none of them."""
from __future__ import annotations

import importlib

_MODULE_OF = {
    **dict.fromkeys(("reduce", "mapreduce", "sum", "min", "max", "argmin", "argmax", "any",
                     "all"), "reductions"),
    **dict.fromkeys(("cumsum", "accumulate"), "scans"),
    **dict.fromkeys(("sort", "argsort"), "sorting"),
    **dict.fromkeys(("searchsorted", "histogram"), "searching"),
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
