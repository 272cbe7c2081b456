"""A pytest plugin standing in for the CUDA driver library (libcuda.so.1) over host
memory, so that the CUDA runtime runs where there is no GPU: allocation, copies in every
direction, views, argument packing, stream and context handling, debug records, errors.

The stand-in sits below cuda-python: `stand_in_libcuda.c`, built here with the C
compiler, is loaded as libcuda.so.1 before cuda-python looks for the driver and hands
cuda-python's bindings the functions defined below (ctypes callbacks with the driver's C
signatures). So every call of the runtime goes through the real `cuda.bindings.driver`
and its conversion of Python values to C arguments, and arrives here as the driver would
see it: raw pointers, sizes, handles and structs.

What it checks as the driver would: cuInit first; a current context for everything but
device queries (per thread, with push and pop); live handles (streams, events, pools,
modules, functions); that copies and memsets stay inside one allocation; launch limits;
that the memory pool's properties are those of a device pool; that a module is a CUDA
cubin (ELF, machine EM_CUDA) or PTX, and holds the kernel asked for. Anything the driver
would refuse is recorded in `problems` and fails the running test, also where the runtime
ignores the result (a free in a finalizer, say).

"Device" memory is host memory; a launch runs the CPU build of the same kernel job on the
same launch record (both backends share `ArgumentLayout`), so results can be checked.

Work is asynchronous as on a GPU, and as late as it may be: copies, memsets, launches and
frees queue on their stream and run only when the host waits for them (a stream
synchronize or query, a copy to host memory) or another stream waits for them through an
event; the legacy default stream and blocking streams wait for each other; a destroyed
stream's work runs later, unordered. So a result read
without the waits the driver needs is stale, and memory freed on one stream while
another, not ordered after it, still has work using it is caught: freed memory is filled
with 0xFF until no queued work is left, and a launch checks that every array it is given
lies in live memory when it runs (an illegal address otherwise, and the context is lost,
as on a GPU).

Races between streams are found whatever order the work happens to run in: each stream,
and the host, keeps a vector clock of how far it knows every stream to have run (events,
stream waits, synchronizes, the legacy stream's rules), and every access to memory (an
allocation or free in stream order, a copy, a memset, a launch's arrays: kk.Const ones
read, the others written) is checked against the recent accesses of other streams to
the same allocation: a conflicting one that is not ordered before it is a problem.

Nothing is proved about the PTX: that is tested on a GPU, where this plugin is not used.

    PYTHONPATH=tests/backends/cuda python -m pytest -p host_driver tests/..."""
from __future__ import annotations

import bisect
import collections
import ctypes
import dataclasses
import hashlib
import math
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import traceback
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
MEMORY = 1 << 34   # what the stand-in GPU has
calls: list = []   # what was asked of the stand-in that tests may look at
problems: list = []   # (function, why) for every call the real driver would refuse

SUCCESS, INVALID_VALUE, OUT_OF_MEMORY, NOT_INITIALIZED = 0, 1, 2, 3
INVALID_DEVICE, INVALID_IMAGE, INVALID_CONTEXT = 101, 200, 201
INVALID_HANDLE, NOT_FOUND, ILLEGAL_ADDRESS, UNKNOWN = 400, 500, 700, 999
LEGACY, PER_THREAD = 1, 2   # CU_STREAM_LEGACY, CU_STREAM_PER_THREAD; NULL is LEGACY
EM_CUDA = 190
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
PRIMARY_CONTEXT = 0x1000


class Refused(Exception):
    """What the driver returns instead of CUDA_SUCCESS; `misuse` when only a wrong call
    gets it (as opposed to out of memory or an unknown device, which a program may ask
    for and must handle)."""

    def __init__(self, result: int, why: str, misuse: bool = True):
        super().__init__(why)
        self.result = result
        self.misuse = misuse


class _Thread(threading.local):
    def __init__(self):
        self.contexts: list[int] = []


_thread = _Thread()
_state = {"initialized": False, "next": 0x10000, "used": 0, "lost": SUCCESS}
_allocations: dict[int, ctypes.Array] = {}
_starts: list[int] = []
_events: dict[int, tuple | None] = {}   # event -> (its stream's queue, position) recorded
_freed: list[ctypes.Array] = []   # freed memory, kept (filled with 0xFF) while work is queued
_lock = threading.RLock()
_pools: dict[int, int] = {}   # pool -> release threshold
_modules: dict[int, bytes] = {}
_functions: dict[int, str] = {}
jobs: dict[int, object] = {}   # function handle -> the kernel's compiler job
coarsening: dict[int, int] = {}   # function handle -> work-groups a block may run
waits: dict[int, bool] = {}   # function handle -> it waits for the previous grid at entry
_callbacks: dict[str, object] = {}
_ERROR_TEXT = ctypes.create_string_buffer(b"an error of the host stand-in for the driver")

VOID_P, U64, SIZE, UINT, INT = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t,
                                ctypes.c_uint, ctypes.c_int)


def driver_function(*argtypes, context: bool = True, initialized: bool = True):
    """Register the decorated function as the driver function of its name, with the C
    argument types `argtypes`: it returns nothing or raises `Refused`."""
    def register(function):
        name = function.__name__

        def call(*args):
            try:
                with _lock:
                    return _call(args)
            except Exception:
                problems.append((name, traceback.format_exc()))
                return UNKNOWN

        def _call(args):
            try:
                if initialized and not _state["initialized"]:
                    raise Refused(NOT_INITIALIZED, "called before cuInit")
                if context and not _thread.contexts:
                    raise Refused(INVALID_CONTEXT, "no context is current to this thread")
                if context and _state["lost"]:
                    raise Refused(_state["lost"], "the context was lost", misuse=False)
                function(*args)
                return _state["lost"] if context else SUCCESS
            except Refused as refused:
                if refused.misuse:
                    problems.append((name, str(refused)))
                return refused.result
            except Exception:
                problems.append((name, traceback.format_exc()))
                return UNKNOWN
        _callbacks[name] = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(call)
        return function
    return register


def _handle() -> int:
    _state["next"] += 16
    return _state["next"]


def _store(pointer, ctype, value) -> None:
    if not pointer:
        raise Refused(INVALID_VALUE, "the result pointer is NULL")
    ctype.from_address(pointer).value = value


def _live(handle, table, what: str) -> int:
    handle = handle or 0
    if handle not in table:
        raise Refused(INVALID_HANDLE, f"{what} {handle:#x} is not a live handle")
    return handle


class _Stream:
    """A stream's queue: operations numbered in the order they were queued."""

    def __init__(self, blocking: bool):
        self.blocking = blocking   # waits for the legacy default stream and it for this
        self.queued = collections.deque()
        self.submitted = 0   # the number of the last operation queued
        self.done = 0   # the number of the last operation run
        self.clock = {self: 0}   # stream -> how far it has run before this one goes on

    def run(self, until: int | None = None) -> None:
        while self.queued and (until is None or self.queued[0][0] <= until):
            number, operation = self.queued.popleft()
            operation()
            self.done = number
        if _freed and not any(stream.queued for stream in [*_streams.values(), *_destroyed]):
            _freed.clear()


_streams: dict[int, _Stream] = {LEGACY: _Stream(blocking=False),
                                PER_THREAD: _Stream(blocking=True)}
_destroyed: list[_Stream] = []   # destroyed streams with work still queued


def _progress() -> None:
    """The device gets on with the work of destroyed streams (no one can wait for it)."""
    while _destroyed:
        _destroyed.pop().run()


def _stream(stream) -> int:
    stream = stream or LEGACY
    return _live(stream, _streams, "stream")


def _waiting_for(stream: _Stream, until: int):
    return lambda: stream.run(until)


_host: dict = {}
"""How far each stream is known to have run when the host queues its next operation (it
waited for them): the vector clock of the host."""


def _merge(clock: dict, other: dict) -> None:
    for stream, position in other.items():
        if clock.get(stream, 0) < position:
            clock[stream] = position


def _host_waited(queue: _Stream) -> None:
    _merge(_host, queue.clock)


def _enqueue(stream, operation, accesses=(), checked: bool = True) -> None:
    """Queue `operation` on `stream` (a handle), after what the legacy default stream and
    blocking streams require of each other. `accesses` are the (pointer, size, write,
    what) of memory it uses: each must lie within an allocation not freed, and be ordered
    after every access of another stream it conflicts with (a race otherwise). When it
    runs, a `checked` operation finds them still allocated or records a problem instead."""
    queue = _streams[_stream(stream)]
    for pointer, size, _, what in accesses:   # refused before anything is queued
        if _inside(pointer, size, what) in _logically_freed:
            raise Refused(INVALID_VALUE, f"{what}: the memory at {pointer:#x} was freed")
    legacy = _streams[LEGACY]
    if queue is legacy:
        waits = [other for other in _streams.values() if other.blocking]
    else:
        waits = [legacy] if queue.blocking else []
    for other in waits:
        _merge(queue.clock, other.clock)
        if other.submitted > other.done:
            _append(queue, _waiting_for(other, other.submitted))
    _merge(queue.clock, _host)
    if checked and accesses:
        operation = _when_live(operation, accesses)
    _append(queue, operation)
    for pointer, size, write, what in accesses:
        _access(queue, pointer, size, write, what)


def _when_live(operation, accesses):
    def run():
        try:
            for pointer, size, _, what in accesses:
                _inside(pointer, size, what)
        except Refused as refused:
            problems.append((what, f"when it ran: {refused}"))
            return
        operation()
    return run


def _append(queue: _Stream, operation) -> None:
    queue.submitted += 1
    queue.clock[queue] = queue.submitted
    queue.queued.append((queue.submitted, operation))


@dataclasses.dataclass
class _Access:
    stream: _Stream
    position: int
    low: int
    high: int
    write: bool
    what: str


_accesses: dict[int, list[_Access]] = {}   # allocation -> its latest accesses
_logically_freed: set[int] = set()   # allocations whose free is queued


def _access(queue: _Stream, pointer: int, size: int, write: bool, what: str) -> None:
    recent = _accesses.setdefault(_inside(pointer, size, what), [])
    for other in recent:
        if (write or other.write) and other.low < pointer + size and pointer < other.high \
                and queue.clock.get(other.stream, 0) < other.position:
            problems.append((what, f"{'writes' if write else 'reads'} memory that {other.what} "
                                   f"{'wrote' if other.write else 'read'} on another stream, "
                                   f"and nothing (an event, a synchronize) orders the two"))
            break
    recent.append(_Access(queue, queue.clock[queue], pointer, pointer + size, write, what))
    if len(recent) > 32:
        del recent[0]


def _run_everything() -> None:
    _progress()
    for stream in list(_streams.values()):
        stream.run()


def _inside(pointer: int, size: int, what: str) -> int:
    """The start of the allocation [pointer, pointer + size) lies within."""
    index = bisect.bisect_right(_starts, pointer) - 1
    if index >= 0:
        start = _starts[index]
        if pointer + size <= start + len(_allocations[start]):
            return start
    raise Refused(INVALID_VALUE, f"{what}: {size} bytes at {pointer:#x} are not inside one "
                                 f"live allocation")


# Initialisation, devices and contexts

@driver_function(UINT, context=False, initialized=False)
def cuInit(flags):
    if flags != 0:
        raise Refused(INVALID_VALUE, "cuInit takes flags 0")
    _state["initialized"] = True


@driver_function(INT, VOID_P, context=False, initialized=False)
def cuGetErrorString(result, text):
    _store(text, VOID_P, ctypes.addressof(_ERROR_TEXT))


@driver_function(VOID_P, context=False)
def cuDeviceGetCount(count):
    _store(count, INT, 1)


@driver_function(VOID_P, INT, context=False)
def cuDeviceGet(device, ordinal):
    if ordinal != 0:
        raise Refused(INVALID_DEVICE, f"no device {ordinal}", misuse=False)
    _store(device, INT, 0)


def _device(device) -> None:
    if device != 0:
        raise Refused(INVALID_DEVICE, f"device {device} was not got from cuDeviceGet")


@driver_function(VOID_P, INT, INT, context=False)
def cuDeviceGetName(name, length, device):
    _device(device)
    text = b"host stand-in for a GPU\0"
    if length < len(text):
        raise Refused(INVALID_VALUE, "the name buffer is too short")
    ctypes.memmove(name, text, len(text))


_ATTRIBUTES = {75: 9, 76: 0, 16: 132, 115: 1}   # compute capability 9.0, 132 SMs, pools


@driver_function(VOID_P, INT, INT, context=False)
def cuDeviceGetAttribute(value, attribute, device):
    _device(device)
    if attribute not in _ATTRIBUTES:
        raise Refused(INVALID_VALUE, f"the stand-in knows no device attribute {attribute}")
    _store(value, INT, _ATTRIBUTES[attribute])


@driver_function(VOID_P, INT, context=False)
def cuDevicePrimaryCtxRetain(context, device):
    _device(device)
    _store(context, VOID_P, PRIMARY_CONTEXT)


def _context(context) -> int:
    if context != PRIMARY_CONTEXT:
        raise Refused(INVALID_CONTEXT, f"{context} is not a context")
    return context


@driver_function(VOID_P, context=False)
def cuCtxSetCurrent(context):
    stack = _thread.contexts
    if not context:
        if stack:
            stack.pop()
        return
    if stack:
        stack[-1] = _context(context)
    else:
        stack.append(_context(context))


@driver_function(VOID_P, context=False)
def cuCtxPushCurrent(context):
    calls.append("push")
    _thread.contexts.append(_context(context))


@driver_function(VOID_P, context=False)
def cuCtxPopCurrent(context):
    calls.append("pop")
    if not _thread.contexts:
        raise Refused(INVALID_CONTEXT, "popped with no context current")
    popped = _thread.contexts.pop()
    if context:
        _store(context, VOID_P, popped)


# Memory

@driver_function(VOID_P, VOID_P)
def cuMemGetInfo(free, total):
    _store(free, SIZE, MEMORY - _state["used"])
    _store(total, SIZE, MEMORY)


def _allocate(result, size: int) -> None:
    if size == 0:
        raise Refused(INVALID_VALUE, "an allocation of 0 bytes")
    if size > MEMORY - _state["used"]:
        raise Refused(OUT_OF_MEMORY, "out of memory", misuse=False)
    buffer = ctypes.create_string_buffer(size)
    pointer = ctypes.addressof(buffer)
    _allocations[pointer] = buffer
    bisect.insort(_starts, pointer)
    _state["used"] += size
    _store(result, U64, pointer)


def _free(pointer) -> None:
    if pointer not in _allocations or pointer in _logically_freed:
        raise Refused(INVALID_VALUE, f"{pointer:#x} is not the start of an allocation")


def _release(pointer) -> None:
    buffer = _allocations.pop(pointer)
    _starts.remove(pointer)
    _logically_freed.discard(pointer)
    _accesses.pop(pointer, None)
    _state["used"] -= len(buffer)
    ctypes.memset(buffer, 0xFF, len(buffer))
    _freed.append(buffer)


@driver_function(VOID_P, SIZE)
def cuMemAlloc(result, size):
    _allocate(result, size)


def _allocate_on(result, size: int, stream) -> None:
    """Stream-ordered: the memory may be used by work ordered after the allocation."""
    _allocate(result, size)
    pointer = U64.from_address(result).value
    _enqueue(stream, lambda: None, [(pointer, size, True, "cuMemAllocAsync")])


@driver_function(VOID_P, SIZE, VOID_P)
def cuMemAllocAsync(result, size, stream):
    _allocate_on(result, size, stream)


@driver_function(VOID_P, SIZE, VOID_P, VOID_P)
def cuMemAllocFromPoolAsync(result, size, pool, stream):
    _live(pool, _pools, "memory pool")
    _allocate_on(result, size, stream)


@driver_function(U64)
def cuMemFree(pointer):
    _free(pointer)
    _run_everything()   # cuMemFree waits for the device
    for queue in _streams.values():
        _host_waited(queue)
    _release(pointer)


@driver_function(U64, VOID_P)
def cuMemFreeAsync(pointer, stream):
    _free(pointer)
    size = len(_allocations[pointer])
    _enqueue(stream, lambda: _release(pointer), [(pointer, size, True, "cuMemFreeAsync")])
    _logically_freed.add(pointer)


class _PoolProperties(ctypes.Structure):   # CUmemPoolProps, as far as the stand-in reads it
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int),
                ("locationType", ctypes.c_int), ("locationId", ctypes.c_int)]


@driver_function(VOID_P, VOID_P)
def cuMemPoolCreate(pool, properties):
    asked = _PoolProperties.from_address(properties)
    if (asked.allocType, asked.locationType, asked.locationId) != (1, 1, 0):
        raise Refused(INVALID_VALUE, f"pool properties: allocation type {asked.allocType}, "
                                     f"location type {asked.locationType} id "
                                     f"{asked.locationId}; a pinned pool on device 0 is 1, 1, 0")
    handle = _handle()
    _pools[handle] = 0
    _store(pool, VOID_P, handle)


@driver_function(VOID_P, INT, VOID_P)
def cuMemPoolSetAttribute(pool, attribute, value):
    _live(pool, _pools, "memory pool")
    if attribute != 4:   # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, a cuuint64_t
        raise Refused(INVALID_VALUE, f"the stand-in knows no pool attribute {attribute}")
    _pools[pool] = U64.from_address(value).value


@driver_function(VOID_P, SIZE)
def cuMemPoolTrimTo(pool, keep):
    _live(pool, _pools, "memory pool")


@driver_function(VOID_P, INT, U64, context=False)
def cuPointerGetAttribute(value, attribute, pointer):
    if attribute != 9:   # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        raise Refused(INVALID_VALUE, f"the stand-in knows no pointer attribute {attribute}")
    try:
        _inside(pointer, 1, "cuPointerGetAttribute")
    except Refused:   # not device memory: the driver says so, without misuse
        raise Refused(INVALID_VALUE, "not a device pointer", misuse=False) from None
    _store(value, INT, 0)


def _set(pointer, value: int, count: int, width: int, stream) -> None:
    what = f"a memset of {count} x {width} bytes"
    if pointer % width:
        raise Refused(INVALID_VALUE, f"{what} at {pointer:#x}, not aligned to {width} bytes")

    def fill():
        memory = (ctypes.c_uint8 * (count * width)).from_address(pointer)
        np.frombuffer(memory, f"u{width}")[:] = value
    _enqueue(stream, fill, [(pointer, count * width, True, what)])


@driver_function(U64, ctypes.c_ubyte, SIZE)
def cuMemsetD8(pointer, value, count):
    _set(pointer, value, count, 1, LEGACY)   # asynchronous for device memory


@driver_function(U64, ctypes.c_ubyte, SIZE, VOID_P)
def cuMemsetD8Async(pointer, value, count, stream):
    _set(pointer, value, count, 1, stream)


@driver_function(U64, ctypes.c_ushort, SIZE, VOID_P)
def cuMemsetD16Async(pointer, value, count, stream):
    _set(pointer, value, count, 2, stream)


@driver_function(U64, UINT, SIZE, VOID_P)
def cuMemsetD32Async(pointer, value, count, stream):
    _set(pointer, value, count, 4, stream)


@driver_function(U64, SIZE, UINT, SIZE, SIZE, VOID_P)
def cuMemsetD2D32Async(pointer, pitch, value, width, height, stream):
    if height > 1 and (pitch < 4 * width or pitch % 4):
        raise Refused(INVALID_VALUE, f"pitch {pitch} for rows of {width} x 4 bytes")
    for row in range(height):
        _set(pointer + row * pitch, value, width, 4, stream)


@driver_function(U64, VOID_P, SIZE, VOID_P)
def cuMemcpyHtoDAsync(destination, source, size, stream):
    """From pageable host memory: the source is staged at once, the copy queued."""
    staged = ctypes.string_at(source, size)
    _enqueue(stream, lambda: ctypes.memmove(destination, staged, size),
             [(destination, size, True, "a copy to the device")])


def _to_host(destination, source, size, stream) -> None:
    """To pageable host memory: returns once the copy has run, so after the stream's work."""
    _enqueue(stream, lambda: ctypes.memmove(destination, source, size),
             [(source, size, False, "a copy from the device")])
    queue = _streams[_stream(stream)]
    queue.run()
    _host_waited(queue)


@driver_function(VOID_P, U64, SIZE, VOID_P)
def cuMemcpyDtoHAsync(destination, source, size, stream):
    _to_host(destination, source, size, stream)


@driver_function(VOID_P, U64, SIZE)
def cuMemcpyDtoH(destination, source, size):
    _to_host(destination, source, size, LEGACY)


@driver_function(U64, U64, SIZE, VOID_P)
def cuMemcpyAsync(destination, source, size, stream):
    _enqueue(stream, lambda: ctypes.memmove(destination, source, size),
             [(source, size, False, "the source of a copy"),
              (destination, size, True, "the destination of a copy")])


# Streams and events

@driver_function(VOID_P, UINT)
def cuStreamCreate(stream, flags):
    if flags not in (0, 1):   # CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING
        raise Refused(INVALID_VALUE, f"stream flags {flags}")
    handle = _handle()
    _streams[handle] = _Stream(blocking=flags == 0)
    _store(stream, VOID_P, handle)


@driver_function(VOID_P)
def cuStreamDestroy(stream):
    """The handle is gone at once; work still queued runs later, unordered with the host
    (it runs whenever the host waits for anything)."""
    handle = _stream(stream)
    if handle in (LEGACY, PER_THREAD):
        raise Refused(INVALID_HANDLE, "the default streams cannot be destroyed")
    _destroyed.append(_streams.pop(handle))


@driver_function(VOID_P)
def cuStreamSynchronize(stream):
    queue = _streams[_stream(stream)]
    _progress()
    queue.run()
    _host_waited(queue)


@driver_function(VOID_P)
def cuStreamQuery(stream):
    queue = _streams[_stream(stream)]
    queue.run()   # the device got on with it: the answer is "done", which the host now knows
    _host_waited(queue)


@driver_function(VOID_P, UINT)
def cuEventCreate(event, flags):
    handle = _handle()
    _events[handle] = None
    _store(event, VOID_P, handle)


@driver_function(VOID_P, VOID_P)
def cuEventRecord(event, stream):
    _live(event, _events, "event")
    handle = _stream(stream)
    _enqueue(handle, lambda: None)   # an action of the stream: the legacy rules apply
    queue = _streams[handle]
    _events[event] = (queue, queue.submitted, dict(queue.clock))
    calls.append(("record", handle))


@driver_function(VOID_P, VOID_P, UINT)
def cuStreamWaitEvent(stream, event, flags):
    _live(event, _events, "event")
    handle = _stream(stream)
    calls.append(("wait", handle))
    if _events[event] is not None:
        producer, position, clock = _events[event]
        waiter = _streams[handle]
        _merge(waiter.clock, clock)
        if producer is not waiter and position > producer.done:
            _append(waiter, _waiting_for(producer, position))


@driver_function(VOID_P)
def cuEventDestroy(event):
    del _events[_live(event, _events, "event")]


# Modules and launches

refuse_cubins = False
"""Set by a test: cubins are refused, as a driver older than the linker refuses them."""


def _image(image: int) -> bytes:
    """A cubin (ELF for machine EM_CUDA, its length from its header) or PTX (to its NUL)."""
    if ctypes.string_at(image, 4) == b"\x7fELF":
        if refuse_cubins:
            raise Refused(INVALID_IMAGE, "cubins are refused (a test asked)", misuse=False)
        header = ctypes.string_at(image, 64)
        if int.from_bytes(header[18:20], "little") != EM_CUDA:
            raise Refused(INVALID_IMAGE, "an ELF image that is not for CUDA")
        section_table = int.from_bytes(header[40:48], "little")
        entry, count = (int.from_bytes(header[58:60], "little"),
                        int.from_bytes(header[60:62], "little"))
        return ctypes.string_at(image, section_table + entry * count)
    text = ctypes.string_at(image)
    if b".version" not in text or b".entry" not in text:
        raise Refused(INVALID_IMAGE, "neither a cubin nor PTX with an .entry")
    return text


@driver_function(VOID_P, VOID_P)
def cuModuleLoadData(module, image):
    handle = _handle()
    _modules[handle] = _image(image)
    _store(module, VOID_P, handle)


@driver_function(VOID_P, VOID_P, ctypes.c_char_p)
def cuModuleGetFunction(function, module, name):
    image = _modules[_live(module, _modules, "module")]
    if name + b"\0" not in image and b".entry " + name + b"(" not in image:
        raise Refused(NOT_FOUND, f"no kernel {name.decode()} in the module")
    handle = _handle()
    _functions[handle] = name.decode()
    _store(function, VOID_P, handle)


@driver_function(VOID_P, INT, VOID_P)
def cuFuncGetAttribute(value, attribute, function):
    _live(function, _functions, "function")
    if attribute != 0:   # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        raise Refused(INVALID_VALUE, f"the stand-in knows no function attribute {attribute}")
    _store(value, INT, 1024)


@driver_function(VOID_P, UINT, UINT, UINT, UINT, UINT, UINT, UINT, VOID_P, VOID_P, VOID_P)
def cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    _launch(function, (gx, gy, gz), (bx, by, bz), shared, stream, params, extra)
    calls.append(("launch", _functions.get(function)))


PROGRAMMATIC_STREAM_SERIALIZATION = 6
LAUNCH_CONFIG = struct.Struct("<7I4xQQI4x")   # CUlaunchConfig
LAUNCH_ATTRIBUTE = struct.Struct("<I4xi60x")   # CUlaunchAttribute, with an int value


@driver_function(VOID_P, VOID_P, VOID_P, VOID_P)
def cuLaunchKernelEx(config, function, params, extra):
    """cuLaunchKernel with a CUlaunchConfig. The one attribute the stand-in knows is
    programmatic stream serialization, and it is given only for a kernel that waits for
    the previous grid at its entry (else that kernel could read memory the previous one
    has not written yet)."""
    if not config:
        raise Refused(INVALID_VALUE, "no launch configuration")
    *sizes, stream, attributes, count = LAUNCH_CONFIG.unpack(
        ctypes.string_at(config, LAUNCH_CONFIG.size))
    if count and not attributes:
        raise Refused(INVALID_VALUE, f"{count} launch attributes and no pointer to them")
    given = {}
    for number in range(count):
        key, value = LAUNCH_ATTRIBUTE.unpack(ctypes.string_at(
            attributes + number * LAUNCH_ATTRIBUTE.size, LAUNCH_ATTRIBUTE.size))
        if key != PROGRAMMATIC_STREAM_SERIALIZATION:
            raise Refused(INVALID_VALUE, f"the stand-in knows no launch attribute {key}")
        given[key] = value
    if given.get(PROGRAMMATIC_STREAM_SERIALIZATION) and function and \
            not waits.get(function, False):
        raise Refused(INVALID_VALUE, f"kernel {_functions.get(function)} is launched to "
                      f"overlap the previous one but does not wait for it")
    _launch(function, tuple(sizes[:3]), tuple(sizes[3:6]), sizes[6], stream, params, extra)
    calls.append(("launch_ex", _functions.get(function), given))


def _launch(function, grid, block, shared, stream, params, extra):
    """Run the CPU build of the kernel's job on the launch record the runtime packed."""
    from kernelkit.backend import make_backend
    from kernelkit.compiler.driver import compile_job
    from kernelkit.compiler.job import CompilerJob
    from kernelkit.runtime.arguments import ArgumentLayout
    from backends.cuda.thread import cuda_shape
    _live(function, _functions, "function")
    _stream(stream)
    if not all(1 <= count <= most for count, most in zip(grid, MAX_GRID)):
        raise Refused(INVALID_VALUE, f"grid {grid} outside the limits {MAX_GRID}")
    if not all(1 <= count <= most for count, most in zip(block, MAX_BLOCK)) \
            or math.prod(block) > 1024:
        raise Refused(INVALID_VALUE, f"block {block} outside the limits")
    if shared or extra or not params:
        raise Refused(INVALID_VALUE, "the launch record goes in kernelParams alone")
    job = jobs[function]
    config = dataclasses.replace(job.config, target=make_backend("cpu").target())
    compiled = compile_job(CompilerJob(job.source, config))
    sizes = job.config.workgroupsize
    folded = cuda_shape(sizes)   # a 4-d work-group's first two axes share z
    assert block[:len(folded)] == tuple(reversed(folded)), "block = work-group, x last"
    layout = ArgumentLayout(compiled.parameter_types, len(sizes))
    record = ctypes.string_at(VOID_P.from_address(params).value, layout.size)  # copied now
    # The work-groups the grid covers. A coarsened kernel (backends/cuda/thread.py)
    # launched with fewer blocks than groups along its first axis (CUDA's last used
    # one) runs `coarsening` groups per block there.
    covered = list(reversed(grid[:len(folded)]))
    (first,) = struct.unpack_from("<q", record, layout.groups_offset(0))
    if covered[0] < first:
        covered[0] = min(covered[0] * coarsening[function], first)
    groups = math.prod(covered)
    name = _functions[function]
    entry = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
    accesses = []
    for access in _array_accesses(name, layout, record):
        try:
            _inside(access[0], access[1], access[3])
            accesses.append(access)
        except Refused:   # a wild pointer: the launch fails as it runs, as on a GPU
            pass

    def run():
        """As on a GPU, a kernel given memory that is not allocated when it runs fails
        with an illegal address, and the context is lost: every later call says so."""
        try:
            _arrays_live(name, layout, record)
        except Refused as refused:
            problems.append((f"cuLaunchKernel({name})", f"when it ran: {refused}"))
            _state["lost"] = ILLEGAL_ADDRESS
            return
        entry(compiled.entry)(record, 0, groups)
    _enqueue(stream, run, accesses, checked=False)   # run() fails as a GPU would


def _arrays_live(name: str, layout, record: bytes) -> None:
    """Every array of the launch record lies within one live allocation."""
    for pointer, size, _, what in _array_accesses(name, layout, record):
        _inside(pointer, size, what)


def _array_accesses(name: str, layout, record: bytes):
    """(pointer, size, write, what) of each array of the launch record: kk.Const arrays
    are read, others may be written."""
    from kernelkit.ir import types as T
    for number, field in enumerate(layout.fields):
        if not isinstance(field.type, T.ArrayType):
            continue
        ndim = field.type.ndim
        pointer, *rest = struct.unpack_from(f"<{1 + 2 * ndim}q", record, field.offset)
        shape, strides = rest[:ndim], rest[ndim:]
        if 0 in shape:
            continue
        if field.type.layout == "C":
            low, high = 0, math.prod(shape) - 1
        else:
            low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
            high = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
        itemsize = field.type.dtype.itemsize
        yield (pointer + low * itemsize, (high - low + 1) * itemsize, not field.type.const,
               f"kernel {name}, array argument {number}")


# Loading

def _build() -> Path:
    """stand_in_libcuda.c built as libcuda.so.1 (once per source text)."""
    source = HERE / "stand_in_libcuda.c"
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        raise RuntimeError("the host stand-in for the driver needs a C compiler: cc, or $CC")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kernelkit-stand-in-libcuda-{digest}"
    library = folder / "libcuda.so.1"
    if not library.exists():
        folder.mkdir(exist_ok=True)
        built = folder / f"libcuda.so.1.{os.getpid()}"
        subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1",
                        "-o", str(built), str(source)], check=True)
        built.replace(library)
    return library


def _install() -> None:
    library = ctypes.CDLL(str(_build()), mode=os.RTLD_GLOBAL)
    for name, callback in _callbacks.items():
        if library.stand_in_register(name.encode(), callback):
            raise RuntimeError("stand_in_libcuda.c: too many functions registered")
    _install.library = library
    # The launch needs the kernel's job: note it under the function handle.
    import backends.cuda.runtime as runtime
    prepare = runtime.CUDABackend.prepare

    def prepare_with_job(self, compiled, argtypes, ndim):
        prepared = prepare(self, compiled, argtypes, ndim)
        jobs[int(prepared.function)] = compiled.job
        coarsening[int(prepared.function)] = prepared.coarsening
        waits[int(prepared.function)] = prepared.compiled.info.get("dependent_launch", False)
        return prepared
    runtime.CUDABackend.prepare = prepare_with_job
    runtime.HOST_DRIVER = True


@pytest.fixture(autouse=True)
def _no_driver_misuse():
    """A test fails when the runtime made a call the real driver would refuse, also one
    whose result it ignores."""
    seen = len(problems)
    yield
    import gc
    gc.collect()   # the frees of the test's arrays
    misuse = problems[seen:]
    assert not misuse, "driver calls the real driver would refuse:\n" + "\n".join(
        f"{name}: {why}" for name, why in misuse)


_install()
