"""A launch's arrays checked natively: are they the ones it packed last?

A fast launcher (`runtime._fast_launcher`) keeps the record it packed last and runs it
again where the arrays are the same (the same data address, extents, strides where the
kernel reads them, element type and flags), with the scalars of this launch written
into it: a scalar is packed anew every launch (a few tens of nanoseconds), since users
pass a new time step or coefficient each time. Asked in Python, the arrays' fields are
a dozen attribute reads per array (0.7 us for saxpy's three arguments, a tenth of a
100k-element launch on 2 cores). Natively, `@matches` reads them from the objects
themselves and compares them with the launch's fingerprint, the words the launcher
wrote when it packed the record (`fingerprint_source`): a `Head` (the kernel's `Key`,
so that the fingerprint is also the key the native launch takes, the argument count,
the tuple type), then for each argument a `Print`: for a scalar its header is `SCALAR`
(its type the launcher checks, its value it packs); for an array it is ndim + 1
(+ `STRIDED` where its strides are compared), and the extents follow it, then the
strides (in bytes).

`@matches` is compiled with the mailbox's functions, which call it before they run or
lead a launch (`work_sharing`). It reads CPython's tuple and NumPy's array struct (the
public `PyArrayObject_fields`) at offsets found on probe objects when this module is
imported, each checked against what Python says of them; on an interpreter where one
does not check out, `LAYOUT` is None and the launcher asks in Python."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from . import interrupts

C_CONTIGUOUS = 0x1   # NumPy's NPY_ARRAY_C_CONTIGUOUS
WRITEABLE = 0x400    # NPY_ARRAY_WRITEABLE
SCALAR = 0
STRIDED = 256        # in an array's first word: its strides follow its extents
_i64 = ctypes.c_int64


class Key(ctypes.Structure):
    """How the native calls find a kernel (`work_sharing`): the mailbox, the kernel's
    group function."""

    _fields_ = [("mailbox", _i64), ("entry", _i64)]


class Head(ctypes.Structure):
    """A fingerprint's first words."""

    _fields_ = [("key", Key), ("count", _i64), ("tuple", _i64)]


class Print(ctypes.Structure):
    """An argument's words in a fingerprint: a scalar's are its `header` and `type`
    (both 0); an array's all of them, then its extents (and strides)."""

    _fields_ = [("header", _i64), ("type", _i64), ("data", _i64), ("descr", _i64),
                ("mask", _i64), ("flags", _i64)]


_SCALAR_WORDS = 2


@dataclass(frozen=True, slots=True)
class Layout:
    """Byte offsets in CPython's objects (`type`) and tuples, and in NumPy's arrays."""

    type: int
    size: int
    items: int
    data: int
    ndim: int
    extents: int
    strides: int
    descr: int
    flags: int


def _probe() -> Layout | None:
    """The layout of this interpreter's objects, each offset checked on probe objects;
    None where one does not check out (another interpreter, another pointer size)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None

    def word(address: int) -> int:
        return ctypes.c_int64.from_address(address).value

    def int32(address: int) -> int:
        return ctypes.c_int32.from_address(address).value

    items = (np.zeros(3), 2.5, (1, 2))
    base = id(items)
    if word(base + 8) != id(tuple) or word(base + 16) != 3 or \
            [word(base + 24 + 8 * i) for i in range(3)] != [id(item) for item in items]:
        return None
    arrays = [np.zeros(3, np.float64), np.arange(12, dtype=np.int8)[3:], np.ones((2, 3)).T,
              np.zeros((2, 3, 4), np.float32)[:, ::2], np.zeros(5, np.int32)]
    arrays[-1].setflags(write=False)
    expected = [a.__array_interface__["data"][0] for a in arrays]
    data = next((offset for offset in range(16, 72, 8)
                 if all(word(id(a) + offset) == e for a, e in zip(arrays, expected))), None)
    if data is None:
        return None
    layout = Layout(type=8, size=16, items=24, data=data, ndim=data + 8, extents=data + 16,
                    strides=data + 24, descr=data + 40, flags=data + 48)
    for a in arrays:
        address = id(a)
        extents, strides = word(address + layout.extents), word(address + layout.strides)
        flags = int32(address + layout.flags)
        if word(address + layout.type) != id(np.ndarray) or \
                int32(address + layout.ndim) != a.ndim or \
                [word(extents + 8 * i) for i in range(a.ndim)] != list(a.shape) or \
                [word(strides + 8 * i) for i in range(a.ndim)] != list(a.strides) or \
                word(address + layout.descr) != id(a.dtype) or \
                bool(flags & C_CONTIGUOUS) != a.flags.c_contiguous or \
                bool(flags & WRITEABLE) != a.flags.writeable:
            return None
    return layout


LAYOUT = _probe()

_SOURCE = """
@{interrupts} = external global i64
@{seen} = external global i64

define private i1 @matches(ptr %args, ptr %fingerprint) nounwind {{
start:
  %interrupts = load atomic i64, ptr @{interrupts} monotonic, align 8
  %seen = load atomic i64, ptr @{seen} monotonic, align 8
  %quiet = icmp eq i64 %interrupts, %seen
  br i1 %quiet, label %uninterrupted, label %differs
uninterrupted:
  %count.word = getelementptr i8, ptr %fingerprint, i64 {head.count.offset}
  %count = load i64, ptr %count.word, align 8
  %tuple.word = getelementptr i8, ptr %fingerprint, i64 {head.tuple.offset}
  %tuple = load i64, ptr %tuple.word, align 8
  %args.type.field = getelementptr i8, ptr %args, i64 {type}
  %args.type = load i64, ptr %args.type.field, align 8
  %is.tuple = icmp eq i64 %args.type, %tuple
  br i1 %is.tuple, label %sized, label %differs
sized:
  %size.field = getelementptr i8, ptr %args, i64 {size}
  %size = load i64, ptr %size.field, align 8
  %counted = icmp eq i64 %size, %count
  br i1 %counted, label %next, label %differs
next:
  %index = phi i64 [ 0, %sized ], [ %index.next, %scalar ], [ %index.next, %array.same ]
  %word = phi i64 [ {head_words}, %sized ], [ %word.after.scalar, %scalar ],
                  [ %word.after.array, %array.same ]
  %all = icmp eq i64 %index, %count
  br i1 %all, label %same, label %argument
argument:
  %items = getelementptr i8, ptr %args, i64 {items}
  %slot = getelementptr ptr, ptr %items, i64 %index
  %object = load ptr, ptr %slot, align 8
  %index.next = add i64 %index, 1
  %header.word = getelementptr i64, ptr %fingerprint, i64 %word
  %header = load i64, ptr %header.word, align 8
  %second.word = getelementptr i8, ptr %header.word, i64 {array.type.offset}
  %second = load i64, ptr %second.word, align 8
  %is.scalar = icmp eq i64 %header, {scalar}
  br i1 %is.scalar, label %scalar, label %array
scalar:
  %word.after.scalar = add i64 %word, {scalar_words}
  br label %next
array:
  %type.field = getelementptr i8, ptr %object, i64 {type}
  %type = load i64, ptr %type.field, align 8
  %is.array = icmp eq i64 %type, %second
  br i1 %is.array, label %array.fields, label %differs
array.fields:
  %data.word = getelementptr i8, ptr %header.word, i64 {array.data.offset}
  %data.expected = load i64, ptr %data.word, align 8
  %descr.word = getelementptr i8, ptr %header.word, i64 {array.descr.offset}
  %descr.expected = load i64, ptr %descr.word, align 8
  %mask.word = getelementptr i8, ptr %header.word, i64 {array.mask.offset}
  %mask = load i64, ptr %mask.word, align 8
  %flags.word = getelementptr i8, ptr %header.word, i64 {array.flags.offset}
  %flags.expected = load i64, ptr %flags.word, align 8
  %data.field = getelementptr i8, ptr %object, i64 {data}
  %data = load i64, ptr %data.field, align 8
  %ndim.field = getelementptr i8, ptr %object, i64 {ndim}
  %ndim.narrow = load i32, ptr %ndim.field, align 4
  %ndim = sext i32 %ndim.narrow to i64
  %descr.field = getelementptr i8, ptr %object, i64 {descr}
  %descr = load i64, ptr %descr.field, align 8
  %flags.field = getelementptr i8, ptr %object, i64 {flags}
  %flags.narrow = load i32, ptr %flags.field, align 4
  %flags.all = zext i32 %flags.narrow to i64
  %flags = and i64 %flags.all, %mask
  %axes.plus.one = and i64 %header, 255
  %axes = sub i64 %axes.plus.one, 1
  %strided.bit = and i64 %header, {strided}
  %strided = icmp ne i64 %strided.bit, 0
  %same.data = icmp eq i64 %data, %data.expected
  %same.ndim = icmp eq i64 %ndim, %axes
  %same.descr = icmp eq i64 %descr, %descr.expected
  %same.flags = icmp eq i64 %flags, %flags.expected
  %same.one = and i1 %same.data, %same.ndim
  %same.two = and i1 %same.descr, %same.flags
  %same.fields = and i1 %same.one, %same.two
  br i1 %same.fields, label %shape, label %differs
shape:
  %extents.field = getelementptr i8, ptr %object, i64 {extents}
  %extents = load ptr, ptr %extents.field, align 8
  %strides.field = getelementptr i8, ptr %object, i64 {strides}
  %strides = load ptr, ptr %strides.field, align 8
  %extents.expected = getelementptr i8, ptr %header.word, i64 {array_bytes}
  %strides.expected = getelementptr i64, ptr %extents.expected, i64 %axes
  br label %axes.loop
axes.loop:
  %axis = phi i64 [ 0, %shape ], [ %axis.next, %axis.same ]
  %more = icmp slt i64 %axis, %axes
  br i1 %more, label %extent.check, label %array.same
extent.check:
  %extent.slot = getelementptr i64, ptr %extents, i64 %axis
  %extent = load i64, ptr %extent.slot, align 8
  %extent.expected.slot = getelementptr i64, ptr %extents.expected, i64 %axis
  %extent.expected = load i64, ptr %extent.expected.slot, align 8
  %same.extent = icmp eq i64 %extent, %extent.expected
  br i1 %same.extent, label %stride.check, label %differs
stride.check:
  br i1 %strided, label %stride.compare, label %axis.same
stride.compare:
  %stride.slot = getelementptr i64, ptr %strides, i64 %axis
  %stride.value = load i64, ptr %stride.slot, align 8
  %stride.expected.slot = getelementptr i64, ptr %strides.expected, i64 %axis
  %stride.expected = load i64, ptr %stride.expected.slot, align 8
  %same.stride = icmp eq i64 %stride.value, %stride.expected
  br i1 %same.stride, label %axis.same, label %differs
axis.same:
  %axis.next = add i64 %axis, 1
  br label %axes.loop
array.same:
  %per.axis = select i1 %strided, i64 2, i64 1
  %axis.words = mul i64 %axes, %per.axis
  %word.past.fields = add i64 %word, {array_words}
  %word.after.array = add i64 %word.past.fields, %axis.words
  br label %next
same:
  ret i1 true
differs:
  ret i1 false
}}
"""

def matches_definition() -> str | None:
    """LLVM IR text defining `i1 @matches(ptr %args, ptr %fingerprint)`: whether the
    tuple `args` holds what `fingerprint` says, and no interrupt came that the runtime
    has not seen (`interrupts`: the launch then takes the Python path, which says what
    the interrupt cut short); None where `LAYOUT` is None."""
    if LAYOUT is None:
        return None
    return _SOURCE.format(scalar=SCALAR, strided=STRIDED, interrupts=interrupts.SYMBOL,
                          seen=interrupts.SEEN_SYMBOL, head=Head, array=Print,
                          head_words=ctypes.sizeof(Head) // 8, scalar_words=_SCALAR_WORDS,
                          array_bytes=ctypes.sizeof(Print),
                          array_words=ctypes.sizeof(Print) // 8,
                          **{name: getattr(LAYOUT, name) for name in Layout.__dataclass_fields__})


def fingerprint_source(key: bytes, names: list[str], kinds: list) -> str | None:
    """A Python expression, over the arguments `names` (and the tuple `args` of them),
    for the fingerprint of these arguments of the kernel whose `Key` is `key`: for each,
    its `kinds` entry is None for a scalar, else (ndim, contiguous, writeable, strided)
    for a NumPy array (as the launcher checked it). Uses the names `struct`, `pointer`
    (`data_pointer`), `ndarray` and `tuple`. None where `LAYOUT` is."""
    if LAYOUT is None:
        return None
    words = ["len(args)", "id(tuple)"]
    formats = 2
    for name, kind in zip(names, kinds):
        if kind is None:
            words += [str(SCALAR), "0"]
            formats += _SCALAR_WORDS
            continue
        ndim, contiguous, writeable, strided = kind
        flags = (C_CONTIGUOUS if contiguous else 0) | (WRITEABLE if writeable else 0)
        # (in the order of `Print`'s fields)
        words += [str(ndim + 1 + (STRIDED if strided else 0)), "id(ndarray)",
                  f"pointer({name})", f"id({name}.dtype)", str(C_CONTIGUOUS | WRITEABLE),
                  str(flags), f"*{name}.shape"]
        formats += len(Print._fields_) + ndim
        if strided:
            words.append(f"*{name}.strides")
            formats += ndim
    return f"{key!r} + struct.pack('={formats}q', {', '.join(words)})"


__all__ = ["Head", "Key", "LAYOUT", "Layout", "Print", "fingerprint_source", "matches_definition"]
