"""What the PyTorch and JAX wrappers of a program (`enzyme_ext.torch`, `enzyme_ext.jax`)
share: one call of a program, run plainly or recorded for reverse mode, its outputs, and
its reverse pass seeded with the outputs' cotangents.

A framework's autograd calls a function's forward and, later, its backward with the
cotangents of its outputs; `ProgramCall` is that split for a program (`program.py`).
The wrappers turn tensors into kernelkit arrays and back; this module knows no
framework. The conventions both wrappers give their users:

- The program is called with arrays (and numbers) and returns its outputs: an array,
  or a tuple of arrays, that it made (`kk.zeros`, `kk.empty_like`). An argument is not
  an output: autograd keeps the arguments for the backward pass, so a program that
  changed one would change what the framework holds (the wrappers pass them read-only).
- A float array the caller differentiates is `Duplicated`, a float number `Active`,
  everything else `Const`."""
from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

import kernelkit as kk
from kernelkit.errors import KernelkitError

from .activities import Active, Const, Duplicated, Mode
from .program import _is_array, _name, record


def _holds_floats(value) -> bool:
    if _is_array(value):
        return np.issubdtype(np.dtype(value.dtype), np.floating)
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)


class ProgramCall:
    """`program(*arguments)` run once: plainly where no argument is `wanted`, else
    recorded in reverse mode (each launch's augmented forward run and taped) so that
    `reverse` can follow. Its `outputs` are the arrays the program returned."""

    def __init__(self, program, arguments: Sequence, wanted: Sequence[bool]):
        arguments = _shared(arguments)
        self.kinds = [_kind(value, want) for value, want in zip(arguments, wanted)]
        self.shadows = [kk.zeros_like(value) if kind is Duplicated else None
                        for value, kind in zip(arguments, self.kinds)]
        self.recording = None
        if all(kind is Const for kind in self.kinds):
            result = program(*arguments)
        else:
            activities = [Duplicated(value, shadow) if kind is Duplicated else kind(value)
                          for value, kind, shadow in
                          zip(arguments, self.kinds, self.shadows)]
            self.recording, result = record(Mode.REVERSE, program, activities)
        self.single = not isinstance(result, (tuple, list))
        self.outputs = _outputs(program, (result,) if self.single else tuple(result),
                                arguments)

    def carries(self, output) -> bool:
        """Whether `output` depends on a differentiated argument (it has a shadow)."""
        return self.recording is not None and self.recording.shadow_of(output) is not None

    def reverse(self, cotangents: Sequence) -> list:
        """The derivatives of the arguments (a shadow array for a `Duplicated` one, a
        float for an `Active` one, None for the others) given the outputs' cotangents
        (arrays of their shapes on their backend, or None for zero). A recording is
        reversed once: a second backward pass needs a new call."""
        recording, self.recording = self.recording, None
        assert recording is not None, "a ProgramCall is reversed at most once"
        for output, cotangent in zip(self.outputs, cotangents):
            if cotangent is not None and recording.shadow_of(output) is not None:
                recording.seed(output, cotangent)
        recording.reverse()
        return [shadow if kind is Duplicated else
                recording.derivatives[id(traced)] if kind is Active else None
                for kind, shadow, traced in zip(self.kinds, self.shadows,
                                                recording.arguments)]


def _shared(arguments: Sequence) -> list:
    """The arguments, each array over the same memory as an earlier one replaced by that
    one: `f(x, x)` gives the program one array twice, as the framework sees it, not two
    that overlap (which a recording refuses). The first position gets the whole derivative
    and the others zero; the framework adds them up."""
    seen = {}
    return [seen.setdefault(_memory(value), value) if _is_array(value) else value
            for value in arguments]


def _memory(array) -> tuple:
    interface = getattr(array, "__array_interface__", None) or \
        array.__cuda_array_interface__
    return (interface["data"][0], tuple(interface["shape"]), interface.get("strides"),
            interface["typestr"])


def _kind(value, wanted: bool) -> type:
    if not wanted or not _holds_floats(value):
        return Const
    return Duplicated if _is_array(value) else Active


def _outputs(program, outputs: tuple, arguments: Sequence) -> tuple:
    """The program's outputs, checked: arrays, none of them an argument."""
    for position, output in enumerate(outputs):
        where = "" if len(outputs) == 1 else f" (output {position})"
        if not _is_array(output):
            raise KernelkitError(
                f"program '{_name(program)}' returned {type(output).__name__}{where}: a "
                f"program wrapped for PyTorch or JAX returns an array, or a tuple of "
                f"arrays, that it made (kk.zeros, kk.empty_like) and its launches wrote")
        for index, argument in enumerate(arguments):
            if output is argument:
                raise KernelkitError(
                    f"program '{_name(program)}' returned its argument {index}{where}: "
                    f"its arguments are the framework's arrays, which it keeps for the "
                    f"backward pass; return a copy (kk.copyto into kk.empty_like)")
    return outputs
