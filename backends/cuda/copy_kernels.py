"""Copies between GPU arrays with any strides, as kernels of kernelkit itself (the driver
copies only contiguous memory). One work-item per element over a 1-D ndrange (the grid
of a 1-D launch has room for 2**31 groups), the element's position from its flat index."""
from __future__ import annotations

import kernelkit as kk
from kernelkit.errors import BackendError


@kk.kernel
def _copy_1d(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def _copy_2d(y, x: kk.Const, columns):
    flat = kk.index(kk.Global)
    i = flat // columns
    j = flat - i * columns
    y[i, j] = x[i, j]


@kk.kernel
def _copy_3d(y, x: kk.Const, rows, columns):
    flat = kk.index(kk.Global)
    plane = flat // columns
    k = flat - plane * columns
    i = plane // rows
    j = plane - i * rows
    y[i, j, k] = x[i, j, k]


GROUP = 256


def strided_copy(backend, destination, source) -> None:
    """destination[...] = source[...] on the GPU (same shape and dtype), queued."""
    shape = destination.shape
    # Axes of extent 1 carry nothing: drop them (a 4-D array of shape (1, n, m, k) is 3-D).
    kept = [axis for axis, extent in enumerate(shape) if extent != 1] or [0]
    if len(kept) != len(shape):
        destination = _squeeze(destination, kept)
        source = _squeeze(source, kept)
    size = destination.size
    if destination.ndim == 1:
        _copy_1d(backend, GROUP)(destination, source, ndrange=size)
    elif destination.ndim == 2:
        _copy_2d(backend, GROUP)(destination, source, destination.shape[1], ndrange=size)
    elif destination.ndim == 3:
        _copy_3d(backend, GROUP)(destination, source, destination.shape[1],
                                 destination.shape[2], ndrange=size)
    else:
        raise BackendError(f"copying between GPU arrays of {destination.ndim} dimensions that "
                           "are not both C-contiguous is not supported; copy through the host "
                           "(kk.to_numpy) or make them contiguous")


def _squeeze(array, kept):
    index = tuple(slice(None) if axis in kept else 0 for axis in range(array.ndim))
    return array[index]
