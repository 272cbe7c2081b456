"""The CPU backend: NumPy arrays, and launches spread over worker threads.

Every CPU backend runs on one device, the machine's cores: launches of all of them go
to one queue (`_Device`) and run in the order they were made, across one pool of worker
threads (as many as the backend with the most threads asks for, less one).

Every launch first asks the native policy (`work_sharing`'s `launch`, which keeps each
kernel's measured time per work-group): a short launch on an idle device runs there and
then, on the calling thread or shared natively with the awake workers. What it leaves
is run here, in Python: a kernel's first launches, before its time is measured (a first
launch of few work-items runs its first group on the calling thread, which measures the
kernel, and hands the rest to the threads where they are long), and launches long
enough to be queued. A queued launch's work-groups are split into chunks that the
workers and the thread that synchronizes take in turn (as an OpenMP team does: the
caller is one of the threads), at most the launching backend's `threads` at once; once
the kernel's time is known, the thread that takes a chunk leads the rest of the launch
through the mailbox, where the others join it natively.

A chunk takes at most about `_CHUNK_NS`, so the thread that waits returns to Python
often: Ctrl-C (KeyboardInterrupt) stops a launch or a synchronize within that time (and
a running kernel within microseconds: `interrupts.py`). What was queued is then
abandoned: chunks already running finish, no other starts, and the interrupt says which
kernels did not run to the end."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from kernelkit.analysis.work_groups import NOTE as WORK_GROUPS_OBSERVED
from kernelkit.backend import Backend
from kernelkit.compiler.driver import compile_job
from kernelkit.compiler.job import CompilerConfig, CompilerJob, function_source
from kernelkit.errors import BackendError, LaunchError
from kernelkit.ir import types as T
from kernelkit.runtime.arguments import (ArgumentLayout, data_pointer, device_memory,
                                         element_strides, host_array, in_host_memory,
                                         numpy_argument_key, numpy_argument_type,
                                         launch_frame, packing_function, scalar_slot,
                                         SCALAR_SLOT, unpacking_source,
                                         unsupported_argument)
from kernelkit.runtime.bounds import ERROR_RECORD_FIELDS, out_of_bounds_error
from kernelkit.runtime.geometry import default_workgroupsize, number_of_groups

from . import argument_checks, fault, interrupts
from .fault import running
from .races import RaceDetector, detects_races
from .work_sharing import Mailbox, Ran, State

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
_INLINE_ITEMS = 1 << 14          # a first launch this small starts on the calling thread
_FIRST_LAUNCH_NS = 1_000_000
"""A first launch of at most _INLINE_ITEMS runs its first group on the calling thread,
and its other groups there too unless that group's time says they would take longer than
this."""
# The last chunks of a queued launch handed out in Python (one whose kernel's time is not
# known yet) are 1 / (threads * _SMALLEST_CHUNKS) of it (or take `_SHORTEST_CHUNK_NS`): a
# launch ends when its last chunk does, and the threads that finished theirs wait for it.
_SMALLEST_CHUNKS = 128
_SHORTEST_CHUNK_NS = 10_000
"""But no chunk shorter than this (where the kernel's time is known): handing out a chunk
costs a few microseconds of Python."""
_CHUNK_NS = 20_000_000
"""The longest a chunk should take (estimated from the kernel's earlier runs): the
waiting thread sees a KeyboardInterrupt between two chunks."""
_WAIT_SECONDS = 0.05    # a sleeping thread looks again after this long
_SPIN_NS = 100_000      # how long a waiting thread watches for a retirement
# How long an idle worker watches the mailbox and the queue for new work.
# Launches a program makes in a loop come closer together than that, so the workers
# are there for each (OpenMP's threads spin a few milliseconds by default).
_SERVE_NS = 500_000
_BURST_NS = 1_000_000   # launches that could be led this close together wake the workers
_WAKE_NS = 100_000      # how long the waking thread waits for one to watch
_PYTHON_SCALARS = (float, int, bool)
_LONGEST_ROW = 1024   # the work-items of a regrouped kernel's groups (`CPU.regrouped`)
RACES = "races"   # CPU(debug=RACES), KERNELKIT_DEBUG=races: race detection
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_sched_getcpu = getattr(_libc, "sched_getcpu", None)   # (Linux)


@dataclass
class PreparedKernel:
    """A compiled kernel with what a launch needs to call it."""

    name: str
    function: object          # the ctypes function
    layout: ArgumentLayout
    argtypes: tuple
    pack: object              # (header, args, None) -> the record's fields
    compiled: object
    uses_print: bool
    debug: bool
    description: ctypes.Array  # the kernel's name and file, for the fault handler
    geometry: dict = field(default_factory=dict)  # ndrange -> (header, groups, items)
    # Where the kernel does not observe its work-groups: whether a launch's rows are long
    # -> (the same kernel compiled for the CPU's group shape, that shape)
    # (`CPU.regrouped`); False where it keeps its own shape; None: not asked yet
    regrouped: object = None
    fire: object = None       # its `fast_launcher`, once made; False: it has none
    races: bool = False       # it records its accesses for the race detector (`races.py`)
    # What the native calls take: the kernel's `work_sharing.Key`, and its books (its time
    # per group, its count of led launches) and their address
    key: bytes = field(init=False, repr=False)
    state: State = field(init=False, repr=False)
    state_address: int = field(init=False, default=0)

    def __post_init__(self):
        entry = ctypes.cast(self.function, ctypes.c_void_p).value
        self.key = _device.mailbox.key(entry)
        self.state = State(description=ctypes.addressof(self.description),
                           running=ctypes.addressof(running))
        self.state_address = ctypes.addressof(self.state)

    @property
    def nanoseconds_per_group(self) -> float:
        """Measured on earlier launches; 0: not yet."""
        return self.state.estimate

    @nanoseconds_per_group.setter
    def nanoseconds_per_group(self, nanoseconds: float) -> None:
        self.state.estimate = nanoseconds


def _debug_from_environment() -> bool | str:
    """KERNELKIT_DEBUG as `CPU(debug=...)` takes it: RACES, or whether to check bounds
    (any value but empty or 0)."""
    setting = os.environ.get("KERNELKIT_DEBUG", "").strip().lower()
    return RACES if setting == RACES else setting not in ("", "0")


def default_threads() -> int:
    """KERNELKIT_NUM_THREADS where it is set, else the cores this process may run on (its
    CPU affinity, as `taskset` or a container's limit sets it), else every core."""
    setting = os.environ.get("KERNELKIT_NUM_THREADS", "").strip()
    if setting:
        try:
            threads = int(setting)
        except ValueError:
            threads = 0
        if threads < 1:
            raise BackendError(f"KERNELKIT_NUM_THREADS={setting!r}: give a whole number of "
                               f"threads, 1 or more (or unset it to use every core this "
                               f"process may run on)")
        return threads
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


class CPU(Backend):
    """Kernels on this machine's cores. `threads` defaults to KERNELKIT_NUM_THREADS, else
    the cores this process may run on (`default_threads`).

    `debug` (by default KERNELKIT_DEBUG's value): True (or KERNELKIT_DEBUG=1) checks
    every array access, an access out of bounds raising an IndexError; "races" (or
    KERNELKIT_DEBUG=races) also detects races (`races.py`): two work-items of a launch
    touching one element, at least one writing, neither ordered by a barrier nor both
    atomic, raise a `kk.RaceError` naming both. Race detection costs microseconds per
    access and runs each launch on one thread (`threads` is then 1)."""

    name = "cpu"

    def __init__(self, threads: int | None = None, debug: bool | str | None = None):
        self.threads = max(1, int(threads or default_threads()))
        if debug is None:
            debug = _debug_from_environment()
        elif isinstance(debug, str) and debug != RACES:
            raise BackendError(f"CPU(debug={debug!r}): give True (check every array "
                               f"access), {RACES!r} (check accesses and detect races) or "
                               f"False")
        self.races = debug == RACES
        self.debug = bool(debug)
        if self.races:
            self.threads = 1   # groups one after another, in order (`races.py`)
        self._error: BaseException | None = None   # of a queued launch, until synchronize
        # The compiler and the host's code generator are set up with the backend, not at
        # the first launch: a launch of a kernel found in the disk cache then costs
        # milliseconds.
        from kernelkit.compiler import driver  # noqa: F401
        from .target import CPUTarget
        self._target = CPUTarget.host()
        if self.races:
            self._target = replace(self._target, races=True)
        fault.install()
        interrupts.install()
        _device.mailbox.start()

    def __repr__(self) -> str:
        debug = f", debug={RACES!r}" if self.races else ", debug=True" if self.debug else ""
        return f"CPU(threads={self.threads}{debug})"

    @classmethod
    def target_named(cls, name):
        """For "cpu", the target `CPU()` compiles for (with race detection where
        KERNELKIT_DEBUG=races): an offline replay then gives what a launch compiles."""
        if name != "cpu":
            return None
        from .target import CPUTarget
        return replace(CPUTarget.host(), races=_debug_from_environment() == RACES)

    @classmethod
    def backend_of(cls, array):
        """The default CPU backend for arrays in host memory: NumPy's, and other libraries'
        that say they are there (`in_host_memory`)."""
        if isinstance(array, np.ndarray) or in_host_memory(array):
            from kernelkit.backend import make_backend
            return make_backend("cpu")
        return None

    # -- arrays ---------------------------------------------------------------------------

    def allocate(self, dtype, shape):
        return np.empty(shape, dtype=dtype)

    def zeros(self, dtype, shape):
        return np.zeros(shape, dtype=dtype)

    def ones(self, dtype, shape):
        return np.ones(shape, dtype=dtype)

    def to_backend(self, array):
        if isinstance(array, np.ndarray):
            return array
        from kernelkit.backend import get_backend
        try:
            owner = get_backend(array)   # another backend's array: it copies it here
        except BackendError:
            owner = None
        if owner is not None:
            return owner.to_numpy(array)
        return np.asarray(array)

    def to_numpy(self, array) -> np.ndarray:
        _synchronize_every_cpu_backend()
        view = host_array(array)   # another library's host array: its memory, not a copy
        return np.asarray(array) if view is None else view

    def copyto(self, destination, source) -> None:
        if not isinstance(destination, np.ndarray):
            raise BackendError(f"the CPU backend cannot copy into a {type(destination).__name__}")
        _synchronize_every_cpu_backend()
        if not isinstance(source, np.ndarray):
            from kernelkit.memory import to_numpy
            source = to_numpy(source)
        if not self._copy_in_parallel(destination, source):
            np.copyto(destination, source)

    def _copy_in_parallel(self, destination: np.ndarray, source: np.ndarray) -> bool:
        """Copy a large array into one of its shape and dtype, both contiguous and apart,
        as a launch of this backend's threads, word for word (NumPy copies on one thread:
        a 4 MiB copy took 0.40 ms, shared by two threads 0.20 ms); False, copying
        nothing, where that does not apply. The copy has run when it returns."""
        if destination.nbytes < _PARALLEL_COPY_BYTES or self.threads == 1 or \
                source.dtype != destination.dtype or source.shape != destination.shape or \
                not (destination.flags.c_contiguous and source.flags.c_contiguous and
                     destination.flags.writeable) or \
                np.may_share_memory(destination, source):
            return False
        word = next((size for size in (8, 4, 2, 1) if destination.nbytes % size == 0 and
                     destination.ctypes.data % size == 0 and source.ctypes.data % size == 0))
        words = np.dtype(f"u{word}")
        # (through the launcher: a program being recorded does not see the copy's
        # launch, only the copy, `kk.copyto`)
        _copy_words()(self, _COPY_GROUP).launcher.launch(
            (destination.reshape(-1).view(words), source.reshape(-1).view(words)),
            destination.nbytes // word, None)
        _synchronize_every_cpu_backend()
        return True

    def synchronize(self) -> None:
        """Wait for every queued launch (of every CPU backend: they share the device);
        raise what went wrong in this backend's launches since the last synchronize."""
        if not _device.queue and not _device.printed and self._error is None and \
                not _device.cut_short:
            return   # every launch has run (a queued one leaves the queue when done)
        _device.wait()
        with _device.condition:
            if interrupts.pending() and not _device.queue:
                interrupts.acknowledge()
            error, self._error = self._error, None
            if error is None and _device.cut_short:
                kernels = ", ".join(f"'{name}'" for name in dict.fromkeys(_device.cut_short))
                error = LaunchError(f"an interrupt (Ctrl-C) stopped launches of kernel "
                                    f"{kernels} before they ran to the end; the arrays they "
                                    f"write hold partial results (launch them again for "
                                    f"whole ones)")
            _device.cut_short = []
        if error is not None:
            raise error

    # -- kernels --------------------------------------------------------------------------

    def argument_key(self, value):
        return numpy_argument_key(value)

    def argument_type(self, value, const, name, kernel):
        argtype = numpy_argument_type(value, const, name, kernel)
        if argtype is not None:
            return argtype
        try:
            view = host_array(value)   # another library's array in host memory
        except Exception as error:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is an array in host "
                              f"memory that its library refuses to share: "
                              f"{type(error).__name__}: {error}") from error
        if view is not None:
            return numpy_argument_type(view, const, name, kernel)
        where = device_memory(value)
        if where is not None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is a device array "
                              f"({where}); the CPU backend runs on host memory: "
                              f"{_device_array_advice(value, const, name, kernel)}")
        raise unsupported_argument(value, name, kernel,
                                   "arrays in host memory (NumPy's, or any with DLPack or the "
                                   "array interface), Python or NumPy scalars (bool, int, "
                                   "float), and frozen dataclasses and tuples of scalars",
                                   "np.asarray({name})")

    def default_workgroupsize(self, ndim):
        return default_workgroupsize(ndim, 1024)

    def target(self):
        return self._target

    def compiler_job(self, function, argtypes, *, workgroupsize, opt_level: int = 3, **options):
        config = CompilerConfig(self.target(), kernel=True, workgroupsize=tuple(workgroupsize),
                                opt_level=opt_level, debug=self.debug,
                                params=tuple(sorted(options.items())))
        return CompilerJob(function_source(function, argtypes), config)

    def prepare(self, compiled, argtypes, ndim):
        layout = ArgumentLayout(argtypes, ndim)
        function = compiled.job.source.function
        names = list(compiled.parameters)
        return PreparedKernel(function.__name__, _ENTRY(compiled.entry), layout, argtypes,
                              _packer(argtypes, names), compiled, compiled.uses_print,
                              compiled.job.config.debug,
                              fault.description(function.__name__, function),
                              races=detects_races(compiled.job.config.target))

    def launch(self, prepared: PreparedKernel, args, ndrange, workgroupsize):
        # (Race detection names work-groups as the launch asked for them.)
        if self._may_regroup(prepared):
            regrouped = self.regrouped(prepared, workgroupsize, ndrange)
            if regrouped:
                prepared, workgroupsize = regrouped
                if prepared.fire is None:
                    # (made here, from arguments of the kinds it was compiled for:
                    # `_regrouped_fire` is asked with any)
                    self.fast_launcher(prepared, args)
        geometry = prepared.geometry.get(ndrange)
        if geometry is None:
            geometry = _geometry(prepared, ndrange, workgroupsize)
        header, total, items = geometry
        if total == 0:
            return
        args = _host_views(args)
        error_record = races = None
        if prepared.races:
            races = RaceDetector(prepared.name, prepared.compiled, ndrange, workgroupsize,
                                 prepared.argtypes, args)
            error_record = races.record
        elif prepared.debug:
            error_record = np.zeros(ERROR_RECORD_FIELDS, np.int64)
        if error_record is not None:
            header = (*header[:-1], error_record.ctypes.data)
        packed = prepared.layout.struct.pack(*prepared.pack(header, args, None))
        self.run_groups(prepared, packed, total, items, args, error_record, races)

    def run_groups(self, prepared: PreparedKernel, packed: bytes, total: int, items: int,
                   args, error_record=None, races: RaceDetector | None = None) -> None:
        """Run `total` work-groups (`items` work-items) of `prepared` on its packed record,
        as the native policy says (`work_sharing`), and where it leaves the launch to
        Python, as `_Device.settle` says."""
        device = _device
        if interrupts.pending():
            device.see_interrupt()
        ran = device.mailbox.calls().launch(prepared.key, packed, total,
                                            prepared.state_address, self.threads - 1)
        device.settle(ran, prepared, packed, total, items, args, self, error_record, races)

    def fast_launcher(self, prepared: PreparedKernel, args):
        """`fire(args, n) -> bool` (`Backend.fast_launcher`) where every argument is a NumPy
        array or a scalar (not a struct or tuple: the launcher hands their leaves) and the
        kernel checks no accesses, else None: one generated function that checks the
        arguments' kinds as `argument_key` tells them apart, packs the record with one
        `struct.pack` and runs the launch; where the arrays are those it packed last
        (checked natively, in the call that runs the launch: `_fast_launcher`), it runs
        the same bytes again with this launch's scalars packed in. It knows the
        ndranges, of any rank, `launch` has launched `prepared` over
        (`prepared.geometry`), and for a kernel run regrouped, those of its versions;
        any other goes through `launch` first."""
        if prepared.fire is None:
            prepared.fire = (_regrouped_fire(self, prepared) if self._may_regroup(prepared)
                             else _fast_launcher(self, prepared, args)) or False
        return prepared.fire or None

    def _may_regroup(self, prepared: PreparedKernel) -> bool:
        """Whether `launch` runs `prepared` compiled for another group shape
        (`regrouped`): a multi-dimensional kernel that does not observe its groups,
        whose groups are narrow along the last axis (race detection names work-groups
        as the launch asked for them)."""
        if prepared.regrouped is None:
            workgroupsize = prepared.compiled.job.config.workgroupsize
            preferred = self.default_workgroupsize(len(workgroupsize))
            observed = prepared.compiled.notes.get(WORK_GROUPS_OBSERVED, True)
            prepared.regrouped = False if observed or len(workgroupsize) == 1 or \
                prepared.races or workgroupsize[-1] >= preferred[-1] else {}
        return prepared.regrouped is not False

    def regrouped(self, prepared: PreparedKernel, workgroupsize, ndrange):
        """A multi-dimensional kernel that does not observe its work-groups
        (`kernelkit.analysis.work_groups`) gives the same results with any group shape:
        where its groups are narrow along the last axis (a GPU user's (16, 16)), it runs
        as compiled for a shape of the CPU's, whose long rows make long vector loops:
        one row of `_LONGEST_ROW` work-items where the ndrange's rows are at least that
        long, else the default shape. A group of several rows reads and writes as many
        rows of each array at once, more streams than the prefetchers follow, and where
        each work-item loops over a row of one matrix and a column of another (a naive
        matrix multiply), one row reads the other matrix row by row, a page at a time:
        paired, a 5-point stencil on 4096 x 4096 took 6.95 ms in (4, 256) groups, 5.71 ms
        in (1, 1024); the naive 1024 x 1024 matrix multiply 51-61 ms and 42-47 ms.
        (the prepared kernel, the group shape) or False; `prepared.regrouped` keeps them
        by whether the rows are long."""
        if not self._may_regroup(prepared):
            return False
        versions = prepared.regrouped
        long_rows = ndrange[-1] >= _LONGEST_ROW   # (a launch asks for one or the other)
        regrouped = versions.get(long_rows)
        if regrouped is None:
            preferred = (1,) * (len(workgroupsize) - 1) + (_LONGEST_ROW,) if long_rows \
                else self.default_workgroupsize(len(workgroupsize))
            job = prepared.compiled.job
            compiled = compile_job(replace(job, config=replace(job.config,
                                                               workgroupsize=preferred)))
            # A plugin's transform, made again for that shape, must have made the same
            # choices (a derivative kernel's tape, the updates its gather kernel makes,
            # which the launch reads in the notes of the version it was asked for).
            try:
                same = bool(_plugin_notes(compiled) == _plugin_notes(prepared.compiled))
            except (TypeError, ValueError):   # notes that do not compare (arrays)
                same = False
            regrouped = versions[long_rows] = same and (
                self.prepare(compiled, prepared.argtypes, len(preferred)), preferred)
        return regrouped


def _plugin_notes(compiled) -> dict:
    return {key: value for key, value in compiled.notes.items()
            if key != WORK_GROUPS_OBSERVED}


def _regrouped_fire(backend: CPU, prepared: PreparedKernel):
    """The fast launcher of a kernel that `CPU.launch` runs regrouped (`CPU.regrouped`):
    the fast launcher of the version that runs an ndrange, once a general launch has
    made that version (and its fast launcher, from arguments of its kinds) and launched
    it over that ndrange."""
    versions = prepared.regrouped

    def fire(args, n) -> bool:
        if type(n) is not tuple or not n or type(n[-1]) is not int:
            return False
        version = versions.get(n[-1] >= _LONGEST_ROW)
        if not version:
            return False
        fire = version[0].fire   # (made by `CPU.launch`, which made the version)
        return bool(fire) and fire(args, n)
    return fire


def _fast_launcher(backend: CPU, prepared: PreparedKernel, args):
    """See `CPU.fast_launcher`. It keeps what it packed last (`last`): the ndrange, the
    arrays' fingerprint, the bytes, and the bytes cut where the scalars go (`_spliced`).
    A launch with the same ndrange and the same arrays (the same data address, shape,
    strides unless C-ordered, element type and flags) runs those bytes again with its
    own scalars packed into them: users pass a new time step or coefficient each launch,
    and packing one is tens of nanoseconds. It holds no array.

    Where the object layout is known (`argument_checks`), the native call that runs the
    launch (`launch_if_same`) compares the arrays with the fingerprint first, and where
    they differ, the launcher packs them anew. Else it compares them in Python
    (`_python_fire`)."""
    if prepared.debug:
        return None   # each launch has an error record of its own
    if not all(isinstance(argtype, (T.ArrayType, T.ScalarType)) for argtype in prepared.argtypes):
        return None   # a struct or tuple argument: `launch` packs its leaves
    names = [f"a{index}" for index in range(len(args))]
    device = _device
    calls = device.mailbox.calls()
    namespace = {"ndarray": np.ndarray, "geometry": prepared.geometry, "pointer": data_pointer,
                 "run": backend.run_groups, "prepared": prepared, "backend": backend,
                 "settle": device.settle, "calls": calls,
                 "state": prepared.state_address, "struct": struct, "join": b"".join,
                 "pack": packing_function(prepared.argtypes, names, _array_fields,
                                          {"pointer": data_pointer,
                                           "element_strides": element_strides},
                                          finish=prepared.layout.struct.pack)}
    # `checks` say the arguments are of the kinds this launcher packs; `same`, that the
    # arrays are those it packed last (`kept` in `last`, after `n`, a fingerprint's place
    # and the cut record's), and of those kinds: checked first, without what the equal
    # shape already says (the number of dimensions). `kinds` are what the fingerprint
    # says of each; `scalars`, the scalar arguments and their slots' offsets.
    checks, kept, same, kinds, scalars = [], ["n", "None", "pieces"], ["record[0] == n"], [], []
    for name, value, argtype, slot in zip(names, args, prepared.argtypes,
                                          prepared.layout.fields):
        key = numpy_argument_key(value)
        if isinstance(argtype, T.ArrayType):
            if type(value) is not np.ndarray:
                return None
            dtype, ndim, contiguous, writeable = key
            namespace[f"{name}_dtype"] = dtype
            flags = (f"{name}.dtype is {name}_dtype and ({name}_flags := {name}.flags)"
                     f".c_contiguous is {contiguous} and {name}_flags.writeable is {writeable}")
            checks.append(f"type({name}) is ndarray and {name}.ndim == {ndim} and {flags}")
            fields = [f"pointer({name})", f"{name}.shape"] + \
                ([f"{name}.strides"] if argtype.layout != "C" else [])
            same.append(f"type({name}) is ndarray and " + " and ".join(
                f"record[{len(kept) + index}] == {field}" for index, field in enumerate(fields))
                + f" and {flags}")
            kept += fields
            kinds.append((ndim, contiguous, writeable, argtype.layout != "C"))
        else:
            namespace[f"{name}_key"] = key
            namespace[f"{name}_slot"] = scalar_slot(argtype).pack
            checks.append(f"type({name}) is {name}_key")
            scalars.append((name, slot.offset))
            kinds.append(None)
    scalar_checks = " and ".join(f"type({name}) is {name}_key" for name, _ in scalars)
    same += [scalar_checks] if scalars else []
    splice = _spliced(scalars)
    fingerprint = argument_checks.fingerprint_source(prepared.key, names, kinds) \
        if calls.launch_if_same is not None else None
    if fingerprint is not None:
        source = _native_fire(backend, prepared, names, checks,
                              f"n, {fingerprint}, {splice.cut}", splice, scalar_checks)
    else:
        source = _python_fire(names, checks, ", ".join(kept[:2] + [splice.cut] + kept[3:]),
                              " and ".join(same), splice)
    exec(compile(source, f"<kernelkit launch of {prepared.name}>", "exec"),  # noqa: S102
         namespace)
    return namespace["make"]()


@dataclass(frozen=True)
class _Splice:
    """How a fast launcher packs a launch's scalars into the record it packed last:
    `cut`, an expression of that record (`packed`), is the record cut where the scalars'
    slots are (None where there are none); `packing` the expression that packs the
    scalars into the cut record (`pieces`), None where there are none."""

    cut: str
    packing: str | None


def _spliced(scalars: list[tuple[str, int]]) -> _Splice:
    """The `_Splice` of a launcher's scalar arguments: (name, offset of its slot)."""
    if not scalars:
        return _Splice("None", None)
    bounds = [0] + [bound for _, offset in scalars for bound in (offset, offset + SCALAR_SLOT)]
    cut = "".join(f"packed[{start}:{end}], " for start, end in zip(bounds[::2], bounds[1::2]))
    parts = [part for index, (name, _) in enumerate(scalars)
             for part in (f"pieces[{index}]", f"{name}_slot({name})")]
    return _Splice(f"({cut}packed[{bounds[-1]}:])",
                   f"join(({', '.join(parts)}, pieces[{len(scalars)}]))")


def _packing(names: list[str] | None, checks: list[str], keep: str, indent: str) -> str:
    """Lines of a fast launcher that check the arguments and find the geometry
    (`launch_frame`), then pack the record and keep it (`keep`, a statement that may use
    `packed`, `total` and `items`), returning True where there is nothing to run."""
    return (f"{launch_frame(names, checks, indent)}"
            f"{indent}header, total, items = launch\n"
            f"{indent}if not total:\n"
            f"{indent}    return True\n"
            f"{indent}packed = pack(header, args, None)\n"
            f"{indent}{keep}\n")


def _native_fire(backend: CPU, prepared: PreparedKernel, names: list[str], checks: list[str],
                 kept: str, splice: _Splice, scalar_checks: str) -> str:
    """The source of a fast launcher whose arrays are compared natively, in the call
    that runs the launch (`_fast_launcher`). It keeps the two records packed last,
    `last` and `other`, and where the arrays are not those of `last` it tries `other`
    (`again`): a program that swaps two arrays from launch to launch (a stencil's input
    and output, say) packs each once."""
    scalars = "" if splice.packing is None else (
        f"{unpacking_source(names, '        ')}"
        f"        if not ({scalar_checks}):\n"
        f"            return False\n"
        f"        pieces = record[2]\n"
        f"        packed = {splice.packing}\n")
    done = "" if prepared.uses_print else f"        if ran == {Ran.RAN}:\n            return True\n"

    def attempt(otherwise: str) -> str:
        """Lines that run the launch of `record`, or `otherwise` where the arrays differ
        from its fingerprint."""
        return (f"        packed, total, items = record[3]\n"
                f"{scalars}"
                f"        ran = calls.launch_if_same(args, record[1], packed, total, state, "
                f"{backend.threads - 1})\n"
                f"{done}"
                f"        if ran == {Ran.DIFFERS}:\n"
                f"            {otherwise}\n"
                f"        settle(ran, prepared, packed, total, items, args, backend)\n"
                f"        return True\n")

    keep = f"last, other = ({kept}, (packed, total, items)), previous"
    return (f"def make():\n"
            f"    last = other = (None, None)\n"
            f"    def packed_anew(args, n, previous):\n"
            f"        nonlocal last, other\n"
            f"{_packing(names, checks, keep, '        ')}"
            f"        run(prepared, packed, total, items, args)\n"
            f"        return True\n"
            f"    def again(args, n):\n"
            f"        nonlocal last, other\n"
            f"        first, record = last, other\n"
            f"        if record[0] != n:\n"
            f"            return packed_anew(args, n, first)\n"
            f"        last, other = record, first\n"
            f"{attempt('return packed_anew(args, n, first)')}"
            f"    def fire(args, n):\n"
            f"        record = last   # once: another thread may replace it\n"
            f"        if record[0] != n:\n"
            f"            return again(args, n)\n"
            f"{attempt('return again(args, n)')}"
            f"    return fire\n")


def _python_fire(names: list[str], checks: list[str], kept: str, same: str,
                 splice: _Splice) -> str:
    """The source of a fast launcher whose arrays are compared in Python, `same`
    (`_fast_launcher`), where the object layout is not known: it packs the record
    where they differ and runs the launch as `CPU.run_groups` does."""
    packing = f"            pieces = record[2]\n            packed = {splice.packing}\n" \
        if splice.packing is not None else ""
    return (f"def make():\n"
            f"    last = (None, None)\n"
            f"    def fire(args, n):\n"
            f"        nonlocal last\n"
            f"        record = last   # once: another thread may replace it\n"
            f"{unpacking_source(names, '        ')}"
            f"        if {same}:\n"
            f"            packed, total, items = record[-1]\n"
            f"{packing}"
            f"        else:\n"
            f"{_packing(None, checks, f'last = ({kept}, (packed, total, items))', '            ')}"
            f"        run(prepared, packed, total, items, args)\n"
            f"        return True\n"
            f"    return fire\n")


def _geometry(prepared: PreparedKernel, ndrange, workgroupsize) -> tuple:
    """(record header, work-groups, work-items) of a launch over `ndrange`, kept per
    kernel (the header's error-record address is filled in per launch in debug mode)."""
    groups = number_of_groups(ndrange, workgroupsize)
    total = 1
    for count in groups:
        total *= count
    items = total
    for size in workgroupsize:
        items *= size
    geometry = ((*ndrange, *groups, 0), total, items)
    if len(prepared.geometry) >= 64:
        prepared.geometry.clear()
    prepared.geometry[ndrange] = geometry
    return geometry


def _device_array_advice(value, const: bool, name: str, kernel: str) -> str:
    """What to do with a device array passed to a CPU launch, where that works: launch on
    the backend that owns it, or pass a host copy (and copy results back)."""
    from kernelkit.backend import get_backend
    try:
        owner = get_backend(value)
    except Exception:  # no installed backend reads that memory (or none can start here)
        owner = None
    if owner is None:
        return (f"no installed backend can read that memory; copy it to host memory with the "
                f"library that made it (PyTorch: {name}.cpu(), CuPy: {name}.get()) and pass "
                f"that")
    copy_back = "" if const else \
        f", then copy the kernel's results back with kk.copyto({name}, host)"
    return (f"pass a host copy, host = kk.to_numpy({name}){copy_back}; or launch the kernel "
            f"on the backend that owns it, {kernel}(kk.get_backend({name}), ...)")


def _array_fields(value, argtype, name) -> str:
    """An array's fields in the launch record: a C-ordered array's strides are never read
    (the kernel knows them from the extents), so its extents fill their slots."""
    if argtype.layout == "C":
        return f"(pointer({value}), *{value}.shape, *{value}.shape)"
    return (f"(pointer({value}), *{value}.shape, "
            f"*element_strides({value}.strides, {argtype.dtype.itemsize}))")


def _packer(argtypes, names):
    """The launch's packing function (`packing_function`) for NumPy arrays
    (`_array_fields`): another library's array is packed from its NumPy view
    (`_host_views`)."""
    return packing_function(argtypes, names, _array_fields,
                            {"pointer": data_pointer, "element_strides": element_strides})


def _host_views(args: tuple) -> tuple:
    """`args`, with each array of another library in host memory as its NumPy view: the
    launch keeps the views, and so the memory they show, until it has run (an array
    interface may hand out memory of its own making each time it is asked)."""
    if all(type(arg) is np.ndarray or type(arg) in _PYTHON_SCALARS for arg in args):
        return args
    return tuple(arg if type(arg) is np.ndarray or not in_host_memory(arg)
                 else host_array(arg) for arg in args)


def _chunk_limit(prepared: PreparedKernel) -> int:
    """The most work-groups of `prepared` one chunk may take (about `_CHUNK_NS`); one for
    a kernel not measured yet (its first chunk measures it)."""
    per_group = prepared.state.estimate
    return max(1, int(_CHUNK_NS / per_group)) if per_group else 1


def _check_error(prepared: PreparedKernel, error_record: np.ndarray | None,
                 races: RaceDetector | None) -> BaseException | None:
    """The error a launch's failed check recorded (a race, or an access out of bounds), or
    None."""
    if error_record is None or error_record[0] == 0:
        return None
    if races is not None and races.failed():
        return races.error()
    return out_of_bounds_error(prepared.name, prepared.compiled, error_record)


def _abandoned(interrupt: BaseException, names) -> None:
    """Say on the interrupt which kernels it stopped before they ran to the end."""
    if names:
        kernels = ", ".join(f"'{name}'" for name in dict.fromkeys(names))
        interrupt.add_note(f"kernelkit: interrupted launches of kernel {kernels} were "
                           f"abandoned; the arrays they write hold partial results")


@dataclass
class _Launch:
    prepared: PreparedKernel
    packed: bytes
    groups: int
    args: tuple                # kept alive until the launch has run
    error_record: np.ndarray | None
    backend: CPU               # whose synchronize reports its errors
    threads: int               # at most this many threads run its chunks at once
    first: int = 0             # the first group it runs (the ones before ran already)
    chunk: int = 1
    exception: BaseException | None = None
    races: RaceDetector | None = None   # its race detector, in race mode
    cut_short: bool = False    # it ran while an interrupt stopped kernels (`interrupts`)

    def failed(self) -> bool:
        return self.error_record is not None and self.error_record[0] != 0

    def error(self) -> BaseException | None:
        return _check_error(self.prepared, self.error_record, self.races)


class _Device:
    """The machine's cores, shared by every CPU backend: runs launches in submission
    order, each across worker threads and the thread that waits for them.

    There is no dispatcher: the workers, and a thread in `wait`, take chunks of
    work-groups from the launch at the head of the queue, and whoever finishes its last
    chunk retires it. The waiting thread starts on the work at once, while the workers
    are still waking up. Once a kernel's time is known, the thread that takes a chunk
    takes the rest of the launch (up to `_CHUNK_NS` a thread) and leads it through the
    mailbox (`work_sharing`), where the other threads join it natively: between a
    launch's claims there is no Python, no lock and no GIL (handed out in Python, the
    chunks of a 10M-element saxpy on 2 threads cost it 3-9%). Workers are started as
    launches ask for them, never more than the largest `threads` of a backend less
    one."""

    def __init__(self):
        # `with self.lock` where a KeyboardInterrupt must not leave the lock held:
        # `Condition.__enter__` and `__exit__` are Python code that it can stop between
        # taking the lock and entering the block, or before releasing it.
        self.lock = threading.RLock()
        self.condition = threading.Condition(self.lock)
        self.cut_short: list[str] = []   # kernels of launches an interrupt cut short
        self.queue: deque = deque()
        self.next_group = 0           # the next group of queue[0] to hand out
        self.running = 0              # chunks of queue[0] being run now
        self.printed = False
        self.workers: list[threading.Thread] = []
        # Bumped at every submission and retirement; an idle worker watches it for a
        # while before it goes to sleep (see `work`).
        self.submissions = np.zeros(1, np.int64)
        self.retired = np.zeros(1, np.int64)     # bumped when a launch is done
        self.retired_address = self.retired.ctypes.data
        self.mailbox = Mailbox()
        self.sleeping = 0             # workers waiting for a notification
        self.waiting = 0              # threads in `wait` waiting for one
        self.last_unled = 0           # when a launch that could be led last was not (ns)
        # Workers kept off a leader's core while they watch (`separate`): their native
        # thread id -> the cores they ran on before, given back when they go to sleep.
        self.separated: dict[int, set] = {}

    def settle(self, ran: int, prepared: PreparedKernel, packed: bytes, total: int,
               items: int, args, backend: CPU, error_record=None,
               races: RaceDetector | None = None) -> None:
        """Finish a launch the native policy answered `ran` (a `work_sharing.Ran`) for:
        run what it left (a kernel's first launches; launches too long to run at once,
        queued; one thread's long launches, in chunks), and keep the books of what it
        ran."""
        if ran == Ran.BEHIND:
            # Launches are queued before this one, which the native policy would take:
            # once they have run (this thread helps), it asks again. Queued behind them,
            # this one and every launch after it would be handed out in Python.
            self.wait()
            ran = self.mailbox.calls().launch(prepared.key, packed, total,
                                              prepared.state_address, backend.threads - 1)
        if Ran.RAN <= ran <= Ran.ALONE:
            if prepared.uses_print:
                self.printed = True
            if ran == Ran.LED_BESIDE:
                self.separate()
            elif ran == Ran.ALONE:
                self.unled(backend.threads)
            error = _check_error(prepared, error_record, races)
            if error is not None:
                raise error
            return
        launch = _Launch(prepared, packed, total, args, error_record, backend,
                         backend.threads, races=races)
        if ran == Ran.UNSHARED:
            self.unled(backend.threads)
            self.submit(launch)
            self.wait()   # (this thread is awake and joins in: the launch is short)
            return
        measured = prepared.state.estimate > 0
        if self.queue or not (backend.threads == 1 or total == 1 or
                              not measured and items <= _INLINE_ITEMS):
            self.submit(launch)
        elif measured or total == 1 or backend.threads == 1:
            self.run_inline(prepared, packed, total, error_record, races=races)
        else:
            # A kernel's first launch, few work-items: its first group, run here, says
            # whether the others are worth the other threads (each work-item may loop
            # long).
            self.run_inline(prepared, packed, 1, error_record, races=races)
            if prepared.state.estimate * (total - 1) < _FIRST_LAUNCH_NS:
                self.run_inline(prepared, packed, total, error_record, first=1, races=races)
            else:
                self.submit(replace(launch, first=1))

    def unled(self, threads: int) -> None:
        """A launch that could have been led was not: no worker watched the mailbox.
        Where such launches come in a burst, wake the workers (or start them) for the
        next ones."""
        now = time.monotonic_ns()
        if now - self.last_unled < _BURST_NS:
            self.wake(threads)
        self.last_unled = now

    def submit(self, launch: _Launch) -> None:
        launch.chunk = max(1, launch.groups // (launch.threads * _SMALLEST_CHUNKS))
        per_group = launch.prepared.state.estimate
        if per_group:
            launch.chunk = max(launch.chunk, int(_SHORTEST_CHUNK_NS / per_group))
        with self.condition:
            if not self.queue:
                self.next_group = launch.first
            self.queue.append(launch)
            self.mailbox.words.queued = len(self.queue)
            self.submissions[0] += 1
            if len(self.workers) < launch.threads - 1:
                self.start(launch.threads - 1)
            self.condition.notify_all()

    def separate(self) -> None:
        """Keep the workers off the core the calling thread runs on, on the others they
        may run on (where the system lets a thread choose), until they next go to sleep
        (`work`). Moved off it and let free at once, a worker came back to the leader's
        core within a few launches (in the benchmark suite, most of a case's launches
        ran on one core while the other idled); kept off, the leader is the thread the
        system moves, to the idle core."""
        if not hasattr(os, "sched_setaffinity") or _sched_getcpu is None:
            return
        here = _sched_getcpu()
        for worker in self.workers:
            try:
                allowed = self.separated.get(worker.native_id) or \
                    os.sched_getaffinity(worker.native_id)
                others = allowed - {here}
                if others and others != allowed:
                    os.sched_setaffinity(worker.native_id, others)
                    self.separated[worker.native_id] = allowed
            except OSError:
                pass   # (it ended, or the system refuses)
        self.mailbox.forget_core()


    def wake(self, threads: int) -> None:
        """Wake the sleeping workers, and start those a backend of `threads` asks for that
        were never started (launches too short to be queued start none): they watch the
        mailbox for a while."""
        if self.sleeping or len(self.workers) < threads - 1:
            watching = self.mailbox.words.watching
            with self.lock:
                if len(self.workers) < threads - 1:
                    self.start(threads - 1)
                self.condition.notify_all()
            # A woken worker needs the GIL for a few Python steps before it watches the
            # mailbox without it; between its short native calls this thread would take
            # the GIL back first, and the worker wait for Python's switch interval (5 ms).
            # So this thread waits for it without the GIL, and awake: a thread that
            # sleeps here could be woken on the core the worker now runs on, and the
            self.mailbox.calls().spin(self.mailbox.watching_address, watching, _WAKE_NS)

    def run_inline(self, prepared: PreparedKernel, packed: bytes, groups: int,
                   error_record: np.ndarray | None, first: int = 0,
                   races: RaceDetector | None = None) -> None:
        """Run a launch's groups [first, groups) on the calling thread, now (the queue is
        empty), in chunks of about `_CHUNK_NS`, between which Python sees Ctrl-C."""
        run = self.mailbox.calls().run
        try:
            while first < groups:
                end = min(groups, first + _chunk_limit(prepared))
                run(prepared.key, packed, first, end, prepared.state_address)
                first = end
                if error_record is not None and error_record[0] != 0:
                    break   # a check failed: the launch stops there
        except KeyboardInterrupt as interrupt:
            _abandoned(interrupt, [prepared.name])
            raise
        if prepared.uses_print:
            self.printed = True
        error = _check_error(prepared, error_record, races)
        if error is not None:
            raise error

    def finish(self, launch: _Launch) -> None:
        if launch.prepared.uses_print:
            self.printed = True
        backend = launch.backend
        if backend._error is None:
            if launch.failed():
                backend._error = launch.error()
            elif launch.exception is not None:
                backend._error = launch.exception
        if launch.cut_short or interrupts.pending():
            self.cut_short.append(launch.prepared.name)

    def see_interrupt(self) -> None:
        """An interrupt came that the runtime has not seen (`interrupts`): the queued
        launches may have lost groups to it, and say so when they finish; launches from
        now on run to the end."""
        with self.condition:
            for launch in self.queue:
                launch.cut_short = True
            interrupts.acknowledge()

    def wait(self) -> None:
        """Wait until every queued launch has run; the waiting thread runs chunks too
        (it is awake, the workers may still be waking up). A KeyboardInterrupt meanwhile
        abandons what is queued (`abandon`) and goes on to the caller."""
        try:
            with self.condition:
                while self.queue:
                    if self.run_a_chunk():
                        continue
                    # Another thread runs the last chunk: watch for it to retire the
                    # launch (as idle workers watch for submissions) before sleeping,
                    # and help with a chunk led meanwhile (`run_a_chunk`), back in Python
                    # after each (a KeyboardInterrupt is seen in between).
                    seen = int(self.retired[0])
                    self.condition.release()
                    try:
                        served = self.mailbox.serve(self.retired_address, seen, _SPIN_NS,
                                                    once=True)
                        self.mailbox.forget_core()   # (it is not a worker)
                    finally:
                        self.condition.acquire()
                    if not served and self.queue and int(self.retired[0]) == seen:
                        self.waiting += 1
                        try:
                            self.condition.wait(_WAIT_SECONDS)
                        finally:
                            self.waiting -= 1
                printed, self.printed = self.printed, False
        except KeyboardInterrupt as interrupt:
            self.abandon(interrupt)
            raise
        if printed:
            _libc.fflush(None)

    def abandon(self, interrupt: BaseException) -> None:
        """Drop every queued launch and hand out no more chunks; return once the chunks
        being run have finished, so that nothing writes the launches' arrays after the
        interrupt has reached the caller."""
        with self.condition:
            names = self.cut_short + [launch.prepared.name for launch in self.queue]
            if self.queue:
                while len(self.queue) > 1:
                    self.queue.pop()
                head = self.queue[0]
                self.next_group = head.groups
                if self.running == 0:
                    self.retire(head)
            while self.queue:
                self.condition.wait(_WAIT_SECONDS)
            self.cut_short = []        # (named on the interrupt)
            interrupts.acknowledge()   # (nothing runs now)
        _abandoned(interrupt, names)

    def start(self, workers: int) -> None:
        for number in range(len(self.workers), workers):
            worker = threading.Thread(target=self.work, name=f"kernelkit-cpu-{number}",
                                      daemon=True)
            worker.start()
            self.workers.append(worker)

    def work(self) -> None:
        """Run chunks; when there are none, serve the mailbox and watch for the next
        submission for about `_SERVE_NS` in native code (without the GIL, without
        sleeping: launches that follow each other start on every thread at once), then
        sleep until notified."""
        word = self.submissions.ctypes.data
        self.mailbox.calls()   # (compiled before the lock is taken)
        with self.condition:
            while True:
                if self.run_a_chunk():
                    continue
                seen = int(self.submissions[0])
                self.condition.release()
                try:
                    self.mailbox.serve(word, seen, _SERVE_NS)
                finally:
                    self.condition.acquire()
                if int(self.submissions[0]) == seen:
                    allowed = self.separated.pop(threading.get_native_id(), None)
                    if allowed is not None:   # free to run anywhere again (`separate`)
                        try:
                            os.sched_setaffinity(0, allowed)
                        except OSError:
                            pass
                    self.sleeping += 1
                    self.condition.wait()
                    self.sleeping -= 1

    def run_a_chunk(self) -> bool:
        """Run the next chunk of the launch at the head of the queue, if there is one and
        the launch's thread count allows another (called holding the condition's lock,
        which is released while the chunk runs); the thread that finishes a launch's
        last chunk retires it."""
        launch = self.queue[0] if self.queue else None
        if launch is None or self.next_group >= launch.groups or launch.failed() or \
                self.running >= launch.threads:
            return False
        first = self.next_group
        prepared = launch.prepared
        limit = _chunk_limit(prepared)
        shared = launch.threads > 1 and prepared.state.estimate > 0 and launch.groups < 2**31
        if shared:
            # The rest of the launch, up to `_CHUNK_NS` on each thread, led by this one:
            # the others join it natively (`Mailbox.serve`).
            end = min(first + limit * launch.threads, launch.groups)
        else:
            # Guided: a share of what is left, so that the first chunks are large (few
            # hand-offs) and the last ones small (the threads finish together); never
            # longer than `_CHUNK_NS`.
            share = (launch.groups - first) // (2 * launch.threads)
            end = min(first + min(max(launch.chunk, share), limit), launch.groups)
        self.next_group = end
        self.running += 1
        self.condition.release()
        try:
            calls = self.mailbox.calls()
            # (a led chunk returns -1 where another thread leads: it runs here then)
            if not (shared and calls.share(prepared.key, launch.packed, first, end,
                                           prepared.state_address, launch.threads - 1) >= 0):
                calls.run(prepared.key, launch.packed, first, end, prepared.state_address)
        except Exception as error:  # reported on synchronize, never lost
            launch.exception = error
        finally:  # also when a KeyboardInterrupt reaches the waiting thread here
            self.condition.acquire()
            self.running -= 1
            exhausted = self.next_group >= launch.groups or launch.failed()
            if exhausted and self.running == 0 and self.queue and self.queue[0] is launch:
                self.retire(launch)
        return True

    def retire(self, launch: _Launch) -> None:
        """The head launch is done (called holding the lock): the next one starts."""
        self.finish(launch)
        self.queue.popleft()
        self.mailbox.words.queued = len(self.queue)
        self.next_group = self.queue[0].first if self.queue else 0
        self.retired[0] += 1
        if self.queue:
            self.submissions[0] += 1   # idle workers look at the new head
        self.condition.notify_all()


_device = _Device()


_PARALLEL_COPY_BYTES = 1 << 20
"""`CPU.copyto` copies arrays at least this large with its threads (below, a launch costs
more than it saves)."""
_COPY_GROUP = 1024


@functools.lru_cache(maxsize=1)
def _copy_words():
    """The kernel `CPU.copyto` copies with: one word per work-item."""
    import kernelkit as kk

    @kk.kernel
    def copy_words(destination, source: kk.Const):
        i = kk.index(kk.Global)
        destination[i] = source[i]
    return copy_words


def _synchronize_every_cpu_backend() -> None:
    """A NumPy array does not say which CPU backend last wrote it: wait for the device."""
    _device.wait()
