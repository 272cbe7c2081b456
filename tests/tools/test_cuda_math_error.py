"""tools/cuda_math_error.py and tools/libdevice_on_host.py: libdevice's own code run on the
host gives sqrt correctly rounded, fmod exactly and sin within NVIDIA's bound; what it
emulates of the GPU is what LLVM's NVPTX back end emits, bit for bit where exact
(the directed roundings against exact rationals, the shifts as PTX clamps them); the
--gpu mode's kernels compile for CUDA."""
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from backends.cuda.libdevice import libdevice_unavailable_reason

pytest.importorskip("mpmath")
pytestmark = pytest.mark.skipif(libdevice_unavailable_reason() is not None,
                                reason=str(libdevice_unavailable_reason()))

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import cuda_math_error as tool  # noqa: E402
import libdevice_on_host as host  # noqa: E402
from kernelkit.ir.math_functions import MATH_FUNCTIONS  # noqa: E402

COUNT = 1500


@pytest.fixture(scope="module")
def evaluate():
    return tool.HostEvaluator([MATH_FUNCTIONS[n] for n in ("sqrt", "fmod", "sin")])


def largest_error(evaluate, name, dtype):
    (measurement,) = tool.measure(MATH_FUNCTIONS[name], dtype, evaluate, COUNT)
    assert not measurement.wrong_kind and not measurement.special_differences, measurement
    return measurement.max_ulps


def test_libdevice_sqrt_on_the_host_is_correctly_rounded(evaluate):
    assert largest_error(evaluate, "sqrt", np.float64) <= 0.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_libdevice_fmod_on_the_host_is_exact(evaluate, dtype):
    assert largest_error(evaluate, "fmod", dtype) == 0.0


def test_libdevice_sin_of_float64_on_the_host_is_within_nvidia_s_bound(evaluate):
    error = largest_error(evaluate, "sin", np.float64)
    assert 0.5 < error <= tool.NVIDIA_BOUNDS["sin"][1]
    # Payne-Hanek reduction of the largest arguments (multi-word integer assembly)
    x = np.array([1e300, 1e22, 6381956970095103 * 2.0 ** 797, -1.7e308])
    assert np.array_equal(evaluate.library.evaluate("__nv_sin", x), np.sin(x))


def test_each_emulated_intrinsic_is_the_instruction_nvptx_emits_for_it():
    from backends.cuda.target import _target_machine
    from llvmlite import binding as llvm
    symbols = [tool.symbol(f, d) for f in tool.MEASURED for d in tool.DTYPES]
    library = host.libdevice_for(symbols)
    checked = 0
    for name, emulation in host.gpu_only_instructions(library).items():
        if not name.startswith("llvm.nvvm.") or emulation.ptx == "mov.b64":
            continue
        signature = str(library.get_function(name).global_value_type)
        result, operands = signature.split(" ", 1)
        arguments = ", ".join(f"{t} %a{i}" for i, t in enumerate(operands.strip("()").split(", ")))
        declaration = signature.replace(" (", f" @{name}(", 1)
        module = llvm.parse_assembly(
            f'target triple = "nvptx64-nvidia-cuda"\ndeclare {declaration}\n'
            f"define {result} @f({arguments}) {{\n  %r = call {result} @{name}({arguments})\n"
            f"  ret {result} %r\n}}\n")
        ptx = _target_machine("sm_90", 3).emit_assembly(module)
        assert f"\t{emulation.ptx} " in ptx, (name, emulation.ptx, ptx)
        checked += 1
    assert checked >= 20


def nearest_float32_toward(exact: Fraction, rounding: str) -> np.float32:
    nearest = np.float32(float(exact)) if abs(exact) < 2 ** 128 \
        else np.float32(np.sign(exact) * np.inf)
    with np.errstate(over="ignore"):
        if np.isfinite(nearest) and Fraction(float(nearest)) == exact:
            return nearest
        below = nearest if np.isfinite(nearest) and Fraction(float(nearest)) < exact \
            else np.nextafter(nearest, np.float32(-np.inf))
        above = np.nextafter(below, np.float32(np.inf))
    return {"rm": below, "rp": above, "rz": below if exact > 0 else above}[rounding]


@pytest.mark.parametrize("rounding", ["rm", "rp", "rz"])
def test_directed_rounding_fma_is_exact(rounding):
    from llvmlite import ir
    from kernelkit.compiler.native import host_functions
    import ctypes
    module = ir.Module()
    float_type = ir.FloatType()
    function = ir.Function(module, ir.FunctionType(float_type, [float_type] * 3), "fma_directed")
    builder = ir.IRBuilder(function.append_basic_block())
    builder.ret(host.INTRINSICS[f"fma.{rounding}.f"].build(builder, list(function.args)))
    address = host_functions(str(module), {})["fma_directed"]
    fma = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_float, ctypes.c_float)(address)
    rng = np.random.default_rng(7)
    values = np.concatenate([
        np.exp2(rng.uniform(-149, 128, 3000)) * rng.choice([-1, 1], 3000),
        rng.uniform(-4, 4, 3000),
        [1.0, -1.0, 2.0 ** -149, 3.4028235e38, 2.0 ** -126]]).astype(np.float32)
    for _ in range(3000):
        x, y, z = rng.choice(values, 3)
        if rng.random() < 0.2:   # cancellation: exact zeros and tiny remainders
            z = np.float32(-float(x) * float(y)) if abs(float(x) * float(y)) < 3e38 else z
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        got = np.float32(fma(x, y, z))
        if exact == 0:
            continue   # the sign of an exact zero: IEEE's rule, not checked against Fraction
        assert got == nearest_float32_toward(exact, rounding), (x, y, z, got)


def test_variable_shifts_clamp_as_ptx_does():
    """pow of a negative number to a huge even power is +inf: libdevice's oddness test
    shifts by more than 64, which PTX clamps (x86 would shift by the amount mod 64)."""
    library = host.LibdeviceOnHost(["__nv_pow"])
    result = library.evaluate("__nv_pow", np.array([-5.461352690630534e+173, -3.0]),
                              np.array([1.767264720309646e+130, 3.0]))
    assert result.tolist() == [np.inf, -27.0]


def test_inline_assembly_without_an_emulation_is_an_error_naming_it():
    with pytest.raises(NotImplementedError, match="mystery.b32 \\$0"):
        host._asm_emulation("mystery.b32 $0;")


def test_the_gpu_mode_compiles_kernels_calling_the_language_s_functions_for_cuda():
    import kernelkit as kk
    from backends.cuda import CUDABackend
    from backends.cuda.runtime import compile_only_unavailable_reason
    if compile_only_unavailable_reason() is not None:
        pytest.skip(compile_only_unavailable_reason())
    x = np.zeros(64, np.float32)
    ptx = kk.code_native(tool._applying("atan2", 2), CUDABackend.compile_only("sm_90"),
                         x.copy(), x, x, ndrange=64, workgroupsize=64)
    assert ".entry kk_apply_to_pairs(" in ptx and "fma.rn.f32" in ptx
