"""Binomial checkpointing of a time loop: `checkpoint(step, n_steps, budget)`.

`loop = checkpoint(step, n_steps, budget=50)` is a program: `loop(*state, *params)` calls
`step(*state, *params)` `n_steps` times, where `step` updates the state arrays in place
(through its kernels: it may use temporaries of its own). Run plainly it is that loop.
Differentiated in reverse mode (inside a program `autodiff` or `gradient` records), it
keeps at most `budget` copies of the state (the initial one among them) instead of every
step's tape, and recomputes the rest: each step is taped only while its reverse runs.

Where the copies go is Griewank's binomial schedule (Revolve): with s copies besides the
initial state, a loop of up to C(s + t, s) steps can be reversed advancing no step more
than t times, the first sweep included; `treeverse` places each copy so that the right
part needs one copy fewer and the left part one advance fewer. So `repetitions(n_steps,
budget - 1)` bounds how often each step runs forward (3 for 10,000 steps and 50 copies),
and the forward steps in all stay under that many times `n_steps`; each step also runs
once more while its reverse is taped."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import kernelkit as kk
from kernelkit.errors import KernelkitError
from kernelkit.lang.kernel import OBSERVERS, observe_launches
from kernelkit.memory import WRITE_OBSERVERS

from .activities import Mode


def repetitions(steps: int, copies: int) -> int:
    """The smallest t with C(copies + t, copies) >= steps: how often some step is
    advanced when `steps` steps are reversed with `copies` copies of the state."""
    if copies <= 0:      # every step is advanced again from the start: the first, n times
        return steps
    t = 0
    while math.comb(copies + t, copies) < steps:
        t += 1
    return t


def split(low: int, high: int, copies: int) -> int:
    """Where the next copy goes when steps [low, high) are reversed with `copies` copies
    besides the one at `low`: the right part can then be reversed with one copy fewer,
    the left part with one advance fewer."""
    steps = high - low
    t = repetitions(steps, copies)
    right = math.comb(copies - 1 + t, copies - 1)      # what one copy fewer reverses
    return low + max(1, steps - right)


@dataclass
class Schedule:
    """The reverse sweep of one checkpointed loop, as `Recording.reverse` runs it."""
    loop: "Checkpointed"
    state: tuple
    params: tuple
    copies: dict = field(default_factory=dict)     # step -> the state's copy there
    final: list = field(default_factory=list)      # the state as the loop left it
    advances: int = 0                               # forward steps run, first sweep too
    most_copies: int = 0                            # copies of the state held at once

    def store(self, position: int) -> None:
        self.copies[position] = [_copy(array) for array in self.state]
        self.most_copies = max(self.most_copies, len(self.copies))

    def restore(self, position: int) -> None:
        for array, copy in zip(self.state, self.copies[position]):
            kk.get_backend(array).copyto(array, copy)

    def advance(self, low: int, high: int) -> None:
        """Steps [low, high) run plainly (nothing recorded)."""
        with _plain():
            for _ in range(low, high):
                self.loop.step(*self.state, *self.params)
        self.advances += high - low

    def reverse(self, recording) -> None:
        self.treeverse(0, self.loop.n_steps, self.loop.budget - 1, recording)
        for array, copy in zip(self.state, self.final):
            kk.get_backend(array).copyto(array, copy)

    def treeverse(self, low: int, high: int, copies: int, recording) -> None:
        """Reverse steps [low, high), the state at `low` kept, with `copies` more."""
        if high - low == 1:
            self.restore(low)
            recording.reverse_step(self.loop.step, self.state + self.params)
            return
        if copies == 0:
            for position in range(high - 1, low - 1, -1):
                self.restore(low)
                self.advance(low, position)
                recording.reverse_step(self.loop.step, self.state + self.params)
            return
        middle = split(low, high, copies)
        if middle not in self.copies:
            self.restore(low)
            self.advance(low, middle)
            self.store(middle)
        self.treeverse(middle, high, copies - 1, recording)
        del self.copies[middle]
        self.treeverse(low, middle, copies, recording)


class Checkpointed:
    """`checkpoint(step, n_steps, budget)`: see the module."""

    def __init__(self, step, n_steps: int, budget: int, state_arrays: int):
        if budget < 1:
            raise KernelkitError(f"checkpoint of '{_name(step)}': budget={budget}; it keeps "
                                 f"at least the initial state (budget >= 1)")
        self.step, self.n_steps, self.budget = step, int(n_steps), int(budget)
        self.state_arrays = state_arrays
        self.__name__ = f"checkpointed_{_name(step)}"
        self.last_schedule: Schedule | None = None

    def __call__(self, *arguments):
        state, params = arguments[:self.state_arrays], arguments[self.state_arrays:]
        watch = OBSERVERS[-1] if OBSERVERS else None
        recording = getattr(getattr(watch, "observer", None), "__self__", None)
        if not hasattr(recording, "before_checkpointed"):
            recording = None
        if recording is None or recording.mode is Mode.FORWARD or self.n_steps == 0:
            for _ in range(self.n_steps):
                self.step(*state, *params)
            return
        schedule = self.last_schedule = Schedule(self, tuple(state), tuple(params))
        recording.before_checkpointed(schedule)
        # The first sweep: the copies on the schedule's rightmost path.
        copies, low, high = self.budget - 1, 0, self.n_steps
        schedule.store(0)
        while high - low > 1 and copies > 0:
            middle = split(low, high, copies)
            schedule.advance(low, middle)
            schedule.store(middle)
            low, copies = middle, copies - 1
        schedule.advance(low, self.n_steps)
        schedule.final = [_copy(array) for array in state]
        recording.after_checkpointed(schedule)


def checkpoint(step, n_steps: int, budget: int, state_arrays: int = 1) -> Checkpointed:
    """A program running `step(*state, *params)` `n_steps` times, whose reverse mode keeps
    at most `budget` copies of the state (the first `state_arrays` arguments, updated in
    place by `step`) and recomputes the rest on the binomial schedule."""
    return Checkpointed(step, n_steps, budget, state_arrays)


class _plain:
    """Launches and copies run as they are, not recorded (a checkpointed loop's forward
    steps)."""

    def __enter__(self):
        self.saved = list(WRITE_OBSERVERS)
        WRITE_OBSERVERS.clear()
        self.launches = observe_launches(
            lambda launch, args, ndrange, workgroupsize:
            launch.launcher.launch(args, ndrange, workgroupsize))
        self.launches.__enter__()
        return self

    def __exit__(self, *exc):
        self.launches.__exit__(*exc)
        WRITE_OBSERVERS[:] = self.saved
        return False


def _copy(array):
    backend = kk.get_backend(array)
    copy = backend.allocate(array.dtype, np.shape(array))
    backend.copyto(copy, array)
    return copy


def _name(function) -> str:
    return getattr(function, "__name__", type(function).__name__)
