"""Native work sharing: a launch's work-groups run on the calling thread and on the
worker threads that are awake, handed out without Python, without the GIL and without
a lock.

A worker that has no work watches, in native code (`serve`), two words: the device's
submissions (a launch queued in Python: it returns to take it) and a mailbox where a
thread posts the launch, or the range of a queued launch's groups, it leads (`lead`):
the thread that launches, or the one that takes a queued launch (the thread waiting for
it serves the mailbox too). The leader writes the kernel's entry point, its argument
record, the range of work-groups and a chunk size into the
mailbox, opens it, and takes chunks of groups from the front of the range not yet
handed out, as the workers that see the post do from its back; each adds the groups it
ran to a counter. When the range is empty the leader waits for the groups
others are running, closes the mailbox and returns: a worker still inside may hold the
record's address, but it runs a chunk only after it claimed one, and none is left. The
next post waits until no worker is inside (one that finds the range empty leaves at
once), so none claims a chunk of it with an earlier post's record. A launch of a few
microseconds is thus
shared by every awake thread at the cost of a few atomic operations, where a hand-off
through Python costs tens of microseconds.

The mailbox is 24 int64 words, in three cache lines (the two counters every chunk
updates each on a line of its own, so threads taking chunks do not contend for the
line the others read):
    0: sequence: odd while a launch is posted (open), even otherwise
    1: entry point   2: argument record   3: work-groups posted   4: chunk (groups)
    5: workers inside (they add 1 before they read a post and take it back after)
    6: seats: how many more workers may take part (the launching backend's threads,
       less the leader)
    7: twice the launching backend's threads
    8: the groups left to hand out, [front, back): back << 32 | front. The leader takes
       chunks from the front, the workers from the back (each claim a compare-and-
       swap), so from one launch to the next each thread tends to run the same groups,
       whose data its cache still holds (as a static schedule would), and whoever is
       faster takes more. A claim is guided: the groups left over word 7, and at least
       the chunk, so a launch is handed out in a few claims per thread (each moves
       the line between the cores) and still ends in small ones (the threads finish
       together).
    12: the workers watching the mailbox (in `serve`)
    13: 1 while a thread leads: another thread that would lead at the same time does
        not (it runs its launch as if no worker were awake)
    14: the core a watching worker ran on when it last gave its core away (-1: not
        known): the leader compares it with its own (`_Device.lead`)
    16: the groups that have run
A worker enters (word 5), reads the post, and runs it only if the sequence is still the
odd one it saw and it got a seat; a post waits for word 5 to come back to 0 before it
writes. Only one launch is posted at a time (word 13)."""
from __future__ import annotations

import ctypes
import functools
import struct
import sys
import threading
from dataclasses import dataclass

import numpy as np

from . import argument_checks, interrupts
from .calls import (
    C_API,
    CALLS_WIDEN_INTS,
    FAST_CALL_DECLARATIONS,
    SMALL_INT,
    fast_call_function,
    fast_call_source,
    untyped,
)

MAILBOX_WORDS = 24
PREEMPTED_GAP_NANOSECONDS = 40_000
"""A gap this long between two looks of a worker that watches the mailbox is a time the
system ran another thread on its core: it does not count as time spent watching."""
_WATCHING = 12   # the word that counts the workers in `serve`
_CORE = 14       # the core a watching worker last ran on

_LEAD = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                         ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_SERVE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_bool)

_SOURCE = """
{relax_definition}
{core_definition}
{clock_definition}

define private i64 @share(ptr %mailbox, ptr %entry, ptr %record, i64 %chunk,
                          i1 %from.back) nounwind {{
start:
  %divisor.word = getelementptr i64, ptr %mailbox, i64 7
  %left = getelementptr i64, ptr %mailbox, i64 8
  %done = getelementptr i64, ptr %mailbox, i64 16
  %divisor = load atomic i64, ptr %divisor.word seq_cst, align 8
  br label %take
take:
  %ran = phi i64 [ 0, %start ], [ %ran.after, %run ]
  %range = load atomic i64, ptr %left seq_cst, align 8
  br label %claim
claim:
  %seen = phi i64 [ %range, %take ], [ %now, %lost ]
  %front = and i64 %seen, 4294967295
  %back = lshr i64 %seen, 32
  %empty = icmp uge i64 %front, %back
  br i1 %empty, label %out, label %cut
cut:
  %remaining = sub i64 %back, %front
  %guided = udiv i64 %remaining, %divisor
  %small = icmp ult i64 %guided, %chunk
  %size = select i1 %small, i64 %chunk, i64 %guided
  %front.end.whole = add i64 %front, %size
  %front.past = icmp ugt i64 %front.end.whole, %back
  %front.end = select i1 %front.past, i64 %back, i64 %front.end.whole
  %back.start.whole = sub i64 %back, %size
  %back.past = icmp slt i64 %back.start.whole, %front
  %back.start = select i1 %back.past, i64 %front, i64 %back.start.whole
  %first = select i1 %from.back, i64 %back.start, i64 %front
  %end = select i1 %from.back, i64 %back, i64 %front.end
  %new.front = select i1 %from.back, i64 %front, i64 %front.end
  %new.back = select i1 %from.back, i64 %back.start, i64 %back
  %new.high = shl i64 %new.back, 32
  %new = or i64 %new.high, %new.front
  %exchange = cmpxchg ptr %left, i64 %seen, i64 %new seq_cst seq_cst
  %now = extractvalue {{ i64, i1 }} %exchange, 0
  %won = extractvalue {{ i64, i1 }} %exchange, 1
  br i1 %won, label %run, label %lost
lost:
  br label %claim
run:
  call void %entry(ptr %record, i64 %first, i64 %end)
  %count = sub i64 %end, %first
  %ignored = atomicrmw add ptr %done, i64 %count seq_cst
  %ran.after = add i64 %ran, %count
  br label %take
out:
  ret i64 %ran
}}

define i64 @kernelkit_lead(ptr %key, ptr %record, i64 %first, i64 %end, i64 %chunk,
                           i64 %helpers) nounwind {{
start:
  %mailbox = load ptr, ptr %key, align 8
  %entry.in.key = getelementptr ptr, ptr %key, i64 1
  %entry = load ptr, ptr %entry.in.key, align 8
  %leader = getelementptr i64, ptr %mailbox, i64 13
  %claim = cmpxchg ptr %leader, i64 0, i64 1 seq_cst seq_cst
  %alone = extractvalue {{ i64, i1 }} %claim, 1
  br i1 %alone, label %post, label %busy
busy:
  ret i64 -1
post:
  call void @vacated(ptr %mailbox)
  %entry.word = getelementptr i64, ptr %mailbox, i64 1
  %record.word = getelementptr i64, ptr %mailbox, i64 2
  %groups.word = getelementptr i64, ptr %mailbox, i64 3
  %chunk.word = getelementptr i64, ptr %mailbox, i64 4
  %left = getelementptr i64, ptr %mailbox, i64 8
  %done = getelementptr i64, ptr %mailbox, i64 16
  %seats = getelementptr i64, ptr %mailbox, i64 6
  %divisor.word = getelementptr i64, ptr %mailbox, i64 7
  store atomic i64 %helpers, ptr %seats seq_cst, align 8
  %threads = add i64 %helpers, 1
  %divisor = shl i64 %threads, 1
  store atomic i64 %divisor, ptr %divisor.word seq_cst, align 8
  %groups = sub i64 %end, %first
  %back = shl i64 %end, 32
  %all = or i64 %back, %first
  store atomic i64 %all, ptr %left seq_cst, align 8
  store atomic i64 0, ptr %done seq_cst, align 8
  store atomic ptr %entry, ptr %entry.word seq_cst, align 8
  store atomic ptr %record, ptr %record.word seq_cst, align 8
  store atomic i64 %groups, ptr %groups.word seq_cst, align 8
  store atomic i64 %chunk, ptr %chunk.word seq_cst, align 8
  %closed = load atomic i64, ptr %mailbox seq_cst, align 8
  %open = add i64 %closed, 1
  store atomic i64 %open, ptr %mailbox seq_cst, align 8
  %ran = call i64 @share(ptr %mailbox, ptr %entry, ptr %record, i64 %chunk, i1 false)
  call void @finish(ptr %mailbox)
  store atomic i64 0, ptr %leader seq_cst, align 8
  ret i64 %ran
}}

define private void @finish(ptr %mailbox) nounwind {{
start:
  %groups.word = getelementptr i64, ptr %mailbox, i64 3
  %done = getelementptr i64, ptr %mailbox, i64 16
  %groups = load atomic i64, ptr %groups.word seq_cst, align 8
  br label %finishing
finishing:
  %spins = phi i64 [ 0, %start ], [ %spins.next, %wait.finish ]
  %finished = load atomic i64, ptr %done seq_cst, align 8
  %all = icmp sge i64 %finished, %groups
  br i1 %all, label %close, label %wait.finish
wait.finish:
  %ignored.gave = call i1 @relax(i64 %spins)
  %spins.next = add i64 %spins, 1
  br label %finishing
close:
  %open = load atomic i64, ptr %mailbox seq_cst, align 8
  %closed = add i64 %open, 1
  store atomic i64 %closed, ptr %mailbox seq_cst, align 8
  ret void
}}

; Wait until no worker is inside the mailbox (entered for an earlier post): only then may
; a post replace the one they read.
define private void @vacated(ptr %mailbox) nounwind {{
start:
  %inside = getelementptr i64, ptr %mailbox, i64 5
  br label %leaving
leaving:
  %spins = phi i64 [ 0, %start ], [ %spins.next, %wait.leave ]
  %count = load atomic i64, ptr %inside seq_cst, align 8
  %empty = icmp eq i64 %count, 0
  br i1 %empty, label %out, label %wait.leave
wait.leave:
  %ignored.gave = call i1 @relax(i64 %spins)
  %spins.next = add i64 %spins, 1
  br label %leaving
out:
  ret void
}}

define i64 @kernelkit_serve(ptr %mailbox, ptr %submissions, i64 %seen,
                            i64 %nanoseconds, i1 %once) nounwind {{
start:
  %entry.word = getelementptr i64, ptr %mailbox, i64 1
  %record.word = getelementptr i64, ptr %mailbox, i64 2
  %chunk.word = getelementptr i64, ptr %mailbox, i64 4
  %inside = getelementptr i64, ptr %mailbox, i64 5
  %seats = getelementptr i64, ptr %mailbox, i64 6
  %watching = getelementptr i64, ptr %mailbox, i64 12
  %core.word = getelementptr i64, ptr %mailbox, i64 14
  %ignored.watch = atomicrmw add ptr %watching, i64 1 seq_cst
  %first.core = call i64 @core()
  store atomic i64 %first.core, ptr %core.word seq_cst, align 8
  %began = call i64 @now_ns()
  br label %watch
watch:
  %idle.time = phi i64 [ 0, %start ], [ %idle.after, %idle.on ], [ 0, %served ],
                       [ %idle.time, %refused ]
  %before = phi i64 [ %began, %start ], [ %now, %idle.on ], [ %served.at, %served ],
                    [ %before, %refused ]
  %last = phi i64 [ -1, %start ], [ %last, %idle.on ], [ %sequence, %served ],
                  [ %sequence, %refused ]
  %spins = phi i64 [ 0, %start ], [ %spins.next, %idle.on ], [ 0, %served ],
                   [ %spins, %refused ]
  %submitted = load atomic i64, ptr %submissions seq_cst, align 8
  %new.work = icmp ne i64 %submitted, %seen
  br i1 %new.work, label %to.python, label %mailbox.look
mailbox.look:
  %sequence = load atomic i64, ptr %mailbox seq_cst, align 8
  %odd = and i64 %sequence, 1
  %is.open = icmp ne i64 %odd, 0
  %unseen = icmp ne i64 %sequence, %last
  %post = and i1 %is.open, %unseen
  br i1 %post, label %enter, label %idle
enter:
  %ignored.in = atomicrmw add ptr %inside, i64 1 seq_cst
  %entry = load atomic ptr, ptr %entry.word seq_cst, align 8
  %record = load atomic ptr, ptr %record.word seq_cst, align 8
  %chunk = load atomic i64, ptr %chunk.word seq_cst, align 8
  %again = load atomic i64, ptr %mailbox seq_cst, align 8
  %still = icmp eq i64 %again, %sequence
  br i1 %still, label %sit, label %refused
sit:
  %free = atomicrmw sub ptr %seats, i64 1 seq_cst
  %seated = icmp sgt i64 %free, 0
  br i1 %seated, label %work, label %refused
work:
  %ran = call i64 @share(ptr %mailbox, ptr %entry, ptr %record, i64 %chunk, i1 true)
  %ignored.out = atomicrmw sub ptr %inside, i64 1 seq_cst
  br label %served
served:
  %served.at = call i64 @now_ns()
  br i1 %once, label %served.once, label %watch
served.once:
  %ignored.unwatch.once = atomicrmw sub ptr %watching, i64 1 seq_cst
  ret i64 1
refused:
  %ignored.back = atomicrmw sub ptr %inside, i64 1 seq_cst
  br label %watch
idle:
  %gave = call i1 @relax(i64 %spins)
  br i1 %gave, label %tell.core, label %idle.on
tell.core:   ; where it runs once it has its core back (the system may have moved it)
  %core = call i64 @core()
  store atomic i64 %core, ptr %core.word seq_cst, align 8
  br label %idle.on
idle.on:
  %spins.next = add i64 %spins, 1
  %now = call i64 @now_ns()
  ; Only short gaps count as time spent watching, or one after the thread gave its core
  ; away: a longer one is a time the system took the core from it (to run another), and
  ; it must still watch as long once it runs. (Counting the time it gave away, it stops
  ; watching beside a thread that needs the core.)
  %gap = sub i64 %now, %before
  %short = icmp ult i64 %gap, {preempted_gap}
  %counts = or i1 %short, %gave
  %counted = select i1 %counts, i64 %gap, i64 0
  %idle.after = add i64 %idle.time, %counted
  %over = icmp uge i64 %idle.after, %nanoseconds
  br i1 %over, label %timed.out, label %watch
to.python:
  %ignored.unwatch = atomicrmw sub ptr %watching, i64 1 seq_cst
  ret i64 1
timed.out:
  %ignored.unwatch.idle = atomicrmw sub ptr %watching, i64 1 seq_cst
  ret i64 0
}}
"""


_compiling = threading.Lock()
_compiling_start = threading.Lock()   # (a mailbox starts one thread compiling)


# With the object layout known (`argument_checks`), the calls a fast launcher makes: each
# first compares the arguments with the fingerprint of what was packed last (which is
# also the key `kernelkit_lead` reads: the mailbox, the entry point), and runs nothing
# where they differ.
_CHECKED = """
define i64 @kernelkit_matches(ptr %args, ptr %fingerprint) nounwind {
start:
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  %answer = zext i1 %same to i64
  ret i64 %answer
}

; -2 where the arguments differ, else as kernelkit_lead
define i64 @kernelkit_lead_if_same(ptr %args, ptr %fingerprint, ptr %record, i64 %first,
                                   i64 %end, i64 %chunk, i64 %helpers) nounwind {
start:
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  br i1 %same, label %lead, label %differs
lead:
  %ran = call i64 @kernelkit_lead(ptr %fingerprint, ptr %record, i64 %first, i64 %end,
                                  i64 %chunk, i64 %helpers)
  ret i64 %ran
differs:
  ret i64 -2
}

; 1 where it ran groups [first, end) on this thread, 0 where the arguments differ
define i64 @kernelkit_call_if_same(ptr %args, ptr %fingerprint, ptr %record, i64 %first,
                                   i64 %end) nounwind {
start:
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  br i1 %same, label %call, label %differs
call:
  %entry.word = getelementptr ptr, ptr %fingerprint, i64 1
  %entry = load ptr, ptr %entry.word, align 8
  call void %entry(ptr %record, i64 %first, i64 %end)
  ret i64 1
differs:
  ret i64 0
}
"""



# Where the system has CLOCK_MONOTONIC (Linux): the calls that run a fast launch and keep
# its kernel's books, `call_timed` and `lead_timed` (see `Mailbox`). A kernel's state is
# STATE_WORDS doubles.
_TIMED = """
define private double @now() nounwind {
start:
  %nanoseconds = call i64 @now_ns()
  %whole = sitofp i64 %nanoseconds to double
  %time = fmul double %whole, 1.0e-9
  ret double %time
}

; the state's words are read and written whole (another thread may launch the kernel)
define private double @word(ptr %state, i64 %index) alwaysinline nounwind {
start:
  %address = getelementptr double, ptr %state, i64 %index
  %bits = load atomic i64, ptr %address monotonic, align 8
  %value = bitcast i64 %bits to double
  ret double %value
}

define private void @set_word(ptr %state, i64 %index, double %value) alwaysinline nounwind {
start:
  %address = getelementptr double, ptr %state, i64 %index
  %bits = bitcast double %value to i64
  store atomic i64 %bits, ptr %address monotonic, align 8
  ret void
}

; the estimate after a run that took %per.group a group (runtime._folded)
define private void @fold(ptr %state, double %per.group) nounwind {
start:
  %estimate = call double @word(ptr %state, i64 0)
  %none = fcmp oeq double %estimate, 0.0
  %limit = fmul double %estimate, 4.0
  %over = fcmp ogt double %per.group, %limit
  %clipped = select i1 %over, double %limit, double %per.group
  %kept = fmul double %estimate, 0.75
  %added = fmul double %clipped, 0.25
  %sum = fadd double %kept, %added
  %folded = select i1 %none, double %per.group, double %sum
  call void @set_word(ptr %state, i64 0, double %folded)
  ret void
}

define private void @say_running(ptr %state) alwaysinline nounwind {
start:
  %described.value = call double @word(ptr %state, i64 2)
  %described = fptoui double %described.value to i64
  %slot.value = call double @word(ptr %state, i64 3)
  %slot.address = fptoui double %slot.value to i64
  %slot = inttoptr i64 %slot.address to ptr
  store volatile i64 %described, ptr %slot, align 8
  ret void
}

; runs every group on this thread, timed
define private void @run_timed(ptr %fingerprint, ptr %record, i64 %groups, ptr %state)
    nounwind {
start:
  call void @say_running(ptr %state)
  %entry.word = getelementptr ptr, ptr %fingerprint, i64 1
  %entry = load ptr, ptr %entry.word, align 8
  %start.time = call double @now()
  call void %entry(ptr %record, i64 0, i64 %groups)
  %end.time = call double @now()
  %some = icmp sgt i64 %groups, 0
  br i1 %some, label %timed, label %done
timed:
  %took = fsub double %end.time, %start.time
  %count = sitofp i64 %groups to double
  %per.group = fdiv double %took, %count
  call void @fold(ptr %state, double %per.group)
  br label %done
done:
  ret void
}

; 1 where it ran every group on this thread, timed, 0 where the arguments differ
define i64 @kernelkit_call_timed(ptr %args, ptr %fingerprint, ptr %record, i64 %groups,
                                 i64 %state.address) nounwind {
start:
  %state = inttoptr i64 %state.address to ptr
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  br i1 %same, label %call, label %differs
call:
  call void @run_timed(ptr %fingerprint, ptr %record, i64 %groups, ptr %state)
  ret i64 1
differs:
  ret i64 0
}

; -2 where the arguments differ (nothing counted), else 1 where it led the launch (or
; ran it here: a probe), 2 where it did and the worker that watched took no group and
; last ran on this core, 0 where it did not lead (another thread leads, or the groups
; are too few or too many)
define i64 @kernelkit_lead_timed(ptr %args, ptr %fingerprint, ptr %record, i64 %groups,
                                 i64 %state.address) nounwind {
start:
  %state = inttoptr i64 %state.address to ptr
  %several = icmp sgt i64 %groups, 1
  %small = icmp slt i64 %groups, 2147483648
  %fits = and i1 %several, %small
  br i1 %fits, label %check, label %declined
check:
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  br i1 %same, label %measured, label %different
measured:
  %per.group = call double @word(ptr %state, i64 0)
  %estimated = fcmp ogt double %per.group, 0.0   ; (0: none yet)
  br i1 %estimated, label %count, label %declined
count:
  %leads.value = call double @word(ptr %state, i64 1)
  %leads.before = fptoui double %leads.value to i64
  %leads = add i64 %leads.before, 1
  %leads.after = uitofp i64 %leads to double
  call void @set_word(ptr %state, i64 1, double %leads.after)
  %count.groups = sitofp i64 %groups to double
  %estimate = fmul double %per.group, %count.groups
  %probed.every.value = call double @word(ptr %state, i64 8)
  %probed.every = fptoui double %probed.every.value to i64
  %probed.turn = urem i64 %leads, %probed.every
  %probed.now = icmp eq i64 %probed.turn, 0
  %probed.seconds = call double @word(ptr %state, i64 6)
  %near = fcmp olt double %estimate, %probed.seconds
  %probe = and i1 %probed.now, %near
  br i1 %probe, label %probing, label %lead
probing:
  call void @run_timed(ptr %fingerprint, ptr %record, i64 %groups, ptr %state)
  ret i64 1
lead:
  call void @say_running(ptr %state)
  %timed.every.value = call double @word(ptr %state, i64 7)
  %timed.every = fptoui double %timed.every.value to i64
  %timed.turn = urem i64 %leads, %timed.every
  %timed = icmp eq i64 %timed.turn, 0
  %chunk.seconds = call double @word(ptr %state, i64 5)
  %chunk.groups = fdiv double %chunk.seconds, %per.group
  %chunk.fits = fcmp olt double %chunk.groups, %count.groups   ; (so it converts)
  br i1 %chunk.fits, label %chunk.part, label %chunk.chosen
chunk.part:
  %chunk.whole = fptoui double %chunk.groups to i64
  %chunk.more = add i64 %chunk.whole, 1
  br label %chunk.chosen
chunk.chosen:
  %chunk = phi i64 [ %groups, %lead ], [ %chunk.more, %chunk.part ]
  %helpers.value = call double @word(ptr %state, i64 4)
  %helpers = fptoui double %helpers.value to i64
  %start.time = call double @now()
  %ran = call i64 @kernelkit_lead(ptr %fingerprint, ptr %record, i64 0, i64 %groups,
                                  i64 %chunk, i64 %helpers)
  %not.led = icmp slt i64 %ran, 0
  br i1 %not.led, label %declined, label %led
led:
  %some = icmp sgt i64 %ran, 0
  %fold.now = and i1 %timed, %some
  br i1 %fold.now, label %folding, label %placed
folding:
  %end.time = call double @now()
  %took = fsub double %end.time, %start.time
  %count.ran = sitofp i64 %ran to double
  %per.group.ran = fdiv double %took, %count.ran
  call void @fold(ptr %state, double %per.group.ran)
  br label %placed
placed:
  %all = icmp eq i64 %ran, %groups
  %mailbox = load ptr, ptr %fingerprint, align 8
  %watching.word = getelementptr i64, ptr %mailbox, i64 12
  %watching = load atomic i64, ptr %watching.word seq_cst, align 8
  %watched = icmp ne i64 %watching, 0
  %core.word = getelementptr i64, ptr %mailbox, i64 14
  %core.there = load atomic i64, ptr %core.word seq_cst, align 8
  %here = call i64 @core()
  %known = icmp ne i64 %here, -1
  %same.core = icmp eq i64 %core.there, %here
  %waits.a = and i1 %all, %watched
  %waits.b = and i1 %known, %same.core
  %waits = and i1 %waits.a, %waits.b
  %answer = select i1 %waits, i64 2, i64 1
  ret i64 %answer
declined:
  ret i64 0
different:
  ret i64 -2
}
"""

STATE_WORDS = 9
"""A kernel's state for `call_timed` and `lead_timed`, doubles: 0 its estimate of the
seconds a group takes (0: none yet), 1 how many of its launches were led, 2 the address
of its description and 3 the slot that names the running kernel (`fault.running`), 4 the
workers a launch may have (its threads less 1); then the launcher's policy
(`runtime`'s): 5 the seconds of a led chunk, 6 and 8: one led launch in every [8]
estimated under [6] seconds is run on the calling thread alone, timed, 7 one led launch
in this many is timed."""


@dataclass(frozen=True)
class _Functions:
    lead: object
    serve: object
    # builtins (`calls.fast_call_function`) or `checked_function`s; None where the object
    # layout is not known (`argument_checks`)
    matches: object
    lead_if_same: object
    call_if_same: object
    # builtins (`calls.fast_call_function`); None where those are not, or the system has no
    # CLOCK_MONOTONIC
    call_timed: object
    lead_timed: object


_CHECKED_CALLS = (("matches", "ob"), ("lead_if_same", "obbiiii"), ("call_if_same", "obbii"))
"""The checked calls and their arguments' kinds (`calls.fast_call_source`): the tuple of
arguments, the fingerprint, the record, then ints."""
_TIMED_CALLS = (("call_timed", "obbii"), ("lead_timed", "obbii"))


@functools.lru_cache(maxsize=1)
def _compiled() -> _Functions:
    from kernelkit.compiler.native import host_functions

    matches = argument_checks.matches_definition()
    fast = matches is not None and C_API is not None
    timed = fast and sys.platform.startswith("linux")
    calls = _CHECKED_CALLS + (_TIMED_CALLS if timed else ())
    source = native_source(matches, fast, timed, calls)
    symbols = {**interrupts.SYMBOLS, **(C_API if fast else {})}
    functions = host_functions(source, symbols)   # from the disk cache, once there
    lead = functions["kernelkit_lead"]
    if fast:
        made = {name: fast_call_function(functions[f"kernelkit_fast_{name}"], name)
                for name, _ in calls}
    else:
        made = {name: checked_function(functions[f"kernelkit_{name}"], len(kinds) - 1)
                if matches else None for name, kinds in _CHECKED_CALLS}
    made = {name: made.get(name) for name, _ in _CHECKED_CALLS + _TIMED_CALLS}
    return _Functions(untyped(lead, _LEAD(lead), ctypes.c_int64),
                      _SERVE(functions["kernelkit_serve"]), **made)


def native_source(matches: str | None, fast: bool, timed: bool, calls,
                  triple: str | None = None) -> str:
    """The LLVM IR text of the mailbox's functions (`_compiled`), for `triple`'s machine
    (this process's by default): with the native argument check where `matches`, the
    builtins that call them where `fast`, and the timed calls where `timed`."""
    from .target import with_relax
    source = with_relax(_SOURCE, triple, preempted_gap=PREEMPTED_GAP_NANOSECONDS) + \
        (_CHECKED + matches if matches else "")
    if fast:
        source += (_TIMED if timed else "") + FAST_CALL_DECLARATIONS + "".join(
            fast_call_source(f"kernelkit_fast_{name}", f"kernelkit_{name}", kinds)
            for name, kinds in calls)
    return source


def checked_function(address: int, parameters: int):
    """The function at `address` that takes a tuple, then `parameters` bytes and ints
    below `SMALL_INT`, and returns an int64, called through ctypes (where the C API is
    not there to make it a builtin, `calls.fast_call_function`): its tuple is typed (a
    `py_object`), the others pass untyped where the platform widens ints
    (`calls.CALLS_WIDEN_INTS`)."""
    if CALLS_WIDEN_INTS:
        return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.py_object)(address)
    # (the first one or two after the tuple are bytes: the fingerprint, the record)
    rest = [ctypes.c_char_p] * min(parameters, 2) + [ctypes.c_int64] * max(parameters - 2, 0)
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.py_object, *rest)(address)


def _functions() -> _Functions:
    """The mailbox's functions, compiled once: by one thread, where several workers start
    at once."""
    with _compiling:
        return _compiled()


class Mailbox:
    """The device's mailbox (see the module's docstring) and the calls on it.

    The functions are compiled by the first worker that serves, or on a thread of their
    own that a fast launcher waits for (`prepare`), never by a thread that launches: a
    KeyboardInterrupt (which only the main thread sees) arriving while llvmlite frees
    what it made can have it free the same memory twice, so `lead` may be called only
    once the mailbox is `ready` (a launch is not led before). Then, where the object
    layout is known (`argument_checks`), it has the calls a fast launcher makes with
    the arguments it was given and the fingerprint of those it packed last:
    `matches(args, fingerprint)` (1 or 0), `lead_if_same(args, fingerprint, record,
    first, end, chunk, helpers)` (as `lead`, or -2 where they differ) and
    `call_if_same(args, fingerprint, record, first, end)` (runs the groups on this
    thread: 1, or 0 where they differ); else these are None. Where those are builtins
    and the system has CLOCK_MONOTONIC, it also has the two that run a fast launch and
    keep its kernel's books in the kernel's `state` (`STATE_WORDS` doubles at the
    address `state`): `call_timed(args, fingerprint, record, groups, state)` (as
    `call_if_same` over every group, timed: the estimate folded as `runtime._folded`
    does) and `lead_timed(args, fingerprint, record, groups, state)` (as
    `runtime._Device.lead`, once the caller has seen the device idle and a worker
    awake; see `_TIMED`); else they are None."""

    def __init__(self):
        whole = np.zeros(MAILBOX_WORDS + 8, np.int64)
        start = (-whole.ctypes.data % 64) // 8     # at the start of a cache line
        self.words = whole[start:start + MAILBOX_WORDS]
        self.address = self.words.ctypes.data
        self._lead = self._serve = None
        self.matches = self.lead_if_same = self.call_if_same = None
        self.call_timed = self.lead_timed = None
        self._keys: dict[int, bytes] = {}   # entry point -> what `lead` passes
        self.ready = False   # whether the functions are compiled
        self._compiling: threading.Thread | None = None   # the thread compiling them

    @property
    def watching(self) -> int:
        """How many workers watch it now (in `serve`)."""
        return int(self.words[_WATCHING])

    @property
    def core(self) -> int:
        """The core a watching worker last ran on, or -1."""
        return int(self.words[_CORE])

    def forget_core(self) -> None:
        """The worker was moved: -1 until it says where it runs now."""
        self.words[_CORE] = -1

    @property
    def watching_address(self) -> int:
        return self.address + 8 * _WATCHING

    def lead(self, entry: int, record: bytes, groups: int, chunk: int, helpers: int,
             first: int = 0) -> int:
        """Run work-groups [first, groups) of the kernel at `entry` on `record`, posted
        for up to `helpers` workers that serve, in chunks of `chunk`; returns how many
        groups this thread ran, once all have run (the record may be freed then), or
        -1 at once where another thread leads (nothing ran)."""
        if not 0 <= first < groups < SMALL_INT:
            raise ValueError(f"a led launch runs groups from 0 to {SMALL_INT - 1}, "
                             f"at least one, not {first} to {groups}")
        key = self._keys.get(entry)
        if key is None:   # the mailbox and the entry point, read from bytes natively
            if len(self._keys) >= 1024:
                self._keys.clear()
            key = self._keys[entry] = struct.pack("=QQ", self.address, entry)
        return self._lead(key, record, first, groups, min(chunk, groups - first), helpers)

    def serve(self, submissions: int, seen: int, nanoseconds: int,
              once: bool = False) -> bool:
        """Run what is posted, and watch for more for `nanoseconds` after
        the last (a time the system ran other threads does not count); True where the
        word at `submissions` changed from `seen` (a launch was queued in Python), or
        `once` a post was served, False after the time passed with nothing."""
        if self._serve is None:
            self._load()
        return bool(self._serve(self.address, submissions, seen, nanoseconds, once))

    def prepare(self) -> None:
        """Make the mailbox `ready` now, its functions compiled on a thread of their own
        (which goes on where a KeyboardInterrupt stops the wait)."""
        if not self.ready:
            self.prepare_soon()
            self._compiling.join()

    def prepare_soon(self) -> None:
        """Start compiling the functions on a thread of their own, if not yet started
        (`preparing` from then on), and return."""
        with _compiling_start:
            if self._compiling is None:
                # (not a daemon: the interpreter's exit waits for LLVM to finish)
                self._compiling = threading.Thread(target=self._load, name="kernelkit-compile")
                self._compiling.start()

    @property
    def preparing(self) -> bool:
        """Whether the functions are compiled or being compiled (`prepare_soon`)."""
        return self._compiling is not None

    def _load(self) -> None:
        functions = _functions()
        self._lead, self._serve = functions.lead, functions.serve
        self.matches, self.lead_if_same, self.call_if_same = \
            functions.matches, functions.lead_if_same, functions.call_if_same
        self.call_timed, self.lead_timed = functions.call_timed, functions.lead_timed
        self.ready = True
