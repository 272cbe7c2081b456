"""The native check of a fast launch's arguments (`argument_checks`, in the mailbox's
`matches`, `call_if_same` and `lead_if_same`): the same
arrays as packed last match their fingerprint; any change of an array a kernel could see
(another array, the same array resized, reshaped, restrided, retyped or made read-only,
another count of arguments) does not. Scalars are not compared: the launcher checks
their types and packs their values every launch."""
import array
import struct
import types

import numpy as np
import pytest

from backends.cpu import argument_checks, runtime
from backends.cpu.runtime import data_pointer
from backends.cpu.work_sharing import Mailbox

pytestmark = pytest.mark.skipif(argument_checks.LAYOUT is None,
                                reason="this interpreter's object layout is not known here")


@pytest.fixture(scope="module")
def matches():
    mailbox = runtime._device.mailbox
    mailbox.prepare()
    return mailbox.matches


def kind_of(value, strided=False):
    """The launcher's kind of an argument: None for a scalar."""
    if not isinstance(value, np.ndarray):
        return None
    return (value.ndim, value.flags.c_contiguous, value.flags.writeable, strided)


def fingerprint(args, kinds):
    names = [f"a{index}" for index in range(len(args))]
    source = argument_checks.fingerprint_source(runtime._device.mailbox.address, 0, names,
                                                kinds)
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


def test_a_launch_whose_arguments_differ_runs_no_group(count_groups):
    mailbox = Mailbox()
    mailbox.prepare()
    y, x = np.zeros(10, np.float32), np.zeros(10, np.float32)
    names = ["a0", "a1"]
    source = argument_checks.fingerprint_source(mailbox.address, count_groups, names,
                                                [kind_of(y), kind_of(x)])
    packed = eval(source, dict(a0=y, a1=x, args=(y, x), struct=struct,  # noqa: S307
                               pointer=data_pointer, ndarray=np.ndarray, tuple=tuple))
    counter = np.zeros(1, np.int64)
    record = struct.pack("=Q", counter.ctypes.data)
    assert mailbox.call_if_same((y, x), packed, record, 3, 10) == 1
    assert mailbox.lead_if_same((y, x), packed, record, 0, 1000, 7, 0) == 1000
    assert counter[0] == 1007
    assert mailbox.call_if_same((x, y), packed, record, 0, 10) == 0
    assert mailbox.lead_if_same((y, y), packed, record, 0, 1000, 7, 0) == -2
    assert mailbox.matches((y, x), packed) == 1 and mailbox.matches((x, y), packed) == 0
    assert counter[0] == 1007


@pytest.fixture
def counted_launch(count_groups):
    """A mailbox no worker watches, and what the timed calls take for a launch of the
    counting function on (y, x): the fingerprint, the record, a state whose running
    slot is a word of the test's own, and the counter."""
    mailbox = Mailbox()
    mailbox.prepare()
    if mailbox.lead_timed is None:
        pytest.skip("the timed calls need the C API and CLOCK_MONOTONIC")
    y, x = np.zeros(10, np.float32), np.zeros(10, np.float32)
    source = argument_checks.fingerprint_source(mailbox.address, count_groups, ["a0", "a1"],
                                                [kind_of(y), kind_of(x)])
    packed = eval(source, dict(a0=y, a1=x, args=(y, x), struct=struct,  # noqa: S307
                               pointer=data_pointer, ndarray=np.ndarray, tuple=tuple))
    counter, slot = np.zeros(1, np.int64), np.zeros(1, np.int64)
    # (estimate, leads, description, running slot, helpers, chunk seconds, probed
    # seconds, timed leads, probed leads: `work_sharing.STATE_WORDS`)
    state = array.array("d", [0.0, 0.0, 12345.0, slot.ctypes.data, 1, 5e-7, 1e-3, 8, 64])
    return types.SimpleNamespace(mailbox=mailbox, args=(y, x), packed=packed,
                                 record=struct.pack("=Q", counter.ctypes.data),
                                 counter=counter, slot=slot, state=state,
                                 address=state.buffer_info()[0])


def test_a_timed_call_runs_every_group_and_folds_its_time(counted_launch):
    launch = counted_launch
    call = launch.mailbox.call_timed
    assert call(launch.args, launch.packed, launch.record, 25, launch.address) == 1
    assert launch.counter[0] == 25 and launch.slot[0] == 12345   # named for the handler
    first = launch.state[0]
    assert first > 0                                      # its first time is the estimate
    launch.state[0] = 1e-15                               # one run counts 4 times it
    assert call(launch.args, launch.packed, launch.record, 25, launch.address) == 1
    assert launch.state[0] == pytest.approx(1.75e-15)
    y, x = launch.args
    assert call((x, y), launch.packed, launch.record, 25, launch.address) == 0
    assert launch.counter[0] == 50 and launch.state[0] == pytest.approx(1.75e-15)


def test_a_timed_lead_keeps_the_books_and_says_where_the_worker_waits(counted_launch):
    launch = counted_launch
    lead, words, state = launch.mailbox.lead_timed, launch.mailbox.words, launch.state

    def led(groups, args=launch.args):
        return lead(args, launch.packed, launch.record, groups, launch.address)

    y, x = launch.args
    assert led(1000) == 0 and state[1] == 0            # no estimate yet: not led
    state[0] = 1e-5                                     # 10 ms: led
    assert led(1, (x, y)) == 0 and led(2**31) == 0      # too few or too many groups
    assert led(1000, (x, y)) == -2 and state[1] == 0    # other arguments: not counted
    posts = int(words[0])
    assert led(1000) == 1 and state[1] == 1 and launch.counter[0] == 1000
    assert words[0] == posts + 2 and state[0] == 1e-5   # posted; not timed (1 in 8)
    state[1] = 7
    assert led(1000) == 1 and state[1] == 8 and state[0] != 1e-5   # timed
    state[0], state[1] = 1e-7, 63                       # 100 us, under the probed 1 ms
    assert led(1000) == 1 and words[0] == posts + 4     # probed: run here, not posted
    assert state[1] == 64 and launch.counter[0] == 3000 and state[0] != 1e-7
    # A worker watches (word 12) and last ran on this core (word 14), and ran nothing:
    # the leader is to keep it off this core.
    state[0] = 1e-5
    words[12] = 1
    for _ in range(20):   # (until this thread stays on one core for the call)
        here = runtime._sched_getcpu()
        words[14] = here
        answer = led(1000)
        if runtime._sched_getcpu() == here:
            break
    assert answer == 2
    words[14] = -1 if here != -1 else 0                 # elsewhere, or nowhere known
    assert led(1000) == 1
