"""Ctrl-C in a running CPU kernel.

Python handles SIGINT by setting a flag that its main thread reads between bytecodes: a
thread in a kernel's native code sees it only when the call returns, which for a long
kernel (or a runaway loop in one work-item) may be never. So the runtime puts a native
handler in front of Python's (`install`): it adds one to a process-wide count of
interrupts (`COUNT`) and hands the signal on to Python's handler. Compiled CPU kernels
poll the count against the count the runtime has seen (`SEEN`) where they may run long
(`group.py`): at the start of each work-group and of each region of a group, and at the
back edges of loops (`polled_back_edges`). Where they differ, every call returns at once,
so the launches running end within microseconds, and the native check of a fast launch's
arguments (`argument_checks`) sends every launch to the runtime's Python path, which
says which launches were cut short and then sees the interrupt (`acknowledge`): launches
from then on run to the end. The main thread meanwhile raises KeyboardInterrupt as it
returns to Python. An interrupt that comes while no kernel runs cuts nothing short: the
next launch sees it first.

A loop whose trip count is a constant is not polled: LLVM unrolls it into the work-item
loop it sits in, which a poll (a second way out) would keep from being vectorized. Nor
is a loop with a barrier in it (the loops all work-items run alike get one: see
`passes/loop_barriers.py`): each of its trips is a region, and a region starts with a
poll. Any other loop is polled, at the cost of two loads and a branch per trip.

The handler is installed only where SIGINT has Python's default handler, which raises
KeyboardInterrupt, and only on Linux (the layout of `struct sigaction` is read as
`fault.py` reads it): a handler of the program's own is left alone, and kernels then run
to the end, as before. A handler Python installs later (`signal.signal`) replaces this
one, with the same effect."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import signal
import sys
import threading

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.analysis.loops import counted_loop, natural_loops
from kernelkit.analysis.regions import ends_with_barrier
from kernelkit.compiler.llvm_types import i64

from .fault import _Action

SYMBOL = "kernelkit_interrupts"
"""The name under which compiled code finds `COUNT`."""
SEEN_SYMBOL = "kernelkit_interrupts_seen"
"""The name under which compiled code finds `SEEN`."""

_WORDS = (ctypes.c_int64 * 2)()   # one cache line: a poll reads both
COUNT = ctypes.c_int64.from_buffer(_WORDS, 0)
"""How many SIGINTs the handler has seen in this process."""
SEEN = ctypes.c_int64.from_buffer(_WORDS, 8)
"""How many of them the runtime has seen (`acknowledge`)."""

SYMBOLS = {SYMBOL: ctypes.addressof(COUNT), SEEN_SYMBOL: ctypes.addressof(SEEN)}
for _name, _address in SYMBOLS.items():
    llvm.add_symbol(_name, _address)   # before any kernel is loaded


def pending() -> bool:
    """Whether an interrupt came that the runtime has not seen: kernels return at once."""
    return COUNT.value != SEEN.value


def acknowledge() -> None:
    """The runtime has seen the interrupts so far: kernels run to the end again."""
    SEEN.value = COUNT.value


_CONSTANT_TRIPS = 1 << 16   # a trip count up to this, known when compiled, is a constant's

_HANDLER = f"""
@{SYMBOL} = external global i64
@kernelkit_python_handler = global ptr null

define ptr @kernelkit_python_handler_slot() {{
  ret ptr @kernelkit_python_handler
}}

define void @kernelkit_interrupt_handler(i32 %signal) {{
  %ignored = atomicrmw add ptr @{SYMBOL}, i64 1 monotonic, align 8
  %python = load ptr, ptr @kernelkit_python_handler, align 8
  call void %python(i32 %signal)
  ret void
}}
"""

_SA_SIGINFO = 4
_lock = threading.Lock()
_handler: int | None = None          # the native handler's address, once compiled
_handed_on: ctypes.c_void_p | None = None   # where it keeps the handler it hands on to


@functools.lru_cache(maxsize=1)
def _libc():
    # (once: `find_library` runs ldconfig, milliseconds, and a backend is made often)
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def install() -> bool:
    """Put the native handler in front of Python's SIGINT handler, where Python's default
    one is installed and this one is not yet; whether it is in place now."""
    global _handler, _handed_on
    if not sys.platform.startswith("linux") or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    with _lock:
        libc = _libc()
        current = _Action()
        if libc.sigaction(signal.SIGINT, None, ctypes.byref(current)):
            return False
        if current.handler is not None and current.handler == _handler:
            return True
        if current.flags & _SA_SIGINFO or current.handler in (None, 1):
            return False   # not the handler Python installs (SIG_DFL is None, SIG_IGN 1)
        if _handler is None:
            from kernelkit.compiler.native import host_functions
            functions = host_functions(_HANDLER, SYMBOLS)
            slot = ctypes.CFUNCTYPE(ctypes.c_void_p)(
                functions["kernelkit_python_handler_slot"])()
            _handler = functions["kernelkit_interrupt_handler"]
            _handed_on = ctypes.c_void_p.from_address(slot)
        _handed_on.value = current.handler   # (the native handler is not in place now)
        ours = _Action(handler=_handler, mask=current.mask, flags=current.flags)
        return libc.sigaction(signal.SIGINT, ctypes.byref(ours), None) == 0


def polled_back_edges(function) -> set:
    """The back edges (block, loop header) of `function`'s loops at which a kernel polls
    for an interrupt: those of every loop but one whose trip count is a constant, and
    one with a barrier in it, whose trips are regions of the group (`group.py` polls
    before each region)."""
    edges = set()
    for header, body in natural_loops(function).items():
        counted = counted_loop(header, body)
        if counted is not None and counted.trip_count(_CONSTANT_TRIPS) is not None or \
                any(ends_with_barrier(block) for block in body):
            continue
        edges.update((block, header) for block in body if header in block.successors)
    return edges


class InterruptPolls:
    """The polls of one group function (`poll`): each leaves the function, branching to
    `done`, where an interrupt came that the runtime has not seen."""

    def __init__(self, module: ir.Module):
        self.count, self.seen = (module.globals.get(name) or ir.GlobalVariable(module, i64, name)
                                 for name in (SYMBOL, SEEN_SYMBOL))
        self.done = None

    def poll(self, builder: ir.IRBuilder) -> None:
        count = builder.load_atomic(self.count, "monotonic", 8)
        seen = builder.load_atomic(self.seen, "monotonic", 8)
        go_on = builder.append_basic_block("not_interrupted")
        builder.cbranch(builder.icmp_unsigned("!=", count, seen), self.done,
                        go_on).set_weights([1, 1 << 20])
        builder.position_at_end(go_on)


__all__ = ["COUNT", "SEEN", "SYMBOLS", "InterruptPolls", "acknowledge", "install", "pending",
           "polled_back_edges"]
