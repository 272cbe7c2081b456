"""A pytest plugin standing in for `cuda.bindings.driver` over host memory, so that the
CUDA runtime's own logic runs where there is no GPU: allocation, copies in every
direction, views, argument packing, stream waits, debug records and the errors.

"Device" memory is host memory; a launch runs the CPU build of the same kernel job on
the same launch record (both backends share `ArgumentLayout`), so results can be
checked. This proves nothing about the PTX or the real driver: those are tested on a
GPU, where this plugin is not used.

    PYTHONPATH=tests/backends/cuda python -m pytest -p host_driver tests/..."""
from __future__ import annotations

import ctypes
import dataclasses
import sys
import types

import numpy as np
from cuda.bindings import driver as real

OK = real.CUresult.CUDA_SUCCESS
OUT_OF_MEMORY = real.CUresult.CUDA_ERROR_OUT_OF_MEMORY
MEMORY = 1 << 34   # what the stand-in GPU has
_buffers: dict[int, ctypes.Array] = {}
calls: list = []   # what was asked of the stand-in that tests may look at
_streams = [0x5000]


class Handle:
    def __init__(self, value, **attributes):
        self.value = value
        self.__dict__.update(attributes)

    def __int__(self):
        return self.value


def cuInit(flags):
    return (OK,)


def cuDeviceGetCount():
    return (OK, 1)


def cuDeviceGet(ordinal):
    return (OK, Handle(ordinal)) if ordinal == 0 else (real.CUresult.CUDA_ERROR_INVALID_DEVICE,
                                                       None)


def cuDeviceGetName(length, device):
    return (OK, b"host stand-in\0")


def cuDevicePrimaryCtxRetain(device):
    return (OK, Handle(1))


def cuCtxSetCurrent(context):
    return (OK,)


def cuCtxPushCurrent(context):
    calls.append("push")
    return (OK,)


def cuCtxPopCurrent():
    calls.append("pop")
    return (OK, Handle(1))


def cuDeviceGetAttribute(attribute, device):
    names = real.CUdevice_attribute
    return (OK, {names.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
                 names.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
                 names.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 132,
                 names.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: 1}[attribute])


def cuDeviceGetDefaultMemPool(device):
    return (OK, Handle(7))


def cuMemPoolCreate(properties):
    assert properties.location.type == real.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    return (OK, Handle(8))


def cuMemPoolSetAttribute(pool, attribute, value):
    assert isinstance(value, real.cuuint64_t)
    return (OK,)


def cuMemPoolTrimTo(pool, keep):
    return (OK,)


def cuStreamCreate(flags):
    _streams[0] += 1
    return (OK, real.CUstream(_streams[0]))


def cuStreamDestroy(stream):
    return (OK,)


def cuStreamSynchronize(stream):
    return (OK,)


def cuStreamQuery(stream):
    return (OK,)


def _allocate(size):
    if size > MEMORY:
        return (OUT_OF_MEMORY, None)
    buffer = ctypes.create_string_buffer(size)
    _buffers[ctypes.addressof(buffer)] = buffer
    return (OK, real.CUdeviceptr(ctypes.addressof(buffer)))


def cuMemAllocAsync(size, stream):
    return _allocate(size)


def cuMemAllocFromPoolAsync(size, pool, stream):
    assert int(pool) == 8, "from the backend's own pool"
    return _allocate(size)


def cuMemAlloc(size):
    return _allocate(size)


def cuMemFreeAsync(pointer, stream):
    del _buffers[int(pointer)]
    return (OK,)


def cuMemFree(pointer):
    del _buffers[int(pointer)]
    return (OK,)


def cuMemGetInfo():
    return (OK, MEMORY // 2, MEMORY)


def _set(pointer, value, count, width):
    memory = (ctypes.c_uint8 * (count * width)).from_address(int(pointer))
    np.ctypeslib.as_array(memory).view(f"u{width}")[:] = value
    return (OK,)


def cuMemsetD8Async(pointer, value, count, stream):
    return _set(pointer, value, count, 1)


def cuMemsetD8(pointer, value, count):
    return _set(pointer, value, count, 1)


def cuMemsetD16Async(pointer, value, count, stream):
    return _set(pointer, value, count, 2)


def cuMemsetD32Async(pointer, value, count, stream):
    return _set(pointer, value, count, 4)


def cuMemsetD2D32Async(pointer, pitch, value, width, height, stream):
    for row in range(height):
        _set(int(pointer) + row * pitch, value, width, 4)
    return (OK,)


def _copy(destination, source, size):
    ctypes.memmove(int(destination), int(source), size)
    return (OK,)


def cuMemcpyHtoDAsync(destination, source, size, stream):
    return _copy(destination, source, size)


def cuMemcpyDtoHAsync(destination, source, size, stream):
    return _copy(destination, source, size)


def cuMemcpyDtoH(destination, source, size):
    return _copy(destination, source, size)


def cuMemcpyAsync(destination, source, size, stream):
    return _copy(destination, source, size)


def cuModuleLoadData(image):
    assert image[:4] == b"\x7fELF" or image.endswith(b"\0"), "a cubin, or PTX ending in NUL"
    return (OK, Handle(9))


def cuModuleGetFunction(module, name):
    return (OK, Handle(10, name=name))


def cuFuncGetAttribute(attribute, function):
    return (OK, 1024)


def cuEventCreate(flags):
    return (OK, Handle(11))


def cuEventRecord(event, stream):
    calls.append(("record", int(stream)))
    return (OK,)


def cuStreamWaitEvent(stream, event, flags):
    calls.append(("wait", int(stream)))
    return (OK,)


def cuEventDestroy(event):
    return (OK,)


def cuGetErrorString(result):
    return (OK, b"an error of the host stand-in")


def cuPointerGetAttribute(attribute, pointer):
    return (OK, 0)


def cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    """Run the CPU build of the kernel's job on the launch record the runtime packed."""
    from kernelkit.backend import make_backend
    from kernelkit.compiler.driver import compile_job
    from kernelkit.compiler.job import CompilerJob
    from kernelkit.runtime.arguments import ArgumentLayout
    job = function.job
    config = dataclasses.replace(job.config, target=make_backend("cpu").target())
    compiled = compile_job(CompilerJob(job.source, config))
    sizes = job.config.workgroupsize
    assert (bx, by, bz)[:len(sizes)] == tuple(reversed(sizes)), "block = work-group, x last"
    layout = ArgumentLayout(job.source.argtypes, len(sizes))
    record = ctypes.string_at(ctypes.c_void_p.from_address(params).value, layout.size)
    groups = 1
    for count in (gx, gy, gz)[:len(sizes)]:
        groups *= count
    entry = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
    entry(compiled.entry)(record, 0, groups)
    return (OK,)


_DEFINED = {name for name in dir() if name.startswith("cu")}


def _install() -> None:
    module = types.ModuleType("cuda.bindings.driver")
    for name in dir(real):
        value = getattr(real, name)
        if isinstance(value, type) or not callable(value):  # types and enums; every
            setattr(module, name, value)  # function comes from here: a missing one fails
    for name in _DEFINED:
        setattr(module, name, globals()[name])
    sys.modules["cuda.bindings.driver"] = module
    import cuda.bindings
    cuda.bindings.driver = module
    # The launch needs the kernel's job: hang it on the function handle.
    import backends.cuda.runtime as runtime
    prepare = runtime.CUDABackend.prepare

    def prepare_with_job(self, compiled, argtypes, ndim):
        prepared = prepare(self, compiled, argtypes, ndim)
        prepared.function = Handle(10, name=prepared.name, job=compiled.job)
        return prepared
    runtime.CUDABackend.prepare = prepare_with_job
    runtime.HOST_DRIVER = True


_install()
