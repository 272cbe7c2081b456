"""The generic launch rules: forward mode, and reverse mode in one kernel or split in
two, for every backend alike.

`job = compiler_job_from_backend(backend, fn, argtypes)` gives the parent job; the
derivative kernels are that job with the AD plugin's transform (`jobs.derivative_job`),
compiled by kernelkit's driver and launched through the backend's own `prepare` and
`launch`, with the same ndrange and work-group size as the primal. Reverse mode runs
the combined kernel (`transform/combined.py`) where the tape has a constant size;
elsewhere, and always for `ReverseSplit`, it allocates the tape from `tape_type`'s record
on the backend, launches the augmented forward kernel, then the reverse kernel. Then it
sums each `Active` scalar's per-work-item partials on the backend (`reduce.py`). Nothing
here asks which backend it has."""
from __future__ import annotations

import logging
import math
import numbers
import weakref

import numpy as np

from kernelkit.compiler.driver import compile_job
from kernelkit.errors import CompileError, KernelkitError, LaunchError
from kernelkit.ir import types as T
from kernelkit.lang.kernel import Launcher
from kernelkit.logs import get_logger

from .activities import (Activity, Active, Const, Duplicated, Mode, activity_class)
from .device import translate_call
from .jobs import compiler_job_from_backend, derivative_job
from .program import autodiff_program, is_program
from .reduce import deterministic_sum
from .signature import AUGMENTED, COMBINED, FORWARD, GATHER, REVERSE, derivative_parameters
from .tape import DEFAULT_MAX_ITERATIONS, Tape, tape_layout
from .transform.plugin import WRITTEN, ADPlugin


def autodiff(mode: Mode, launch, *args, ndrange=None, workgroupsize=None,
             max_iterations: int | None = None):
    """Differentiate one launch of `launch` (`k(backend, workgroupsize)`).

    Reverse: runs the primal (augmented) and the reverse pass; returns one entry per
    argument: the derivative of each `Active` scalar as a Python float, None for the
    others. Each `Duplicated` shadow holds the adjoint of the array's final contents on
    entry, and of its initial contents afterwards. Forward: the shadows of `Duplicated`
    arguments carry tangents in, and those of written arrays receive the output
    tangents; returns ().

    Inside a kernel, `autodiff(Reverse, f, Active(x), Const(c))` gives the tuple of the
    device function f's derivatives (0 for Const arguments) and `autodiff(Forward, f,
    Duplicated(x, dx))` the tangent of its result."""
    if is_program(launch):
        return autodiff_program(mode, launch, *args)
    if mode is Mode.FORWARD:
        rule_for(launch, tuple(map(_activity_of, args)), max_iterations).forward(
            args, ndrange, workgroupsize)
        return ()
    if mode is not Mode.REVERSE:
        raise KernelkitError(f"autodiff takes Forward or Reverse; for {mode!r} use "
                             f"autodiff_thunk")
    derivatives = rule_for(launch, tuple(map(_activity_of, args)), max_iterations).combined(
        args, ndrange, workgroupsize)
    if derivatives is not None:
        return derivatives
    forward, reverse = autodiff_thunk(Mode.REVERSE_SPLIT, launch, *map(_activity_of, args),
                                      max_iterations=max_iterations)
    tape = forward(*args, ndrange=ndrange, workgroupsize=workgroupsize)
    return reverse(*args, tape=tape, ndrange=ndrange, workgroupsize=workgroupsize)


# Called inside a kernel, `autodiff` differentiates a device function (`device.py`).
autodiff.__kernelkit_call__ = translate_call


def autodiff_thunk(mode: Mode, launch, *activities, max_iterations: int | None = None):
    """`forward, reverse = autodiff_thunk(ReverseSplit, k(backend, wg), Duplicated, Active,
    Const)`: `tape = forward(*args, ndrange=...)` runs the augmented primal and returns the
    tape; `reverse(*args, tape=tape, ndrange=...)` runs the reverse pass and returns what
    `autodiff(Reverse, ...)` does."""
    if mode is not Mode.REVERSE_SPLIT:
        raise KernelkitError(f"autodiff_thunk takes ReverseSplit, not {mode!r}")
    rule = rule_for(launch, tuple(map(activity_class, activities)), max_iterations)

    def forward(*args, ndrange=None, workgroupsize=None) -> Tape:
        return rule.augmented_forward(args, ndrange, workgroupsize)

    def reverse(*args, tape: Tape, ndrange=None, workgroupsize=None):
        return rule.reverse(args, tape, ndrange, workgroupsize)

    name = rule.kernel.name
    forward.__name__, reverse.__name__ = f"{name}_augmented_forward", f"{name}_reverse"
    return forward, reverse


_rules: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
logger = get_logger("autodiff")


def rule_for(launch, activities: tuple, max_iterations: int) -> Rule:
    """The rule of a launch function and activities, kept with the launch function (which
    `k(backend, wg)` gives again for the same arguments), so that a loop calling
    `autodiff` prepares its derivative kernels once."""
    try:
        rules = _rules.setdefault(launch, {})
    except TypeError:   # not a launch function: Rule says what to pass
        return Rule(launch, activities, max_iterations)
    key = (activities, max_iterations)
    rule = rules.get(key)
    if rule is None:
        rule = rules[key] = Rule(launch, activities, max_iterations)
    return rule


class TwoKernelsNeeded(Exception):
    """The tape of this launch's reverse grows with a loop: no combined kernel."""


def _activity_of(argument) -> type[Activity]:
    return activity_class(argument) if isinstance(argument, Activity) else Const


class Rule:
    """A kernel on a backend with one activity per argument: its derivative launches."""

    def __init__(self, launch, activities: tuple, max_iterations: int):
        kernel = getattr(launch, "kernel", None)
        if kernel is None or not hasattr(launch, "backend"):
            raise KernelkitError(f"autodiff differentiates a kernel launch: pass "
                                 f"k(backend, workgroupsize), not {launch!r}")
        self.kernel, self.backend = kernel, launch.backend
        self.launcher = Launcher(kernel, launch.backend, launch.workgroupsize, launch.ndrange)
        if len(activities) != len(kernel.parameters):
            raise LaunchError(f"kernel '{kernel.name}' takes {len(kernel.parameters)} "
                              f"arguments ({', '.join(kernel.parameters)}) but "
                              f"{len(activities)} activities were given")
        self.activities = activities
        self.names = tuple(a.name for a in activities)
        self.max_iterations = max_iterations
        self._prepared: dict = {}

    # -- arguments -----------------------------------------------------------------------

    def unwrap(self, args, mode: str):
        """(primal values, shadows) of the annotated arguments, checked against the
        activities (whether they share memory is checked once the derivative kernels
        say which arguments the kernel writes: `refuse_shared_memory`)."""
        kernel = self.kernel
        if len(args) != len(self.activities):
            raise LaunchError(f"kernel '{kernel.name}' takes {len(self.activities)} "
                              f"arguments but {len(args)} were given")
        values, shadows = [], []
        for argument, activity, name in zip(args, self.activities, kernel.parameters):
            given = _activity_of(argument)
            if given is not activity:
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' was declared "
                                  f"{activity.__name__} but given as {given.__name__}")
            value = argument.value if isinstance(argument, Activity) else argument
            shadow = getattr(argument, "shadow", None)
            scalar = isinstance(value, (numbers.Number, np.generic))
            if activity is Active and mode == FORWARD:
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is Active, "
                                  f"which is for reverse mode; in forward mode pass "
                                  f"Duplicated({name}, tangent)")
            if activity is Active and not scalar:
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is Active, "
                                  f"which is for scalars; pass an array as "
                                  f"Duplicated({name}, shadow)")
            if activity is Active and not np.issubdtype(type(value), np.floating) and \
                    not isinstance(value, float):
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is "
                                  f"Active({value!r}), an integer, which has no derivative: "
                                  f"pass a float (Active({float(value)!r}))")
            if issubclass(activity, Duplicated):
                if scalar and mode != FORWARD:
                    raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is a "
                                      f"Duplicated scalar, which is for forward mode; in "
                                      f"reverse mode pass Active({name})")
                if not _holds_floats(value):
                    what = f"the number {value!r}" if scalar else f"an array of {value.dtype}"
                    raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is "
                                      f"{activity.__name__}, but it is {what}, and only "
                                      f"floats have derivatives: pass it as Const({name})")
                if shadow is value:
                    raise LaunchError(f"kernel '{kernel.name}': the shadow of '{name}' is "
                                      f"'{name}' itself; give it an array of its own "
                                      f"(kk.zeros_like-style: same shape and dtype)")
                if not scalar and (np.shape(shadow) != np.shape(value) or
                                   getattr(shadow, "dtype", None) != value.dtype):
                    raise LaunchError(
                        f"kernel '{kernel.name}': the shadow of '{name}' must have its shape "
                        f"{np.shape(value)} and dtype {value.dtype}, not "
                        f"{np.shape(shadow)} and {getattr(shadow, 'dtype', type(shadow))}")
            values.append(value)
            shadows.append(shadow)
        return values, shadows

    def refuse_shared_memory(self, values, shadows, written: tuple[int, ...]) -> None:
        """Arguments whose memory overlaps, where one is written: by the kernel (`written`,
        the positions of the parameters it stores into or updates atomically, whatever
        their activity) or, being a shadow, by the derivative kernels. The transform
        takes each argument for memory of its own, so a value read through one and
        overwritten through the other would not be taped (a silently wrong derivative).
        Arrays that are only read may share memory."""
        arrays = []     # (label, array, why it is written or None, bytes spanned or None)
        for index, (value, shadow, name) in enumerate(zip(values, shadows,
                                                          self.kernel.parameters)):
            writer = f"the kernel writes '{name}'" if index in written else None
            for label, array, why in ((f"'{name}'", value, writer),
                                      (f"the shadow of '{name}'", shadow,
                                       f"the shadow of '{name}' receives derivatives")):
                span = None if isinstance(array, np.ndarray) else _memory_range(array)
                if span is not None or isinstance(array, np.ndarray):
                    arrays.append((label, array, why, span))
        for position, (first, a, why_a, span_a) in enumerate(arrays):
            for second, b, why_b, span_b in arrays[position + 1:]:
                if (why_a or why_b) and _overlap(a, span_a, b, span_b):
                    raise LaunchError(
                        f"kernel '{self.kernel.name}': {first} and {second} share memory, "
                        f"and {why_a or why_b}: what is read through one would be "
                        f"overwritten through the other, which the derivative does not "
                        f"see; pass arrays of their own (a copy of one of them)")

    def derivatives(self, modes: tuple[str, ...], values, shadows, ndrange, workgroupsize):
        """The derivative kernels of `modes`, compiled in that order, each as (prepared
        kernel, its parameters, the compiled kernel); and the launch geometry."""
        backend = self.backend
        ndrange, workgroupsize = self.launcher.geometry(ndrange, workgroupsize)
        # The backend's cheap argument keys, as a launch's: equal keys, equal types.
        argument_key = backend.argument_key
        key = (tuple(map(argument_key, values)),
               tuple(None if shadow is None else argument_key(shadow) for shadow in shadows),
               workgroupsize, len(ndrange))
        entries = []
        for mode in modes:
            entry = self._prepared.get((mode, key))
            if entry is None:
                try:
                    entry = self.prepare(mode, values, shadows, ndrange, workgroupsize)
                except TwoKernelsNeeded as error:
                    entry = error
                self._prepared[(mode, key)] = entry
            if isinstance(entry, TwoKernelsNeeded):
                raise entry
            entries.append(entry)
        return entries, ndrange, workgroupsize

    def prepare(self, mode: str, values, shadows, ndrange, workgroupsize):
        backend, kernel = self.backend, self.kernel
        argtypes = kernel.argument_types(backend, tuple(values))
        for name, argtype in zip(kernel.parameters, argtypes):
            if isinstance(argtype, (T.StructType, T.TupleType)):
                kind = "dataclass" if isinstance(argtype, T.StructType) else "tuple"
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' is a {kind}; "
                                  f"autodiff does not take {kind} arguments yet: pass its "
                                  f"numbers as arguments of their own (Const, or Active to "
                                  f"differentiate them)")
        shadow_types = tuple(
            None if shadow is None else
            backend.argument_type(shadow, False, f"d_{name}", kernel.name)
            for shadow, name in zip(shadows, kernel.parameters))
        parent = compiler_job_from_backend(backend, kernel.function, argtypes,
                                           workgroupsize=workgroupsize)
        if mode == COMBINED and not tape_layout(derivative_job(
                parent, AUGMENTED, self.names, shadow_types)).combined:
            raise TwoKernelsNeeded(kernel.name)
        job = derivative_job(parent, mode, self.names, shadow_types)
        compiled = _compile(job, kernel.name)
        if mode in (COMBINED, AUGMENTED) and logger.isEnabledFor(logging.INFO):
            self.log_tape(mode, compiled.notes[ADPlugin.name], values)
        parameters = derivative_parameters(mode, list(self.names), list(kernel.parameters),
                                           list(argtypes), list(shadow_types))
        assert compiled.parameter_types == tuple(p.type for p in parameters)
        prepared = backend.prepare(compiled, compiled.parameter_types, len(ndrange))
        return prepared, parameters, compiled

    def log_tape(self, mode: str, layout, values) -> None:
        if mode == COMBINED:    # in private memory: registers, where the slots are few
            floats, integers = layout.constant_slots()
            how, size = "in one kernel, with a private tape of", 8 * (floats + integers)
        else:                   # in global memory, with the counts
            floats, integers = layout.slots(values, self.max_iterations or
                                            DEFAULT_MAX_ITERATIONS)
            how, size = "in two kernels, with a tape of", 8 * (floats + integers + 2)
        unknown = layout.unknown_loops() if mode != COMBINED else []
        logger.info("kernel '%s': reverse mode %s %d float and %d integer slots, %d bytes "
                    "per work-item%s", self.kernel.name, how, floats, integers, size,
                    f" (loops at lines {', '.join(str(loop.line) for loop in unknown)} "
                    f"counted at launch)" if unknown else "")

    # -- the launches ----------------------------------------------------------------------

    def forward(self, args, ndrange, workgroupsize) -> None:
        values, shadows = self.unwrap(args, FORWARD)
        [(prepared, parameters, compiled)], ndrange, workgroupsize = self.derivatives(
            (FORWARD,), values, shadows, ndrange, workgroupsize)
        self.refuse_shared_memory(values, shadows, compiled.notes[WRITTEN])
        arguments = [values[p.index] if p.role == "primal" else shadows[p.index]
                     for p in parameters]
        self.backend.launch(prepared, tuple(arguments), ndrange, workgroupsize)

    def combined(self, args, ndrange, workgroupsize):
        """`autodiff(Reverse, ...)` as one launch of the combined kernel (the augmented
        primal, then its reverse, in each work-item, with a private tape), after the gather
        kernel if there is one, where the tape has a constant size; None where it grows
        with a loop (the caller runs the two halves, `ReverseSplit`'s)."""
        values, shadows = self.unwrap(args, REVERSE)
        try:
            [(prepared, parameters, compiled)], ndrange, workgroupsize = self.derivatives(
                (COMBINED,), values, shadows, ndrange, workgroupsize)
        except TwoKernelsNeeded:
            return None
        self.refuse_shared_memory(values, shadows, compiled.notes[WRITTEN])
        gather = None
        if compiled.notes[ADPlugin.name].gather:   # neighbours' updates, before it
            [gather], _, _ = self.derivatives((GATHER,), values, shadows, ndrange,
                                              workgroupsize)
        return self.launch_reverse((prepared, parameters), values, shadows, None, ndrange,
                                   workgroupsize, gather)

    def augmented_forward(self, args, ndrange, workgroupsize) -> Tape:
        values, shadows = self.unwrap(args, AUGMENTED)
        # The reverse kernel is compiled first: an error in it must come before the primal
        # arrays are overwritten.
        (reverse, (prepared, parameters, compiled)), ndrange, workgroupsize = \
            self.derivatives((REVERSE, AUGMENTED), values, shadows, ndrange, workgroupsize)
        self.refuse_shared_memory(values, shadows, compiled.notes[WRITTEN])
        if reverse[2].notes[ADPlugin.name].gather:
            self.derivatives((GATHER,), values, shadows, ndrange, workgroupsize)
        layout = compiled.notes[ADPlugin.name]
        items = math.prod(ndrange)
        geometry = (ndrange, workgroupsize)
        if self.max_iterations is None and layout.unknown_loops() and items:
            slots = self.measure_slots(prepared, parameters, compiled.notes[WRITTEN], values,
                                       items, geometry)
        else:
            slots = layout.slots(values, self.max_iterations or DEFAULT_MAX_ITERATIONS)
        tape = Tape.for_launch(self.backend, slots, items, geometry, self.kernel.name)
        tape.owner = (self, compiled.job)
        arguments = [values[p.index] if p.role == "primal" else tape.arrays[p.field]
                     for p in parameters]
        self.backend.launch(prepared, tuple(arguments), ndrange, workgroupsize)
        if layout.loops and items and any(slots):
            self.check_capacity(tape, layout, slots)
        return tape

    def measure_slots(self, prepared, parameters, written, values, items, geometry
                      ) -> tuple[int, int]:
        """The slots a launch needs when its loops' trip counts depend on data: the
        augmented kernel run once on copies of the arrays it writes, with a tape of one
        slot that it overwrites, counting (`max_iterations=None`, the default)."""
        backend = self.backend
        copies = {}
        for index in written:
            original = values[index]
            copies[index] = backend.allocate(original.dtype, np.shape(original))
            backend.copyto(copies[index], original)
        scratch = Tape.for_launch(backend, (1, 1), items, geometry, self.kernel.name)
        arguments = [copies.get(p.index, values[p.index]) if p.role == "primal"
                     else scratch.arrays[p.field] for p in parameters]
        backend.launch(prepared, tuple(arguments), *geometry)
        counts = backend.to_numpy(scratch.arrays["tape_counts"])
        return tuple(int(n) for n in counts.max(axis=1))

    def check_capacity(self, tape: Tape, layout, capacity) -> None:
        counts = self.backend.to_numpy(tape.arrays["tape_counts"])
        needed = counts.max(axis=1)
        if all(n <= c for n, c in zip(needed, capacity)):
            return
        loops = layout.unknown_loops() or list(layout.loops)
        where = ", ".join(f"line {loop.line}" for loop in loops)
        raise KernelkitError(
            f"kernel '{self.kernel.name}': a work-item ran its loops ({where}) more times "
            f"than the tape was sized for: it needs {int(needed[0])} float and "
            f"{int(needed[1])} integer slots, the tape has {capacity[0]} and {capacity[1]} "
            f"(loops whose trip counts the arguments do not give are sized for "
            f"max_iterations={self.max_iterations}, or by a run that counted them if the "
            f"kernel's control flow depends on the order its atomics ran in); pass a larger "
            f"max_iterations= to autodiff or autodiff_thunk, or max_iterations=None to "
            f"count")

    def reverse(self, args, tape: Tape, ndrange, workgroupsize):
        if not isinstance(tape, Tape):
            raise LaunchError(f"kernel '{self.kernel.name}': tape= must be the tape the "
                              f"forward half returned, not {type(tape).__name__}")
        values, shadows = self.unwrap(args, REVERSE)
        ((_, _, augmented), (prepared, parameters, compiled)), ndrange, workgroupsize = \
            self.derivatives((AUGMENTED, REVERSE), values, shadows, ndrange, workgroupsize)
        self.refuse_shared_memory(values, shadows, compiled.notes[WRITTEN])
        if tape.owner != (self, augmented.job):
            raise LaunchError(f"kernel '{self.kernel.name}': this tape was made by "
                              f"another kernel's forward half ('{tape.kernel}'), or for "
                              f"arguments of other types: pass the tape the forward half of "
                              f"this autodiff_thunk returned for these arguments")
        if tape.geometry != (ndrange, workgroupsize):
            raise LaunchError(f"kernel '{self.kernel.name}': the reverse pass must have the "
                              f"forward's ndrange and workgroupsize {tape.geometry}, not "
                              f"{(ndrange, workgroupsize)}")
        ndrange, workgroupsize = tape.geometry
        gather = None
        if compiled.notes[ADPlugin.name].gather:   # neighbours' updates, before the reverse
            [gather], _, _ = self.derivatives((GATHER,), values, shadows, ndrange,
                                              workgroupsize)
        return self.launch_reverse((prepared, parameters), values, shadows, tape, ndrange,
                                   workgroupsize, gather)

    def launch_reverse(self, kernel, values, shadows, tape: Tape | None, ndrange,
                       workgroupsize, gather=None):
        """Launch a reverse or combined `kernel` (prepared, parameters), after its
        `gather` kernel if it has one (which reads no tape: a combined kernel's has
        empty arrays for it); each Active scalar's derivative, summed from one partial
        per work-group."""
        groups = math.prod(-(-n // g) for n, g in zip(ndrange, workgroupsize))
        partials = {p.index: self.backend.allocate(np.float64, (groups,))
                    for p in kernel[1] if p.role == "partials"}

        def launch(prepared, parameters, *_) -> None:
            nonlocal tape
            if tape is None and any(p.role == "tape" for p in parameters):
                tape = Tape.for_launch(self.backend, (0, 0), 0, (ndrange, workgroupsize),
                                       self.kernel.name)
            arguments = [values[p.index] if p.role == "primal" else
                         shadows[p.index] if p.role == "shadow" else
                         partials[p.index] if p.role == "partials" else
                         tape.arrays[p.field] for p in parameters]
            self.backend.launch(prepared, tuple(arguments), ndrange, workgroupsize)
        if gather is not None:
            launch(*gather)
        launch(*kernel)
        return tuple(deterministic_sum(self.backend, partials[i]) if i in partials else None
                     for i in range(len(values)))


def _memory_range(array) -> tuple[int, int] | None:
    """The bytes an array spans, from its array interface (host or CUDA), or None for a
    scalar."""
    interface = getattr(array, "__array_interface__", None) or \
        getattr(array, "__cuda_array_interface__", None)
    if interface is None or np.isscalar(array):
        return None
    start = interface["data"][0]
    itemsize = np.dtype(interface["typestr"]).itemsize
    shape, strides = interface["shape"], interface.get("strides")
    if strides is None:
        strides = tuple(math.prod(shape[i + 1:]) * itemsize for i in range(len(shape)))
    if any(extent == 0 for extent in shape):
        return (start, start)
    low = start + sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    high = start + itemsize + sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
    return (low, high)


def _overlap(a, span_a, b, span_b) -> bool:
    """Whether two arrays share memory: NumPy's exact answer for two NumPy arrays, else
    whether the bytes they span overlap."""
    if span_a is None and span_b is None:
        return bool(np.shares_memory(a, b))
    (a_low, a_high) = span_a or _memory_range(a)
    (b_low, b_high) = span_b or _memory_range(b)
    return a_low < a_high and b_low < b_high and a_low < b_high and b_low < a_high


def _holds_floats(value) -> bool:
    """Whether an argument (a scalar or an array) holds floats, which have derivatives."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return isinstance(value, float)
    return np.issubdtype(dtype, np.floating)


def _compile(job, kernel: str):
    try:
        return compile_job(job)
    except KernelkitError:
        raise
    except Exception as error:  # a compiler bug: say so, and keep the cause attached
        raise CompileError(f"internal compiler error while differentiating: "
                           f"{type(error).__name__}: {error}", kernel=kernel,
                           hint="this is a bug in kernelkit; please report it with the "
                                "kernel's source") from error
