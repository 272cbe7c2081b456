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
import dataclasses
import math
import numbers
import weakref
from dataclasses import dataclass

import numpy as np

from kernelkit.compiler.driver import compile_job
from kernelkit.errors import CompileError, KernelkitError, LaunchError
from kernelkit.ir import types as T
from kernelkit.lang.kernel import Launcher
from kernelkit.logs import get_logger

from .activities import (Activity, Active, Const, Duplicated, Mode, activity_class)
from .device import translate_call
from .jobs import compiler_job_from_backend, derivative_job
from .program import _is_array, autodiff_program, is_program
from .reduce import deterministic_sum
from .signature import (AUGMENTED, COMBINED, FORWARD, GATHER, GATHER_STORED, REVERSE,
                        REVERSE_UNZEROED, derivative_parameters)
from .tape import DEFAULT_MAX_ITERATIONS, Tape, tape_layout
from .transform.plugin import EFFECTLESS, REVERSE_READS, WRITTEN, ADPlugin


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


@dataclass(frozen=True)
class Unwrapped:
    """A launch's arguments as it was given them (`arguments`) and as the derivative
    kernels take them (`values`, `shadows`): a dataclass or tuple as its leaves
    (`T.leaves`), each a parameter of the compiled kernel."""

    arguments: tuple
    values: list
    shadows: list
    names: list        # the parameters', a leaf's as Python reads it: 'state.x'
    owners: list       # the position of the argument each parameter belongs to

    def regrouped(self, derivatives: tuple) -> tuple:
        """One derivative per argument from one per leaf: an Active dataclass's is one of
        its class with the derivative in each float field (and 0 in the others)."""
        leaves = iter(derivatives)
        regrouped = []
        for argument in self.arguments:
            if not _is_struct(argument):
                regrouped.append(next(leaves))
                continue
            mine = [next(leaves) for _ in _leaves(argument)]
            regrouped.append(None if all(d is None for d in mine) else
                             _rebuilt(argument, iter(mine)))
        return tuple(regrouped)


@dataclass(frozen=True)
class _StandIn:
    """An augmented kernel the primal launch stands for (its layout's `primal`): its job
    (a tape's owner), and the notes of the launch's reverse kernel, which are its own."""
    job: object
    notes: dict


@dataclass
class Plan:
    """What launches of arguments of one kind in one geometry need (`Rule.planned`): the
    parameters' names and owners (`Unwrapped`), the geometry, and the derivative kernels
    (prepared kernel, parameters, compiled kernel) by mode, a gather kernel's under
    `GATHER` where one runs before the reverse kernel."""

    names: list
    owners: list
    ndrange: tuple
    workgroupsize: tuple
    kernels: dict
    groups: int | None = None   # work-groups of the geometry, where a launch counted them
    empty_tape: object = None   # the tape of every launch whose augmented kernel tapes nothing


def _differentiated_leaf(leaf: T.IRType, activity: str, mode: str) -> bool:
    """Whether a leaf of a dataclass or tuple argument of `activity` is differentiated:
    a float of one that is not Const, but a number of a Duplicated one (which holds
    arrays) only in forward mode, reverse mode having nowhere to put its derivative."""
    if isinstance(leaf, T.ArrayType):
        return leaf.dtype.is_float and activity != Const.name
    if not (isinstance(leaf, T.ScalarType) and leaf.is_float) or activity == Const.name:
        return False
    return activity == Active.name or mode == FORWARD


def _is_struct(value) -> bool:
    """A dataclass or a tuple of numbers, passed to a kernel as its leaves."""
    return (dataclasses.is_dataclass(value) and not isinstance(value, type)) or \
        (isinstance(value, tuple) and not any(map(_is_array, value)))


def _leaves(value, path: str = "") -> list:
    """The numbers and arrays of a dataclass or tuple, depth first, as `T.leaves` orders
    its type; with `path`, each as (its path from `value` as Python writes it, the
    leaf)."""
    if dataclasses.is_dataclass(value):
        return [leaf for field in dataclasses.fields(value)
                for leaf in _leaves(getattr(value, field.name), path and f"{path}.{field.name}")]
    if isinstance(value, tuple):
        return [leaf for position, item in enumerate(value)
                for leaf in _leaves(item, path and f"{path}[{position}]")]
    return [(path, value)] if path else [value]



def _leaf_kind(leaf):
    """What a leaf and its shadow's leaf must share: an array's shape and dtype, a
    number's type."""
    if _is_array(leaf):
        return ("array", tuple(np.shape(leaf)), np.dtype(leaf.dtype))
    return type(leaf)


def _shown(value) -> str:
    """A dataclass or tuple in a message: its numbers, and its arrays by shape and dtype."""
    if dataclasses.is_dataclass(value):
        return f"{type(value).__name__}(" + ", ".join(
            f"{field.name}={_shown(getattr(value, field.name))}"
            for field in dataclasses.fields(value)) + ")"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_shown, value)) + ")"
    if _is_array(value):
        return f"<array {tuple(np.shape(value))} {np.dtype(value.dtype)}>"
    return repr(value)


def _rebuilt(value, derivatives):
    """`value`'s shape, holding the next of `derivatives` for each float leaf and a zero
    of its type for the others."""
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{field.name: _rebuilt(getattr(value, field.name),
                                                                  derivatives)
                                             for field in dataclasses.fields(value)
                                             if field.init})
    if isinstance(value, tuple):
        return type(value)(*(_rebuilt(item, derivatives) for item in value)) \
            if hasattr(value, "_fields") else tuple(_rebuilt(item, derivatives)
                                                     for item in value)
    derivative = next(derivatives)
    if derivative is None:
        return type(value)(0)
    return type(value)(derivative) if isinstance(value, np.generic) else derivative


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
        # Arguments found not to share memory (`refuse_shared_memory`) and the kinds of
        # arguments unwrapped (`unwrap`), the last few of each (a program's time loop
        # swaps two buffers): a loop that differentiates launches of the same arrays
        # checks them once.
        self._disjoint = _Seen()
        self._unwrapped = _Seen()
        self._plans = _Seen()
        self.fast_launcher = getattr(launch.backend, "fast_launcher", None)

    # -- arguments -----------------------------------------------------------------------

    def unwrap(self, args, mode: str):
        """(primal values, shadows) of the annotated arguments, checked against the
        activities (whether they share memory is checked once the derivative kernels
        say which arguments the kernel writes: `refuse_shared_memory`). Arguments of the
        kinds of one of the last few (the same arrays and shadows, numbers of the same
        types) are not checked again: a loop of launches pays for the checks once."""
        key = self.argument_kinds(args, mode)
        seen = self._unwrapped.get(key)
        if seen is not None:
            values = [a.value if isinstance(a, Activity) else a for a in args]
            return Unwrapped(tuple(values), values, [getattr(a, "shadow", None) for a in args],
                             seen.names, seen.owners)
        unwrapped = self.checked(args, mode)
        if key is not None:
            self._unwrapped.add(key, [array for pair in zip(unwrapped.values,
                                                            unwrapped.shadows)
                                      for array in pair if _memory_key(array) is not None],
                                unwrapped)
        return unwrapped

    def argument_kinds(self, args, mode: str) -> tuple | None:
        """What `checked` and the derivative kernels depend on, where it is cheap to
        tell: per argument, its activity and the kinds (`kind_of`) of its value and its
        shadow; None for arguments it must see (a dataclass or tuple, a count or
        activity that does not match)."""
        if len(args) != len(self.activities):
            return None
        kinds = [mode]
        for argument, activity in zip(args, self.activities):
            if isinstance(argument, Activity):
                given, value = type(argument), argument.value
                shadow = getattr(argument, "shadow", None)
            else:
                given, value, shadow = Const, argument, None
            kind = self.kind_of(value)
            if given is not activity or kind is None:
                return None
            kinds.append(kind if shadow is None else (kind, self.kind_of(shadow)))
        return tuple(kinds)

    def kind_of(self, value):
        """What says a value is of the kind of an earlier one: a NumPy array's identity,
        shape, strides, dtype and whether it is writable (its argument key, and its
        memory while it lives: `_Seen`); a number's type, and a float's finiteness
        (`_finite_scalars`); another array's type, argument key (the backend's) and
        memory. None for a dataclass or tuple."""
        kind = type(value)
        if kind is np.ndarray:
            return (id(value), value.shape, value.strides, value.dtype, value.flags.writeable)
        if kind is float or isinstance(value, np.floating):
            return (kind, _finite_scalar(value))
        if kind is int or kind is bool or isinstance(value, np.generic):
            return kind
        if isinstance(value, tuple) or dataclasses.is_dataclass(value):
            return None
        return (kind, self.backend.argument_key(value), _memory_key(value))

    def checked(self, args, mode: str) -> Unwrapped:
        """`unwrap`, every argument checked."""
        kernel = self.kernel
        if len(args) != len(self.activities):
            raise LaunchError(f"kernel '{kernel.name}' takes {len(self.activities)} "
                              f"arguments but {len(args)} were given")
        arguments, values, shadows, names, owners = [], [], [], [], []
        for argument, activity, name in zip(args, self.activities, kernel.parameters):
            given = _activity_of(argument)
            if given is not activity:
                raise LaunchError(f"kernel '{kernel.name}': argument '{name}' was declared "
                                  f"{activity.__name__} but given as {given.__name__}")
            value = argument.value if isinstance(argument, Activity) else argument
            shadow = getattr(argument, "shadow", None)
            if _is_struct(value):
                self.check_struct(value, shadow, activity, name, mode)
                arguments.append(value)
                leaves = _leaves(value, name)
                values.extend(leaf for _, leaf in leaves)
                names.extend(path for path, _ in leaves)
                owners.extend(len(arguments) - 1 for _ in leaves)
                shadows.extend(_leaves(shadow) if shadow is not None else
                               [None] * len(leaves))
                continue
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
            arguments.append(value)
            values.append(value)
            shadows.append(shadow)
            names.append(name)
            owners.append(len(arguments) - 1)
        return Unwrapped(tuple(arguments), values, shadows, names, owners)

    def check_struct(self, value, shadow, activity, name: str, mode: str) -> None:
        """A dataclass or tuple is Const; or, where it holds a float, differentiated:
        Duplicated where it holds arrays (its shadow one of its class, whose float arrays
        are theirs; in forward mode its float numbers carry tangents, in reverse mode
        they are constants), else as a number is: Active in reverse mode (its derivative
        is one of its class, the derivative in each float field), Duplicated in forward
        mode (its shadow one of its class, the tangent in each float field)."""
        kind = "dataclass" if dataclasses.is_dataclass(value) else "tuple"
        kernel = self.kernel.name
        leaves = _leaves(value)
        holds_arrays = any(_is_array(leaf) for leaf in leaves)
        if activity is Active and holds_arrays:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is Active, but the "
                              f"{kind} holds arrays, whose derivatives need arrays of their "
                              f"own: pass Duplicated({name}, shadow), the shadow a {kind} of "
                              f"its class holding a shadow of each array")
        if issubclass(activity, Duplicated) and mode != FORWARD and not holds_arrays:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is a Duplicated {kind} "
                              f"of numbers, which is for forward mode; in reverse mode pass "
                              f"Active({name}): its derivative comes back as a {kind} of "
                              f"the same shape")
        if activity is Active and mode == FORWARD:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is Active, which is for "
                              f"reverse mode; in forward mode pass Duplicated({name}, "
                              f"tangent), the tangent a {kind} of the same shape")
        if activity is not Const and not any(_holds_floats(leaf) for leaf in leaves):
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is "
                              f"{activity.__name__}, but the {kind} holds no float, and only "
                              f"floats have derivatives: pass it as Const({name})")
        if shadow is not None and (type(shadow) is not type(value) or
                                   list(map(_leaf_kind, _leaves(shadow))) !=
                                   list(map(_leaf_kind, leaves))):
            what = "shadow" if holds_arrays else "tangent"
            raise LaunchError(f"kernel '{kernel}': the {what} of '{name}' must be a {kind} "
                              f"of its class, its arrays' shapes and dtypes and its numbers' "
                              f"types ({_shown(value)}), not {_shown(shadow)}")
        for (path, leaf), shadow_leaf in zip(_leaves(value, name), _leaves(shadow)
                                             if shadow is not None else ()):
            if _is_array(leaf) and shadow_leaf is leaf:
                raise LaunchError(f"kernel '{kernel}': the shadow of {path} is {path} itself; "
                                  f"give it an array of its own")

    def refuse_shared_memory(self, unwrapped: Unwrapped, written: tuple[int, ...]) -> None:
        """Arguments whose memory overlaps, where one is written: by the kernel (`written`,
        the positions of the parameters it stores into or updates atomically, whatever
        their activity) or, being a shadow, by the derivative kernels. The transform
        takes each argument for memory of its own, so a value read through one and
        overwritten through the other would not be taped (a silently wrong derivative).
        Arrays that are only read may share memory. The same arrays (the same objects,
        shapes and strides, still alive) as one of the last launches that passed are not
        checked again."""
        key = (written, tuple(_memory_key(array) for pair in zip(unwrapped.values,
                                                                 unwrapped.shadows)
                              for array in pair))
        if self._disjoint.get(key) is not None:
            return
        arrays = []     # (label, array, why it is written or None, bytes spanned or None)
        for index, (value, shadow, name) in enumerate(zip(unwrapped.values, unwrapped.shadows,
                                                          unwrapped.names)):
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
        self._disjoint.add(key, [array for _, array, _, _ in arrays], True)

    def derivatives(self, modes: tuple[str, ...], unwrapped: Unwrapped, ndrange,
                    workgroupsize):
        """The derivative kernels of `modes`, compiled in that order, each as (prepared
        kernel, its parameters, the compiled kernel); and the launch geometry."""
        backend = self.backend
        shadows = unwrapped.shadows
        ndrange, workgroupsize = self.launcher.geometry(ndrange, workgroupsize)
        # The backend's cheap argument keys, as a launch's: equal keys, equal types.
        argument_key = backend.argument_key
        finite = _finite_scalars(unwrapped.values)
        key = (tuple(map(argument_key, unwrapped.arguments)),
               tuple(None if shadow is None else argument_key(shadow) for shadow in shadows),
               workgroupsize, len(ndrange), finite)
        entries = []
        for mode in modes:
            entry = self._prepared.get((mode, key))
            if entry is None:
                try:
                    stand_in = None
                    if mode == AUGMENTED:
                        # Where it would tape nothing, the primal launch stands for it (the
                        # reverse kernel, needed anyway, says so): it is not compiled.
                        [(_, _, reverse)], _, _ = self.derivatives(
                            (REVERSE,), unwrapped, ndrange, workgroupsize)
                        if reverse.notes[ADPlugin.name].primal:
                            stand_in = reverse.notes
                    entry = self.prepare(mode, unwrapped, ndrange, workgroupsize, finite,
                                         stand_in)
                except TwoKernelsNeeded as error:
                    entry = error
                self._prepared[(mode, key)] = entry
            if isinstance(entry, TwoKernelsNeeded):
                raise entry
            entries.append(entry)
        return entries, ndrange, workgroupsize

    def prepare(self, mode: str, unwrapped: Unwrapped, ndrange, workgroupsize,
                finite: bool = False, stand_in=None):
        """The derivative kernel of `mode` for these arguments (`derivatives`); `finite`:
        the version for float scalar arguments that are all finite, which has no
        strong-zero tests on the partials they are (an augmented kernel has no partials,
        and is one for both: a tape is the same). With `stand_in` (the notes of the
        reverse kernel, whose layout says the primal kernel stands for the augmented
        one), the augmented kernel's job, not compiled: (None, None, `_StandIn`)."""
        backend, kernel = self.backend, self.kernel
        argtypes = kernel.argument_types(backend, unwrapped.arguments)
        # The compiled kernel takes a dataclass or tuple as its leaves, each a parameter
        # with an activity of its own: an Active one's floats are Active, the rest Const.
        activities, names, types, shadow_types = [], [], [], []
        shadows = iter(unwrapped.shadows)
        for activity, name, argtype in zip(self.names, kernel.parameters, argtypes):
            for path, leaf in T.leaves(argtype):
                shadow = next(shadows)
                if path and not _differentiated_leaf(leaf, activity, mode):
                    activities.append(Const.name)
                    shadow = None
                else:
                    activities.append(activity)
                names.append(name + T.path_text(path))
                types.append(leaf)
                shadow_types.append(None if shadow is None else backend.argument_type(
                    shadow, False, f"d_{name}{T.path_text(path)}", kernel.name))
        parent = compiler_job_from_backend(backend, kernel.function, argtypes,
                                           workgroupsize=workgroupsize)
        if mode == COMBINED and not tape_layout(derivative_job(
                parent, AUGMENTED, activities, shadow_types)).combined:
            raise TwoKernelsNeeded(kernel.name)
        job = derivative_job(parent, mode, activities, shadow_types,
                             finite_scalars=finite and mode != AUGMENTED)
        if stand_in is not None:
            if logger.isEnabledFor(logging.INFO):
                self.log_tape(mode, stand_in[ADPlugin.name], unwrapped.values)
            return None, None, _StandIn(job, stand_in)
        compiled = _compile(job, kernel.name)
        if mode in (COMBINED, AUGMENTED) and logger.isEnabledFor(logging.INFO):
            self.log_tape(mode, compiled.notes[ADPlugin.name], unwrapped.values)
        layout = compiled.notes.get(ADPlugin.name)
        parameters = derivative_parameters(mode, activities, names, types, shadow_types,
                                           getattr(layout, "float_type", T.float64))
        assert compiled.parameter_types == tuple(p.type for p in parameters)
        prepared = backend.prepare(compiled, compiled.parameter_types, len(ndrange))
        return prepared, parameters, compiled

    def log_tape(self, mode: str, layout, values) -> None:
        width = layout.float_type.bits // 8
        if mode == COMBINED:    # in private memory: registers, where the slots are few
            floats, integers = layout.constant_slots()
            how, size = "in one kernel, with a private tape of", width * floats + 8 * integers
        else:                   # in global memory, with the counts
            floats, integers = layout.slots(values, self.max_iterations or
                                            DEFAULT_MAX_ITERATIONS)
            counts = 2 if layout.terms else 0   # the tape's counts, where it pushes
            how, size = "in two kernels, with a tape of", \
                width * floats + 8 * (integers + counts)
        unknown = layout.unknown_loops() if mode != COMBINED else []
        logger.info("kernel '%s': reverse mode %s %d float (%s) and %d integer slots, %d bytes "
                    "per work-item%s", self.kernel.name, how, floats, layout.float_type.name,
                    integers, size,
                    f" (loops at lines {', '.join(str(loop.line) for loop in unknown)} "
                    f"counted at launch)" if unknown else "")

    # -- the launches ----------------------------------------------------------------------

    def planned(self, args, mode: str, modes: tuple[str, ...], ndrange, workgroupsize
                ) -> tuple[Unwrapped, Plan]:
        """The arguments unwrapped, and the plan of their launch: found at the first launch
        of arguments of their kinds (`argument_kinds`) in this geometry (every argument
        checked, the derivative kernels of `modes` compiled, their memory checked for
        overlaps), and kept for the next ones, which only unwrap them. Raises
        `TwoKernelsNeeded` where `modes` asks for the combined kernel and the tape grows
        with a loop."""
        kinds = self.argument_kinds(args, mode)
        key = None if kinds is None else (kinds, modes, ndrange, workgroupsize)
        try:
            plan = self._plans.get(key)
        except TypeError:   # an ndrange given as a list: the launch says what to pass
            key = plan = None
        if plan is not None:
            values = [a.value if isinstance(a, Activity) else a for a in args]
            return Unwrapped(tuple(values), values, [getattr(a, "shadow", None) for a in args],
                             plan.names, plan.owners), plan
        unwrapped = self.unwrap(args, mode)
        entries, *geometry = self.derivatives(modes, unwrapped, ndrange, workgroupsize)
        kernels = dict(zip(modes, entries))
        self.refuse_shared_memory(unwrapped, entries[0][2].notes[WRITTEN])
        reverse = kernels.get(COMBINED) or kernels.get(REVERSE)
        if reverse is not None and reverse[2].notes[ADPlugin.name].gather:
            [kernels[GATHER]], _, _ = self.derivatives((GATHER,), unwrapped, ndrange,
                                                       workgroupsize)
        plan = Plan(unwrapped.names, unwrapped.owners, *geometry, kernels)
        if key is not None:
            self._plans.add(key, [array for pair in zip(unwrapped.values, unwrapped.shadows)
                                  for array in pair if _memory_key(array) is not None], plan)
        return unwrapped, plan

    def launch(self, kernel, arguments: tuple, ndrange, workgroupsize) -> None:
        """Launch a derivative kernel (prepared, parameters, compiled): through the
        backend's fast launcher where it has one for these arguments, as a primal launch
        goes."""
        prepared = kernel[0]
        fire = self.fast_launcher(prepared, arguments) if self.fast_launcher else None
        if fire is None or not fire(arguments, ndrange):
            self.backend.launch(prepared, arguments, ndrange, workgroupsize)

    def forward(self, args, ndrange, workgroupsize) -> None:
        unwrapped, plan = self.planned(args, FORWARD, (FORWARD,), ndrange, workgroupsize)
        values, shadows = unwrapped.values, unwrapped.shadows
        kernel = plan.kernels[FORWARD]
        self.launch(kernel, tuple(values[p.index] if p.role == "primal" else shadows[p.index]
                                  for p in kernel[1]), plan.ndrange, plan.workgroupsize)

    def combined(self, args, ndrange, workgroupsize):
        """`autodiff(Reverse, ...)` as one launch of the combined kernel (the augmented
        primal, then its reverse, in each work-item, with a private tape), after the gather
        kernel if there is one, where the tape has a constant size; None where it grows
        with a loop (the caller runs the two halves, `ReverseSplit`'s)."""
        try:
            unwrapped, plan = self.planned(args, REVERSE, (COMBINED,), ndrange,
                                           workgroupsize)
        except TwoKernelsNeeded:
            return None
        return unwrapped.regrouped(self.launch_reverse(plan, COMBINED, unwrapped, None))

    def augmented_forward(self, args, ndrange, workgroupsize) -> Tape:
        # The reverse kernel is compiled first: an error in it must come before the primal
        # arrays are overwritten.
        unwrapped, plan = self.planned(args, AUGMENTED, (REVERSE, AUGMENTED), ndrange,
                                       workgroupsize)
        values = unwrapped.values
        prepared, parameters, compiled = kernel = plan.kernels[AUGMENTED]
        layout = compiled.notes[ADPlugin.name]
        geometry = (plan.ndrange, plan.workgroupsize)
        if layout.primal:
            # Nothing to tape: the primal launch, as the program would make it, and one
            # empty tape for every launch of the plan.
            self.launcher.launch(unwrapped.arguments, ndrange, workgroupsize)
            if plan.empty_tape is None:
                plan.empty_tape = self.new_tape(plan, (0, 0), math.prod(plan.ndrange),
                                                layout, compiled.job)
            return plan.empty_tape
        items = math.prod(plan.ndrange)
        if self.max_iterations is None and layout.unknown_loops() and items:
            slots = self.measure_slots(prepared, parameters, compiled.notes[WRITTEN], values,
                                       items, geometry, layout.float_type)
        else:
            slots = layout.slots(values, self.max_iterations or DEFAULT_MAX_ITERATIONS)
        tape = self.new_tape(plan, slots, items, layout, compiled.job)
        self.launch(kernel, tuple(values[p.index] if p.role == "primal" else
                                  tape.arrays[p.field] for p in parameters), *geometry)
        if layout.loops and items and any(slots):
            self.check_capacity(tape, layout, slots)
        return tape

    def new_tape(self, plan: Plan, slots, items: int, layout, job) -> Tape:
        """A tape for an augmented launch of `plan`, of `slots` for each of `items`."""
        tape = Tape.for_launch(self.backend, slots, items, (plan.ndrange, plan.workgroupsize),
                               self.kernel.name, counted=bool(layout.terms),
                               float_type=layout.float_type)
        tape.owner = (self, job)
        tape.reads = frozenset(plan.owners[index]
                               for index in plan.kernels[REVERSE][2].notes[REVERSE_READS])
        return tape

    def measure_slots(self, prepared, parameters, written, values, items, geometry,
                      float_type: T.ScalarType) -> tuple[int, int]:
        """The slots a launch needs when its loops' trip counts depend on data: the
        augmented kernel run once on copies of the arrays it writes, with a tape of one
        slot that it overwrites, counting (`max_iterations=None`, the default)."""
        backend = self.backend
        copies = {}
        for index in written:
            original = values[index]
            copies[index] = backend.allocate(original.dtype, np.shape(original))
            backend.copyto(copies[index], original)
        scratch = Tape.for_launch(backend, (1, 1), items, geometry, self.kernel.name,
                                  float_type=float_type)
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

    def reverse(self, args, tape: Tape, ndrange, workgroupsize, zeros=None):
        """The reverse launch after `augmented_forward` made `tape`; in a program's
        reverse pass, `zeros` (`program.Zeros`) knows which shadows hold zeros, and
        learns which this launch leaves zero."""
        if not isinstance(tape, Tape):
            raise LaunchError(f"kernel '{self.kernel.name}': tape= must be the tape the "
                              f"forward half returned, not {type(tape).__name__}")
        unwrapped, plan = self.planned(args, REVERSE, (AUGMENTED, REVERSE), ndrange,
                                       workgroupsize)
        if tape.owner != (self, plan.kernels[AUGMENTED][2].job):
            raise LaunchError(f"kernel '{self.kernel.name}': this tape was made by "
                              f"another kernel's forward half ('{tape.kernel}'), or for "
                              f"arguments of other types: pass the tape the forward half of "
                              f"this autodiff_thunk returned for these arguments")
        if tape.geometry != (plan.ndrange, plan.workgroupsize):
            raise LaunchError(f"kernel '{self.kernel.name}': the reverse pass must have the "
                              f"forward's ndrange and workgroupsize {tape.geometry}, not "
                              f"{(plan.ndrange, plan.workgroupsize)}")
        return unwrapped.regrouped(self.launch_reverse(plan, REVERSE, unwrapped, tape, zeros))

    def launch_reverse(self, plan: Plan, mode: str, unwrapped: Unwrapped, tape: Tape | None,
                       zeros=None):
        """Launch the reverse or combined kernel of `plan` (`mode`), after its gather
        kernel if it has one (which reads no tape: a combined kernel's has empty arrays
        for it), or the kernels `zeros` allows (`in_program`); each Active scalar's
        derivative, summed from one partial per work-group."""
        values, shadows = unwrapped.values, unwrapped.shadows
        ndrange, workgroupsize = plan.ndrange, plan.workgroupsize
        kernel = plan.kernels[mode]
        launches = (plan.kernels.get(GATHER), kernel)
        if zeros is not None:
            launches, left = self.in_program(plan, unwrapped, zeros)
        partials = {}
        if plan.groups is None:
            plan.groups = math.prod(-(-n // g) for n, g in zip(ndrange, workgroupsize))
        for p in kernel[1]:
            if p.role == "partials":
                partials[p.index] = self.backend.allocate(np.float64, (plan.groups,))
        for launched in launches:
            if launched is None or launched[2].notes.get(EFFECTLESS):
                continue
            if tape is None and any(p.role == "tape" for p in launched[1]):
                tape = Tape.for_launch(self.backend, (0, 0), 0, (ndrange, workgroupsize),
                                       self.kernel.name, float_type=kernel[2].notes[
                                           ADPlugin.name].float_type)
            self.launch(launched, tuple(values[p.index] if p.role == "primal" else
                                        shadows[p.index] if p.role == "shadow" else
                                        partials[p.index] if p.role == "partials" else
                                        tape.arrays[p.field] for p in launched[1]),
                        ndrange, workgroupsize)
        if zeros is not None:
            zeros.after(shadows, *left)
        return tuple(deterministic_sum(self.backend, partials[i]) if i in partials else None
                     for i in range(len(values)))

    def in_program(self, plan: Plan, unwrapped: Unwrapped, zeros):
        """The gather and reverse kernels of a launch in a program's reverse pass, and the
        shadows they leave zero in value (not in memory) and in memory. A shadow covers
        the launch where its shape is the ndrange. Where each shadow the gather kernel
        updates holds zeros (known to `zeros`: in memory, or in value where the gather
        kernel stores into every element of it), the gather kernel stores into them
        without reading them. Where every array the kernel overwrites whole
        (`TapeLayout.whole_outputs`) has a covering shadow, the reverse kernel leaves
        those shadows unzeroed: zero in value. Every other shadow of the launch that is
        zero only in value is zeroed in memory first."""
        shadows = unwrapped.shadows
        layout = plan.kernels[REVERSE][2].notes[ADPlugin.name]

        def covers(p) -> bool:
            return tuple(np.shape(shadows[p])) == tuple(plan.ndrange)

        stored = bool(layout.gathered) and all(
            zeros.in_memory(shadows[p]) or (whole and covers(p) and zeros.in_value(shadows[p]))
            for p, whole in layout.gathered)
        outputs = [p for p in layout.whole_outputs if shadows[p] is not None]
        unzeroed = bool(outputs) and all(map(covers, outputs))
        kept = {p for p, _ in layout.gathered} if stored else set()
        for p, shadow in enumerate(shadows):
            if shadow is not None and p not in kept:
                zeros.zero_in_memory(shadow)
        gather, reverse = plan.kernels.get(GATHER), plan.kernels[REVERSE]
        for mode, wanted in ((GATHER_STORED, stored), (REVERSE_UNZEROED, unzeroed)):
            if wanted and mode not in plan.kernels:
                [plan.kernels[mode]], _, _ = self.derivatives(
                    (mode,), unwrapped, plan.ndrange, plan.workgroupsize)
        if stored:
            gather = plan.kernels[GATHER_STORED]
        if unzeroed:
            reverse = plan.kernels[REVERSE_UNZEROED]
        covered = [shadows[p] for p in outputs if covers(p)]
        return (gather, reverse), (covered if unzeroed else [],
                                   [] if unzeroed else covered)


class _Seen:
    """What was found for the last few keys, each kept while the arrays it names live
    (weak references: the arrays are not kept alive by it, and an id reused by a new
    array after the old one died does not match)."""

    SIZE = 8

    def __init__(self):
        self.entries: dict = {}

    def get(self, key):
        entry = self.entries.get(key) if key is not None else None
        if entry is None:
            return None
        references, found = entry
        if any(reference() is None for reference in references):
            del self.entries[key]
            return None
        return found

    def add(self, key, arrays: list, found) -> None:
        try:
            references = [weakref.ref(array) for array in arrays]
        except TypeError:   # an array that takes no weak reference: checked each time
            return
        if len(self.entries) >= self.SIZE:
            del self.entries[next(iter(self.entries))]
        self.entries[key] = (references, found)


def _memory_key(value) -> tuple | None:
    """What says an argument's memory is the same as before: for an array, the object
    (while it lives: `refuse_shared_memory` holds a weak reference) and its shape and
    strides, which may be set in place; None for a scalar or nothing."""
    if type(value) is np.ndarray:
        return (id(value), value.shape, value.strides)
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, np.generic):
        return None
    return (id(value), shape, getattr(value, "strides", None))


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


def _finite_scalars(values) -> bool:
    """Whether every float scalar among a launch's arguments (leaves) is finite, in
    float32's range (a kernel may narrow it to float32): its derivative kernels are then
    those without strong-zero tests on them."""
    return all(_finite_scalar(value) for value in values
               if type(value) is float or isinstance(value, np.floating))


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _finite_scalar(value) -> bool:
    return math.isfinite(value) and abs(value) <= _FLOAT32_MAX


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
