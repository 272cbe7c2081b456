"""The native check of a fast launch's arguments (`argument_checks`, in the native call
that runs a fast launch, `launch_if_same`): the same arrays as packed last match their fingerprint; any change of an array a kernel could see
(another array, the same array resized, reshaped, restrided, retyped or made read-only,
another count of arguments) does not. Scalars are not compared: the launcher checks
their types and packs their values every launch."""
import ctypes
import struct
import types

import numpy as np
import pytest

from backends.cpu import argument_checks, runtime
from backends.cpu.runtime import data_pointer
from backends.cpu.work_sharing import JOINED_NS, LED_NS, PROBED_LEADS, Mailbox, Ran, State

pytestmark = pytest.mark.skipif(argument_checks.LAYOUT is None,
                                reason="this interpreter's object layout is not known here")


@pytest.fixture(scope="module")
def matches():
    """`matches(args, fingerprint)`: 1 where the native check finds them the same (a
    launch of a kernel not measured yet, which the native call leaves to Python and so
    runs nothing), else 0."""
    launch_if_same = runtime._device.mailbox.calls().launch_if_same
    state = State()

    def matched(args, fingerprint) -> int:
        ran = launch_if_same(args, fingerprint, b"", 1, ctypes.addressof(state), 0)
        assert ran in (Ran.LEFT, Ran.DIFFERS)
        return int(ran == Ran.LEFT)
    return matched


def kind_of(value, strided=False):
    """The launcher's kind of an argument: None for a scalar."""
    if not isinstance(value, np.ndarray):
        return None
    return (value.ndim, value.flags.c_contiguous, value.flags.writeable, strided)


def fingerprint(args, kinds):
    names = [f"a{index}" for index in range(len(args))]
    source = argument_checks.fingerprint_source(runtime._device.mailbox.key(0), names, kinds)
    scope = dict(zip(names, args), args=args, struct=struct, pointer=data_pointer,
                 ndarray=np.ndarray, tuple=tuple)
    return eval(source, scope)  # noqa: S307 - the launcher's own expression


def test_the_layout_probe_finds_this_interpreters_arrays():
    layout = argument_checks.LAYOUT
    assert layout.type == 8 and layout.items == 24
    assert layout.ndim == layout.data + 8 and layout.flags == layout.data + 48


def test_the_same_arguments_match(matches):
    y, x = np.zeros(100, np.float32), np.arange(100, dtype=np.float32)
    a = 2.0
    args = (y, a, x)
    packed = fingerprint(args, [kind_of(y), None, kind_of(x)])
    assert matches(args, packed) == 1
    assert matches((y, a, x), packed) == 1   # another tuple of the same objects
    assert matches((), fingerprint((), [])) == 1


def test_a_strided_array_matches_its_own_strides_only(matches):
    base = np.zeros((8, 12), np.float64)
    view = base[:, ::3]
    packed = fingerprint((view,), [kind_of(view, strided=True)])
    assert matches((view,), packed) == 1
    assert matches((base[:, ::3],), packed) == 1     # another view of the same memory
    assert matches((base[:, ::2][:, :4],), packed) == 0   # same extents, other strides
    assert matches((base[:4, ::3],), packed) == 0


@pytest.mark.parametrize("change", [
    "another array", "resized in place", "reshaped in place", "retyped in place",
    "made read-only", "one argument fewer", "one argument more", "a subclass",
    "a scalar for the array", "another dimension count", "not C-ordered"])
def test_a_change_a_kernel_could_see_does_not_match(matches, change):
    y = np.zeros(64, np.float32)
    x = np.arange(64, dtype=np.float32)
    a = 0.0
    args = (y, a, x)
    packed = fingerprint(args, [kind_of(y), None, kind_of(x)])
    assert matches(args, packed) == 1
    if change == "another array":
        args = (y.copy(), a, x)
    elif change == "resized in place":
        y.resize(4096, refcheck=False)
    elif change == "reshaped in place":
        y.shape = (8, 8)
    elif change == "retyped in place":
        y.dtype = np.int32
    elif change == "made read-only":
        y.flags.writeable = False
    elif change == "one argument fewer":
        args = (y, a)
    elif change == "one argument more":
        args = (y, a, x, x)
    elif change == "a subclass":
        args = (y.view(np.memmap), a, x)
    elif change == "a scalar for the array":
        args = (a, a, x)
    elif change == "another dimension count":
        args = (y.reshape(8, 8), a, x)
    elif change == "not C-ordered":
        args = (np.zeros(128, np.float32)[::2], a, x)
    assert matches(args, packed) == 0


def test_scalars_are_left_to_the_launcher(matches):
    y, x = np.zeros(64, np.float32), np.arange(64, dtype=np.float32)
    packed = fingerprint((y, 0.0, x), [kind_of(y), None, kind_of(x)])
    for scalar in (1.0, -0.0, np.float32(3), 7):
        assert matches((y, scalar, x), packed) == 1


def test_extents_of_every_axis_are_compared(matches):
    grid = np.zeros((4, 6, 8), np.float32)
    packed = fingerprint((grid,), [kind_of(grid)])
    assert matches((grid,), packed) == 1
    for shape in [(4, 6, 8), (4, 8, 6), (6, 4, 8), (8, 6, 4)]:
        assert matches((grid.reshape(shape),), packed) == (shape == (4, 6, 8))


COUNTER = """
define void @kernelkit_test_count_groups(ptr %record, i64 %first, i64 %end) {
  %counter = load ptr, ptr %record
  %groups = sub i64 %end, %first
  %ignored = atomicrmw add ptr %counter, i64 %groups seq_cst
  ret void
}
"""


@pytest.fixture(scope="module")
def count_groups() -> int:
    from kernelkit.compiler.native import host_functions
    return host_functions(COUNTER, {})["kernelkit_test_count_groups"]


@pytest.fixture
def counted_launch(count_groups):
    """A mailbox no worker watches, and a launch of the counting function on (y, x) with
    its fingerprint, its record, its counter, and a state whose running slot is a word
    of the test's own: `launch(groups, args, helpers)` runs it natively."""
    mailbox = Mailbox()
    calls = mailbox.calls()
    if calls.launch_if_same is None:
        pytest.skip("the native fast launch needs the C API")
    y, x = np.zeros(10, np.float32), np.zeros(10, np.float32)
    source = argument_checks.fingerprint_source(mailbox.key(count_groups), ["a0", "a1"],
                                                [kind_of(y), kind_of(x)])
    packed = eval(source, dict(a0=y, a1=x, args=(y, x), struct=struct,  # noqa: S307
                               pointer=data_pointer, ndarray=np.ndarray, tuple=tuple))
    counter, slot = np.zeros(1, np.int64), np.zeros(1, np.int64)
    state = State(description=12345, running=slot.ctypes.data)
    record = struct.pack("=Q", counter.ctypes.data)

    def launch(groups, args=(y, x), helpers=1):
        return calls.launch_if_same(args, packed, record, groups, ctypes.addressof(state),
                                    helpers)
    return types.SimpleNamespace(mailbox=mailbox, calls=calls, launch=launch, args=(y, x),
                                 key=mailbox.key(count_groups), record=record, counter=counter, slot=slot, state=state)


def test_a_launch_whose_arguments_differ_runs_no_group(counted_launch):
    launch = counted_launch
    launch.state.estimate = 1.0                # 1 ns a group: run here
    assert launch.launch(10) == Ran.RAN and launch.counter[0] == 10
    y, x = launch.args
    assert launch.launch(10, (x, y)) == Ran.DIFFERS
    assert launch.launch(10, (y, y)) == Ran.DIFFERS
    assert launch.launch(10, (y,)) == Ran.DIFFERS
    assert launch.counter[0] == 10


def test_a_short_launch_runs_here_timed_and_folds_its_time(counted_launch):
    launch, state = counted_launch, counted_launch.state
    assert launch.launch(25) == Ran.LEFT and launch.counter[0] == 0   # not measured yet
    assert launch.calls.run(launch.key, launch.record, 0, 25, ctypes.addressof(state)) == 25
    assert launch.counter[0] == 25 and launch.slot[0] == 12345   # named for the handler
    assert state.estimate > 0                      # its first time is the estimate
    state.estimate = 1e-6                          # one run counts 4 times it at most
    assert launch.launch(25) == Ran.RAN and launch.counter[0] == 50
    assert state.estimate == pytest.approx(1.75e-6)
    state.estimate = 1000.0                        # 25 us: to be led, but none watches
    assert launch.launch(25) == Ran.ALONE and launch.counter[0] == 75
    assert launch.launch(25, helpers=0) == Ran.RAN and launch.counter[0] == 100


def test_a_lead_keeps_the_books_and_says_where_the_worker_waits(counted_launch):
    launch, words, state = counted_launch, counted_launch.mailbox.words, counted_launch.state
    state.estimate = 10 * JOINED_NS / 1000              # 1000 groups: queued by Python
    assert launch.launch(1000) == Ran.LEFT
    state.estimate = 0.5 * JOINED_NS / 1000             # led, but no worker watches
    assert launch.launch(1000) == Ran.UNSHARED and launch.counter[0] == 0
    words.watching = 1
    assert launch.launch(1000, helpers=0) == Ran.LEFT   # one thread, too long to run here
    words.queued = 1                                    # behind a queued launch:
    assert launch.launch(1000) == Ran.BEHIND            # the caller waits, asks again
    assert launch.launch(1000, helpers=0) == Ran.LEFT   # (queued: as long alone)
    state.estimate = 0.5 * LED_NS / 1000
    assert launch.launch(1000) == Ran.BEHIND and launch.counter[0] == 0   # short, too
    state.estimate = 10 * JOINED_NS / 1000
    assert launch.launch(1000) == Ran.LEFT              # long: queued behind it
    state.estimate = 0.5 * JOINED_NS / 1000
    words.queued = 0
    posts = words.sequence
    assert launch.launch(1000) == Ran.RAN and state.leads == 1
    assert launch.counter[0] == 1000 and words.sequence == posts + 2   # posted
    assert state.estimate != 0.5 * JOINED_NS / 1000     # timed
    near = 1.5 * LED_NS / 1000
    state.estimate, state.leads = near, PROBED_LEADS - 1    # one in 64 near the line:
    assert launch.launch(1000) == Ran.RAN and words.sequence == posts + 2   # run here
    assert state.leads == PROBED_LEADS and launch.counter[0] == 2000
    assert state.estimate != near
    # A worker watches and last ran on this core, and ran nothing: the leader is to keep
    # it off this core.
    state.estimate = 0.5 * JOINED_NS / 1000
    for _ in range(20):   # (until this thread stays on one core for the call)
        here = runtime._sched_getcpu()
        words.core = here
        answer = launch.launch(1000)
        if runtime._sched_getcpu() == here:
            break
    assert answer == Ran.LED_BESIDE
    words.core = -1 if here != -1 else 0                # elsewhere, or nowhere known
    assert launch.launch(1000) == Ran.RAN
