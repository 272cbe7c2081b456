"""`compiler_job_from_backend`: the one hook through which AD learns about a backend.

It is a generic function dispatched on the backend's type, as `functools.singledispatch`
does: a backend registers its method with `compiler_job_from_backend.register(cls)`
(directly, or from a function named under the entry-point group `enzyme_ext.backends`,
which is given the generic function and registers with it, so that neither package
imports the other until AD is used). kernelkit's CPU and CUDA backends register through
the entry points, as a third party would. The method returns the backend's
`CompilerJob` for the primal kernel: the parent job of every derivative kernel."""
from __future__ import annotations

import dataclasses
import functools
from importlib.metadata import entry_points

from kernelkit.compiler.job import CompilerJob
from kernelkit.errors import BackendError
from kernelkit.ir.types import IRType

from .transform.plugin import MARKER


@functools.singledispatch
def _dispatch(backend, function, argtypes, **options) -> CompilerJob:
    raise _unregistered(backend)


_default = _dispatch.registry[object]


def _unregistered(backend) -> BackendError:
    kind = type(backend)
    return BackendError(
        f"enzyme_ext cannot differentiate kernels on a {kind.__module__}.{kind.__qualname__}: "
        f"no compiler_job_from_backend method is registered for it; register one with "
        f"@enzyme_ext.compiler_job_from_backend.register({kind.__qualname__}) (a function "
        f"(backend, fn, argtypes, **options) returning the backend's CompilerJob), or name a "
        f"function that does under the 'enzyme_ext.backends' entry points")


@functools.lru_cache(maxsize=1)
def _load_entry_points() -> None:
    """Let each installed `enzyme_ext.backends` entry point register its methods."""
    for entry in sorted(entry_points(group="enzyme_ext.backends"), key=lambda e: e.name):
        try:
            register = entry.load()
        except ImportError:      # a backend whose libraries are not installed here
            continue
        register(compiler_job_from_backend)


def compiler_job_from_backend(backend, fn, argtypes, **options) -> CompilerJob:
    """The backend's compiler job for the kernel `fn` (a `@kk.kernel`, its launch function
    `k(backend, workgroupsize)`, or the plain function) specialized to `argtypes` (IR
    types, or example arguments), with `workgroupsize=` among the options (taken from a
    launch function, else the backend's default)."""
    implementation = _dispatch.dispatch(type(backend))
    if implementation is _default:
        _load_entry_points()
        implementation = _dispatch.dispatch(type(backend))
        if implementation is _default:
            raise _unregistered(backend)
    kernel = getattr(fn, "kernel", fn)
    function = getattr(kernel, "function", kernel)
    if not all(isinstance(t, IRType) for t in argtypes):
        argtypes = kernel.argument_types(backend, tuple(argtypes))
    if options.get("workgroupsize") is None:
        size = getattr(fn, "workgroupsize", None)
        options["workgroupsize"] = size if size is not None else \
            backend.default_workgroupsize(1)
    return implementation(backend, function, tuple(argtypes), **options)


compiler_job_from_backend.register = _dispatch.register
compiler_job_from_backend.dispatch = _dispatch.dispatch
compiler_job_from_backend.registry = _dispatch.registry


def derivative_job(parent: CompilerJob, mode: str, activities: tuple[str, ...],
                   shadow_types: tuple, finite_scalars: bool = False) -> CompilerJob:
    """The job of a derivative kernel: the parent job asking the AD plugin for it
    (`shadow_types`: each shadow's IR type, None for arguments without one), with what
    the target says of its subgroups (how a group's sums are best taken: `group_sum.py`).
    With `finite_scalars`, the version for launches whose float scalar arguments are all
    finite (`transform/derivatives.scaled`). The driver gives the marker the job's
    work-group size."""
    attributes = (("activities", tuple(activities)), ("mode", mode),
                  ("shadows", tuple("" if t is None else t for t in shadow_types)),
                  ("subgroups_in_hardware", parent.config.target.subgroups_in_hardware))
    if finite_scalars:
        attributes += (("finite_scalars", True),)
    config = dataclasses.replace(parent.config,
                                 transforms=parent.config.transforms + ((MARKER, attributes),))
    return dataclasses.replace(parent, config=config)
