"""The CUDA backend: kernels on an NVIDIA GPU through cuda-python's driver bindings.

`CUDABackend(device=0)` owns a stream on the GPU's primary context: launches, copies,
allocations and frees are queued on it in order and return at once; `kk.synchronize(
backend)` waits, and reports what went wrong in the meantime (a failed launch, with the
kernel's name; an out-of-bounds access in debug mode, with the source line). Memory
comes from the GPU's stream-ordered pool. Arrays are `CUDAArray`s; CuPy arrays, PyTorch
tensors and any other GPU array speaking `__cuda_array_interface__` or DLPack are taken
as kernel arguments without a copy.

A launch packs the launch record (`ArgumentLayout`) into a buffer of its kernel and
passes it as the kernel's one by-value parameter.

`CUDABackend.compile_only(arch, ...)` needs no GPU and no driver: kernels compile to PTX
and cubins, `kk.code_ir / code_llvm / code_native` (PTX) work, NumPy arrays stand in
for device arrays (their dtype, ndim and layout are what count), and a launch compiles
the kernel for every architecture given and then raises `CompileOnlyError`."""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import gc
import math
import os
import struct
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from kernelkit.backend import Backend
from kernelkit.compiler.job import CompilerConfig, CompilerJob, function_source
from kernelkit.errors import BackendError, CompileOnlyError, LaunchError
from kernelkit.ir import types as T
from kernelkit.runtime.arguments import (ArgumentLayout, array_type_of,
                                         is_dataclass_instance, numpy_argument_key,
                                         numpy_argument_type, packing_function,
                                         read_only_argument, scalar_conversion, scalar_type_of,
                                         struct_key, struct_type_of, launch_frame,
                                         unsupported_argument)
from kernelkit.runtime.bounds import ERROR_RECORD_FIELDS, out_of_bounds_error
from kernelkit.runtime.geometry import default_workgroupsize, number_of_groups

from .array import CUDAArray, foreign_key, foreign_kind, view_of_foreign
from .driver import (STICKY, DeviceMemoryError, DriverError, cuda_driver, current, describe,
                     order_after, pushed)
from .launch import GRID, LaunchBlock
from .thread import cuda_shape

MAX_THREADS_PER_BLOCK = 1024
_MAX_BLOCK = (1024, 1024, 64)              # x, y, z
_MAX_GRID = (2 ** 31 - 1, 65535, 65535)    # x, y, z
BLOCKS_PER_MULTIPROCESSOR = 8   # 2048 resident threads / 256
_LEGACY_STREAMS = (None, 0, 1)   # the legacy default stream: our stream syncs with it
_KEEP_LIMIT = 256                # host buffers kept for queued copies before pruning
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_CUDA_ACCEPTS = ("GPU arrays (kk.to_backend, CuPy, PyTorch), Python or NumPy scalars, and "
                 "frozen dataclasses and tuples of scalars")


STAND_IN_ARCHS = ("sm_80", "sm_90")
"""The architectures the compile-only stand-in (`compile_only_stand_in`) compiles each
kernel for, to a cubin each: where there is no GPU, every kernel is still checked for
at least two."""

_NO_GPU_HINT = "CUDABackend.compile_only('sm_90') compiles kernels without a GPU"


@functools.lru_cache(maxsize=1)
def driver_unavailable_reason() -> str | None:
    try:
        from cuda.bindings import driver
    except ImportError:
        return f"cuda-python is not installed (pip install -e '.[cuda]'); {_NO_GPU_HINT}"
    try:
        (result,) = driver.cuInit(0)
    except Exception as error:  # the driver library itself is missing
        return f"no CUDA driver ({error}); {_NO_GPU_HINT}"
    if result:
        return f"no usable CUDA driver or GPU ({describe(result)}); {_NO_GPU_HINT}"
    error, count = driver.cuDeviceGetCount()
    if error or count == 0:
        return f"the CUDA driver sees no GPU; {_NO_GPU_HINT}"
    return None


def compile_only_unavailable_reason() -> str | None:
    """Why a compile-only backend cannot make cubins and link math here, or None."""
    from .libdevice import libdevice_unavailable_reason
    from .linker import linker_unavailable_reason
    return linker_unavailable_reason() or libdevice_unavailable_reason()


def check_workgroup(function, workgroupsize) -> tuple[int, ...]:
    sizes = tuple(workgroupsize)
    threads = 1
    for size in sizes:
        threads *= size
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchError(f"kernel '{function.__name__}': a work-group of {sizes} is "
                          f"{threads} work-items; CUDA allows at most "
                          f"{MAX_THREADS_PER_BLOCK} per group")
    for size, limit, axis in zip(reversed(sizes), _MAX_BLOCK, range(len(sizes) - 1, -1, -1)):
        if size > limit:
            raise LaunchError(f"kernel '{function.__name__}': a work-group of {sizes} has "
                              f"{size} work-items along axis {axis}; CUDA allows at most "
                              f"{limit} there")
    return sizes


@dataclass(eq=False)
class PreparedKernel:
    """A kernel loaded on the GPU, with its launch buffer and argument packers."""

    name: str
    function: object          # CUfunction
    launch: LaunchBlock       # `go(packed)`
    pack: object              # (header, args, touched) -> packed grid and record (_packer)
    ndim: int
    compiled: object
    uses_print: bool
    error_record: int = 0     # device address of the bounds-check record (debug)
    geometry: dict = dataclasses.field(default_factory=dict)  # ndrange -> grid and header
    keep: tuple = ()          # the module, the bounds-check record's allocation
    coarsening: int = 1       # work-groups a thread block may run (`thread.py`)
    argtypes: tuple = ()
    finish: object = None     # packs the grid and the record's fields (`struct.pack`)
    fire: object = None       # its `fast_launcher`, once made


class _Allocation:
    """Owns device memory; freed (queued on the stream) when no array uses it."""

    __slots__ = ("pointer", "nbytes", "__weakref__")

    def __init__(self, pointer: int, nbytes: int):
        self.pointer = pointer
        self.nbytes = nbytes


def _free(gpu, stream, pointer: int) -> None:
    """Free an allocation, queued on the stream of the backend that made it (whose stream
    other backends' work on the memory has been ordered before)."""
    try:
        cu = cuda_driver()
        with pushed(gpu):
            if gpu.stream_ordered:
                cu.cuMemFreeAsync(pointer, stream.handle)
            else:
                cu.cuMemFree(pointer)
    except Exception:  # at exit, or after a failed launch lost the context: nothing to do
        pass


class CUDABackend(Backend):
    """Kernels on an NVIDIA GPU. `device`: the GPU's ordinal; `debug=True` (or
    KERNELKIT_DEBUG=1) checks every array access and reports the first out-of-bounds
    one on synchronize."""

    name = "cuda"

    def __init__(self, device: int = 0, debug: bool | None = None):
        reason = driver_unavailable_reason()
        if reason is not None:
            raise BackendError(f"CUDABackend() cannot run kernels here: {reason}")
        from . import driver as gpus
        from .target import PTXTarget, architecture_for
        self.device = int(device)
        self._gpu = gpus.device(self.device)
        if debug is None:
            debug = os.environ.get("KERNELKIT_DEBUG", "") not in ("", "0")
        self.debug = bool(debug)
        self._stream = gpus.Stream(self._gpu)
        self._stream_handle = self._stream.handle
        self._context = self._gpu.context
        self.stream_handle = self._stream.address
        arch, exact = architecture_for(*self._gpu.compute_capability)
        self.arch = arch
        self._target = PTXTarget(arch, cubin=exact)
        self._launched: dict[PreparedKernel, None] = {}   # since the last synchronize
        self._keep: list = []     # what queued work reads: host buffers, imported tensors
        self._several = self._gpu.several
        # Coarsened launches keep at least this many blocks: enough for every
        # multiprocessor to hold as many 256-thread blocks as it can run at once.
        self.blocks_to_fill = BLOCKS_PER_MULTIPROCESSOR * self._gpu.multiprocessors
        self._printed = False
        self._lost: str | None = None   # why the context cannot be used any more
        from kernelkit.compiler import driver  # noqa: F401 - set up now, not at a launch
        with _instances_lock:
            _instances.add(self)

    def __repr__(self) -> str:
        return (f"CUDABackend(device={self.device}{', debug=True' if self.debug else ''}) "
                f"on {self._gpu.name} ({self.arch})")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return driver_unavailable_reason()

    @classmethod
    def target_named(cls, name):
        from .target import PTXTarget, supported_architectures
        return PTXTarget(name) if name in supported_architectures() else None

    @classmethod
    def compile_only(cls, arch: str = "sm_90", *more_archs: str,
                     debug: bool = False) -> CompileOnlyCUDA:
        """A backend that compiles kernels for `arch` (and each of `more_archs`) without a
        GPU or a driver."""
        return CompileOnlyCUDA((arch, *more_archs), debug)

    @classmethod
    def compile_only_stand_in(cls) -> CompileOnlyCUDA | None:
        """`compile_only(*STAND_IN_ARCHS)`, where cubins can be made and libdevice linked."""
        if compile_only_unavailable_reason() is not None:
            return None
        return cls.compile_only(*STAND_IN_ARCHS)

    @classmethod
    def backend_of(cls, array):
        if type(array) is CUDAArray:
            return array.backend
        kind = foreign_kind(array)
        if kind is None or driver_unavailable_reason() is not None:
            return None
        return default_backend(_device_of(array, kind))

    # -- the stream -----------------------------------------------------------------------

    def _enter(self) -> None:
        if self._lost is not None:
            raise BackendError(self._lost)
        self._gpu.make_current()

    def synchronize(self) -> None:
        """Wait for everything queued; raise what failed since the last synchronize."""
        self._enter()
        queued = len(self._keep)  # what another thread adds meanwhile waits for the next
        result = cuda_driver().cuStreamSynchronize(self._stream_handle)[0]
        if result:
            raise self._failure(result, "waiting for the stream")
        del self._keep[:queued]
        launched, self._launched = self._launched, {}
        if self._printed:
            self._printed = False
            _libc.fflush(None)
        if self.debug:
            self._raise_out_of_bounds(launched)

    def _failure(self, result, what: str) -> BackendError:
        """The error for a failed driver call; a launch that failed earlier is named."""
        name = getattr(result, "name", str(result))
        launched = [p.name for p in list(self._launched)]  # list(): atomic under the GIL
        self._launched = {}
        if name in STICKY:
            kernels = ", ".join(f"'{n}'" for n in dict.fromkeys(launched)) or "(none recorded)"
            self._lost = (f"the GPU context of {self!r} was lost when a kernel failed "
                          f"({describe(result)}); start a new process to use the GPU again")
            return LaunchError(
                f"a launch of kernel {kernels} on GPU {self.device} failed: {describe(result)}"
                f" (reported by {what}). The GPU context cannot be used any more; start a "
                f"new process. To find an out-of-bounds access, run with "
                f"CUDABackend(debug=True) or KERNELKIT_DEBUG=1.")
        return DriverError(f"{what} on GPU {self.device} failed: {describe(result)}", name)

    def _check(self, result, what: str) -> None:
        if result:
            raise self._failure(result, what)

    def _raise_out_of_bounds(self, launched) -> None:
        cu = cuda_driver()
        first = None
        for prepared in launched:
            if not prepared.error_record:
                continue
            record = np.zeros(ERROR_RECORD_FIELDS, np.int64)
            self._check(cu.cuMemcpyDtoH(record.ctypes.data, prepared.error_record,
                                        record.nbytes)[0], "reading the bounds-check record")
            if record[0]:
                if first is None:
                    first = out_of_bounds_error(prepared.name, prepared.compiled, record)
                self._check(cu.cuMemsetD8(prepared.error_record, 0, record.nbytes)[0],
                            "clearing the bounds-check record")
        if first is not None:
            raise first

    def wait_for_stream(self, stream: int | None) -> None:
        """Order this backend's later work after what is queued on `stream` (another
        library's stream handle)."""
        if stream in _LEGACY_STREAMS or stream == self.stream_handle:
            return  # our stream and the legacy default stream synchronize implicitly
        self._enter()
        order_after(self._stream_handle, stream)

    def make_stream_wait(self, stream: int | None) -> None:
        """Order what is queued later on `stream` after this backend's work so far."""
        if stream in _LEGACY_STREAMS or stream == self.stream_handle:
            return
        self._enter()
        order_after(stream, self._stream_handle, self._gpu)

    def wait_for_backend(self, other: CUDABackend) -> None:
        """Order this backend's later work after what `other` has queued so far."""
        if other is not self:
            self._enter()
            order_after(self._stream_handle, other._stream_handle, other._gpu)

    def _wait_for_other_backends(self) -> None:
        """Before the host reads GPU memory: every other backend on this GPU has run what
        it queued (it may have written the memory: another library's array, say)."""
        with _instances_lock:
            backends = list(_instances)
        for backend in backends:
            if backend is not self and backend.device == self.device and backend._launched:
                backend.synchronize()

    def _keep_until_done(self, value) -> None:
        """Keep `value` alive until the work queued so far has run."""
        keep = self._keep
        keep.append(value)
        if len(keep) > _KEEP_LIMIT:
            result = cuda_driver().cuStreamQuery(self._stream_handle)[0]
            if not result:
                keep.clear()

    # -- memory ---------------------------------------------------------------------------

    def _allocate(self, nbytes: int, shape, dtype) -> _Allocation:
        self._enter()
        if nbytes == 0:
            return _Allocation(0, 0)
        cu = cuda_driver()
        gpu = self._gpu
        for attempt in range(2):
            if gpu.pool is not None:
                error, pointer = cu.cuMemAllocFromPoolAsync(nbytes, gpu.pool, self._stream_handle)
            elif gpu.stream_ordered:
                error, pointer = cu.cuMemAllocAsync(nbytes, self._stream_handle)
            else:
                error, pointer = cu.cuMemAlloc(nbytes)
            if not error:
                break
            if getattr(error, "name", "") != "CUDA_ERROR_OUT_OF_MEMORY":
                self._check(error, f"allocating {nbytes} bytes")
            if attempt == 0:  # arrays waiting to be collected, frees waiting on the stream
                gc.collect()
                cu.cuStreamSynchronize(self._stream_handle)
                if gpu.pool is not None:
                    cu.cuMemPoolTrimTo(gpu.pool, 0)
        else:
            free, total = self._gpu.memory_info()
            raise DeviceMemoryError(
                f"GPU {self.device} ({self._gpu.name}) is out of memory: an array of shape "
                f"{tuple(shape)} and dtype {dtype} needs {_bytes(nbytes)}; {_bytes(free)} of "
                f"{_bytes(total)} are free")
        allocation = _Allocation(int(pointer), nbytes)
        weakref.finalize(allocation, _free, gpu, self._stream, int(pointer))
        return allocation

    def allocate(self, dtype, shape):
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        size = 1
        for extent in shape:
            if extent < 0:
                raise ValueError(f"negative dimensions are not allowed: {shape}")
            size *= extent
        allocation = self._allocate(size * dtype.itemsize, shape, dtype)
        return CUDAArray(self, allocation.pointer, shape, dtype, None, allocation)

    def zeros(self, dtype, shape):
        array = self.allocate(dtype, shape)
        self.fill(array, 0)
        return array

    def ones(self, dtype, shape):
        array = self.allocate(dtype, shape)
        self.fill(array, 1)
        return array

    def fill(self, array: CUDAArray, value) -> None:
        """Set every element of a C-contiguous array to `value` (queued on the stream)."""
        if not array.is_c_contiguous:
            raise BackendError("fill needs a C-contiguous array")
        if array.size == 0:
            return
        self._enter()
        cu = cuda_driver()
        bits = np.array(value, dtype=array.dtype).reshape(1)
        stream, pointer, count = self._stream_handle, array.pointer, array.size
        itemsize = array.itemsize
        if itemsize == 1:
            result = cu.cuMemsetD8Async(pointer, int(bits.view(np.uint8)[0]), count, stream)[0]
        elif itemsize == 2:
            result = cu.cuMemsetD16Async(pointer, int(bits.view(np.uint16)[0]), count,
                                         stream)[0]
        elif itemsize == 4:
            result = cu.cuMemsetD32Async(pointer, int(bits.view(np.uint32)[0]), count,
                                         stream)[0]
        else:  # 8 bytes: each 32-bit half as a column of a 2-D memset with an 8-byte pitch
            low, high = (int(w) for w in bits.view(np.uint32))
            result = cu.cuMemsetD2D32Async(pointer, 8, low, 1, count, stream)[0] or \
                cu.cuMemsetD2D32Async(pointer + 4, 8, high, 1, count, stream)[0]
        self._check(result, "filling an array")

    def to_backend(self, array):
        if type(array) is CUDAArray:
            if array.backend is self or array.backend.device == self.device:
                return array
            return self.copy(array)  # from another GPU
        kind = foreign_kind(array)
        if kind is not None:
            return self._adopt(array, kind, "array")
        host = np.asarray(array)
        copy = self.allocate(host.dtype, host.shape)
        self._upload(copy, np.ascontiguousarray(host))
        return copy

    def to_numpy(self, array) -> np.ndarray:
        array = self._device_array(array, "array")
        self._wait_for_other_backends()
        finish = self._download(array)
        self.synchronize()
        return finish()

    def copy(self, array: CUDAArray) -> CUDAArray:
        """A C-contiguous copy of `array` on this backend."""
        result = self.allocate(array.dtype, array.shape)
        self.copyto(result, array)
        return result

    def copyto(self, destination, source) -> None:
        destination_on_host = isinstance(destination, np.ndarray)
        source_on_host = isinstance(source, np.ndarray) or \
            (type(source) is not CUDAArray and foreign_kind(source) is None)
        if destination_on_host and source_on_host:
            np.copyto(destination, source)
            return
        if destination_on_host:
            if not destination.flags.writeable:
                raise BackendError("copyto: the destination NumPy array is read-only")
            source = self._device_array(source, "source")
            _check_shapes(destination.shape, source.shape)
            if destination.flags.c_contiguous and destination.dtype == source.dtype and \
                    source.is_c_contiguous:
                self._wait_for_other_backends()
                self._download(source, destination)
                self.synchronize()
            else:
                np.copyto(destination, self.to_numpy(source))
            return
        destination = self._device_array(destination, "destination")
        if source_on_host:
            host = np.asarray(source)
            _check_shapes(destination.shape, host.shape)
            if not np.can_cast(host.dtype, destination.dtype, "same_kind"):
                raise BackendError(f"copyto: cannot copy {host.dtype} into {destination.dtype} "
                                   f"(NumPy's same_kind casting rule)")
            host = np.ascontiguousarray(host, dtype=destination.dtype)
            if destination.is_c_contiguous:
                self._upload(destination, host)
            else:
                staged = self.allocate(host.dtype, host.shape)
                self._upload(staged, host)
                self._copy_on_device(destination, staged)
            return
        source = self._device_array(source, "source")
        _check_shapes(destination.shape, source.shape)
        if destination.dtype != source.dtype:
            raise BackendError(f"copyto: the destination is {destination.dtype} and the source "
                               f"{source.dtype}; GPU copies do not convert (convert on the host)")
        owners = [a.backend for a in (destination, source) if a.backend is not self]
        for owner in owners:
            self.wait_for_backend(owner)
        if source.backend.device != self.device:
            self._copy_from_another_gpu(destination, source)
        else:
            self._copy_on_device(destination, source)
        for owner in owners:
            owner.wait_for_backend(self)

    def _copy_from_another_gpu(self, destination: CUDAArray, source: CUDAArray) -> None:
        """The driver copies contiguous memory between GPUs; a kernel reads only its own."""
        if not source.is_c_contiguous:
            source = source.backend.copy(source)
            self.wait_for_backend(source.backend)
        staged = destination if destination.is_c_contiguous else \
            self.allocate(destination.dtype, destination.shape)
        self._copy_on_device(staged, source)
        # The contiguous copy of a strided source is freed on its own GPU's stream when
        # it goes: after this copy.
        source.backend.wait_for_backend(self)
        if staged is not destination:
            self._copy_on_device(destination, staged)

    def _copy_on_device(self, destination: CUDAArray, source: CUDAArray) -> None:
        if destination.size == 0:
            return
        if destination.is_c_contiguous and source.is_c_contiguous:
            self._enter()
            self._check(cuda_driver().cuMemcpyAsync(destination.pointer, source.pointer,
                                                    source.nbytes, self._stream_handle)[0],
                        "copying between GPU arrays")
            return
        from .copy_kernels import strided_copy
        strided_copy(self, destination, source)

    def _upload(self, destination: CUDAArray, host: np.ndarray) -> None:
        if host.nbytes == 0:
            return
        self._enter()
        self._check(cuda_driver().cuMemcpyHtoDAsync(destination.pointer, host.ctypes.data,
                                                    host.nbytes, self._stream_handle)[0],
                    "copying to the GPU")
        self._keep_until_done(host)

    def _download(self, array: CUDAArray, host: np.ndarray | None = None):
        """Queue the copy of `array` to the host (into `host`, a C-contiguous array of its
        shape and dtype, if given); returns what gives the NumPy array once the stream
        has run the copy."""
        self._enter()
        if array.size == 0:
            result = np.empty(array.shape, array.dtype) if host is None else host
            return lambda: result
        if array.is_c_contiguous:
            if host is None:
                host = np.empty(array.shape, array.dtype)
            self._check(cuda_driver().cuMemcpyDtoHAsync(host.ctypes.data, array.pointer,
                                                        array.nbytes, self._stream_handle)[0],
                        "copying to the host")
            return lambda: host
        # Any strides: copy the span of bytes the view touches, and view that with them.
        low = sum(min(0, (e - 1) * s) for e, s in zip(array.shape, array.strides))
        high = sum(max(0, (e - 1) * s) for e, s in zip(array.shape, array.strides))
        span = np.empty(high - low + array.itemsize, np.uint8)
        self._check(cuda_driver().cuMemcpyDtoHAsync(span.ctypes.data, array.pointer + low,
                                                    span.nbytes, self._stream_handle)[0],
                    "copying to the host")
        return lambda: np.array(np.ndarray(array.shape, array.dtype, buffer=span,
                                           offset=-low, strides=array.strides))

    def _device_array(self, value, name: str) -> CUDAArray:
        if type(value) is CUDAArray:
            return value
        kind = foreign_kind(value)
        if kind is None:
            raise BackendError(f"{name} is a {type(value).__name__}, not a GPU array")
        return self._adopt(value, kind, name)

    def _adopt(self, value, kind: str, name: str) -> CUDAArray:
        """Another library's GPU array as a CUDAArray of this backend (no copy)."""
        self._enter()
        try:
            array = view_of_foreign(self, value, kind, self.stream_handle, name)
        except (LaunchError, BackendError):
            raise
        except Exception as error:  # the producer refused, and says why
            raise LaunchError(f"argument '{name}' ({type(value).__name__}) cannot be seen as a "
                              f"GPU array: {error}") from error
        device = array.foreign_device
        if device is None and self._gpu.several and array.pointer:
            device = _device_of(value, kind)
        if device is not None and device != self.device:
            raise LaunchError(f"argument '{name}' ({type(value).__name__}) is on GPU {device}; "
                              f"{self!r} runs on GPU {self.device}: move it there first")
        self._keep_until_done(array.owner)  # until the work queued with it has run
        return array

    # -- kernels --------------------------------------------------------------------------

    def argument_key(self, value):
        kind = type(value)
        if kind is CUDAArray:
            return value.key
        if kind is int or kind is float or kind is bool or kind is np.ndarray:
            return kind
        if kind is tuple or is_dataclass_instance(value):
            return struct_key(value, self.argument_key)
        foreign = foreign_kind(value)
        if foreign is not None:
            try:
                return foreign_key(value, foreign)
            except Exception:  # the producer refuses; argument_type says why, by name
                return ("refused", kind)
        return numpy_argument_key(value)

    def argument_type(self, value, const, name, kernel):
        if isinstance(value, np.ndarray):
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is a NumPy array in host "
                              f"memory; kernels on {self!r} read GPU memory: pass "
                              f"kk.to_backend(backend, {name}) (and copy results back with "
                              f"kk.to_numpy)")
        scalar = scalar_type_of(value)
        if scalar is not None:
            return scalar
        struct = struct_type_of(value, name, kernel, lambda array, where: self.argument_type(
            array, const, where, kernel))
        if struct is not None:
            return struct
        if type(value) is not CUDAArray:
            kind = foreign_kind(value)
            if kind is None:
                raise unsupported_argument(value, name, kernel, _CUDA_ACCEPTS,
                                           "kk.to_backend(backend, np.asarray({name}))")
            value = self._adopt(value, kind, name)
        if value.readonly and not const:
            raise read_only_argument(name, kernel, "the library that made it says so")
        if value.fields is None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' has strides "
                              f"{value.strides} that are not multiples of its item size "
                              f"{value.itemsize}")
        return array_type_of(value.dtype, value.ndim, value.is_c_contiguous, const, name,
                             kernel)

    def default_workgroupsize(self, ndim):
        return default_workgroupsize(ndim, 256)

    def target(self):
        return self._target

    def compiler_job(self, function, argtypes, *, workgroupsize, opt_level: int = 3,
                     target=None, **options):
        sizes = check_workgroup(function, workgroupsize)
        config = CompilerConfig(target or self._target, kernel=True, workgroupsize=sizes,
                                opt_level=opt_level, debug=self.debug,
                                params=tuple(sorted(options.items())))
        return CompilerJob(function_source(function, argtypes), config)

    def prepare(self, compiled, argtypes, ndim):
        self._enter()
        cu = cuda_driver()
        name = compiled.job.source.function.__name__
        module = self._load_module(compiled, name)
        image = compiled.entry
        error, function = cu.cuModuleGetFunction(module, image.symbol.encode())
        self._check(error, f"finding kernel '{name}' in its module")
        sizes = compiled.job.config.workgroupsize
        threads = 1
        for size in sizes:
            threads *= size
        error, most = cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function)
        self._check(error, "cuFuncGetAttribute")
        if threads > most:
            raise LaunchError(f"kernel '{name}' needs too many registers for a work-group of "
                              f"{threads} work-items on {self._gpu.name}: at most {most}; "
                              f"launch it with a smaller workgroupsize")
        layout = ArgumentLayout(argtypes, ndim)
        block = tuple(reversed(cuda_shape(sizes)))
        block += (1,) * (3 - len(block))
        names = list(compiled.parameters)
        packed = struct.Struct("<" + GRID + layout.struct.format.lstrip("<"))
        launch = LaunchBlock(function, self._stream.address, block, packed.size,
                             dependent=compiled.info.get("dependent_launch", False))
        prepared = PreparedKernel(name, function, launch,
                                  self._packer(argtypes, names, packed.pack), ndim, compiled,
                                  compiled.uses_print, keep=(module,),
                                  coarsening=compiled.info.get("coarsening", 1),
                                  argtypes=argtypes, finish=packed.pack)
        if compiled.job.config.debug:
            allocation = self._allocate(8 * ERROR_RECORD_FIELDS, (ERROR_RECORD_FIELDS,),
                                        np.int64)
            self._check(cu.cuMemsetD8(allocation.pointer, 0, allocation.nbytes)[0],
                        "clearing the bounds-check record")
            prepared.error_record = allocation.pointer
            prepared.keep += (allocation,)
        return prepared

    def _load_module(self, compiled, name: str):
        """The kernel's module, from its cubin; from PTX compiled by the driver where the
        cubin does not load (a driver older than the linker, say)."""
        cu = cuda_driver()
        image = compiled.entry
        code = image.code if image.is_cubin else image.code + b"\0"
        error, module = cu.cuModuleLoadData(code)
        if not error:
            return module
        if not image.is_cubin:
            self._check(error, f"loading kernel '{name}' (PTX compiled by the driver)")
        from kernelkit.compiler.driver import compile_job
        job = compiled.job
        target = dataclasses.replace(job.config.target, cubin=False)
        ptx = compile_job(dataclasses.replace(
            job, config=dataclasses.replace(job.config, target=target))).entry
        retry, module = cu.cuModuleLoadData(ptx.code + b"\0")
        if retry:
            raise DriverError(f"loading kernel '{name}' on GPU {self.device} failed: its cubin "
                              f"({describe(error)}) and its PTX ({describe(retry)})",
                              getattr(retry, "name", ""))
        return module

    def _packer(self, argtypes, names, finish):
        """The launch's packing function (`packing_function`), which returns
        `finish(grid..., record fields...)`: an array of this backend gives its fields as
        they are; any other array goes through `_foreign_fields`, which adds the backends
        whose arrays the launch uses to `context`."""
        def array_fields(value, argtype, name):
            return (f"({value}.fields if type({value}) is CUDAArray and {value}.backend is "
                    f"backend and not {value}.adopted else "
                    f"backend._foreign_fields({value}, {name!r}, context))")
        return packing_function(argtypes, names, array_fields,
                                {"CUDAArray": CUDAArray, "backend": self}, finish)

    def _foreign_fields(self, value, name: str, touched: list) -> tuple:
        """The fields of an array that is not simply one of this backend's: another
        backend's (its stream and ours are ordered both ways: `touched`), another
        library's (kept alive until the launch has run)."""
        if type(value) is CUDAArray:
            if value.backend is self:  # a view of another library's memory
                self._keep_until_done(value.owner)
                return value.fields
            if value.backend.device != self.device:
                raise LaunchError(f"argument '{name}' is on GPU {value.backend.device}; "
                                  f"{self!r} runs on GPU {self.device}: move it with "
                                  f"kk.to_backend(backend, array)")
            self.wait_for_backend(value.backend)
            touched.append(value.backend)
            if value.adopted:
                self._keep_until_done(value.owner)
            return value.fields
        return self._adopt(value, foreign_kind(value), name).fields

    def launch(self, prepared: PreparedKernel, args, ndrange, workgroupsize):
        header = prepared.geometry.get(ndrange)
        if header is None:
            header = self._geometry(prepared, ndrange, workgroupsize)
        if header is _EMPTY:
            return
        touched = []
        packed = prepared.pack(header, args, touched)
        if self._several or current.context is not self._context:
            self._gpu.make_current()
        result = prepared.launch.go(packed)
        if result:
            self._launch_failed(prepared, result)
        self._launched[prepared] = None
        if touched:
            for owner in dict.fromkeys(touched):
                owner.wait_for_backend(self)
        if prepared.uses_print:
            self._printed = True

    def _launch_failed(self, prepared: PreparedKernel, result: int):
        raise self._failure(cuda_driver().CUresult(result), f"launching kernel '{prepared.name}'")

    def fast_launcher(self, prepared: PreparedKernel, args):
        """`fire(args, n) -> bool` (`Backend.fast_launcher`) where every argument is one of
        this backend's own arrays or a scalar (not a struct or tuple), else None: one
        generated function that checks the arguments' kinds, packs them and launches, with
        no call in between but the packing's `struct.pack` and the launch itself. It knows
        the grids of the ndranges `launch` has launched `prepared` over
        (`prepared.geometry`); any other goes through `launch` first.

        Every launch packs its record anew: a scalar is packed in tens of nanoseconds, and
        users pass a new time step or coefficient each launch."""
        if prepared.fire is not None:
            return prepared.fire
        if not all(isinstance(argtype, (T.ArrayType, T.ScalarType))
                   for argtype in prepared.argtypes):
            return None   # a struct or tuple argument: `launch` packs its leaves
        names = [f"a{index}" for index in range(len(args))]
        namespace = {"CUDAArray": CUDAArray, "backend": self, "prepared": prepared,
                     "geometry": prepared.geometry, "EMPTY": _EMPTY,
                     "current": current,
                     "context": self._context, "gpu": self._gpu, "go": prepared.launch.go,
                     "finish": prepared.finish}
        checks, fields = [], ["*launch"]
        for name, value, argtype in zip(names, args, prepared.argtypes):
            namespace[f"{name}_key"] = self.argument_key(value)
            if isinstance(argtype, T.ArrayType):
                if type(value) is not CUDAArray or value.backend is not self or value.adopted:
                    return None
                checks.append(f"type({name}) is CUDAArray and {name}.backend is backend and "
                              f"not {name}.adopted and {name}.key is {name}_key")
                fields.append(f"*{name}.fields")
            else:
                checks.append(f"type({name}) is {name}_key")
                fields.append(f"{scalar_conversion(argtype)}({name})")
        source = (
            f"def make():\n"
            f"    def fire(args, n):\n"
            f"{launch_frame(names, checks, '        ')}"
            f"        if launch is EMPTY:\n"
            f"            return False\n"
            f"        packed = finish({', '.join(fields)})\n"
            f"        if {'True' if self._several else 'current.context is not context'}:\n"
            f"            gpu.make_current()\n"
            f"        result = go(packed)\n"
            f"        if result:\n"
            f"            backend._launch_failed(prepared, result)\n"
            f"        backend._launched[prepared] = None\n"
            + ("        backend._printed = True\n" if prepared.uses_print else "")
            + "        return True\n"
            + "    return fire\n")
        exec(compile(source, f"<kernelkit launch of {prepared.name}>", "exec"),  # noqa: S102
             namespace)
        prepared.fire = namespace["make"]()
        return prepared.fire

    def _geometry(self, prepared: PreparedKernel, ndrange, workgroupsize):
        """The grid (x, y, z) and the launch record's header of a launch over `ndrange`,
        as one tuple, kept per kernel; _EMPTY for an empty ndrange."""
        groups = number_of_groups(ndrange, workgroupsize)
        if 0 in groups:
            return _EMPTY
        blocks = cuda_shape(self._blocks(prepared, groups))
        grid = tuple(reversed(blocks)) + (1,) * (3 - len(blocks))
        if grid[1] > _MAX_GRID[1] or grid[2] > _MAX_GRID[2]:
            raise LaunchError(f"kernel '{prepared.name}': {groups} work-groups; CUDA "
                              f"allows at most 65535 along each axis but the last (make the "
                              f"last axis of the ndrange the longest)")
        if grid[0] > _MAX_GRID[0]:
            raise LaunchError(f"kernel '{prepared.name}': {grid[0]} work-groups along the last "
                              f"axis; CUDA allows at most {_MAX_GRID[0]}")
        geometry = (*grid, *ndrange, *groups, prepared.error_record)
        if len(prepared.geometry) >= 64:
            prepared.geometry.clear()
        prepared.geometry[ndrange] = geometry
        return geometry

    def _blocks(self, prepared: PreparedKernel, groups: tuple[int, ...]) -> tuple[int, ...]:
        """Thread blocks per axis for `groups` work-groups: `prepared.coarsening` groups
        of the first axis per block where the GPU is still filled that way (at least
        `self.blocks_to_fill` blocks), one group per block otherwise."""
        factor = prepared.coarsening
        if factor == 1 or groups[0] < 2:
            return groups
        first = -(-groups[0] // factor)
        if first * math.prod(groups[1:]) < self.blocks_to_fill:
            return groups
        return (first, *groups[1:])


_EMPTY = object()


def _check_shapes(destination, source) -> None:
    if tuple(destination) != tuple(source):
        raise BackendError(f"copyto: the destination has shape {tuple(destination)} and the "
                           f"source {tuple(source)}; they must be equal")


def _bytes(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def _device_of(array, kind: str) -> int:
    if kind == "dlpack":
        return int(array.__dlpack_device__()[1])
    pointer = array.__cuda_array_interface__["data"][0]
    if not pointer:
        return 0
    cu = cuda_driver()
    error, ordinal = cu.cuPointerGetAttribute(
        cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer)
    return int(ordinal) if not error else 0


_default_backends: dict[int, CUDABackend] = {}
_instances: weakref.WeakSet = weakref.WeakSet()
_instances_lock = threading.Lock()


def default_backend(device: int) -> CUDABackend:
    """The shared backend of GPU `device` (for `kk.get_backend` of other libraries' arrays)."""
    if device == 0:
        from kernelkit.backend import make_backend
        return make_backend("cuda")
    backend = _default_backends.get(device)
    if backend is None:
        backend = _default_backends[device] = CUDABackend(device)
    return backend


class CompileOnlyCUDA(Backend):
    name = "cuda"

    def __init__(self, archs: tuple[str, ...] = ("sm_90",), debug: bool = False):
        from .target import PTXTarget
        self.targets = tuple(PTXTarget(arch) for arch in archs)
        self.archs = archs
        self.debug = bool(debug)

    def __repr__(self) -> str:
        return f"CUDABackend.compile_only({', '.join(map(repr, self.archs))})"

    # -- arrays: NumPy arrays stand in for device arrays ---------------------------------

    def allocate(self, dtype, shape):
        return np.empty(shape, dtype=dtype)

    def zeros(self, dtype, shape):
        return np.zeros(shape, dtype=dtype)

    def ones(self, dtype, shape):
        return np.ones(shape, dtype=dtype)

    def to_backend(self, array):
        return np.asarray(array)

    def to_numpy(self, array) -> np.ndarray:
        return np.asarray(array)

    def copyto(self, destination, source) -> None:
        np.copyto(destination, np.asarray(source))

    def synchronize(self) -> None:
        pass

    # -- kernels --------------------------------------------------------------------------

    def argument_key(self, value):
        return numpy_argument_key(value)

    def argument_type(self, value, const, name, kernel):
        argtype = numpy_argument_type(value, const, name, kernel)
        if argtype is not None:
            return argtype
        raise unsupported_argument(value, name, kernel, _CUDA_ACCEPTS,
                                   "kk.to_backend(backend, np.asarray({name}))")

    def default_workgroupsize(self, ndim):
        return default_workgroupsize(ndim, 256)

    def compiler_job(self, function, argtypes, *, workgroupsize, opt_level: int = 3,
                     target=None, **options):
        sizes = check_workgroup(function, workgroupsize)
        config = CompilerConfig(target or self.targets[0], kernel=True, workgroupsize=sizes,
                                opt_level=opt_level, debug=self.debug,
                                params=tuple(sorted(options.items())))
        return CompilerJob(function_source(function, argtypes), config)

    def prepare(self, compiled, argtypes, ndim):
        """Compile for the other architectures too, so that every one is checked."""
        from kernelkit.compiler.driver import compile_job
        job = compiled.job
        for target in self.targets[1:]:
            compile_job(dataclasses.replace(job, config=dataclasses.replace(job.config,
                                                                             target=target)))
        return compiled

    def launch(self, prepared, args, ndrange, workgroupsize):
        name = prepared.job.source.function.__name__
        raise CompileOnlyError(f"kernel '{name}' was compiled for {', '.join(self.archs)}; "
                               f"{self!r} has no GPU to run it on")
