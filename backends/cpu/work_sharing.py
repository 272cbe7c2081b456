"""The native side of a CPU launch: the policy that runs a short launch on the calling
thread or shares it with the awake workers, and the sharing itself, without Python,
without the GIL and without a lock.

`launch` is where the policy lives. Given a launch's record and its kernel's `State` (the
kernel's measured nanoseconds per work-group, folded in by every timed run), where the
device has nothing queued it
  - runs a launch estimated under `LED_NS` on the calling thread, timed;
  - leads one under `JOINED_NS` (below), where a worker watches the mailbox and the
    backend has threads to spare: the calling thread runs chunks of it with the workers.
    One such launch in `PROBED_LEADS` estimated under `PROBED_NS` runs on the calling
    thread alone instead, timed: where sharing is not worth it, its time shared (the
    hand-over included) would make the estimate say it is;
  - runs one it could have led but nobody watches on the calling thread where it is
    estimated under `INLINE_NS`;
and leaves the rest to the Python runtime (`runtime.py`): a kernel not measured yet, and
launches long enough to be queued for the worker threads in chunks, each of which runs
through `run` or, once measured, `share`. A launch it would take while launches are
queued it leaves too (`Ran.BEHIND`): the caller waits for them and asks again, so that
one long launch does not make every launch after it go through the queue. Its answer is
a `Ran` value.

The mailbox (`Words`) is where a leader posts a launch's range of work-groups. A worker
that has no work watches, in native code (`serve`), two words: the device's submissions
(a launch queued in Python: it returns to take it) and the mailbox's sequence. The leader
writes the kernel's entry point, its record, the range and a chunk size into the
mailbox, opens it, and takes chunks from the front of the range, as the workers that see
the post do from its back; each adds the groups it ran to a counter. When the range is
empty the leader waits for the groups others are running, closes the mailbox and
returns: a worker still inside may hold the record's address, but it runs a chunk only
after it claimed one, and none is left. The next post waits until no worker is inside,
so none claims a chunk of it with an earlier post's record. A launch of a few
microseconds is thus shared by every awake thread at the cost of a few atomic
operations, where a hand-off through Python costs tens of microseconds.

Every layout the native code reads is a `ctypes.Structure` here (`Words`, `State`,
`Key`), and the IR text takes its offsets from them: `{words.left.offset}`."""
from __future__ import annotations

import ctypes
import enum
import functools
import threading
from dataclasses import dataclass

from . import argument_checks, interrupts
from .argument_checks import Key
from .calls import C_API, FAST_CALL_DECLARATIONS, fast_call_function, fast_call_source

_i64 = ctypes.c_int64

LED_NS = 8_000
"""A launch estimated to take at least this long on one thread is shared (led)."""
JOINED_NS = 2_000_000
"""... and at most this long: a longer one is queued for the worker threads, in chunks."""
INLINE_NS = 200_000
"""A launch that is not shared runs on the calling thread where it is estimated under
this: handing it to other threads costs about as much."""
PROBED_NS = 2 * LED_NS
PROBED_LEADS = 64
"""Not more often than this: a launch worth sharing runs slower alone (a 100k-element
saxpy, 12 us alone and 7 us shared, is near the line on 2 cores)."""
LED_CHUNK_NS = 500
"""The last claims of a led launch take about this long: the threads finish together."""
POLICY = dict(led_ns=LED_NS, joined_ns=JOINED_NS, inline_ns=INLINE_NS, probed_ns=PROBED_NS,
              probed_leads=PROBED_LEADS, led_chunk_ns=LED_CHUNK_NS)
"""The policy's words in the mailbox (`Words`), which the native code reads."""
PREEMPTED_GAP_NS = 40_000
"""A gap this long between two looks of a worker that watches the mailbox is a time the
system ran another thread on its core: it does not count as time spent watching."""


class Ran(enum.IntEnum):
    """What `launch` did."""

    DIFFERS = -2    # `launch_if_same`: the arguments are not those fingerprinted
    LEFT = 0        # nothing: the Python runtime runs it
    RAN = 1         # ran it here, or led it
    LED_BESIDE = 2  # led it, and the worker that watched took no group and last ran on
    #                 this core: it waits for this core (`runtime._Device.separate`)
    ALONE = 3       # ran it here where it could have been led: no worker watched
    UNSHARED = 4    # could have been led, no worker watched, too long to run here: left
    BEHIND = 5      # would have run here or been led, but launches are queued before it:
    #                 left (the caller waits for them, then asks again)


class Words(ctypes.Structure):
    """The mailbox: three cache lines, the two counters every chunk updates each on a line
    of its own, so threads taking chunks do not contend for the line the others read."""

    _fields_ = [
        ("sequence", _i64),   # odd while a launch is posted (open), even otherwise
        ("entry", _i64), ("record", _i64), ("groups", _i64), ("chunk", _i64),
        ("inside", _i64),     # workers reading a post (they take it back after)
        ("seats", _i64),      # how many more workers may join (the backend's threads - 1)
        ("divisor", _i64),    # twice the launching backend's threads
        # The groups left to hand out, [front, back): back << 32 | front. The leader
        # takes chunks from the front, the workers from the back (each claim a compare-
        # and-swap), so from one launch to the next each thread tends to run the same
        # groups, whose data its cache still holds, and whoever is faster takes more. A
        # claim is guided: the groups left over `divisor`, at least the chunk.
        ("left", _i64),
        ("queued", _i64),     # launches queued in Python (`runtime._Device.queue`)
        ("watching", _i64),   # workers in `serve`
        ("leader", _i64),     # 1 while a thread leads: another does not
        ("core", _i64),       # where a watching worker last gave its core away; -1
        ("_line_two", _i64 * 3),
        ("done", _i64),       # the groups that have run
        ("_line_three", _i64 * 7),
        # The policy, in nanoseconds (the module's constants; a test may change them)
        ("led_ns", _i64), ("joined_ns", _i64), ("inline_ns", _i64), ("probed_ns", _i64),
        ("probed_leads", _i64), ("led_chunk_ns", _i64), ("_line_four", _i64 * 2)]


class State(ctypes.Structure):
    """A kernel's books, kept by the native calls that run it."""

    _fields_ = [("estimate", ctypes.c_double),   # nanoseconds per work-group; 0: not yet
                ("leads", _i64),                 # how many of its launches were led
                ("description", _i64),           # its `fault.description`'s address
                ("running", _i64)]               # the address of `fault.running`


_SOURCE = """
{relax_definition}
{core_definition}
{clock_definition}

define private ptr @field(ptr %base, i64 %offset) alwaysinline nounwind {{
start:
  %address = getelementptr i8, ptr %base, i64 %offset
  ret ptr %address
}}

define private double @policy(ptr %mailbox, i64 %offset) alwaysinline nounwind {{
start:
  %word = getelementptr i8, ptr %mailbox, i64 %offset
  %value = load i64, ptr %word, align 8
  %seconds = sitofp i64 %value to double
  ret double %seconds
}}

define private i64 @share(ptr %mailbox, ptr %entry, ptr %record, i64 %chunk,
                          i1 %from.back) nounwind {{
start:
  %divisor.word = call ptr @field(ptr %mailbox, i64 {words.divisor.offset})
  %left = call ptr @field(ptr %mailbox, i64 {words.left.offset})
  %done = call ptr @field(ptr %mailbox, i64 {words.done.offset})
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

; Groups [first, end) of the kernel `key` names, posted for up to `helpers` workers, in
; claims of at least `chunk`: the groups this thread ran, once all have run, or -1 at
; once where another thread leads.
define i64 @kernelkit_lead(ptr %key, ptr %record, i64 %first, i64 %end, i64 %chunk,
                           i64 %helpers) nounwind {{
start:
  %mailbox.in.key = call ptr @field(ptr %key, i64 {key.mailbox.offset})
  %mailbox = load ptr, ptr %mailbox.in.key, align 8
  %entry.in.key = call ptr @field(ptr %key, i64 {key.entry.offset})
  %entry = load ptr, ptr %entry.in.key, align 8
  %leader = call ptr @field(ptr %mailbox, i64 {words.leader.offset})
  %claim = cmpxchg ptr %leader, i64 0, i64 1 seq_cst seq_cst
  %alone = extractvalue {{ i64, i1 }} %claim, 1
  br i1 %alone, label %post, label %busy
busy:
  ret i64 -1
post:
  call void @vacated(ptr %mailbox)
  %entry.word = call ptr @field(ptr %mailbox, i64 {words.entry.offset})
  %record.word = call ptr @field(ptr %mailbox, i64 {words.record.offset})
  %groups.word = call ptr @field(ptr %mailbox, i64 {words.groups.offset})
  %chunk.word = call ptr @field(ptr %mailbox, i64 {words.chunk.offset})
  %left = call ptr @field(ptr %mailbox, i64 {words.left.offset})
  %done = call ptr @field(ptr %mailbox, i64 {words.done.offset})
  %seats = call ptr @field(ptr %mailbox, i64 {words.seats.offset})
  %divisor.word = call ptr @field(ptr %mailbox, i64 {words.divisor.offset})
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
  %groups.word = call ptr @field(ptr %mailbox, i64 {words.groups.offset})
  %done = call ptr @field(ptr %mailbox, i64 {words.done.offset})
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
  %inside = call ptr @field(ptr %mailbox, i64 {words.inside.offset})
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

; Run what is posted, and watch for more for `nanoseconds` after the last (a time the
; system ran other threads does not count): 1 where the word at `submissions` changed
; from `seen` (a launch was queued in Python), or `once` a post was served, 0 after the
; time passed with nothing.
define i64 @kernelkit_serve(ptr %mailbox, ptr %submissions, i64 %seen,
                            i64 %nanoseconds, i1 %once) nounwind {{
start:
  %entry.word = call ptr @field(ptr %mailbox, i64 {words.entry.offset})
  %record.word = call ptr @field(ptr %mailbox, i64 {words.record.offset})
  %chunk.word = call ptr @field(ptr %mailbox, i64 {words.chunk.offset})
  %inside = call ptr @field(ptr %mailbox, i64 {words.inside.offset})
  %seats = call ptr @field(ptr %mailbox, i64 {words.seats.offset})
  %watching = call ptr @field(ptr %mailbox, i64 {words.watching.offset})
  %core.word = call ptr @field(ptr %mailbox, i64 {words.core.offset})
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
  %short = icmp ult i64 %gap, {preempted_gap_ns}
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

; Watch `*word` until it differs from `value` or `nanoseconds` have passed; what it saw.
define i64 @kernelkit_spin_while_equal(ptr %word, i64 %value, i64 %nanoseconds) nounwind {{
entry:
  %start = call i64 @now_ns()
  br label %loop
loop:
  %spins = phi i64 [ 0, %entry ], [ %spins.next, %wait ]
  %seen = load atomic i64, ptr %word acquire, align 8
  %changed = icmp ne i64 %seen, %value
  br i1 %changed, label %done, label %wait
wait:
  %ignored.gave = call i1 @relax(i64 %spins)
  %spins.next = add i64 %spins, 1
  %now = call i64 @now_ns()
  %spent = sub i64 %now, %start
  %over = icmp uge i64 %spent, %nanoseconds
  br i1 %over, label %done, label %loop
done:
  ret i64 %seen
}}

; -- a kernel's books: `State`, read and written whole (other threads launch it too) --

define private double @estimate(ptr %state) nounwind {{
start:
  %word = call ptr @field(ptr %state, i64 {state.estimate.offset})
  %bits = load atomic i64, ptr %word monotonic, align 8
  %value = bitcast i64 %bits to double
  ret double %value
}}

; The estimate after a run that took `per.group` nanoseconds a group: the recent runs
; weigh most, and one run at most 4 times the estimate (a run the system stopped for
; tens of microseconds says nothing of the kernel).
define private void @fold(ptr %state, double %per.group) nounwind {{
start:
  %estimate = call double @estimate(ptr %state)
  %none = fcmp oeq double %estimate, 0.0
  %limit = fmul double %estimate, 4.0
  %over = fcmp ogt double %per.group, %limit
  %clipped = select i1 %over, double %limit, double %per.group
  %kept = fmul double %estimate, 0.75
  %added = fmul double %clipped, 0.25
  %sum = fadd double %kept, %added
  %folded = select i1 %none, double %per.group, double %sum
  %bits = bitcast double %folded to i64
  %word = call ptr @field(ptr %state, i64 {state.estimate.offset})
  store atomic i64 %bits, ptr %word monotonic, align 8
  ret void
}}

; Fold `nanoseconds` spent on `groups` groups into the estimate.
define private void @fold_time(ptr %state, i64 %nanoseconds, i64 %groups) nounwind {{
start:
  %some = icmp sgt i64 %groups, 0
  br i1 %some, label %fold, label %done
fold:
  %took = sitofp i64 %nanoseconds to double
  %count = sitofp i64 %groups to double
  %per.group = fdiv double %took, %count
  call void @fold(ptr %state, double %per.group)
  br label %done
done:
  ret void
}}

; Say which kernel runs, for the fault handler (`fault.py`).
define private void @say_running(ptr %state) nounwind {{
start:
  %description.word = call ptr @field(ptr %state, i64 {state.description.offset})
  %description = load i64, ptr %description.word, align 8
  %running.word = call ptr @field(ptr %state, i64 {state.running.offset})
  %running = load ptr, ptr %running.word, align 8
  store volatile i64 %description, ptr %running, align 8
  ret void
}}

; Run groups [first, end) on this thread, timed.
define i64 @kernelkit_run(ptr %key, ptr %record, i64 %first, i64 %end, ptr %state)
    nounwind {{
start:
  call void @say_running(ptr %state)
  %entry.in.key = call ptr @field(ptr %key, i64 {key.entry.offset})
  %entry = load ptr, ptr %entry.in.key, align 8
  %began = call i64 @now_ns()
  call void %entry(ptr %record, i64 %first, i64 %end)
  %ended = call i64 @now_ns()
  %took = sub i64 %ended, %began
  %groups = sub i64 %end, %first
  call void @fold_time(ptr %state, i64 %took, i64 %groups)
  ret i64 %groups
}}

; Lead groups [first, end) (`kernelkit_lead`), the last claims of about `LED_CHUNK_NS`,
; timed by this thread's own groups; -1 where another thread leads (nothing ran).
define i64 @kernelkit_share(ptr %key, ptr %record, i64 %first, i64 %end, ptr %state,
                            i64 %helpers) nounwind {{
start:
  call void @say_running(ptr %state)
  %groups = sub i64 %end, %first
  %count.groups = sitofp i64 %groups to double
  %per.group = call double @estimate(ptr %state)
  %mailbox.in.key = call ptr @field(ptr %key, i64 {key.mailbox.offset})
  %mailbox = load ptr, ptr %mailbox.in.key, align 8
  %chunk.ns = call double @policy(ptr %mailbox, i64 {words.led_chunk_ns.offset})
  %chunk.groups = fdiv double %chunk.ns, %per.group
  %chunk.fits = fcmp olt double %chunk.groups, %count.groups   ; (so it converts)
  br i1 %chunk.fits, label %chunk.part, label %chunk.chosen
chunk.part:
  %chunk.whole = fptoui double %chunk.groups to i64
  %chunk.more = add i64 %chunk.whole, 1
  br label %chunk.chosen
chunk.chosen:
  %chunk = phi i64 [ %groups, %start ], [ %chunk.more, %chunk.part ]
  %began = call i64 @now_ns()
  %ran = call i64 @kernelkit_lead(ptr %key, ptr %record, i64 %first, i64 %end,
                                  i64 %chunk, i64 %helpers)
  %ended = call i64 @now_ns()
  %took = sub i64 %ended, %began
  call void @fold_time(ptr %state, i64 %took, i64 %ran)
  ret i64 %ran
}}

; The launch policy (see the module's docstring): a `Ran` value.
define i64 @kernelkit_launch(ptr %key, ptr %record, i64 %groups, ptr %state,
                             i64 %helpers) nounwind {{
start:
  %mailbox.in.key = call ptr @field(ptr %key, i64 {key.mailbox.offset})
  %mailbox = load ptr, ptr %mailbox.in.key, align 8
  %queued.word = call ptr @field(ptr %mailbox, i64 {words.queued.offset})
  %queued = load atomic i64, ptr %queued.word seq_cst, align 8
  %idle = icmp eq i64 %queued, 0
  %per.group = call double @estimate(ptr %state)
  %measured = fcmp ogt double %per.group, 0.0
  br i1 %measured, label %estimated, label %left
estimated:
  %count.groups = sitofp i64 %groups to double
  %estimate = fmul double %per.group, %count.groups
  %led.ns = call double @policy(ptr %mailbox, i64 {words.led_ns.offset})
  %joined.ns = call double @policy(ptr %mailbox, i64 {words.joined_ns.offset})
  %inline.ns = call double @policy(ptr %mailbox, i64 {words.inline_ns.offset})
  %short = fcmp olt double %estimate, %led.ns
  %joined = fcmp olt double %estimate, %joined.ns
  %helped = icmp sgt i64 %helpers, 0
  %several = icmp sgt i64 %groups, 1
  %claimable = icmp slt i64 %groups, 2147483648
  %shared.a = and i1 %joined, %helped
  %shared.b = and i1 %several, %claimable
  %shared = and i1 %shared.a, %shared.b
  %inline = fcmp olt double %estimate, %inline.ns
  br i1 %idle, label %ours, label %queued.before
queued.before:   ; one this policy would take (below) waits for those queued before it
  %takes.some = or i1 %short, %shared
  %takes = or i1 %takes.some, %inline
  %answer.before = select i1 %takes, i64 {ran.BEHIND}, i64 {ran.LEFT}
  ret i64 %answer.before
ours:
  br i1 %short, label %here, label %shareable
here:
  %ignored.here = call i64 @kernelkit_run(ptr %key, ptr %record, i64 0, i64 %groups,
                                          ptr %state)
  ret i64 {ran.RAN}
shareable:
  br i1 %shared, label %watched, label %unshared
watched:
  %watching.word = call ptr @field(ptr %mailbox, i64 {words.watching.offset})
  %watching = load atomic i64, ptr %watching.word seq_cst, align 8
  %awake = icmp ne i64 %watching, 0
  br i1 %awake, label %count, label %alone
count:
  %leads.word = call ptr @field(ptr %state, i64 {state.leads.offset})
  %leads.before = atomicrmw add ptr %leads.word, i64 1 monotonic
  %leads = add i64 %leads.before, 1
  %probed.leads.word = call ptr @field(ptr %mailbox, i64 {words.probed_leads.offset})
  %probed.leads = load i64, ptr %probed.leads.word, align 8
  %probed.turn = urem i64 %leads, %probed.leads
  %probed.now = icmp eq i64 %probed.turn, 0
  %probed.ns = call double @policy(ptr %mailbox, i64 {words.probed_ns.offset})
  %near = fcmp olt double %estimate, %probed.ns
  %probe = and i1 %probed.now, %near
  br i1 %probe, label %here, label %lead
lead:
  %ran = call i64 @kernelkit_share(ptr %key, ptr %record, i64 0, i64 %groups, ptr %state,
                                   i64 %helpers)
  %not.led = icmp slt i64 %ran, 0
  br i1 %not.led, label %alone, label %placed
placed:
  %all = icmp eq i64 %ran, %groups
  %watched.after = load atomic i64, ptr %watching.word seq_cst, align 8
  %still.watched = icmp ne i64 %watched.after, 0
  %core.word = call ptr @field(ptr %mailbox, i64 {words.core.offset})
  %core.there = load atomic i64, ptr %core.word seq_cst, align 8
  %here.core = call i64 @core()
  %known = icmp ne i64 %here.core, -1
  %same.core = icmp eq i64 %core.there, %here.core
  %waits.a = and i1 %all, %still.watched
  %waits.b = and i1 %known, %same.core
  %waits = and i1 %waits.a, %waits.b
  %answer = select i1 %waits, i64 {ran.LED_BESIDE}, i64 {ran.RAN}
  ret i64 %answer
alone:   ; it could have been led, but no worker watches (or another thread leads)
  br i1 %inline, label %alone.here, label %alone.left
alone.here:
  %ignored.alone = call i64 @kernelkit_run(ptr %key, ptr %record, i64 0, i64 %groups,
                                           ptr %state)
  ret i64 {ran.ALONE}
alone.left:
  ret i64 {ran.UNSHARED}
unshared:
  br i1 %inline, label %here, label %left
left:
  ret i64 {ran.LEFT}
}}
"""

# Where the object layout is known (`argument_checks`): the launch of a fast launcher,
# which first compares the arguments with the fingerprint of those it packed last (which
# starts with the `Key`), and runs nothing where they differ.
_CHECKED = """
define i64 @kernelkit_launch_if_same(ptr %args, ptr %fingerprint, ptr %record, i64 %groups,
                                     i64 %state.address, i64 %helpers) nounwind {{
start:
  %same = call i1 @matches(ptr %args, ptr %fingerprint)
  br i1 %same, label %launch, label %differs
launch:
  %state = inttoptr i64 %state.address to ptr
  %ran = call i64 @kernelkit_launch(ptr %fingerprint, ptr %record, i64 %groups,
                                    ptr %state, i64 %helpers)
  ret i64 %ran
differs:
  ret i64 {ran.DIFFERS}
}}
"""

_ARGUMENT_KINDS = "obbiii"
"""`launch_if_same`'s arguments (`calls.fast_call_source`): the tuple of arguments, the
fingerprint, the record, the groups, the state's address, the helpers."""


def native_source(checked: bool, triple: str | None = None) -> str:
    """The LLVM IR text of the native calls, for `triple`'s machine (this process's by
    default), with `launch_if_same` and its builtin where `checked`."""
    from .target import with_relax
    source = with_relax(_SOURCE, triple, words=Words, state=State, key=Key, ran=Ran,
                        preempted_gap_ns=PREEMPTED_GAP_NS)
    if not checked:
        return source
    return (source + _CHECKED.format(ran=Ran) + argument_checks.matches_definition() +
            FAST_CALL_DECLARATIONS +
            fast_call_source("kernelkit_fast_launch_if_same", "kernelkit_launch_if_same",
                             _ARGUMENT_KINDS))


_char_p = ctypes.c_char_p


@dataclass
class _Calls:
    """The native calls (see the module's docstring), compiled once per process (not
    frozen: a test may watch a call)."""

    lead: object    # (key, record, first, end, chunk, helpers) -> groups run here, or -1
    share: object   # (key, record, first, end, state, helpers) -> groups run here, or -1
    run: object     # (key, record, first, end, state) -> groups run
    launch: object  # (key, record, groups, state, helpers) -> `Ran`
    serve: object   # (mailbox, submissions, seen, nanoseconds, once) -> 1 or 0
    spin: object    # (word, value, nanoseconds) -> what it saw
    # (args, fingerprint, record, groups, state, helpers) -> `Ran`: a builtin, where the
    # object layout is known and the interpreter is CPython; else None
    launch_if_same: object


@functools.lru_cache(maxsize=1)
def _compiled() -> _Calls:
    from kernelkit.compiler.native import host_functions
    checked = argument_checks.LAYOUT is not None and C_API is not None
    functions = host_functions(native_source(checked),
                               {**interrupts.SYMBOLS, **(C_API if checked else {})})
    pointer = ctypes.c_void_p

    def typed(name: str, *argtypes):
        return ctypes.CFUNCTYPE(_i64, *argtypes)(functions[f"kernelkit_{name}"])
    return _Calls(
        lead=typed("lead", _char_p, _char_p, _i64, _i64, _i64, _i64),
        share=typed("share", _char_p, _char_p, _i64, _i64, pointer, _i64),
        run=typed("run", _char_p, _char_p, _i64, _i64, pointer),
        launch=typed("launch", _char_p, _char_p, _i64, pointer, _i64),
        serve=typed("serve", pointer, pointer, _i64, _i64, ctypes.c_bool),
        spin=typed("spin_while_equal", pointer, _i64, _i64),
        launch_if_same=fast_call_function(functions["kernelkit_fast_launch_if_same"],
                                          "launch_if_same") if checked else None)


class Mailbox:
    """The device's mailbox (`Words`, see the module's docstring) and the native calls.

    The calls are compiled on a thread of their own (or loaded from the disk cache, well
    under a millisecond) from the first backend's creation on (`start`), which the first
    launch waits for where they are not ready (`calls`): never by a thread
    that launches, where a KeyboardInterrupt (which only the main thread sees) arriving
    while llvmlite frees what it made can have it free the same memory twice."""

    def __init__(self):
        whole = (ctypes.c_byte * (ctypes.sizeof(Words) + 64))()
        start = -ctypes.addressof(whole) % 64      # at the start of a cache line
        self._memory = whole
        self.words = Words.from_buffer(whole, start)
        self.address = ctypes.addressof(self.words)
        self.words.core = -1
        for name, value in POLICY.items():
            setattr(self.words, name, value)
        self._calls: _Calls | None = None
        self._compiling: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> None:
        """Start compiling the calls, if not yet started (a backend does so when made)."""
        with self._starting:
            if self._compiling is None:
                # (not a daemon: the interpreter's exit waits for LLVM to finish)
                self._compiling = threading.Thread(target=self._compile,
                                                   name="kernelkit-compile")
                self._compiling.start()

    def calls(self) -> _Calls:
        """The native calls, once compiled (waiting for them where they are not yet)."""
        calls = self._calls
        if calls is None:
            self.start()
            self._compiling.join()
            calls = self._calls
            if calls is None:
                raise RuntimeError("kernelkit's native launch calls failed to compile; "
                                   "the error was printed by the thread that compiled them")
        return calls

    def _compile(self) -> None:
        self._calls = _compiled()

    def key(self, entry: int) -> bytes:
        """The `Key` of the kernel whose group function is at `entry`."""
        return bytes(Key(self.address, entry))

    def forget_core(self) -> None:
        """The worker was moved: -1 until it says where it runs now."""
        self.words.core = -1
        for name, value in POLICY.items():
            setattr(self.words, name, value)

    @property
    def watching_address(self) -> int:
        return self.address + Words.watching.offset

    def lead(self, key: bytes, record: bytes, groups: int, chunk: int, helpers: int,
             first: int = 0) -> int:
        """Run work-groups [first, groups) of the kernel `key` names on `record`, posted
        for up to `helpers` workers that serve, in claims of at least `chunk`; how many
        groups this thread ran, once all have run (the record may be freed then), or -1
        at once where another thread leads (nothing ran)."""
        if not 0 <= first < groups < 2**31:
            raise ValueError(f"a led launch runs groups from 0 to {2**31 - 1}, at least "
                             f"one, not {first} to {groups}")
        return self.calls().lead(key, record, first, groups, min(chunk, groups - first),
                                 helpers)

    def serve(self, submissions: int, seen: int, nanoseconds: int,
              once: bool = False) -> bool:
        """Run what is posted, and watch for more (`kernelkit_serve`): True where the
        word at `submissions` changed from `seen`, or `once` a post was served."""
        return bool(self.calls().serve(self.address, submissions, seen, nanoseconds, once))


__all__ = ["INLINE_NS", "JOINED_NS", "LED_NS", "Key", "Mailbox", "Ran", "State", "Words",
           "native_source"]
