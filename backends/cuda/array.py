"""`CUDAArray`: an n-dimensional view of GPU memory, and how other libraries' GPU arrays
(CuPy, PyTorch, JAX: anything speaking `__cuda_array_interface__` or DLPack) are seen
as one without a copy.

A CUDAArray is metadata over memory some owner keeps alive: an allocation of its
backend, or another library's array. Views (`a[1:, ::2]`, `a.T`, `a.reshape(...)`) share
the memory and keep the owner alive. Strides are in bytes, as in NumPy and CuPy.
Nothing here copies data implicitly: `np.asarray(a)` is an error; `kk.to_numpy(a)`
copies."""
from __future__ import annotations

import operator

import numpy as np

from kernelkit.errors import LaunchError

from . import dlpack


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.insert(0, step)
        step *= max(extent, 1)
    return tuple(strides)


def is_c_contiguous(shape, strides, itemsize) -> bool:
    step = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent == 0:
            return True
        if extent != 1 and stride != step:
            return False
        step *= extent
    return True


_KEYS: dict = {}
"""Each distinct array key, once (`CUDAArray.key`)."""


class CUDAArray:
    """Memory on a GPU with a shape, a dtype and byte strides."""

    __slots__ = ("backend", "pointer", "shape", "dtype", "strides", "owner", "fields", "key",
                 "readonly", "adopted", "foreign_device", "__weakref__")
    __array_priority__ = 100  # NumPy operators defer to it (and then fail with a clear error)

    def __init__(self, backend, pointer: int, shape, dtype, strides=None, owner=None,
                 readonly: bool = False, adopted: bool = False, foreign_device: int | None = None):
        """`adopted`: the memory belongs to another library (`owner`), which may reuse it
        once `owner` is gone; `readonly`: that library says it must not be written."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        strides = c_strides(shape, dtype.itemsize) if strides is None else \
            tuple(int(s) for s in strides)
        self.backend = backend
        self.pointer = int(pointer)
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.owner = owner
        self.readonly = readonly
        self.adopted = adopted
        self.foreign_device = foreign_device   # the GPU another library says it is on
        contiguous = is_c_contiguous(shape, strides, dtype.itemsize)
        key = ("cuda", dtype, len(shape), contiguous)
        itemsize = dtype.itemsize
        if all(s % itemsize == 0 for s in strides):
            self.fields = (self.pointer, *shape, *(s // itemsize for s in strides))
        else:  # such a view can exist (NumPy has them); a kernel cannot take it
            self.fields = None
            key += ("unaligned strides",)
        # Arrays a kernel may not write, or cannot take, have keys of their own: the
        # launch looks at them once (argument_type) and says so. Equal keys are one
        # object, so a fast launch compares them with `is`.
        key = key + ("read-only",) if readonly else key
        self.key = _KEYS.setdefault(key, key)

    # -- what NumPy arrays have -----------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        size = 1
        for extent in self.shape:
            size *= extent
        return size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        return self.key[3]

    @property
    def device(self) -> int:
        """The ordinal of the GPU the memory is on."""
        return self.backend.device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        device = f"cuda:{self.backend.device}" if self.backend is not None else "cuda"
        return f"CUDAArray(shape={self.shape}, dtype={self.dtype}, device={device})"

    def __array__(self, *args, **kwargs):
        raise TypeError("a CUDAArray is in GPU memory; copy it to the host explicitly with "
                        "kk.to_numpy(array)")

    def __bool__(self):
        raise TypeError("the truth value of a CUDAArray needs its data on the host; use "
                        "kk.to_numpy(array)")

    @property
    def T(self) -> CUDAArray:
        return self.transpose()

    def transpose(self, *axes) -> CUDAArray:
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} are not a permutation of the {self.ndim} axes")
        return self._view(self.pointer, tuple(self.shape[a] for a in axes),
                          tuple(self.strides[a] for a in axes))

    def reshape(self, *shape) -> CUDAArray:
        """A view with another shape; the array must be C-contiguous."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        shape = [operator.index(s) for s in shape]
        if shape.count(-1) == 1:
            known = 1
            for extent in shape:
                known *= extent if extent != -1 else 1
            shape[shape.index(-1)] = self.size // known if known else 0
        size = 1
        for extent in shape:
            size *= extent
        if size != self.size or any(s < 0 for s in shape):
            raise ValueError(f"cannot reshape an array of size {self.size} into shape "
                             f"{tuple(shape)}")
        if not self.is_c_contiguous:
            raise ValueError("only a C-contiguous CUDAArray can be reshaped without a copy")
        return self._view(self.pointer, tuple(shape), None)

    def ravel(self) -> CUDAArray:
        return self.reshape(-1)

    def __getitem__(self, index) -> CUDAArray:
        """Basic indexing (integers, slices, `...`, `None`): a view, as NumPy gives."""
        index = index if isinstance(index, tuple) else (index,)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = sum(1 for i in index if i is not None and i is not Ellipsis)
        if used > self.ndim:
            raise IndexError(f"too many indices for an array of {self.ndim} dimensions")
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim - used) + index[at + 1:]
        else:
            index = index + (slice(None),) * (self.ndim - used)
        pointer, shape, strides, axis = self.pointer, [], [], 0
        for item in index:
            if item is None:
                shape.append(1)
                strides.append(0)
                continue
            extent, stride = self.shape[axis], self.strides[axis]
            axis += 1
            if isinstance(item, slice):
                start, stop, step = item.indices(extent)
                length = len(range(start, stop, step))
                if length:
                    pointer += start * stride
                shape.append(length)
                strides.append(stride * step)
                continue
            try:
                position = operator.index(item)
            except TypeError:
                raise IndexError(f"a CUDAArray takes integers, slices, '...' and None as "
                                 f"indices, not {type(item).__name__}; for other indexing "
                                 f"copy to the host with kk.to_numpy") from None
            if not -extent <= position < extent:
                raise IndexError(f"index {position} is out of bounds for axis {axis - 1} "
                                 f"with size {extent}")
            pointer += (position % extent) * stride
        return self._view(pointer, tuple(shape), tuple(strides))

    def _view(self, pointer, shape, strides) -> CUDAArray:
        return CUDAArray(self.backend, pointer, shape, self.dtype, strides,
                         self.owner if self.owner is not None else self, self.readonly,
                         self.adopted, self.foreign_device)

    # -- exchange -------------------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.pointer, self.readonly),
                "strides": None if self.is_c_contiguous else self.strides, "version": 3,
                "stream": self.backend.stream_handle if self.backend is not None else None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.CUDA, self.backend.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"a CUDAArray on GPU {self.backend.device} cannot be exported "
                              f"to device {tuple(dl_device)}; copy it with kk.to_numpy or "
                              f"kk.to_backend")
        array = self.backend.copy(self) if copy else self
        if array.fields is None:
            raise BufferError("a view whose strides are not multiples of its item size "
                              "cannot be exported through DLPack")
        if stream != -1:
            self.backend.make_stream_wait(stream)
        versioned = max_version is not None and tuple(max_version) >= dlpack.VERSION
        return dlpack.export_capsule(array, array.pointer, array.shape,
                                     tuple(s // array.itemsize for s in array.strides),
                                     array.dtype, array.__dlpack_device__(), versioned,
                                     read_only=array.readonly, copied=array is not self)


def foreign_kind(value) -> str | None:
    """'cai' or 'dlpack' if `value` is another library's GPU array, else None."""
    kind = type(value)
    if kind is np.ndarray or kind is CUDAArray:
        return None
    try:  # a producer may refuse (PyTorch: a tensor that requires grad), and say why
        if hasattr(value, "__cuda_array_interface__"):
            return "cai"
    except Exception:
        pass
    device = getattr(value, "__dlpack_device__", None)
    if device is not None and hasattr(value, "__dlpack__"):
        try:
            device_type, _ = device()
        except Exception:  # a producer that cannot say: not ours to take
            return None
        if device_type in dlpack.DEVICE_ACCESSIBLE:
            return "dlpack"
    return None


def foreign_key(value, kind: str):
    """The argument key of another library's GPU array: its dtype, ndim and C order."""
    if kind == "cai":
        interface = value.__cuda_array_interface__
        dtype = np.dtype(interface["typestr"])
        shape = tuple(interface["shape"])
        strides = interface.get("strides")
        contiguous = strides is None or is_c_contiguous(shape, strides, dtype.itemsize)
        key = ("cuda", dtype, len(shape), contiguous)
        if strides is not None and any(s % dtype.itemsize for s in strides):
            key += ("unaligned strides",)
        return key + ("read-only",) if interface["data"][1] else key
    return view_of_foreign(None, value, kind, None, "argument").key


def view_of_foreign(backend, value, kind: str, consumer_stream: int | None,
                    name: str) -> CUDAArray:
    """A CUDAArray seeing another library's GPU array (no copy). `consumer_stream`: the
    stream that will use it (the producer orders its work before), None for none."""
    if kind == "cai":
        interface = value.__cuda_array_interface__
        if interface.get("mask") is not None:
            raise LaunchError(f"argument '{name}' is a masked array; kernels take plain arrays")
        dtype = np.dtype(interface["typestr"])
        pointer = interface["data"][0] or 0
        stream = interface.get("stream")
        if backend is not None and stream is not None:
            backend.wait_for_stream(int(stream))
        return CUDAArray(backend, pointer, interface["shape"], dtype, interface.get("strides"),
                         owner=value, readonly=bool(interface["data"][1]), adopted=True)
    try:
        capsule = value.__dlpack__(stream=consumer_stream, max_version=dlpack.VERSION)
    except TypeError:  # a producer older than DLPack 1.0
        capsule = value.__dlpack__(stream=consumer_stream)
    tensor = dlpack.import_capsule(capsule)
    if tensor.dtype is None:
        raise LaunchError(f"argument '{name}' has a DLPack type ({tensor.dtype_text}) that "
                          "kernels do not support (use bool, int8..int64, uint8..uint64 or "
                          "float16/32/64)")
    itemsize = tensor.dtype.itemsize
    return CUDAArray(backend, tensor.pointer, tensor.shape, tensor.dtype,
                     tuple(s * itemsize for s in tensor.strides), owner=(value, tensor),
                     readonly=tensor.read_only, adopted=True,
                     foreign_device=tensor.device_id if tensor.device_type == dlpack.CUDA
                     else None)
