"""hoist-loads: each load of a global array moves up its block past what cannot change
what it reads (pure operations, other loads' neighbours, local memory, and in a kernel
whose arrays are disjoint, stores to other arrays); it stops at a write to its own array,
a barrier or a call, and loads keep their order. `disjoint_arrays` survives printing and
parsing."""
import pytest

from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_module
from kernelkit.passes import run_passes

HEADER = 'kernel @k(a, b, c, t) -> void file "k.py"{disjoint} {{\n' \
    "^bb0(%0: array<f32, 1, C>, %1: array<f32, 1, C>, %2: array<f32, 1, C>, %3: i64):\n"


def hoisted(body: str, disjoint: bool) -> str:
    text = HEADER.format(disjoint=" disjoint_arrays" if disjoint else "") + body + "}\n"
    module = parse_module(text)
    run_passes(module, ["hoist-loads"], verify=True)
    return print_module(module).split("\n", 2)[2]


BODY = """  %4 = local_id {axis = 0} : i64
  %5 = add %4, %3 : i64
  %6 = load %0, %3 : f32
  %7 = mul %6, %6 : f32
  store %0, %3, %7
  %8 = load %1, %5 : f32
  %9 = load %0, %3 : f32
  %10 = add %8, %9 : f32
  store %2, %3, %10
  ret
"""


def test_in_a_kernel_of_disjoint_arrays_loads_pass_stores_to_other_arrays():
    # b's load passes a's store and the product, not the index it reads at; a's second
    # load stays below a's store.
    assert hoisted(BODY, disjoint=True) == """  %4 = load %0, %3 : f32
  %5 = local_id {axis = 0} : i64
  %6 = add %5, %3 : i64
  %7 = load %1, %6 : f32
  %8 = mul %4, %4 : f32
  store %0, %3, %8
  %9 = load %0, %3 : f32
  %10 = add %7, %9 : f32
  store %2, %3, %10
  ret
}
"""


def test_elsewhere_loads_pass_only_what_touches_no_global_memory():
    # a's first load passes the index arithmetic above it; b's stops at a's store.
    assert hoisted(BODY, disjoint=False) == """  %4 = load %0, %3 : f32
  %5 = local_id {axis = 0} : i64
  %6 = add %5, %3 : i64
  %7 = mul %4, %4 : f32
  store %0, %3, %7
  %8 = load %1, %6 : f32
  %9 = load %0, %3 : f32
  %10 = add %8, %9 : f32
  store %2, %3, %10
  ret
}
"""


@pytest.mark.parametrize("between", ["barrier", 'print {format = "x"}',
                                     "%9 = atomic.add %1, %3, %4 : f32"])
def test_a_barrier_a_print_or_a_write_of_its_own_array_stops_a_load(between):
    body = f"""  %4 = const 1.0 : f32
  store %2, %3, %4
  {between}
  %5 = load %1, %3 : f32
  store %0, %3, %5
  ret
"""
    lines = hoisted(body, disjoint=True).splitlines()
    load = next(k for k, line in enumerate(lines) if "load %1" in line)
    assert between.split("= ")[-1].split(" {")[0] in lines[load - 1]


def test_a_store_to_local_memory_never_stops_a_load_of_a_global_array():
    body = """  %4 = localmem : local<f32, 16>
  %5 = const 1.0 : f32
  store %4, %3, %5
  %6 = load %1, %3 : f32
  store %0, %3, %6
  ret
"""
    moved = hoisted(body, disjoint=False)
    assert moved.index("load %1") < moved.index("store %4")


def test_disjoint_arrays_is_printed_and_parsed():
    text = HEADER.format(disjoint=" disjoint_arrays") + "  ret\n}\n"
    module = parse_module(text)
    assert module.kernel.disjoint_arrays
    assert print_module(module) == text
    assert not parse_module(HEADER.format(disjoint="") + "  ret\n}\n").kernel.disjoint_arrays
