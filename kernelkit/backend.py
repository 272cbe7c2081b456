"""The Backend contract, and finding backends.

The core imports no backend: backends register a class under the entry-point group
`kernelkit.backends` (kernelkit's own CPU backend does so in pyproject.toml), and are
found here by name or by the arrays they own."""
from __future__ import annotations

import functools
import time
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from .errors import BackendError, KernelkitError
from .ir import types as T
from .logs import get_logger
from .runtime.arguments import device_memory

log = get_logger("backend")


class Backend:
    """A place where kernels run. Subclasses implement the methods that raise here."""

    name: str = "abstract"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run kernels on this machine, or None if it can."""
        return None

    @classmethod
    def target_named(cls, name: str):
        """The compiler `Target` this backend uses for `name` (as offline tools name
        targets: "cpu", "sm_90"), or None if it has none of that name."""
        return None

    @classmethod
    def compile_only_stand_in(cls) -> Backend | None:
        """A backend that compiles kernels as this one would but runs none (its launches
        compile the kernel and raise `CompileOnlyError`): what a test suite or a fuzzer
        checks where this backend cannot run. None where there is no such backend, or it
        cannot compile here either."""
        return None

    @classmethod
    def backend_of(cls, array) -> Backend | None:
        """The backend instance that owns `array`, if it is an array of this backend."""
        return None

    # arrays
    def allocate(self, dtype, shape) -> Any:
        raise NotImplementedError

    def zeros(self, dtype, shape) -> Any:
        raise NotImplementedError

    def ones(self, dtype, shape) -> Any:
        raise NotImplementedError

    def full(self, dtype, shape, value) -> Any:
        """An array with every element `value`; a backend with a faster way overrides this
        one, which fills the array on the host and moves it here."""
        return self.to_backend(np.full(shape, value, dtype))

    def to_backend(self, array: np.ndarray) -> Any:
        raise NotImplementedError

    def to_numpy(self, array) -> np.ndarray:
        raise NotImplementedError

    def copyto(self, destination, source) -> None:
        raise NotImplementedError

    # kernels
    def argument_key(self, value) -> Any:
        """A cheap hashable key: values with equal keys have equal argument types."""
        raise NotImplementedError

    def argument_type(self, value, const: bool, name: str, kernel: str) -> T.IRType:
        raise NotImplementedError

    def default_workgroupsize(self, ndim: int) -> tuple[int, ...]:
        raise NotImplementedError

    def compiler_job(self, function, argtypes: tuple[T.IRType, ...], **options):
        raise NotImplementedError

    def prepare(self, compiled, argtypes: tuple[T.IRType, ...], ndim: int) -> Any:
        """Whatever `launch` needs besides the compiled kernel (argument packers ...)."""
        raise NotImplementedError

    def launch(self, prepared, args: tuple, ndrange: tuple[int, ...],
               workgroupsize: tuple[int, ...]) -> None:
        raise NotImplementedError

    def fast_launcher(self, prepared, args: tuple):
        """Optional: `fire(args, n) -> bool`, which launches `prepared` over the
        one-axis ndrange `n` when `args` are of the same kinds as these `args` and `n` is
        an ndrange `prepared` was launched over before, and otherwise does nothing and
        returns False (the caller then goes through `launch`). None: every launch goes
        through `launch`."""
        return None

    def synchronize(self) -> None:
        raise NotImplementedError


@functools.lru_cache(maxsize=1)
def backend_classes() -> dict[str, type]:
    classes = {}
    for entry in sorted(entry_points(group="kernelkit.backends"), key=lambda e: e.name):
        classes[entry.name] = entry
    return classes


@functools.lru_cache(maxsize=None)
def backend_class(name: str) -> type:
    entries = backend_classes()
    if name not in entries:
        raise BackendError(f"no backend named '{name}' is installed (installed: "
                           f"{', '.join(entries) or 'none'}); is kernelkit installed with pip?")
    return entries[name].load()


def backend_names() -> list[str]:
    return list(backend_classes())


def backend_unavailable_reason(name: str) -> str | None:
    try:
        return backend_class(name).unavailable_reason()
    except KernelkitError as error:
        return str(error)
    except ImportError as error:
        return f"the {name} backend cannot be imported: {error}"


@functools.lru_cache(maxsize=None)
def make_backend(name: str) -> Backend:
    """A shared instance of the backend called `name` with default settings."""
    start = time.perf_counter()
    try:
        backend = backend_class(name)()
    except Exception as error:
        log.info("the %s backend did not start: %s", name, error)
        raise
    log.info("started the %s backend in %.3f s: %r", name, time.perf_counter() - start, backend)
    return backend


def get_backend(array) -> Backend:
    """The backend that owns `array`. An array in host memory (NumPy's, or another
    library's that speaks DLPack or NumPy's array interface, such as a PyTorch CPU tensor)
    belongs to the default CPU backend."""
    for name in backend_classes():
        try:
            cls = backend_class(name)
        except ImportError:
            continue
        backend = cls.backend_of(array)
        if backend is not None:
            return backend
    message = f"no installed backend owns an object of type {type(array).__name__}"
    where = device_memory(array)
    if where is not None:
        message += (f": it is a device array ({where}), and no installed backend that can "
                    f"run here reads that memory (kk.backend_unavailable_reason(name) says "
                    f"why a backend cannot)")
    raise BackendError(message)
