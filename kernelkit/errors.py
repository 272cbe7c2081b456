"""The exceptions a user can cause. Each names the kernel, where in its source the
problem is, and what to do about it.

An error raised by a launch (or another function of kernelkit a user calls) reaches the
user with a traceback that ends at that call: the frames of kernelkit's compiler and
runtime say nothing about the user's program, and the error's message already points
at the line of the kernel at fault. `KERNELKIT_TRACEBACK=full` keeps every frame, and
so does an `InternalCompilerError` (a bug in kernelkit, whose frames are its report)."""
from __future__ import annotations

import functools
import os

TRACEBACK_VARIABLE = "KERNELKIT_TRACEBACK"
"""The environment variable that, set to `full`, keeps kernelkit's own frames in the
tracebacks of the errors it raises."""


class KernelkitError(Exception):
    """Base class of every error kernelkit raises on purpose."""


class SourceError(KernelkitError):
    """An error that points at a line of a kernel's Python source."""

    def __init__(self, message: str, *, kernel: str | None = None, function: str | None = None,
                 file: str | None = None, line: int | None = None, source_line: str | None = None,
                 hint: str | None = None):
        self.message = message
        self.kernel = kernel
        self.function = function
        self.file = file
        self.line = line
        self.source_line = source_line
        self.hint = hint
        super().__init__(self._render())

    def in_kernel(self, kernel: str) -> SourceError:
        """This error, saying which kernel it is in where it did not yet (an error in a
        device function raised before the kernel was known)."""
        if self.kernel is None:
            self.kernel = kernel
            self.args = (self._render(),)
        return self

    def _render(self) -> str:
        where = []
        if self.kernel:
            where.append(f"in kernel '{self.kernel}'")
        if self.function and self.function != self.kernel:
            where.append(f"in device function '{self.function}'")
        if self.file:
            where.append(f"at {self.file}:{self.line}" if self.line else f"in {self.file}")
        text = self.message
        if where:
            text = " ".join(where) + ":\n"
            if self.source_line:
                text += f"    {self.source_line.strip()}\n"
            text += self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class CompileError(SourceError):
    """The kernel cannot be compiled: unsupported syntax, an undefined name, a type error."""


class InternalCompilerError(CompileError):
    """The compiler failed on a kernel it should have compiled or refused: a bug in
    kernelkit. The exception it failed with is its `__cause__`."""


class LaunchError(KernelkitError):
    """A launch was asked for with wrong arguments or sizes."""


class BackendError(KernelkitError):
    """A backend cannot be used or cannot do what was asked."""


class CompileOnlyError(BackendError):
    """A launch on a compile-only backend (such as a backend's
    `Backend.compile_only_stand_in()`): the kernel was compiled, not run."""


class RaceError(SourceError):
    """Two work-items of one launch touched one array element, at least one of them
    writing, with no barrier ordering them and not both atomically (found by the CPU's
    race detector in debug mode, `KERNELKIT_DEBUG=races`). It points at the second
    access; the message names the element, both work-items and both source lines.

    `array` names the array, `index` is the element's index tuple, `work_items` the two
    work-items' global indices (the earlier access first) and `lines` their (file,
    line) pairs."""

    def __init__(self, message: str, *, array: str, index: tuple, work_items: tuple,
                 lines: tuple, **where):
        self.array = array
        self.index = index
        self.work_items = work_items
        self.lines = lines
        super().__init__(message, **where)


def keeps_internal_frames(error: BaseException) -> bool:
    """Whether `error` reaches the user with kernelkit's own frames: a bug in kernelkit,
    or any error while `KERNELKIT_TRACEBACK=full`."""
    return isinstance(error, InternalCompilerError) or \
        os.environ.get(TRACEBACK_VARIABLE, "").lower() == "full"


def without_internal_frames(error: KernelkitError) -> KernelkitError:
    """`error` to raise again from the function of kernelkit the user called (where
    `keeps_internal_frames(error)` is false):

        except KernelkitError as error:
            if keeps_internal_frames(error):
                raise
            raise without_internal_frames(error)

    Its traceback then ends at that call. The exception it was raised while handling
    (an internal detail) is not shown; one it was raised `from` on purpose still is."""
    error.__suppress_context__ = True
    return error.with_traceback(None)


def raised_at_the_call(function):
    """`function` raising kernelkit's errors as from the user's call to it
    (`without_internal_frames`); for functions off the launch path (the launch writes the
    same lines out, a call cheaper)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except KernelkitError as error:
            if keeps_internal_frames(error):
                raise
            raise without_internal_frames(error)  # KERNELKIT_TRACEBACK=full shows the rest
    return call
