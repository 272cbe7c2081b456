"""Derivatives of Python programs that launch kernels: `autodiff(Reverse, program, ...)`,
`autodiff(Forward, program, ...)` and `gradient(program, argnums=...)`.

A program is plain Python that launches kernelkit kernels (and may allocate arrays and
call other such functions). Its launches are recorded as it runs once
(`kernelkit.lang.kernel.observe_launches`), each differentiated by the launch rule of
`rules.py` with activities inferred from the data flow:

- An array carries derivatives (it has a shadow) when it is a `Duplicated` argument of
  the program, or a float array that a launch writes while any of its arguments carries
  them (its shadow is then a zeroed array of its own). In each launch, an array with a
  shadow is `Duplicated`, every other argument `Const`; an `Active` argument of the
  program is `Active` in each launch it is passed to as it is (arithmetic on it in
  Python is not followed: pass what a kernel needs as arguments of the program).
- Reverse mode runs each recorded launch's augmented forward kernel as the program
  reaches it (its tape is its own), then the launches' reverse kernels in the opposite
  order, each with the shadows as the later launches left them. A reverse kernel reads
  again the arrays its launch read but did not write. Where a later launch overwrites
  such an array, the recording keeps a copy of the array as it was, once per overwrite,
  and the reverse pass puts it back before it reaches the earlier launch (and puts the
  final contents back at the end): an overwrite never turns into a wrong derivative.
- Forward mode runs each launch's forward-mode kernel with the tangents in the shadows.

The derivatives of `Active` scalars are summed over the launches they are passed to."""
from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import weakref
from dataclasses import dataclass, field

import numpy as np

import kernelkit as kk
from kernelkit.errors import KernelkitError
from kernelkit.ir import types as T
from kernelkit.lang.kernel import observe_launches
from kernelkit.memory import WRITE_OBSERVERS

from .activities import Active, Const, Duplicated, Mode, activity_class


class _Traced(float):
    """An `Active` scalar as the program sees it: a float that a launch recognizes."""
    __slots__ = ()


@dataclass
class _Recorded:
    """One launch: its rule's halves, its arguments as activities, its tape."""
    launch: object
    activities: list
    values: tuple              # the arguments as the program passed them
    ndrange: object
    workgroupsize: object
    reverse: object = None
    tape: object = None
    written: frozenset = frozenset()
    restores: list = field(default_factory=list)   # (array, its copy before this launch)
    copy: tuple | None = None  # a kk.copyto: (the destination's shadow, the source's)
    schedule: object = None    # a checkpointed loop (`checkpointing.Schedule`)


def _span(array) -> tuple[int, int] | None:
    from .rules import _memory_range
    return _memory_range(array)


def _overlaps(a, b) -> bool:
    from .rules import _overlap
    return _overlap(a, None if isinstance(a, np.ndarray) else _span(a),
                    b, None if isinstance(b, np.ndarray) else _span(b))


def _is_array(value) -> bool:
    """An array (NumPy scalars have an array interface too, and are numbers)."""
    kind = type(value)
    if kind is np.ndarray:
        return True
    if kind is float or kind is int or kind is bool:
        return False
    return not isinstance(value, np.generic) and (
        hasattr(value, "__array_interface__") or hasattr(value, "__cuda_array_interface__"))


def _holds_floats(array) -> bool:
    return np.issubdtype(np.dtype(array.dtype), np.floating)


class Shadows:
    """The shadows of a recording's arrays, found by the array (its identity), with the
    bytes each spans: an array that is not one of them but shares memory with one is
    found by comparing spans, and only where they meet by NumPy's exact test, so a
    program of many launches and temporaries pays little per lookup."""

    def __init__(self, pairs=()):
        self.known: dict[int, tuple[object, object, tuple | None]] = {}
        for array, shadow in pairs:
            self.add(array, shadow)

    def add(self, array, shadow) -> None:
        self.known.setdefault(id(array), (array, shadow, _span(array)))   # the first stays

    def copy(self) -> Shadows:
        copied = Shadows()
        copied.known = dict(self.known)
        return copied

    def get(self, array):
        """The shadow of `array`, or None where it has none; raises `_SharedMemory`
        where it shares memory with an array that has one without being it. (An array
        is kept here while the recording lives, so its identity is not reused.)"""
        entry = self.known.get(id(array))
        if entry is not None:
            return entry[1]
        span = _span(array)
        for known, _, known_span in self.known.values():
            if span is not None and known_span is not None and not (
                    span[0] < known_span[1] and known_span[0] < span[1]):
                continue    # disjoint bytes (an empty array meets nothing)
            if _overlaps(known, array):
                raise _SharedMemory()
        return None


SKIP_ZEROS = True
"""Whether a program's reverse pass follows which shadows hold zeros (`Zeros`) to skip
the zeroing no launch reads. Without it, every launch's reverse runs as `ReverseSplit`
runs it: the reference the tests compare with, bit for bit."""


class Zeros:
    """What a program's reverse pass knows of its shadows' contents: those that hold
    zeros in memory (new shadows, zeroed ones), and those that are zero in value only,
    their memory holding adjoints already taken (a reverse kernel that left the shadow
    of an array its kernel overwrites whole unzeroed: `transform/outputs.py`). A shadow
    zero in value is zeroed in memory before anything reads it, or stored into whole
    (a gather kernel's `GATHER_STORED` form), and at the end of the pass. Each is known
    by its identity; the recording keeps them alive."""

    def __init__(self, zeros=()):
        self.followed = SKIP_ZEROS
        self.memory = {id(shadow): shadow for shadow in zeros}
        self.value = {}

    def in_memory(self, shadow) -> bool:
        return self.followed and id(shadow) in self.memory

    def in_value(self, shadow) -> bool:
        return self.followed and (id(shadow) in self.memory or id(shadow) in self.value)

    def zero_in_memory(self, shadow) -> None:
        """Zero `shadow` in memory where it is zero in value only."""
        if self.value.pop(id(shadow), None) is not None:
            _elementwise(_zero, shadow)
            self.memory[id(shadow)] = shadow

    def written(self, shadow) -> None:
        """`shadow` may hold anything now."""
        self.memory.pop(id(shadow), None)
        self.value.pop(id(shadow), None)

    def after(self, shadows, in_value, in_memory) -> None:
        """A reverse launch of `shadows` left `in_value` zero in value and `in_memory`
        zero in memory (the rest may hold anything)."""
        for shadow in shadows:
            if shadow is not None:
                self.written(shadow)
        self.value.update((id(shadow), shadow) for shadow in in_value)
        self.memory.update((id(shadow), shadow) for shadow in in_memory)

    def finish(self, dropped=()) -> None:
        """The end of the pass: every shadow zero in value only is zeroed in memory, but
        those `dropped` with the recording (the shadows of its temporaries)."""
        dropped = {id(shadow) for shadow in dropped}
        for shadow in list(self.value.values()):
            if id(shadow) not in dropped:
                self.zero_in_memory(shadow)


class _SharedMemory(Exception):
    """An array that shares memory with one that has a shadow, without being it."""


class Recording:
    """The launches of one run of a program, in order, and the shadows of its arrays."""

    def __init__(self, mode: Mode, program, activities):
        self.mode = mode
        self.program = program
        self.launches: list[_Recorded] = []
        self.shadows = Shadows()
        self.new_shadows: list = []     # those made here, zero until the reverse pass
        self.active: dict[int, float] = {}     # id of a traced scalar -> its tangent
        self.derivatives: dict[int, float] = {}             # id -> summed derivative
        self.readers: list[tuple[object, _Recorded]] = []   # (array, launch) read, not written
        self.pending: _Recorded | None = None        # a checkpointed loop running
        self.checksums: dict[tuple[int, int], bytes] = {}    # debug: (array, launch) -> hash
        self.debug = False     # set by the first launch on a backend in debug mode
        self.arguments = []
        for position, argument in enumerate(activities):
            kind = activity_class(argument) if isinstance(argument, (Const, Active,
                                                                     Duplicated)) else Const
            value = getattr(argument, "value", argument)
            if kind is Active and mode is Mode.FORWARD:
                raise KernelkitError(f"program '{_name(program)}': argument {position} is "
                                     f"Active, which is for reverse mode; in forward mode "
                                     f"pass Duplicated(value, tangent)")
            if kind is Active or (issubclass(kind, Duplicated) and not _is_array(value)):
                traced = _Traced(value)
                self.active[id(traced)] = getattr(argument, "shadow", 0.0)   # its tangent
                self.derivatives[id(traced)] = 0.0
                self.arguments.append(traced)
            elif issubclass(kind, Duplicated):
                self.shadows.add(value, argument.shadow)
                self.arguments.append(value)
            else:
                self.arguments.append(value)

    # -- the shadows --------------------------------------------------------------------

    def shadow_of(self, array):
        try:
            return self.shadows.get(array)
        except _SharedMemory:
            raise KernelkitError(
                f"program '{_name(self.program)}': a launch takes an array that shares "
                f"memory with a differentiated array without being that array (a view "
                f"of it, or one it is a view of); pass the array itself, or a copy") from None

    def add_shadow(self, array):
        shadow = kk.zeros(kk.get_backend(array), array.dtype, np.shape(array))
        self.shadows.add(array, shadow)
        self.new_shadows.append(shadow)
        return shadow

    def seed(self, array, values) -> None:
        """The adjoint of `array`'s final contents, before the reverse pass."""
        shadow = self.shadow_of(array)
        kk.copyto(shadow, values)
        self.new_shadows = [s for s in self.new_shadows if s is not shadow]

    # -- the launches -------------------------------------------------------------------

    def observe(self, launch, args, ndrange, workgroupsize) -> None:
        """A launch of the program: run as the mode needs it, and recorded."""
        from .rules import _activity_of, rule_for
        self.debug = self.debug or bool(getattr(launch.backend, "debug", False))
        arrays, written, floats = _launch_kind(launch, args, ndrange, workgroupsize,
                                               self.program)
        shadows = [self.shadow_of(args[index]) for index in arrays]
        carries = any(shadow is not None for shadow in shadows) or any(
            isinstance(a, _Traced) and id(a) in self.active for a in args)
        activities = [Const(value) for value in args]
        if carries:
            for index, value in enumerate(args):
                if isinstance(value, _Traced) and id(value) in self.active:
                    activities[index] = Active(float(value)) if self.mode is not \
                        Mode.FORWARD else Duplicated(float(value), self.active[id(value)])
        for index, shadow in zip(arrays, shadows):
            if shadow is None and carries and index in floats and index in written:
                shadow = self.add_shadow(args[index])
            if shadow is not None:
                activities[index] = Duplicated(args[index], shadow)
        recorded = _Recorded(launch, activities, tuple(args), ndrange, workgroupsize,
                             written=written)
        self.check_readers(recorded, args)
        self.keep_what_is_overwritten(recorded, args)
        if not any(isinstance(a, (Active, Duplicated)) for a in activities):
            launch.launcher.launch(tuple(args), ndrange, workgroupsize)   # nothing to follow
        elif self.mode is Mode.FORWARD:
            from . import rules
            rules.autodiff(Mode.FORWARD, launch, *activities, ndrange=ndrange,
                           workgroupsize=workgroupsize)
        else:
            rule = rule_for(launch, tuple(map(_activity_of, activities)), None)
            recorded.reverse = rule
            recorded.tape = rule.augmented_forward(activities, ndrange, workgroupsize)
        if self.mode is not Mode.FORWARD:
            self.launches.append(recorded)
        # The arrays whose contents its reverse pass reads: kept where a later launch
        # overwrites them (an array only its adjoint's reverse needs is not).
        reads = recorded.tape.reads if recorded.tape is not None else frozenset()
        for index in arrays:
            value = args[index]
            if index not in written and index in reads:
                self.readers.append((value, recorded))
                if self.debug and self.mode is not Mode.FORWARD:
                    self.checksums[(id(value), id(recorded))] = _checksum(value)

    def host_write(self, destination, source) -> None:
        """`kk.copyto(destination, source)` between the program's launches: an overwrite
        like a launch's (kept for the reverse pass where an earlier launch read the
        array), and a step of the derivative: the destination's derivative is the
        source's where the source carries one (an array of the program's), else 0."""
        shadow = self.shadow_of(destination) if _is_array(destination) else None
        source_shadow = self.shadow_of(source) if _is_array(source) else None
        if self.mode is Mode.FORWARD:
            if shadow is not None:
                kk.copyto(shadow, source_shadow if source_shadow is not None else
                          np.zeros(np.shape(destination), np.dtype(destination.dtype)))
            return
        if shadow is None and source_shadow is not None:
            shadow = self.add_shadow(destination)
        moment = _Recorded(None, [], (destination,), None, None, written=frozenset({0}))
        moment.copy = (shadow, source_shadow)
        self.keep_what_is_overwritten(moment, (destination,))
        self.launches.append(moment)

    def before_checkpointed(self, schedule) -> None:
        """A checkpointed loop is about to run: it overwrites its state arrays, which get
        shadows where anything it takes carries derivatives."""
        arguments = schedule.state + schedule.params
        carries = any(isinstance(a, _Traced) and id(a) in self.active for a in arguments) \
            or any(_is_array(a) and self.shadow_of(a) is not None for a in arguments)
        for array in schedule.state:
            if carries and self.shadow_of(array) is None and _holds_floats(array):
                self.add_shadow(array)
        moment = _Recorded(None, [], arguments, None, None,
                           written=frozenset(range(len(schedule.state))))
        moment.schedule = schedule
        self.keep_what_is_overwritten(moment, arguments)
        self.pending = moment

    def after_checkpointed(self, schedule) -> None:
        moment, self.pending = self.pending, None
        self.launches.append(moment)
        for value in schedule.params:
            if _is_array(value):
                self.readers.append((value, moment))

    def reverse_step(self, step, arguments) -> None:
        """One step of a checkpointed loop, recorded and reversed at once, its state in
        place: the adjoints of its outputs in the shadows become those of its inputs."""
        nested = Recording.__new__(Recording)
        nested.mode, nested.program = Mode.REVERSE, step
        nested.launches, nested.readers, nested.checksums = [], [], {}
        nested.new_shadows = []
        nested.shadows = self.shadows.copy()   # the step's temporaries' shadows stay its own
        nested.active, nested.derivatives = self.active, self.derivatives
        nested.debug, nested.arguments, nested.pending = False, list(arguments), None
        WRITE_OBSERVERS.append(nested.host_write)
        try:
            with observe_launches(nested.observe):
                step(*arguments)
        finally:
            WRITE_OBSERVERS.remove(nested.host_write)
        nested.reverse()

    def check_readers(self, following: _Recorded | None = None, args=()) -> None:
        """In debug mode (`kk.CPU(debug=True)`, KERNELKIT_DEBUG=1): an array a launch read
        must hold what it held then until a launch or `kk.copyto` overwrites it. Host code
        that wrote it in between (a NumPy assignment) would make the reverse pass read the
        new values: an error naming the array's launches, never a wrong derivative."""
        if not self.checksums:
            return
        for value, reader in self.readers:
            if following is not None and not any(value is a for a in args):
                continue
            kept = self.checksums.get((id(value), id(reader)))
            if kept is not None and kept != _checksum(value):
                reader_name = reader.launch.kernel.name
                where = (f"before launch {len(self.launches) + 1} ('"
                         f"{following.launch.kernel.name}')" if following is not None
                         else "before the program returned")
                index = next(i for i, a in enumerate(reader.values) if a is value)
                raise KernelkitError(
                    f"program '{_name(self.program)}': argument {index} of a launch of "
                    f"'{reader_name}' (an array of shape {np.shape(value)}) was changed by "
                    f"code other than a kernel or kk.copyto {where}: the reverse pass would "
                    f"read the new values; change it through a kernel or kk.copyto, or give "
                    f"the launch a copy")

    def keep_what_is_overwritten(self, recorded: _Recorded, args) -> None:
        """Before a launch overwrites an array that an earlier launch read (and did not
        write), a copy of it as it was, which the reverse pass puts back before it
        reaches the earlier launch."""
        if self.mode is Mode.FORWARD:
            return
        for index in recorded.written:
            array = args[index]
            kept = [entry for entry in self.readers if not _overlaps(entry[0], array)]
            if len(kept) == len(self.readers):
                continue
            backend = kk.get_backend(array)
            copy = backend.allocate(array.dtype, np.shape(array))
            backend.copyto(copy, array)
            recorded.restores.append((array, copy))
            self.readers = kept

    # -- reverse ------------------------------------------------------------------------

    def reverse(self) -> None:
        zeros = Zeros(self.new_shadows)
        restored = {}
        for recorded in self.launches:
            for array, _ in recorded.restores:
                if id(array) not in restored:
                    backend = kk.get_backend(array)
                    final = backend.allocate(array.dtype, np.shape(array))
                    backend.copyto(final, array)
                    restored[id(array)] = (array, final)
        for recorded in reversed(self.launches):
            if recorded.copy is not None:
                _reverse_of_copy(*recorded.copy, zeros)
            if recorded.schedule is not None:
                zeros.finish()   # the loop's steps see shadows as they are in memory
                recorded.schedule.reverse(self)
                zeros = Zeros()
            if recorded.reverse is not None:
                derivatives = recorded.reverse.reverse(recorded.activities, recorded.tape,
                                                       recorded.ndrange,
                                                       recorded.workgroupsize,
                                                       zeros if zeros.followed else None)
                for value, derivative in zip(recorded.values, derivatives):
                    if derivative is not None and id(value) in self.derivatives:
                        self.derivatives[id(value)] += derivative
            for array, copy in reversed(recorded.restores):
                kk.get_backend(array).copyto(array, copy)
        zeros.finish(dropped=self.new_shadows)
        for array, final in restored.values():
            kk.get_backend(array).copyto(array, final)


@kk.kernel
def _take_adjoint(source_adjoint, adjoint):
    at = kk.index(kk.Global, kk.NTuple)
    source_adjoint[at] = source_adjoint[at] + adjoint[at]
    adjoint[at] = 0.0


@kk.kernel
def _move_adjoint(source_adjoint, adjoint):
    """`_take_adjoint` into a source adjoint known to be zero, leaving `adjoint` as it
    is (zero in value: `Zeros`)."""
    at = kk.index(kk.Global, kk.NTuple)
    source_adjoint[at] = 0.0 + adjoint[at]


@kk.kernel
def _zero(adjoint):
    at = kk.index(kk.Global, kk.NTuple)
    adjoint[at] = 0.0


def _elementwise(kernel, *arrays) -> None:
    """Launch `kernel` (`_zero`, `_take_adjoint`, `_move_adjoint`) over `arrays` of one
    shape, in place: over their elements in order where each is C-contiguous, else over
    their shape in the backend's work-group shape. A shadow may be a strided view (that
    of a transposed argument), which flattened is a copy in NumPy (the kernel would
    write that) and refused on CUDA."""
    backend = kk.get_backend(arrays[0])
    if all(map(_c_contiguous, arrays)):
        flat = tuple(array.reshape(-1) for array in arrays)
        kernel(backend, 256)(*flat, ndrange=flat[0].shape)
    else:
        kernel(backend)(*arrays, ndrange=np.shape(arrays[0]))


def _c_contiguous(array) -> bool:
    """Whether `array` (NumPy's or a device array, each with byte strides) lies in C
    order without gaps, as NumPy's flag says (an axis of length 1 may have any stride)."""
    expected = np.dtype(array.dtype).itemsize
    for size, stride in zip(reversed(np.shape(array)), reversed(array.strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _reverse_of_copy(shadow, source_shadow, zeros: Zeros) -> None:
    """The reverse of `copyto(destination, source)`: the destination's adjoint goes to
    the source's (where it has one) and is zeroed (its earlier contents did not count).
    Where it is zero (in value) already, nothing changes (a -0.0 in the source's adjoint
    stays -0.0, where adding 0.0 would have made it 0.0); where the source's is zero (in
    memory), the adjoint is moved there, and left zero in value only."""
    if shadow is None or zeros.in_value(shadow):
        return
    if source_shadow is None:
        _elementwise(_zero, shadow)
        zeros.after((), (), (shadow,))
    elif zeros.in_memory(source_shadow):
        _elementwise(_move_adjoint, source_shadow, shadow)
        zeros.after((source_shadow,), (shadow,), ())
    else:
        zeros.zero_in_memory(source_shadow)
        _elementwise(_take_adjoint, source_shadow, shadow)
        zeros.after((source_shadow,), (), (shadow,))


def _checksum(array) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(kk.to_numpy(array)).tobytes(),
                           digest_size=16).digest()


def _launch_kind(launch, args, ndrange, workgroupsize, program) -> tuple:
    """(the positions of a launch's arrays, of those its kernel writes, of those that
    hold floats), the same for every launch of arguments of the same kinds (their
    argument keys) over the same geometry, as a program's loop makes them: kept for
    those. A dataclass that holds arrays is refused."""
    backend = launch.backend
    try:
        key = (ndrange, workgroupsize, tuple(map(backend.argument_key, args)))
        kinds = _LAUNCH_KINDS.setdefault(launch, {})
        found = kinds.get(key)
    except TypeError:   # an ndrange given as a list, say
        key = found = None
    if found is not None:
        return found
    for name, value in zip(launch.kernel.parameters, args):
        if dataclasses.is_dataclass(value) and any(
                _is_array(getattr(value, f.name)) for f in dataclasses.fields(value)):
            raise KernelkitError(
                f"program '{_name(program)}': kernel '{launch.kernel.name}' is given the "
                f"dataclass '{name}', which holds arrays; a recorded program follows "
                f"arrays passed to its launches as arguments of their own\n  hint: pass "
                f"the arrays of '{name}' to the kernel one by one (a single launch "
                f"differentiates the dataclass: autodiff(Reverse, k(backend, wg), "
                f"Duplicated({name}, shadow), ...))")
    arrays = tuple(index for index, value in enumerate(args) if _is_array(value))
    written = written_parameters(launch, args, ndrange, workgroupsize)
    found = (arrays, frozenset(index for index in written if index in arrays),
             frozenset(index for index in arrays if _holds_floats(args[index])))
    if key is not None:
        if len(kinds) >= 16:
            kinds.clear()
        kinds[key] = found
    return found


_LAUNCH_KINDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""`_launch_kind`'s answers, by launch function (a kernel on a backend), then by kinds."""


def written_parameters(launch, args, ndrange, workgroupsize) -> frozenset:
    """The positions of the parameters the kernel stores into or updates atomically,
    from its IR for these arguments' types and the launch's work-group shape (that of
    its ndrange's rank, where the launch gives none)."""
    kernel, backend = launch.kernel, launch.backend
    workgroupsize = launch.launcher.geometry(ndrange, workgroupsize)[1]
    key = (backend, workgroupsize, tuple(map(backend.argument_key, args)))
    cache = kernel.__dict__.setdefault("_written_parameters", {})
    found = cache.get(key)
    if found is None:
        from kernelkit.compiler.driver import target_neutral_module
        from .jobs import compiler_job_from_backend
        from .transform.activity import written_arrays
        job = compiler_job_from_backend(backend, launch, args, workgroupsize=workgroupsize)
        function = target_neutral_module(job).kernel
        written = written_arrays(function)
        # The kernel takes a dataclass or tuple argument as its leaves' parameters.
        owners = [index for index, argtype in enumerate(job.source.argtypes)
                  for _ in T.leaves(argtype)]
        found = cache[key] = frozenset(owners[position]
                                       for position, param in enumerate(function.params)
                                       if param in written)
    return found


def _name(program) -> str:
    return getattr(program, "__name__", type(program).__name__)


def record(mode: Mode, program, activities) -> tuple[Recording, object]:
    """The recording of one run of `program` (in reverse mode, with each launch's
    augmented forward run and taped), and what the program returned."""
    recording = Recording(mode, program, activities)
    WRITE_OBSERVERS.append(recording.host_write)
    try:
        with observe_launches(recording.observe):
            result = program(*recording.arguments)
    finally:
        WRITE_OBSERVERS.remove(recording.host_write)
    recording.check_readers()
    return recording, result


def autodiff_program(mode: Mode, program, *activities):
    """`autodiff(mode, program, *activities)` of a Python program: in reverse mode one
    entry per argument (an Active scalar's derivative, as a float; None for the others),
    the `Duplicated` shadows holding the adjoints of the arrays' initial contents as for a
    launch; in forward mode (), the tangents in the shadows."""
    if mode not in (Mode.FORWARD, Mode.REVERSE):
        raise KernelkitError(f"autodiff of a program takes Forward or Reverse, not {mode!r}")
    recording, _ = record(mode, program, activities)
    if mode is Mode.FORWARD:
        return ()
    recording.reverse()
    return tuple(recording.derivatives.get(id(argument)) if isinstance(argument, _Traced)
                 else None for argument in recording.arguments)


def gradient(program, argnums=0):
    """`grad = gradient(program, argnums=0)`: `grad(*args)` is the gradient of the
    program's result, a one-element float array (a loss), with respect to its arguments
    `argnums` (an int, or a tuple of them), as `jax.grad` gives it: an array (the shape
    and dtype of the argument's) for an array, a float for a number. The program runs
    once forward, then its launches in reverse."""
    single = isinstance(argnums, numbers.Integral)
    positions = (argnums,) if single else tuple(argnums)

    def grad(*args):
        activities, shadows = [], {}
        for position, value in enumerate(args):
            if position not in positions:
                activities.append(Const(value))
            elif _is_array(value):
                shadows[position] = kk.zeros(kk.get_backend(value), value.dtype,
                                             np.shape(value))
                activities.append(Duplicated(value, shadows[position]))
            else:
                activities.append(Active(value))
        recording, loss = record(Mode.REVERSE, program, activities)
        shadow = recording.shadow_of(loss) if _is_array(loss) else None
        if shadow is None or math.prod(np.shape(loss)) != 1:
            raise KernelkitError(
                f"gradient of '{_name(program)}': the program must return a one-element "
                f"float array that its launches compute from the arguments {positions}, "
                f"not {type(loss).__name__}" + (f" of shape {np.shape(loss)}"
                                                if _is_array(loss) else ""))
        backend = kk.get_backend(loss)
        recording.seed(loss, kk.to_backend(backend, np.ones(np.shape(loss),
                                                            np.dtype(loss.dtype))))
        recording.reverse()
        results = [shadows[p] if p in shadows else
                   recording.derivatives[id(recording.arguments[p])] for p in positions]
        return results[0] if single else tuple(results)

    grad.__name__ = f"gradient_of_{_name(program)}"
    return grad


def is_program(launch) -> bool:
    """Whether `autodiff` was given a Python program rather than a launch function."""
    return callable(launch) and not (hasattr(launch, "kernel") and hasattr(launch, "backend"))
