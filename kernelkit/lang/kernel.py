"""`@kernel`, launching, and reflection.

`k(backend, workgroupsize=None, ndrange=None)` gives a launch function (a `Launcher`'s);
calling it with the arguments launches. Each distinct (backend, workgroupsize, argument
types) is compiled once; later launches find it with one dictionary lookup.

The functions here a user calls raise kernelkit's errors with a traceback that ends at
the call (`errors.without_internal_frames`): a compile error's message points at the
kernel's line, and the frames of the compiler below would only hide it."""
from __future__ import annotations

import functools
import inspect
import struct
import threading
from typing import Callable, overload

import numpy as np

from ..errors import (InternalCompilerError, KernelkitError, LaunchError, SourceError,
                      keeps_internal_frames, raised_at_the_call, without_internal_frames)
from ..frontend.source import kernel_function
from ..ir import types as T
from ..runtime.arguments import array_type_of, struct_class
from ..runtime.geometry import as_sizes, fit_workgroupsize
from .intrinsics import Const


class Kernel:
    """A kernel: made by `@kk.kernel`, launched by `kernel(backend, workgroupsize)(args...,
    ndrange=n)`. `function` is the Python function compiled (see `kernel`)."""
    __kernelkit_kernel__ = True

    def __init__(self, function, source: str | None = None):
        if isinstance(function, Kernel):   # kk.kernel(k, source=...) of a kernel exec made
            function = function.__wrapped__
        if not inspect.isfunction(function):
            raise KernelkitError(f"@kk.kernel decorates a plain Python function, not "
                                 f"{type(function).__name__}")
        functools.update_wrapper(self, function)
        self.function = kernel_function(function, source)
        self.name = function.__name__
        signature = inspect.signature(function)
        self.parameters = list(signature.parameters)
        self.const = tuple(_is_const(p.annotation, function)
                           for p in signature.parameters.values())
        self._specializations: dict = {}
        self._flatteners: dict = {}   # where a specialization takes a dataclass or tuple
        self._launchers: dict = {}   # (backend, workgroupsize, ndrange) as given -> launch

    def __call__(self, backend, workgroupsize=None, ndrange=None):
        """The launch function `launch(*args, ndrange=None, workgroupsize=None)` of this
        kernel on `backend` (`Launcher.function`)."""
        # `k(backend, n)(args..., ndrange=m)` in a loop finds the same launcher each time.
        key = (backend, workgroupsize, ndrange) if _plain(workgroupsize) and \
            _plain(ndrange) else None
        try:
            launcher = self._launchers.get(key)
        except TypeError:  # a backend that cannot be hashed
            launcher = key = None
        if launcher is not None:
            return launcher
        try:
            launcher = self._new_launcher(backend, workgroupsize, ndrange)
        except KernelkitError as error:
            if keeps_internal_frames(error):
                raise
            raise without_internal_frames(error)  # KERNELKIT_TRACEBACK=full shows the rest
        if key is not None:
            if len(self._launchers) >= 64:
                self._launchers.clear()
            self._launchers[key] = launcher
        return launcher

    def _new_launcher(self, backend, workgroupsize, ndrange):
        if not hasattr(backend, "launch"):
            raise LaunchError(f"kernel '{self.name}': the first argument must be a backend such "
                              f"as kk.CPU(), got {type(backend).__name__}; launch with "
                              f"{self.name}(backend, workgroupsize)(args..., ndrange=n)")
        if workgroupsize is not None:
            workgroupsize = as_sizes(workgroupsize, "workgroupsize", self.name)
        return Launcher(self, backend, workgroupsize,
                        None if ndrange is None else as_sizes(ndrange, "ndrange",
                                                              self.name)).function

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"

    def argument_types(self, backend, args, for_reflection: bool = False) -> tuple:
        types = []
        for value, const, name in zip(args, self.const, self.parameters):
            if for_reflection and isinstance(value, np.ndarray):
                types.append(array_type_of(value.dtype, value.ndim, value.flags.c_contiguous,
                                           const, name, self.name))
            else:
                types.append(backend.argument_type(value, const, name, self.name))
        return tuple(types)

    def specialize(self, backend, argtypes: tuple, workgroupsize: tuple[int, ...]):
        from ..compiler.driver import compile_job
        job = backend.compiler_job(self.function, argtypes, workgroupsize=workgroupsize)
        try:
            return compile_job(job)
        except SourceError as error:   # in a device function: say which kernel called it
            error.in_kernel(self.name)
            raise
        except KernelkitError:
            raise
        except Exception as error:  # a compiler bug: say so, and keep the cause attached
            raise InternalCompilerError(f"internal compiler error: {type(error).__name__}: "
                                        f"{error}", kernel=self.name,
                                        hint="this is a bug in kernelkit; please report it "
                                             "with the kernel's source") from error


MAX_SPECIALIZATIONS = 256
"""Prepared specializations a kernel keeps (each also keeps its backend alive); past
that it forgets them and prepares again from the compiler's cache."""


def _plain(size) -> bool:
    """None, an int or a tuple of ints, exactly (a bool equals an int but is refused)."""
    kind = type(size)
    return size is None or kind is int or (kind is tuple and all(type(s) is int for s in size))


def _no_fast_launch(args, ndrange) -> bool:
    return False


class Launcher:
    """A kernel on a backend, with the static workgroupsize and ndrange it was given, and
    the kernels prepared for the arguments it was launched with. What users call is its
    `function`, not the launcher itself: calling a plain function with a keyword argument
    costs a third of calling an object's `__call__` with one (no tuple and dictionary of
    the arguments are made), which matters in a launch of a few microseconds."""
    __slots__ = ("kernel", "backend", "workgroupsize", "ndrange", "_arity", "_key",
                 "_static_group", "_prepared", "_fire", "_fast_launcher", "function")

    def __init__(self, kernel: Kernel, backend, workgroupsize, ndrange):
        self.kernel = kernel
        self.backend = backend
        self.workgroupsize = workgroupsize
        self.ndrange = ndrange
        self._arity = len(kernel.parameters)
        self._key = backend.argument_key
        self._fast_launcher = getattr(backend, "fast_launcher", None)
        # The common launch, `k(backend, groups)(args..., ndrange=m)` with ints (or tuples
        # of as many ints as the groups have axes), takes a shorter path to its geometry.
        self._static_group = ndrange is None and workgroupsize is not None
        # On that path: argument keys -> [prepared kernel, the backend's fast launcher or
        # None]; `_fire` is the fast launcher of the last launch's argument types.
        self._prepared: dict = {}
        self._fire = _no_fast_launch
        self.function = _launch_function(self)

    def geometry(self, ndrange, workgroupsize) -> tuple[tuple[int, ...], tuple[int, ...]]:
        kernel = self.kernel
        if ndrange is None:
            ndrange = self.ndrange
            if ndrange is None:
                raise LaunchError(f"kernel '{kernel.name}': no ndrange given; launch with "
                                  f"{kernel.name}(backend, workgroupsize)(args..., ndrange=n)")
        else:
            ndrange = (ndrange,) if type(ndrange) is int and ndrange >= 0 else \
                as_sizes(ndrange, "ndrange", kernel.name)
            if self.ndrange is not None and ndrange != self.ndrange:
                raise LaunchError(f"kernel '{kernel.name}': launched with ndrange={ndrange} but "
                                  f"created with the static ndrange {self.ndrange}")
        if workgroupsize is None:
            workgroupsize = self.workgroupsize
            if workgroupsize is None:
                workgroupsize = self.backend.default_workgroupsize(len(ndrange))
        else:
            workgroupsize = as_sizes(workgroupsize, "workgroupsize", kernel.name)
            if self.workgroupsize is not None and workgroupsize != self.workgroupsize:
                raise LaunchError(f"kernel '{kernel.name}': launched with "
                                  f"workgroupsize={workgroupsize} but created with the static "
                                  f"workgroupsize {self.workgroupsize}")
        if len(workgroupsize) != len(ndrange):
            workgroupsize = fit_workgroupsize(workgroupsize, ndrange, kernel.name)
        return ndrange, workgroupsize

    def launch(self, args: tuple, ndrange, workgroupsize) -> None:
        """A launch that the last fast launcher (`_fire`) did not take."""
        kernel = self.kernel
        if len(args) != self._arity:
            raise LaunchError(f"kernel '{kernel.name}' takes {len(kernel.parameters)} arguments "
                              f"({', '.join(kernel.parameters)}) but {len(args)} were given")
        shape = self._plain_shape(ndrange) if self._static_group and workgroupsize is None \
            else None
        if shape is not None:
            keys = tuple(map(self._key, args))
            entry = self._prepared.get(keys)
            if entry is None:
                entry = self._prepared[keys] = [
                    *self.prepare(args, shape, self.workgroupsize), None]
            prepared, flatten, fire = entry
            leaves = args if flatten is None else flatten(args)
            if fire is None and self._fast_launcher is not None:
                # None where these arguments cannot take it (another library's array,
                # say): asked again at the next launch with these keys.
                fire = entry[2] = _flattening(flatten, self._fast_launcher(prepared, leaves))
            if fire is not None:
                self._fire = fire
                if fire(args, ndrange):
                    return
            self.backend.launch(prepared, leaves, shape, self.workgroupsize)
            return
        ndrange, workgroupsize = self.geometry(ndrange, workgroupsize)
        prepared, flatten = self.prepare(args, ndrange, workgroupsize)
        self.backend.launch(prepared, args if flatten is None else flatten(args), ndrange,
                            workgroupsize)

    def _plain_shape(self, ndrange) -> tuple[int, ...] | None:
        """`ndrange` as a shape, where it is what the static work-group size takes as it
        is: an int for one axis, or a tuple of as many ints; else None."""
        axes = len(self.workgroupsize)
        if type(ndrange) is int:
            return (ndrange,) if axes == 1 and ndrange >= 0 else None
        if type(ndrange) is tuple and len(ndrange) == axes and \
                all(type(size) is int and size >= 0 for size in ndrange):
            return ndrange
        return None

    def prepare(self, args, ndrange, workgroupsize):
        """The kernel compiled and prepared for these arguments' types (once for each
        distinct backend, workgroupsize and argument types), and the function that gives
        the arguments as the prepared kernel takes them (`leaf_flattener`), or None where
        they are those."""
        kernel, backend = self.kernel, self.backend
        key = (backend, workgroupsize, tuple(map(self._key, args)))
        prepared = kernel._specializations.get(key)
        if prepared is None:
            argtypes = kernel.argument_types(backend, args)
            compiled = kernel.specialize(backend, argtypes, workgroupsize)
            leaves = tuple(leaf for argtype in argtypes for _, leaf in T.leaves(argtype))
            prepared = backend.prepare(compiled, leaves, len(ndrange))
            if len(kernel._specializations) >= MAX_SPECIALIZATIONS:
                kernel._specializations.clear()   # e.g. a new backend for every launch
                kernel._flatteners.clear()
            kernel._specializations[key] = prepared
            flatten = leaf_flattener(argtypes)
            if flatten is not None:
                kernel._flatteners[key] = flatten
        return prepared, kernel._flatteners.get(key)


def leaf_flattener(argtypes: tuple[T.IRType, ...]):
    """`flatten(args) -> tuple | None` where an argument is a dataclass or a tuple: the
    arguments as the compiled kernel takes them, each of those as its leaves
    (`T.leaves`: `p.x`, `p.inner.y`, `t[0]`), so that backends see only arrays and
    numbers; None where the arguments are of other classes or lengths (another
    launch's). None where no argument is a dataclass or a tuple."""
    if not any(isinstance(t, (T.StructType, T.TupleType)) for t in argtypes):
        return None
    names = [f"a{index}" for index in range(len(argtypes))]
    checks, parts, scope = [], [], {}
    for name, argtype in zip(names, argtypes):
        if isinstance(argtype, T.StructType):
            scope[f"{name}_class"] = struct_class(argtype)
            checks.append(f"type({name}) is not {name}_class")
        elif isinstance(argtype, T.TupleType):
            checks.append(f"type({name}) is not tuple or len({name}) != "
                          f"{len(argtype.elements)}")
        parts += [f"{name}{T.path_text(path)}" for path, _ in T.leaves(argtype)]
    source = (f"def flatten(args):\n"
              f"    try:\n"
              f"        {', '.join(names)}, = args\n"
              f"    except ValueError:\n"
              f"        return None\n")
    if checks:
        source += f"    if {' or '.join(checks)}:\n        return None\n"
    source += f"    return ({', '.join(parts)},)\n"
    exec(compile(source, "<kernelkit argument leaves>", "exec"), scope)  # noqa: S102
    return scope["flatten"]


def _flattening(flatten, fire):
    """A backend's fast launcher `fire` for arguments given as `flatten` flattens them."""
    if flatten is None or fire is None:
        return fire

    def fire_leaves(args, ndrange) -> bool:
        leaves = flatten(args)
        return leaves is not None and fire(leaves, ndrange)
    return fire_leaves


def _out_of_range_int(kernel, args) -> LaunchError | None:
    """The error for a Python int argument outside int64, the type a Python int takes
    (`struct` or ctypes refused to pack it), or None."""
    for name, value in zip(kernel.parameters, args):
        if type(value) is int and not -2**63 <= value < 2**63:
            hint = "pass it as np.uint64(...)" if 0 <= value < 2**64 else \
                "it fits in no 64-bit integer: reduce it (a kernel's integers have 64 bits)"
            return LaunchError(f"kernel '{kernel.name}': argument '{name}' is the Python int "
                               f"{value}, outside int64, the type a Python int argument "
                               f"takes; {hint}")
    return None


OBSERVERS: list = []
"""Who watches launches: `observe_launches`. Empty but while a program's launches are
recorded; a launch then costs one more test of a list."""


class observe_launches:
    """`with observe_launches(observer):` every launch made through a launch function
    (`k(backend, wg)(args..., ndrange=...)`) in this thread calls `observer(launch, args,
    ndrange, workgroupsize)` instead of launching; the observer launches (or not) itself,
    through `launch.launcher.launch`. What an extension that differentiates whole programs
    records its launches by; launches from other threads go on as usual."""

    def __init__(self, observer):
        self.observer = observer

    def __enter__(self):
        thread = threading.get_ident()
        observer = self.observer

        def watch(launch, args, ndrange, workgroupsize):
            if threading.get_ident() != thread:
                return launch.launcher.launch(args, ndrange, workgroupsize)
            return observer(launch, args, ndrange, workgroupsize)
        watch.observer = observer
        self.watch = watch
        OBSERVERS.append(watch)
        return self

    def __exit__(self, *exc):
        OBSERVERS.remove(self.watch)
        return False


def _launch_function(launcher: Launcher):
    kernel = launcher.kernel
    observers = OBSERVERS

    def launch(*args, ndrange=None, workgroupsize=None) -> None:
        try:
            if observers:
                return observers[-1](launch, args, ndrange, workgroupsize)
            if workgroupsize is None and (type(ndrange) is int or type(ndrange) is tuple) and \
                    launcher._fire(args, ndrange):
                return
            launcher.launch(args, ndrange, workgroupsize)
        except KernelkitError as error:
            if keeps_internal_frames(error):
                raise
            raise without_internal_frames(error)  # KERNELKIT_TRACEBACK=full shows the rest
        except (struct.error, OverflowError) as error:
            problem = _out_of_range_int(kernel, args)
            if problem is None:
                raise
            raise without_internal_frames(problem) from error

    launch.__name__ = launch.__qualname__ = kernel.name
    launch.__doc__ = (f"Launch kernel '{kernel.name}': {kernel.name}("
                      f"{', '.join(kernel.parameters)}, ndrange=..., workgroupsize=...)")
    launch.kernel, launch.backend = kernel, launcher.backend
    launch.workgroupsize, launch.ndrange = launcher.workgroupsize, launcher.ndrange
    launch.launcher = launcher
    return launch


@overload
def kernel(function: Callable, /, *, source: str | None = None) -> Kernel: ...


@overload
def kernel(*, source: str | None = None) -> Callable[[Callable], Kernel]: ...


def kernel(function: Callable | None = None, /, *, source: str | None = None):
    """Make a plain Python function a kernel:

        @kk.kernel
        def scale(y, a, x: kk.Const):
            i = kk.index(kk.Global)
            y[i] = a * x[i]

        scale(backend, 256)(y, 2.0, x, ndrange=len(y))

    The kernel is compiled from the function's source, which kernelkit reads where Python
    keeps it: a file, a Jupyter or IPython cell, the prompt of Python 3.13 or later,
    `python -c`, or text a program registered in `linecache`. Where Python did not keep it
    (`exec()` of a string, the prompt of Python 3.12 or earlier, a script read from
    standard input), give it as `source`, the text that defines the function: the whole
    text given to `exec()` (then the device functions it defines are found there too), or
    the function's definition alone.

        namespace = {"kk": kk}
        exec(text, namespace)
        scale = kk.kernel(namespace["scale"], source=text)

    `@kk.kernel(source=text)` decorates with a given source too. The kernel is compiled
    from `source`, not from the code Python compiled, so keep them the same."""
    if function is None:
        return functools.partial(Kernel, source=source)
    return Kernel(function, source)


def _is_const(annotation, function) -> bool:
    if annotation is Const:
        return True
    if isinstance(annotation, str):
        try:
            return eval(annotation, function.__globals__) is Const  # noqa: S307 - an annotation
        except Exception:
            return annotation.split(".")[-1] == "Const"
    return False


def _compiled_for_reflection(kernel: Kernel, backend, args, ndrange, workgroupsize):
    if not isinstance(kernel, Kernel):
        raise KernelkitError(f"expected a @kk.kernel, got {type(kernel).__name__}")
    kernel(backend)  # checks the backend
    ndrange, workgroupsize = Launcher(kernel, backend, None, None).geometry(ndrange,
                                                                            workgroupsize)
    if len(args) != len(kernel.parameters):
        raise LaunchError(f"kernel '{kernel.name}' takes {len(kernel.parameters)} arguments but "
                          f"{len(args)} were given")
    argtypes = kernel.argument_types(backend, args, for_reflection=True)
    return kernel.specialize(backend, argtypes, workgroupsize)


@raised_at_the_call
def code_ir(kernel: Kernel, backend, *args, ndrange=None, workgroupsize=None) -> str:
    """The kernel's typed IR after optimization, as text."""
    return _compiled_for_reflection(kernel, backend, args, ndrange, workgroupsize).ir


@raised_at_the_call
def code_llvm(kernel: Kernel, backend, *args, ndrange=None, workgroupsize=None) -> str:
    """The kernel's optimized LLVM IR."""
    return _compiled_for_reflection(kernel, backend, args, ndrange, workgroupsize).llvm_ir


@raised_at_the_call
def code_native(kernel: Kernel, backend, *args, ndrange=None, workgroupsize=None) -> str:
    """The kernel's native assembly (PTX on CUDA)."""
    return _compiled_for_reflection(kernel, backend, args, ndrange, workgroupsize).assembly()


__all__ = ["Kernel", "Launcher", "kernel", "code_ir", "code_llvm", "code_native"]
