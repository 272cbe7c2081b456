"""Copies between GPU arrays with any strides, as kernels of kernelkit itself (the driver
copies only contiguous memory)."""
from __future__ import annotations

import kernelkit as kk
from kernelkit.errors import BackendError


@kk.kernel
def _copy_1d(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def _copy_2d(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j]


@kk.kernel
def _copy_3d(y, x: kk.Const):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    y[i, j, k] = x[i, j, k]


_COPIES = {1: _copy_1d, 2: _copy_2d, 3: _copy_3d}


def strided_copy(backend, destination, source) -> None:
    """destination[...] = source[...] on the GPU (same shape and dtype), queued."""
    shape = destination.shape
    # Axes of extent 1 carry nothing: drop them (a 4-D array of shape (1, n, m, k) is 3-D).
    kept = [axis for axis, extent in enumerate(shape) if extent != 1] or [0]
    if len(kept) != len(shape):
        destination = _squeeze(destination, kept)
        source = _squeeze(source, kept)
    copy = _COPIES.get(destination.ndim)
    if copy is None:
        raise BackendError(f"copying between GPU arrays of {destination.ndim} dimensions that "
                           "are not both C-contiguous is not supported; copy through the host "
                           "(kk.to_numpy) or make them contiguous")
    copy(backend)(destination, source, ndrange=destination.shape)


def _squeeze(array, kept):
    index = tuple(slice(None) if axis in kept else 0 for axis in range(array.ndim))
    return array[index]
