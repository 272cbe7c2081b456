"""Host-side array functions; each asks the backend that owns the arrays.

Allocation follows KernelAbstractions' order, the backend first and the dtype before the
shape: `kk.zeros(backend, np.float32, (3, 4))`. The dtype is checked here, once for
every backend: an array kernels cannot take (complex, object, strings ...) is refused
when it is made, not at its first launch."""
from __future__ import annotations

import numbers

import numpy as np

from .backend import get_backend
from .errors import BackendError
from .ir import types as T
from .runtime.arguments import host_array, in_host_memory, supported_dtypes


def zeros(backend, dtype, shape):
    """An array of zeros on `backend`.

        y = kk.zeros(kk.CPU(), np.float32, (3, 4))     # or dtype=..., shape=...
    """
    return backend.zeros(*_dtype_and_shape("zeros", dtype, shape))


def ones(backend, dtype, shape):
    """An array of ones on `backend`.

        weights = kk.ones(backend, np.float64, 100)
    """
    return backend.ones(*_dtype_and_shape("ones", dtype, shape))


def empty(backend, dtype, shape):
    """An array on `backend` whose elements are not set: the kernel that fills it must
    write every one.

        out = kk.empty(backend, np.int32, (64, 64))
    """
    return backend.allocate(*_dtype_and_shape("empty", dtype, shape))


def allocate(backend, dtype, shape):
    """`kk.empty` under its KernelAbstractions name: an array on `backend` whose elements
    are not set.

        x = kk.allocate(backend, np.float32, n)
    """
    return backend.allocate(*_dtype_and_shape("allocate", dtype, shape))


def full(backend, dtype, shape, value):
    """An array on `backend` with every element `value` (converted to `dtype`).

        mask = kk.full(backend, np.float32, (3, 4), 0.5)
    """
    dtype, shape = _dtype_and_shape("full", dtype, shape, value)
    return backend.full(dtype, shape, _element(dtype, value))


def zeros_like(array, dtype=None, shape=None):
    """An array of zeros on the backend that owns `array`, with its dtype and shape
    (or the `dtype` and `shape` given).

        dx = kk.zeros_like(x)
    """
    return _like("zeros_like", array, dtype, shape, lambda b, d, s: b.zeros(d, s))


def ones_like(array, dtype=None, shape=None):
    """An array of ones on the backend that owns `array`, with its dtype and shape (or the
    `dtype` and `shape` given).

        seed = kk.ones_like(y)
    """
    return _like("ones_like", array, dtype, shape, lambda b, d, s: b.ones(d, s))


def empty_like(array, dtype=None, shape=None):
    """An array whose elements are not set, on the backend that owns `array`, with its
    dtype and shape (or the `dtype` and `shape` given).

        out = kk.empty_like(x)
    """
    return _like("empty_like", array, dtype, shape, lambda b, d, s: b.allocate(d, s))


def to_backend(backend, array):
    """`array` (an array in host memory, or any backend's array) on `backend`; no copy if
    it is there.

        x_gpu = kk.to_backend(kk.CUDABackend(), np.arange(10, dtype=np.float32))
    """
    return backend.to_backend(_host_view(array))


def to_numpy(array) -> np.ndarray:
    """`array` as a NumPy array, once the launches that write it have finished. An array
    in host memory (NumPy's, or another library's that speaks DLPack or the array
    interface, such as a PyTorch CPU tensor) is not copied: the result shares its memory.
    A device array is copied to the host.

        host = kk.to_numpy(y)
    """
    return get_backend(array).to_numpy(array)


def copyto(destination, source) -> None:
    """Copy `source` into `destination` (same shape), between any backends and any
    arrays in host memory.

        kk.copyto(y_gpu, np.ones(n, np.float32))
    """
    # Other libraries' host arrays are seen as NumPy arrays over the same memory, so
    # that every backend can copy to and from them.
    for watch in WRITE_OBSERVERS:   # a program's recording follows the copy
        watch(destination, source)
    destination = _host_view(destination)
    source = _host_view(source)
    backend = get_backend(destination) if not isinstance(destination, np.ndarray) else \
        get_backend(source) if not isinstance(source, np.ndarray) else get_backend(destination)
    backend.copyto(destination, source)


WRITE_OBSERVERS: list = []
"""Called with the destination and the source before `copyto` writes: empty but while an
extension records a program (`enzyme_ext.program`)."""


def _host_view(array):
    if isinstance(array, np.ndarray) or not in_host_memory(array):
        return array
    return host_array(array)


def _like(function: str, array, dtype, shape, make):
    backend = get_backend(array)
    if _is_shape(dtype) and shape is None:
        raise BackendError(f"kk.{function}(array, dtype=None, shape=None): got a shape where "
                           f"the dtype goes; write kk.{function}(array, "
                           f"shape={_shape_code(dtype)})")
    own = _host_view(array)   # every array has a dtype and a shape, NumPy's view too
    dtype, shape = _dtype_and_shape(function, own.dtype if dtype is None else dtype,
                                    own.shape if shape is None else shape)
    return make(backend, dtype, shape)


def _element(dtype: np.dtype, value):
    """`value` as an element of `dtype`, where it is one (`kk.full`): not an integer
    dtype's value out of its range, nor a fraction for an integer."""
    try:
        element = np.array(value, dtype=dtype)
    except (OverflowError, ValueError, TypeError) as error:
        raise BackendError(f"kk.full: {value!r} cannot be an element of a {dtype} array: "
                           f"{error}") from None
    if dtype.kind in "iub" and element != value:
        raise BackendError(f"kk.full: {value!r} is not a {dtype} value (it would become "
                           f"{element.item()!r}); give one, or another dtype")
    return element.item()


def _dtype_and_shape(function: str, dtype, shape, *more) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape given to `kk.<function>`, checked: a dtype kernels can use, a
    shape of whole numbers; where the two are swapped (NumPy's order), the error says
    the order."""
    usage = f"kk.{function}(backend, dtype, shape{', value' if more else ''})"
    if dtype is None:
        raise BackendError(f"{usage}: give the dtype, such as np.float32 (kernels take "
                           f"{supported_dtypes()})")
    if _is_shape(dtype):
        example = _dtype_example(shape)
        rest = "".join(f", {value!r}" for value in more)
        raise BackendError(f"{usage}: got a shape where the dtype goes; write "
                           f"kk.{function}(backend, {example}, {_shape_code(dtype)}{rest})")
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise BackendError(f"{usage}: {dtype!r} is not a dtype; give one such as np.float32 "
                           f"(kernels take {supported_dtypes()})") from None
    if T.from_numpy(resolved) is None:
        name = getattr(dtype, "__name__", None)
        shown = resolved if name in (None, str(resolved)) else f"{name} ({resolved})"
        hint = "; store the real and imaginary parts in two float arrays" \
            if resolved.kind == "c" else \
            " in the machine's byte order" if not resolved.isnative else ""
        raise BackendError(f"{usage}: kernels cannot use arrays of dtype {shown}; they "
                           f"take {supported_dtypes()}{hint}")
    if not _is_shape(shape):
        raise BackendError(f"{usage}: the shape must be an int or a tuple of ints, got "
                           f"{shape!r}")
    extents = (int(shape),) if isinstance(shape, numbers.Integral) else \
        tuple(int(extent) for extent in shape)
    if any(extent < 0 for extent in extents):
        raise BackendError(f"{usage}: the shape {extents} has a negative extent")
    return resolved, extents


def _is_shape(value) -> bool:
    """An int (NumPy's too, not a bool), or a tuple, list or 1-d array of them."""
    def whole(number):
        return isinstance(number, numbers.Integral) and not isinstance(number, (bool, np.bool_))
    if whole(value):
        return True
    if isinstance(value, np.ndarray) and value.ndim != 1:
        return False
    return isinstance(value, (tuple, list, np.ndarray)) and all(map(whole, value))


def _shape_code(shape) -> str:
    """A shape (`_is_shape`) as Python code with plain ints: 8, (3, 4)."""
    if isinstance(shape, numbers.Integral):
        return str(int(shape))
    return repr(tuple(int(extent) for extent in shape))


def _dtype_example(value) -> str:
    """`value` as code naming a dtype, if it is one (np.float32), else a dtype's code."""
    try:
        return f"np.{np.dtype(value).name}"
    except TypeError:
        return "np.float32"
