"""The functions and constants a kernel calls: `kk.index`, `kk.localmem`, atomics ...

Each has the signature a kernel calls it with and a docstring with an example; on the
host it raises a `KernelkitError` that says where it belongs. Inside a kernel the
frontend translates each into IR (see `kernelkit.frontend.intrinsics`), so the bodies
here never run there. Their arguments are positional, as they are in kernels.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, TypeVar

from numpy.typing import DTypeLike

from ..errors import KernelkitError, keeps_internal_frames, without_internal_frames

Result = TypeVar("Result")


class IndexKind(enum.Enum):
    """Which position `kk.index` gives: among all work-items (`kk.Global`), within the
    work-group (`kk.Local`), or of the work-group among the groups (`kk.Group`)."""
    GLOBAL = "Global"
    LOCAL = "Local"
    GROUP = "Group"

    def __repr__(self) -> str:
        return f"kk.{self.value}"


class IndexStyle(enum.Enum):
    """How `kk.index` gives a position: one int in row-major order (`kk.Linear`), or a
    tuple with one int per dimension (`kk.Cartesian` and `kk.NTuple`, the same here)."""
    LINEAR = "Linear"
    CARTESIAN = "Cartesian"
    NTUPLE = "NTuple"

    def __repr__(self) -> str:
        return f"kk.{self.value}"


Global, Local, Group = IndexKind.GLOBAL, IndexKind.LOCAL, IndexKind.GROUP
Linear, Cartesian, NTuple = IndexStyle.LINEAR, IndexStyle.CARTESIAN, IndexStyle.NTUPLE


class Const:
    """Annotate a kernel parameter with `kk.Const`: the array is only read, and no other
    argument aliases it, so the compiler may cache and reorder its loads.

        @kk.kernel
        def copy(y, x: kk.Const):
            i = kk.index(kk.Global)
            y[i] = x[i]
    """


def _outside_kernel(name: str) -> KernelkitError:
    return KernelkitError(f"kk.{name}() can only be called inside a @kk.kernel function (or a "
                          f"function a kernel calls); see help(kk.{name})")


# -- work-item geometry -------------------------------------------------------------------

def index(kind: IndexKind, style: IndexStyle = Linear, /) -> Any:
    """The position of this work-item: `kind` is `kk.Global` (among all work-items),
    `kk.Local` (within its work-group) or `kk.Group` (its work-group's position among
    the groups); `style` is `kk.Linear` (one int, row-major; the default) or
    `kk.Cartesian` / `kk.NTuple` (a tuple, one int per dimension of the ndrange).

        @kk.kernel
        def transpose(out, a: kk.Const):
            i, j = kk.index(kk.Global, kk.NTuple)
            out[j, i] = a[i, j]
    """
    raise _outside_kernel("index")


def groupsize() -> tuple[int, ...]:
    """The work-group's size along each dimension, as a tuple (fixed when the kernel is
    compiled, so it can size `kk.localmem`).

        @kk.kernel
        def reverse_in_groups(y, x: kk.Const):
            i, l = kk.index(kk.Global), kk.index(kk.Local)
            (n,) = kk.groupsize()
            tile = kk.localmem(np.float32, kk.groupsize())
            tile[l] = x[i]
            kk.synchronize()
            y[i] = tile[n - 1 - l]
    """
    raise _outside_kernel("groupsize")


def ngroups() -> tuple[int, ...]:
    """The number of work-groups along each dimension, as a tuple: the ndrange divided
    by the work-group size, rounded up (a last group that sticks out counts).

        @kk.kernel
        def group_numbers(out):
            i, j = kk.index(kk.Global, kk.NTuple)
            gi, gj = kk.index(kk.Group, kk.NTuple)
            rows, columns = kk.ngroups()
            out[i, j] = gi * columns + gj    # as kk.index(kk.Group) numbers them
    """
    raise _outside_kernel("ngroups")


def ndrange() -> tuple[int, ...]:
    """The global size: the number of work-items along each dimension, as a tuple (the
    `ndrange` the kernel was launched with). `kk.ndrange()[0]` is the global size of a
    one-dimensional launch; the work-items per group are `kk.groupsize()`, the groups
    `kk.ngroups()`.

        @kk.kernel
        def grid_stride_scale(y, a):
            (n,) = kk.ndrange()
            for p in range(kk.index(kk.Global), len(y), n):
                y[p] *= a
    """
    raise _outside_kernel("ndrange")


# -- memory -------------------------------------------------------------------------------

def localmem(dtype: DTypeLike, shape: int | tuple[int, ...], /) -> Any:
    """An array in the work-group's shared memory (one per group, shared by its
    work-items; CUDA's shared memory). `shape` must be known when the kernel is compiled:
    literals, module-level constants or `kk.groupsize()` with a static workgroupsize.
    Follow writes that other work-items read with `kk.synchronize()`.

        @kk.kernel
        def shift_left(y, x: kk.Const):
            i, l = kk.index(kk.Global), kk.index(kk.Local)
            tile = kk.localmem(np.float32, 64)
            tile[l] = x[i]
            kk.synchronize()
            y[i] = tile[(l + 1) % 64]
    """
    raise _outside_kernel("localmem")


def private(dtype: DTypeLike, shape: int | tuple[int, ...], /) -> Any:
    """A small array of this work-item's own (registers where the compiler can), of a
    shape known when the kernel is compiled.

        @kk.kernel
        def three_point_sum(y, x: kk.Const):
            i = kk.index(kk.Global)
            window = kk.private(np.float32, 3)
            for k in range(3):
                window[k] = x[i + k]
            y[i] = window[0] + window[1] + window[2]
    """
    raise _outside_kernel("private")


def synchronize(backend: Any = None) -> None:
    """Two functions in one name, as in KernelAbstractions:

    - inside a kernel, `kk.synchronize()` is a work-group barrier: every work-item of the
      group waits there until all have arrived, and sees what the others wrote to local
      memory before it (see `kk.localmem` for an example);
    - on the host, `kk.synchronize(backend)` waits until every launch on `backend` has
      finished.

        saxpy(backend, 256)(y, 2.0, x, ndrange=n)
        kk.synchronize(backend)
    """
    if backend is None:
        raise KernelkitError(
            "kk.synchronize() without a backend is a work-group barrier and only means something "
            "inside a kernel; on the host call kk.synchronize(backend)")
    try:
        backend.synchronize()
    except KernelkitError as error:   # e.g. a kernel's out-of-bounds access, found here
        if keeps_internal_frames(error):
            raise
        raise without_internal_frames(error)  # KERNELKIT_TRACEBACK=full shows the rest


def synchronize_any(condition: Any, /) -> bool:
    """A work-group barrier that returns, on every work-item of the group, whether
    `condition` was true on any of them.

        @kk.kernel
        def clip_groups_with_outliers(a):
            i = kk.index(kk.Global)
            if kk.synchronize_any(a[i] > 5):
                a[i] = min(a[i], 5)
    """
    raise _outside_kernel("synchronize_any")


# -- atomics ------------------------------------------------------------------------------

def atomic_add(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] += value` as one indivisible step, whatever other work-items do to
    the element at the same time; returns the element's value from before. The array
    holds 32- or 64-bit numbers (16-bit floats too).

        @kk.kernel
        def histogram(bins, keys: kk.Const):
            kk.atomic_add(bins, keys[kk.index(kk.Global)], 1)
    """
    raise _outside_kernel("atomic_add")


def atomic_sub(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] -= value` atomically; returns the value from before (see
    `kk.atomic_add`).

        @kk.kernel
        def take_tickets(remaining, mine):
            mine[kk.index(kk.Global)] = kk.atomic_sub(remaining, 0, 1)
    """
    raise _outside_kernel("atomic_sub")


def atomic_min(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] = min(array[index], value)` atomically; returns the value from
    before.

        @kk.kernel
        def smallest(result, x: kk.Const):
            kk.atomic_min(result, 0, x[kk.index(kk.Global)])
    """
    raise _outside_kernel("atomic_min")


def atomic_max(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] = max(array[index], value)` atomically; returns the value from
    before.

        @kk.kernel
        def largest(result, x: kk.Const):
            kk.atomic_max(result, 0, x[kk.index(kk.Global)])
    """
    raise _outside_kernel("atomic_max")


def atomic_and_(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] &= value` atomically, on integers; returns the value from before.

        @kk.kernel
        def all_positive(flag, x: kk.Const):
            kk.atomic_and_(flag, 0, int(x[kk.index(kk.Global)] > 0))
    """
    raise _outside_kernel("atomic_and_")


def atomic_or_(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] |= value` atomically, on integers; returns the value from before.

        @kk.kernel
        def any_negative(flag, x: kk.Const):
            kk.atomic_or_(flag, 0, int(x[kk.index(kk.Global)] < 0))
    """
    raise _outside_kernel("atomic_or_")


def atomic_xor(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """`array[index] ^= value` atomically, on integers; returns the value from before.

        @kk.kernel
        def parity(result, bits: kk.Const):
            kk.atomic_xor(result, 0, bits[kk.index(kk.Global)])
    """
    raise _outside_kernel("atomic_xor")


def atomic_exchange(array: Any, index: int | tuple[int, ...], value: Any, /) -> Any:
    """Store `value` in `array[index]` atomically and return the value it replaced.

        @kk.kernel
        def last_writer(slot, previous):
            i = kk.index(kk.Global)
            previous[i] = kk.atomic_exchange(slot, 0, i)
    """
    raise _outside_kernel("atomic_exchange")


def atomic_cas(array: Any, index: int | tuple[int, ...], expected: Any, new: Any, /) -> Any:
    """Compare and swap: store `new` in `array[index]` if it holds `expected`, atomically;
    returns the value it held (equal to `expected` where the swap happened).

        @kk.kernel
        def claim_first(owner):
            i = kk.index(kk.Global)
            kk.atomic_cas(owner, 0, -1, i)    # the first work-item to get there wins
    """
    raise _outside_kernel("atomic_cas")


ATOMICS = {atomic_add: "add", atomic_sub: "sub", atomic_min: "min", atomic_max: "max",
           atomic_and_: "and", atomic_or_: "or", atomic_xor: "xor", atomic_exchange: "exchange"}


# -- printing and function references -----------------------------------------------------

def print_(*values: Any, sep: str = " ", end: str = "\n") -> None:
    """Print numbers and strings from a kernel (`print` works in kernels too), with
    f-strings' format specifications or printf-style `%` formatting, written as Python
    writes them (what C's printf cannot write, such as centring, is a compile error).
    `sep` and `end` must be string constants. Output from different work-items may come
    in any order.

        @kk.kernel
        def show(x: kk.Const):
            i = kk.index(kk.Global)
            kk.print("x[", i, "] =", x[i])
            kk.print(f"x[{i}] = {x[i]:.3f}")
            kk.print("x[%d] = %8.2e" % (i, x[i]))
    """
    raise _outside_kernel("print")


print_.__name__ = print_.__qualname__ = "print"


def deferred(function: Callable[..., Result], /, *args: Any) -> Callable[..., Result]:
    """A reference to `function` compiled for the types of `args`; call it like the
    function. The function is compiled into the kernel's module after the kernel itself.

        def cube(v):
            return v * v * v

        @kk.kernel
        def cubes(y, x: kk.Const):
            i = kk.index(kk.Global)
            f = kk.deferred(cube, x[i])
            y[i] = f(x[i])
    """
    raise _outside_kernel("deferred")
