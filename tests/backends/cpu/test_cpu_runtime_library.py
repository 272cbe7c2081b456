"""The helpers LLVM calls for float16 conversions (`backends/cpu/runtime_library.py`),
checked bit for bit against NumPy, and the loader's check that every function object code
calls exists (`object_symbols.py`, `target.py`'s loader)."""
import ctypes
import platform

import numpy as np
import pytest
from llvmlite import binding as llvm

import kernelkit as kk
from backends.cpu import target as cpu_target
from backends.cpu.object_symbols import undefined_symbols
from backends.cpu.runtime_library import _library_ir, runtime_library
from kernelkit.errors import BackendError

X86_64 = platform.machine().lower() in ("x86_64", "amd64")

_LOOP = """
{declaration}
define void @{name}(ptr %in, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %source = getelementptr {source}, ptr %in, i64 %i
  %x = load {source}, ptr %source
  %y = {operation}
  %destination = getelementptr {result}, ptr %out, i64 %i
  store {result} %y, ptr %destination
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""

_counter = iter(range(1 << 30))


def elementwise(source: str, result: str, operation: str, declaration: str = "",
                target: cpu_target.CPUTarget | None = None):
    """A native function applying `operation` (LLVM IR of %x) to each element of an
    array, compiled for `target` (the host) and loaded by the CPU target's loader; and
    its object code."""
    target = target or cpu_target.CPUTarget.host()
    name = f"kernelkit_test_elementwise_{next(_counter)}"
    module = llvm.parse_assembly(_LOOP.format(declaration=declaration, name=name,
                                              source=source, result=result,
                                              operation=operation))
    module.triple = target.triple()
    module.verify()
    object_code = target.machine().emit_object(module)
    address = cpu_target._loader.load(object_code, name, name)
    function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(address)

    def apply(x: np.ndarray, dtype) -> np.ndarray:
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape, dtype)
        function(x.ctypes.data, out.ctypes.data, x.size)
        return out
    return apply, object_code


def helper(name: str, source: str, result: str):
    return elementwise(source, result, f"call {result} @{name}({source} %x)",
                       f"declare {result} @{name}({source})")[0]


def every_half() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def quiet_nan_half(bits: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """The float16 NaN that F16C makes of a wider NaN: its sign, the quiet bit and the top
    of its payload."""
    width = bits.dtype.itemsize * 8
    sign = (bits >> (width - 16)).astype(np.uint16) & 0x8000
    payload = (bits >> (mantissa_bits - 10)).astype(np.uint16) & 0x1FF
    return sign | 0x7E00 | payload


def halfway_values() -> np.ndarray:
    halves = np.unique(every_half()[np.isfinite(every_half())].astype(np.float64))
    return (halves[:-1] + halves[1:]) / 2


def values_near_half_boundaries(dtype) -> np.ndarray:
    """Every float16 value, every point halfway between two, and the `dtype` neighbours
    of both, of both signs; overflow and underflow boundaries."""
    dtype = np.dtype(dtype)
    halves = every_half()[np.isfinite(every_half())].astype(np.float64)
    special = [65504.0, 65519.0, 65520.0, 2.0**-24, 2.0**-25, 1e-30, 1e30, np.inf, 0.0]
    with np.errstate(over="ignore"):
        exact = np.concatenate([halves, halfway_values(), special]).astype(dtype)
        exact = np.concatenate([exact, -exact])
        return np.concatenate([exact, np.nextafter(exact, dtype.type(np.inf)),
                               np.nextafter(exact, dtype.type(-np.inf))])


def assert_converts_like_numpy(x: np.ndarray, actual: np.ndarray, mantissa_bits: int) -> None:
    is_nan = np.isnan(x)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    unsigned = x.view(np.uint32 if x.dtype == np.float32 else np.uint64)
    expected = np.where(is_nan, quiet_nan_half(unsigned, mantissa_bits), expected)
    mismatches = np.flatnonzero(actual.view(np.uint16) != expected)
    assert len(mismatches) == 0, (
        f"{len(mismatches)} of {len(x)} differ, e.g. {x[mismatches[:5]]!r}: "
        f"{actual.view(np.uint16)[mismatches[:5]]} instead of {expected[mismatches[:5]]}")


def test_half_to_float_is_exact_for_every_half():
    extend = helper("__extendhfsf2", "half", "float")
    halves = every_half()
    actual = extend(halves, np.float32).view(np.uint32)
    is_nan = np.isnan(halves)
    expected = halves.astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(actual[~is_nan], expected[~is_nan])
    # A NaN keeps its sign and payload and is quieted (as F16C's vcvtph2ps does).
    bits = halves.view(np.uint16)[is_nan].astype(np.uint32)
    np.testing.assert_array_equal(
        actual[is_nan], ((bits & 0x8000) << 16) | 0x7FC00000 | ((bits & 0x3FF) << 13))


def test_float_to_half_rounds_to_nearest_even_like_numpy():
    truncate = helper("__truncsfhf2", "float", "half")
    every_4099th = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([every_4099th, values_near_half_boundaries(np.float32)])
    assert_converts_like_numpy(x, truncate(x, np.float16), 23)


def test_double_to_half_rounds_once_to_nearest_even_like_numpy():
    truncate = helper("__truncdfhf2", "double", "half")
    rng = np.random.default_rng(0)
    halfway = halfway_values()
    float32_step = np.spacing(halfway.astype(np.float32)).astype(np.float64)
    # Rounded to float32 first, these land exactly halfway: rounding twice gets them wrong.
    rounding_twice_goes_wrong = np.concatenate([halfway + float32_step / 4,
                                                halfway - float32_step / 4])
    x = np.concatenate([
        values_near_half_boundaries(np.float64), rounding_twice_goes_wrong,
        -rounding_twice_goes_wrong,
        rng.integers(0, 1 << 64, 1_000_000, dtype=np.uint64).view(np.float64),
        rng.uniform(-70_000, 70_000, 1_000_000) * 2.0 ** rng.integers(-30, 1, 1_000_000),
        [np.finfo(np.float64).smallest_subnormal, np.float64(np.nan), -np.float64(np.nan)]])
    assert_converts_like_numpy(x, truncate(x, np.float16), 52)
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.array_equal(rounding_twice_goes_wrong.astype(np.float32).astype(np.float16),
                                  rounding_twice_goes_wrong.astype(np.float16))


@pytest.mark.skipif(not X86_64, reason="F16C is an x86-64 extension")
def test_code_for_an_x86_64_without_f16c_calls_the_helpers_and_matches_numpy():
    baseline = cpu_target.CPUTarget("x86-64", "")
    apply, object_code = elementwise("half", "half", "call half @scale(half %x)",
                                     target=baseline, declaration="""
define internal half @scale(half %x) {
  %wide = fpext half %x to float
  %product = fmul float %wide, 3.0
  %back = fptrunc float %product to half
  %narrow = fmul half %back, 0xH3555
  ret half %narrow
}""")
    assert {"__extendhfsf2", "__truncsfhf2"} <= undefined_symbols(object_code)
    halves = every_half()
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (halves.astype(np.float32) * 3.0).astype(np.float16) * np.float16(1 / 3)
    np.testing.assert_array_equal(apply(halves, np.float16), expected)


@pytest.mark.parametrize("triple,cpu", [
    ("x86_64-unknown-linux-gnu", "x86-64"), ("x86_64-unknown-linux-gnu", "haswell"),
    ("aarch64-unknown-linux-gnu", "generic")])
def test_the_helpers_call_nothing_themselves(triple, cpu):
    """Compiled for a CPU without float16 instructions, they must not become libcalls of
    their own (they would call themselves)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(_library_ir())
    module.triple = triple
    machine = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, opt=2, reloc="pic")
    assert undefined_symbols(machine.emit_object(module)) == set()


def test_the_helpers_are_known_to_llvm_by_name():
    for name, address in runtime_library().items():
        assert llvm.address_of_symbol(name) == address


_CALLS = """
declare double @fmod(double, double)
declare void @kernelkit_test_nothing_defines_this(ptr)
declare extern_weak void @kernelkit_test_weak(ptr)
@kernelkit_test_counter = external global i64
define half @{name}(double %x, ptr %p) {{
  call void @kernelkit_test_nothing_defines_this(ptr %p)
  call void @kernelkit_test_weak(ptr %p)
  %count = load i64, ptr @kernelkit_test_counter
  store i64 %count, ptr %p
  %m = call double @fmod(double %x, double %x)
  %h = fptrunc double %m to half
  ret half %h
}}
"""


@pytest.mark.parametrize("triple,cpu", [
    ("x86_64-unknown-linux-gnu", "haswell"), ("aarch64-unknown-linux-gnu", "generic"),
    ("arm64-apple-darwin", "apple-m1"), ("x86_64-apple-darwin", "haswell"),
    ("x86_64-pc-windows-msvc", "haswell"), ("powerpc64-unknown-linux-gnu", "pwr9")])
def test_undefined_symbols_lists_what_object_code_needs_but_not_weak_references(triple, cpu):
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(_CALLS.format(name="f"))
    module.triple = triple
    machine = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, opt=2, reloc="pic")
    needed = {"fmod", "kernelkit_test_nothing_defines_this", "kernelkit_test_counter"}
    if triple.startswith("x86_64"):
        needed.add("__truncdfhf2")
    assert undefined_symbols(machine.emit_object(module)) == needed


def test_object_code_calling_a_function_nothing_provides_is_an_error_naming_both():
    target = cpu_target.CPUTarget.host()
    module = llvm.parse_assembly(_CALLS.format(name="kernelkit_test_calls_nothing"))
    module.triple = target.triple()
    object_code = target.machine().emit_object(module)
    with pytest.raises(BackendError) as error:
        cpu_target._loader.load(object_code, "kernelkit_test_calls_nothing", "my_kernel")
    message = str(error.value)
    assert "'my_kernel'" in message
    assert "kernelkit_test_nothing_defines_this" in message
    assert "kernelkit_test_counter" in message
    for provided in ("fmod", "__truncdfhf2", "kernelkit_test_weak"):
        assert provided not in message


@kk.kernel
def kernelkit_test_copy(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


def test_a_kernel_whose_code_needs_a_missing_function_fails_to_load_naming_the_kernel(
        monkeypatch):
    monkeypatch.setattr(cpu_target, "undefined_symbols",
                        lambda object_code: {"kernelkit_test_missing_function"})
    backend = kk.CPU()
    y = np.zeros(4, np.float16)
    with pytest.raises(BackendError, match="kernelkit_test_copy.*kernelkit_test_missing_function"):
        kernelkit_test_copy(backend, 4)(y, np.arange(4.0), ndrange=4)
    monkeypatch.undo()
    kernelkit_test_copy(backend, 4)(y, np.arange(4.0), ndrange=4)
    kk.synchronize(backend)
    np.testing.assert_array_equal(y, [0, 1, 2, 3])
