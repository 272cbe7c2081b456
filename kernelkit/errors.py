"""The exceptions a user can cause. Each names the kernel, where in its source the
problem is, and what to do about it."""
from __future__ import annotations


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


class LaunchError(KernelkitError):
    """A launch was asked for with wrong arguments or sizes."""


class BackendError(KernelkitError):
    """A backend cannot be used or cannot do what was asked."""
