"""The tape: what the augmented forward kernel leaves for the reverse kernel.

`tape_type(job, mode, activities)` is the record one work-item writes: a stack of
float64 slots, a stack of int64 slots (branch and loop decisions, indices, integer
values), and the two counts. It is derived from the parent job alone, by the AD
transform that builds the derivative kernels, before any launch. How many slots a
work-item may need depends on the trip counts of its loops: exact for loops counted up
to a bound the launch's arguments give (pass `arguments=`), `max_iterations` for the
others. In memory the tape is field-major, each field an array indexed [slot,
work-item], so neighbouring work-items write neighbouring addresses."""
from __future__ import annotations

import functools

import numpy as np

from kernelkit.compiler.driver import target_neutral_module
from kernelkit.compiler.job import CompilerJob
from kernelkit.errors import KernelkitError
from kernelkit.ir import types as T

from .activities import Mode, activity_class
from .signature import AUGMENTED, tape_fields

DEFAULT_MAX_ITERATIONS = 1024
"""The trip count `tape_type` assumes for a loop whose trip count the arguments do not
give (a `while` on data). A launch measures such loops instead, unless it is given
`max_iterations=`: then the tape holds that many iterations per work-item, and a launch
that needs more is an error that says how many."""


@functools.lru_cache(maxsize=256)
def tape_layout(derivative: CompilerJob):
    """The tape layout (`transform.sizing.TapeLayout`) of a derivative job, from its
    target-neutral IR (a launch reads it from the compiled kernel's notes instead)."""
    from .transform.plugin import ADPlugin
    module = target_neutral_module(derivative)
    return module.notes[ADPlugin.name]


def tape_type(job: CompilerJob, mode, activities, *, arguments=None,
              max_iterations: int = DEFAULT_MAX_ITERATIONS) -> np.dtype:
    """The per-work-item tape record of reverse mode for the parent `job` (from
    `compiler_job_from_backend`) and one activity class per kernel argument (its
    `itemsize`: the tape's bytes per work-item). With `arguments` (the launch's,
    unwrapped), loops bounded by them are counted exactly."""
    from .jobs import derivative_job
    if mode not in (Mode.REVERSE, Mode.REVERSE_SPLIT):
        raise KernelkitError(f"only reverse mode has a tape, not {mode!r}")
    names = tuple(activity_class(a).name for a in activities)
    layout = tape_layout(derivative_job(job, AUGMENTED, names, (None,) * len(names)))
    floats, integers = layout.slots(arguments, max_iterations)
    return record_type(floats, integers, layout.float_type)


@functools.lru_cache(maxsize=64)
def record_type(floats: int, integers: int, float_type: T.ScalarType = T.float64) -> np.dtype:
    (float_field, float_type), (integer_field, integer_type), (count_field, count_type) = \
        tape_fields(float_type)
    return np.dtype([(float_field, float_type.numpy_dtype, (floats,)),
                     (integer_field, integer_type.numpy_dtype, (integers,)),
                     (count_field, count_type.numpy_dtype, (2,))])


def too_large(kernel: str, record_bytes: int, items: int, error) -> KernelkitError:
    return KernelkitError(
        f"kernel '{kernel}': its tape needs {record_bytes * items / 2 ** 30:.2f} GiB "
        f"({record_bytes} bytes for each of {items} work-items) and cannot be allocated "
        f"({error}); differentiate a smaller launch, or loops with fewer iterations (each "
        f"iteration stores what it overwrites and what its loop carries)")


class Tape:
    """A tape on a backend, from one augmented forward launch: its arrays (owning the
    backend's memory), the record type, and the launch it belongs to."""

    def __init__(self, backend, record: np.dtype, items: int, geometry, kernel: str,
                 counted: bool = False):
        self.backend = backend
        self.record = record
        self.items = items
        self.geometry = geometry
        self.kernel = kernel
        self.owner = None       # (the launch rule, the augmented job) that filled it
        # The arguments (by position) whose contents the launch's reverse pass reads.
        self.reads = frozenset()
        self.arrays = {}
        used = any(record.fields[name][0].shape[0] for name in record.names[:2])
        for name in record.names:
            slots = record.fields[name][0].shape[0]
            # Every slot a work-item reads it wrote first, so the arrays are not zeroed; a
            # kernel that tapes nothing still gets (1, 1) arrays for its parameters. One
            # that keeps counts (`counted`: it has blocks that push) writes them for every
            # work-item, even where this launch's loops push nothing.
            keeps = used or (counted and name == record.names[2])
            shape = (max(slots, 1), items) if keeps else (1, 1)
            try:
                self.arrays[name] = backend.allocate(record.fields[name][0].base, shape)
            except (MemoryError, KernelkitError) as error:
                raise too_large(kernel, record.itemsize, items, error) from error

    @classmethod
    def for_launch(cls, backend, slots: tuple[int, int], items: int, geometry,
                   kernel: str, counted: bool = False,
                   float_type: T.ScalarType = T.float64) -> Tape:
        """The tape of a launch of `items` work-items that may each use `slots` (floats
        of `float_type`, integers), with the counts where the kernel keeps them
        (`counted`); a tape too large to allocate is an error that says how large."""
        try:
            record = record_type(*slots, float_type)
        except ValueError as error:    # NumPy's records stop at 2 GiB
            raise too_large(kernel, float_type.bits // 8 * slots[0] + 8 * (slots[1] + 2),
                            items, error) from error
        return cls(backend, record, items, geometry, kernel, counted)

    @property
    def nbytes(self) -> int:
        return self.record.itemsize * self.items

    def __repr__(self) -> str:
        return f"<Tape of '{self.kernel}': {self.items} work-items x {self.record}>"
