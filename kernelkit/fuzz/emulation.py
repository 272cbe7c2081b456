"""What the reference's copy of a kernel calls instead of kernelkit's language: `kk`
and `math` as plain Python on NumPy scalars, for one work-item at a time.

`KernelLanguage` answers `kk.index`, `kk.groupsize`, `kk.ndrange`, `kk.subgroup_index`
for the work-item the scheduler (`reference`) has made current, hands the scheduler
what a subgroup operation needs (`subgroups`), also from inside a device function
(`device_call`), gives each work-group its own local memory, and checks the rules of
a race-free kernel as it goes: local and private memory read before it is written, or
an element one work-item writes and another reads or writes between two barriers,
raise `InvalidKernel` (the generator or shrinker produced a kernel whose result
depends on timing). `PythonMath` is `math` as kernels define it:
float64 arithmetic that gives nan or inf where Python's `math` would raise."""
from __future__ import annotations

import copy
import math as _math

import numpy as np

from ..lang import math as _kk_math
from ..lang.intrinsics import Cartesian, Const, Global, Group, Linear, Local, NTuple
from .subgroups import SUBGROUP_SIZE, SubgroupCall


class InvalidKernel(Exception):
    """The kernel breaks a rule the language leaves undefined (a race, an uninitialized
    read): its result cannot be compared."""


def linear_index(indices, extents) -> np.int64:
    result = 0
    for index, extent in zip(indices, extents):
        result = result * extent + index
    return np.int64(result)


class CheckedArray:
    """Local or private memory: a NumPy array whose elements remember, per phase
    (the time between two barriers), which work-item wrote and which read them."""

    def __init__(self, language: "KernelLanguage", dtype, shape):
        self.language = language
        self.values = np.zeros(shape, dtype)
        self.written = np.zeros(shape, bool)
        self.shape = self.values.shape
        self.writer: dict = {}
        self.readers: dict = {}
        self.phase = -1

    def _key(self, index):
        index = index if isinstance(index, tuple) else (index,)
        key = []
        for i, extent in zip(index, self.shape):
            i = int(i)
            i = i + extent if i < 0 else i
            if not 0 <= i < extent:
                raise InvalidKernel(f"index {index} out of bounds for shape {self.shape}")
            key.append(i)
        key = tuple(key)
        if self.phase != self.language.phase:
            self.phase = self.language.phase
            self.writer.clear()
            self.readers.clear()
        return key

    def __getitem__(self, index):
        key = self._key(index)
        item = self.language.item
        if not self.written[key]:
            raise InvalidKernel(f"element {key} of local/private memory read before written")
        writer = self.writer.get(key)
        if writer is not None and writer != item:
            raise InvalidKernel(f"element {key} written by work-item {writer} and read by "
                                f"{item} without a barrier between")
        self.readers.setdefault(key, set()).add(item)
        return self.values[key]

    def __setitem__(self, index, value):
        key = self._key(index)
        item = self.language.item
        others = self.readers.get(key, set()) - {item}
        writer = self.writer.get(key)
        if others or (writer is not None and writer != item):
            raise InvalidKernel(f"element {key} written by work-item {item} and used by "
                                f"another without a barrier between")
        self.values[key] = value
        self.written[key] = True
        self.writer[key] = item

    def __len__(self):
        return self.shape[0]


class AnyOf:
    """What a work-item hands the scheduler at `kk.synchronize_any(condition)`."""

    def __init__(self, condition, site: str):
        self.condition = bool(condition)
        self.site = site

    def __eq__(self, other):
        return isinstance(other, AnyOf) and other.site == self.site

    def __hash__(self):
        return hash(self.site)


def _called_at(meeting, site: str):
    """`meeting` (a barrier's site, an `AnyOf` or a `SubgroupCall`) in a device function
    called at `site`: items meet only at the same place by the same calls."""
    if isinstance(meeting, str):
        return f"{site}/{meeting}"
    meeting = copy.copy(meeting)
    meeting.site = f"{site}/{meeting.site}"
    return meeting


class KernelLanguage:
    Global, Local, Group = Global, Local, Group
    Linear, Cartesian, NTuple = Linear, Cartesian, NTuple
    Const = Const

    def __init__(self):
        self.item = None                  # (global index tuple) of the current work-item
        self.local_index = ()
        self.group_index = ()
        self.ndrange_sizes = ()
        self.group_sizes = ()
        self.group_counts = ()
        self.phase = 0
        self.group_memory: dict = {}
        for name in _kk_math.__all__:
            setattr(self, name, getattr(_kk_math, name))

    @staticmethod
    def kernel(function):
        return function

    def index(self, kind, style=Linear):
        if kind is Global:
            indices, extents = self.item, self.ndrange_sizes
        elif kind is Local:
            indices, extents = self.local_index, self.group_sizes
        else:
            indices, extents = self.group_index, self.group_counts
        if style is Linear:
            return linear_index(indices, extents)
        return tuple(np.int64(i) for i in indices)

    def groupsize(self):
        return tuple(np.int64(s) for s in self.group_sizes)

    def ndrange(self):
        return tuple(np.int64(s) for s in self.ndrange_sizes)

    def localmem(self, dtype, shape, site):
        memory = self.group_memory.get(site)
        if memory is None:
            memory = self.group_memory[site] = CheckedArray(self, dtype, shape)
        return memory

    def private(self, dtype, shape):
        return CheckedArray(self, dtype, shape)

    @staticmethod
    def any_of(condition, site):
        return AnyOf(condition, site)

    @staticmethod
    def subgroup_size():
        return np.int64(SUBGROUP_SIZE)

    def subgroup_index(self):
        return linear_index(self.local_index, self.group_sizes) % np.int64(SUBGROUP_SIZE)

    @staticmethod
    def subgroup_call(operation, site, *operands):
        return SubgroupCall(operation, site, operands)

    @staticmethod
    def device_call(site, call):
        """Runs `call`, the generator of a device function that meets the other items
        (a subgroup operation, a barrier), called at `site`: hands the scheduler its
        meetings, named by `site` too, and gives back its answers and its result."""
        answer = None
        while True:
            try:
                meeting = call.send(answer)
            except StopIteration as stop:
                return stop.value
            answer = yield _called_at(meeting, site)

    def print(self, *args, **kwargs):
        pass

    # atomics: the array's dtype throughout, wrapping as the device does
    @staticmethod
    def _update(array, index, function):
        old = array[index]
        array[index] = function(old)
        return old

    def atomic_add(self, array, index, value):
        return self._update(array, index, lambda old: old + value)

    def atomic_sub(self, array, index, value):
        return self._update(array, index, lambda old: old - value)

    def atomic_min(self, array, index, value):
        return self._update(array, index, lambda old: min(old, value))

    def atomic_max(self, array, index, value):
        return self._update(array, index, lambda old: max(old, value))

    def atomic_and_(self, array, index, value):
        return self._update(array, index, lambda old: old & value)

    def atomic_or_(self, array, index, value):
        return self._update(array, index, lambda old: old | value)

    def atomic_xor(self, array, index, value):
        return self._update(array, index, lambda old: old ^ value)

    def atomic_exchange(self, array, index, value):
        return self._update(array, index, lambda old: value)


def _float(x) -> float:
    return float(x)


class PythonMath:
    """`math` in a kernel: float64 in, a Python float out; domain and range errors give
    nan and inf as the device's functions do instead of raising."""

    pi, e, inf, nan, tau = _math.pi, _math.e, _math.inf, _math.nan, _math.tau

    def __getattr__(self, name):
        function = getattr(_math, name)
        fallback = _NUMPY_FALLBACK.get(name)

        def call(*args):
            args = [_float(a) for a in args]
            try:
                return function(*args)
            except (ValueError, OverflowError, ZeroDivisionError):
                if fallback is None:
                    raise
                with np.errstate(all="ignore"):
                    return float(fallback(*[np.float64(a) for a in args]))
        call.__name__ = name
        setattr(self, name, call)
        return call


def _gamma(x):
    if x <= 0 and x == np.floor(x):
        return np.nan if x != 0 else np.copysign(np.inf, x)
    return np.inf


def _lgamma(x):
    return np.inf


_NUMPY_FALLBACK = {
    "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "pow": np.power, "atan2": np.arctan2,
    "hypot": np.hypot, "fmod": np.fmod, "gamma": _gamma, "lgamma": _lgamma,
    "cbrt": np.cbrt, "fabs": np.fabs, "erf": lambda x: x, "erfc": lambda x: x,
}
