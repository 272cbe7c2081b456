"""Native functions called as CPython builtins (`calls.fast_call_source`,
`fast_call_function`): each argument reaches the function as its kind says, a wrong one
raises instead of passing garbage, the GIL is released during the call, and the
mailbox's checked calls, which every fast launch makes, are such builtins."""
import ctypes
import threading
import time
import types

import numpy as np
import pytest

from backends.cpu import argument_checks, runtime
from backends.cpu.calls import (
    C_API,
    FAST_CALL_DECLARATIONS,
    fast_call_function,
    fast_call_source,
)

pytestmark = pytest.mark.skipif(C_API is None, reason="this interpreter has no C API")

TARGETS = """
; object address + first byte + int * 3
define i64 @kernelkit_test_mix(ptr %object, ptr %bytes, i64 %int) {
  %address = ptrtoint ptr %object to i64
  %byte = load i8, ptr %bytes
  %wide = zext i8 %byte to i64
  %sum = add i64 %address, %wide
  %tripled = mul i64 %int, 3
  %result = add i64 %sum, %tripled
  ret i64 %result
}

; 1 where the word at `address` changes from `seen` within `turns` turns, else 0
define i64 @kernelkit_test_watch(i64 %address, i64 %seen, i64 %turns) {
start:
  %word = inttoptr i64 %address to ptr
  br label %loop
loop:
  %turn = phi i64 [ 0, %start ], [ %next, %same ]
  %now = load atomic volatile i64, ptr %word seq_cst, align 8
  %changed = icmp ne i64 %now, %seen
  br i1 %changed, label %yes, label %same
same:
  %next = add i64 %turn, 1
  %over = icmp uge i64 %next, %turns
  br i1 %over, label %no, label %loop
yes:
  ret i64 1
no:
  ret i64 0
}
"""


@pytest.fixture(scope="module")
def builtins():
    from kernelkit.compiler.native import host_functions
    source = TARGETS + FAST_CALL_DECLARATIONS + \
        fast_call_source("kernelkit_test_fast_mix", "kernelkit_test_mix", "obi") + \
        fast_call_source("kernelkit_test_fast_watch", "kernelkit_test_watch", "iii")
    functions = host_functions(source, C_API)
    return types.SimpleNamespace(
        mix=fast_call_function(functions["kernelkit_test_fast_mix"], "mix"),
        watch=fast_call_function(functions["kernelkit_test_fast_watch"], "watch"))


def test_each_argument_arrives_as_its_kind_says(builtins):
    thing = object()
    assert builtins.mix(thing, b"\x07rest", 5) == id(thing) + 7 + 15
    assert builtins.mix(None, b"\xff", -2**40) == id(None) + 255 - 3 * 2**40
    assert builtins.mix(thing, b"", 0) == id(thing)   # the terminating NUL
    assert type(builtins.mix(thing, b"a", 1)) is int
    assert builtins.mix.__name__ == "mix"


@pytest.mark.parametrize("args, error", [
    ((object(), b"x"), TypeError),                # too few
    ((object(), b"x", 1, 2), TypeError),          # too many
    ((object(), "x", 1), TypeError),              # str, not bytes
    ((object(), bytearray(b"x"), 1), TypeError),
    ((object(), b"x", 1.5), TypeError),           # float, not int
    ((object(), b"x", 2**63), OverflowError),
    ((object(), b"x", -2**63 - 1), OverflowError),
])
def test_a_wrong_argument_raises(builtins, args, error):
    with pytest.raises(error):
        builtins.mix(*args)
    assert builtins.mix(None, b"\x01", 1) == id(None) + 4   # and the next call is fine


def test_the_call_releases_the_gil(builtins):
    """A Python thread changes the word the call watches: it can only while the call
    does not hold the GIL (else the call gives up after its turns, about seconds)."""
    word = np.zeros(1, np.int64)

    def change():
        time.sleep(0.01)
        ctypes.c_int64.from_address(word.ctypes.data).value = 1

    changer = threading.Thread(target=change)
    changer.start()
    try:
        seen = builtins.watch(word.ctypes.data, 0, 2_000_000_000)
    finally:
        changer.join()
    assert seen == 1


@pytest.mark.skipif(argument_checks.LAYOUT is None,
                    reason="this interpreter's object layout is not known here")
def test_the_native_fast_launch_is_a_builtin():
    launch_if_same = runtime._device.mailbox.calls().launch_if_same
    assert isinstance(launch_if_same, types.BuiltinFunctionType), launch_if_same
    with pytest.raises(TypeError):
        launch_if_same((), b"", b"", 0, 0)   # one argument short: raised, not run
