"""Host-side array functions; each asks the backend that owns the arrays."""
from __future__ import annotations

import numpy as np

from .backend import get_backend


def allocate(backend, dtype, shape):
    """An uninitialized array on `backend`."""
    return backend.allocate(np.dtype(dtype), _shape(shape))


def zeros(backend, dtype, shape):
    return backend.zeros(np.dtype(dtype), _shape(shape))


def ones(backend, dtype, shape):
    return backend.ones(np.dtype(dtype), _shape(shape))


def to_backend(backend, array):
    """`array` (a NumPy array or any backend's array) on `backend`; no copy if it is there."""
    return backend.to_backend(array)


def to_numpy(array) -> np.ndarray:
    """`array` as a NumPy array, once the launches that write it have finished; no copy
    for arrays already in host memory."""
    return get_backend(array).to_numpy(array)


def copyto(destination, source) -> None:
    """Copy `source` into `destination` (same shape), between any backends."""
    backend = get_backend(destination) if not isinstance(destination, np.ndarray) else \
        get_backend(source) if not isinstance(source, np.ndarray) else get_backend(destination)
    backend.copyto(destination, source)


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
