"""The CUDA driver, through cuda-python's `cuda.bindings.driver`: results checked and
named, one `Device` (primary context, memory pool) per GPU, and the stream handles the
runtime's objects share.

Every driver call of the runtime goes through here or checks its result with `check`.
The context current to a thread is the GPU's primary context, the one CuPy and PyTorch
use, so their pointers and ours are valid in each other's kernels."""
from __future__ import annotations

import contextlib
import threading

from kernelkit.errors import BackendError


def cuda_driver():
    from cuda.bindings import driver
    return driver


class DriverError(BackendError):
    """A driver call failed; `result` is the CUresult's name (e.g. CUDA_ERROR_ILLEGAL_ADDRESS)."""

    def __init__(self, message: str, result: str):
        super().__init__(message)
        self.result = result


class DeviceMemoryError(BackendError, MemoryError):
    """The GPU has no room for an allocation."""


# Errors after which the context cannot be used any more: every later call fails too.
STICKY = frozenset({"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                    "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS",
                    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
                    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT",
                    "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_ECC_UNCORRECTABLE"})


def describe(result) -> str:
    """'CUDA_ERROR_X (what the driver says it means)'."""
    cu = cuda_driver()
    name = getattr(result, "name", str(result))
    try:
        error, text = cu.cuGetErrorString(result)
        if not error and text:
            return f"{name} ({text.decode() if isinstance(text, bytes) else text})"
    except Exception:  # the description is a courtesy
        pass
    return name


def check(result, what: str) -> None:
    if result:
        raise DriverError(f"{what} failed: {describe(result)}", getattr(result, "name", ""))


class _CurrentContext(threading.local):
    context = None


current = _CurrentContext()
"""The context current to each thread, as this module last made it."""


class Device:
    """One GPU: its primary context, compute capability and memory pool."""

    def __init__(self, ordinal: int, several: bool):
        cu = cuda_driver()
        self.ordinal = ordinal
        # With several GPUs, other code (PyTorch, CuPy, Numba) switches the current
        # context behind our back: set it before every use instead of trusting `current`.
        self.several = several
        error, self.handle = cu.cuDeviceGet(ordinal)
        check(error, f"cuDeviceGet({ordinal})")
        error, name = cu.cuDeviceGetName(256, self.handle)
        check(error, "cuDeviceGetName")
        self.name = name.split(b"\0", 1)[0].decode(errors="replace")
        error, self.context = cu.cuDevicePrimaryCtxRetain(self.handle)
        check(error, f"retaining the primary context of GPU {ordinal}")
        self.make_current()
        attribute = cu.CUdevice_attribute
        self.compute_capability = (
            self.attribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            self.attribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.multiprocessors = self.attribute(
            attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.stream_ordered = bool(
            self.attribute(attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED))
        self.pool = self._own_pool() if self.stream_ordered else None

    def _own_pool(self):
        """A memory pool of our own that keeps freed memory for the next allocation (an
        allocation then costs microseconds), leaving the device's default pool, which
        other libraries share, as it is. None where it cannot be made: then allocations
        come from the default pool."""
        cu = cuda_driver()
        try:
            properties = cu.CUmemPoolProps()
            properties.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            properties.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
            properties.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            properties.location.id = self.ordinal
            error, pool = cu.cuMemPoolCreate(properties)
            if error:
                return None
            threshold = cu.cuuint64_t(0xFFFFFFFFFFFFFFFF)
            error, = cu.cuMemPoolSetAttribute(
                pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold)
            return pool if not error else None
        except Exception:  # bindings without pool properties: the default pool serves
            return None

    def attribute(self, attribute) -> int:
        error, value = cuda_driver().cuDeviceGetAttribute(attribute, self.handle)
        check(error, f"cuDeviceGetAttribute({attribute.name})")
        return value

    def make_current(self) -> None:
        """Make this GPU's context current to the calling thread."""
        if self.several or current.context is not self.context:
            check(cuda_driver().cuCtxSetCurrent(self.context)[0],
                  f"making GPU {self.ordinal}'s context current")
            current.context = self.context

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes."""
        self.make_current()
        error, free, total = cuda_driver().cuMemGetInfo()
        return (free, total) if not error else (0, 0)


@contextlib.contextmanager
def pushed(gpu: Device):
    """`gpu`'s context current for a moment, the thread's own restored after (for code
    that can run anywhere: finalizers, another backend's stream)."""
    cu = cuda_driver()
    check(cu.cuCtxPushCurrent(gpu.context)[0], f"making GPU {gpu.ordinal}'s context current")
    try:
        yield
    finally:
        cu.cuCtxPopCurrent()


def order_after(waiter, producer, producer_gpu: Device | None = None) -> None:
    """Work queued later on stream `waiter` runs after what stream `producer` has queued
    so far (an event recorded on `producer` in its own context, waited for by `waiter`,
    which may be on another GPU). Without `producer_gpu` (another library's stream) the
    event is made in the current context, and where the stream belongs to another one
    the host waits for the producer instead."""
    cu = cuda_driver()
    flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING.value
    with pushed(producer_gpu) if producer_gpu is not None else contextlib.nullcontext():
        error, event = cu.cuEventCreate(flags)
        check(error, "cuEventCreate")
        try:
            recorded, = cu.cuEventRecord(event, producer)
            if recorded:
                check(cu.cuStreamSynchronize(producer)[0], "waiting for another stream")
                return
            check(cu.cuStreamWaitEvent(waiter, event, 0)[0], "ordering one stream after another")
        finally:
            cu.cuEventDestroy(event)


def device_count() -> int:
    cu = cuda_driver()
    check(cu.cuInit(0)[0], "cuInit")
    error, count = cu.cuDeviceGetCount()
    check(error, "cuDeviceGetCount")
    return count


_devices: dict[int, Device] = {}
_devices_lock = threading.Lock()


def device(ordinal: int) -> Device:
    """The one `Device` of GPU `ordinal`."""
    with _devices_lock:
        gpu = _devices.get(ordinal)
        if gpu is None:
            count = device_count()
            if not 0 <= ordinal < count:
                raise BackendError(f"there is no GPU {ordinal}: this machine has {count} "
                                   f"(numbered 0 to {count - 1})")
            gpu = _devices[ordinal] = Device(ordinal, several=count > 1)
        return gpu


class Stream:
    """A stream of one GPU; destroyed when the last object using it (a backend, an
    allocation waiting to be freed on it) lets go."""

    def __init__(self, gpu: Device):
        cu = cuda_driver()
        gpu.make_current()
        error, self.handle = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_DEFAULT.value)
        check(error, "cuStreamCreate")
        self.address = int(self.handle)
        self.device = gpu

    def __del__(self):
        try:
            with pushed(self.device):
                cuda_driver().cuStreamDestroy(self.handle)
        except Exception:  # at interpreter exit the driver may be gone already
            pass
