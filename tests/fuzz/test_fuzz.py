"""Differential fuzzing on every CI run: a fixed set of generated kernels (see
kernelkit.fuzz) on every backend, each compared with the plain-Python reference run of
the same source. A failing seed is reported by its number; reproduce it with
`python -m kernelkit.fuzz --seeds N --backend cpu`, read it with `--show N`, reduce it
with `--shrink N`."""
import numpy as np
import pytest

from kernelkit.fuzz.generator import generate
from kernelkit.fuzz.runner import Runner

# Compiling dominates: about 0.2 s a kernel on the CPU and as much again for the two
# CUDA architectures; these seeds take under a minute on two cores.
SEEDS = range(90)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_kernel_matches_the_reference(backend, seed):
    case = generate(seed)
    (outcome,) = Runner(backends={backend.name: backend}).run(case)
    assert outcome.kind != "invalid", f"seed {seed}: the fuzzer wrote an invalid kernel: " \
                                      f"{outcome.detail}"
    assert outcome.kind == "ok", f"seed {seed} on {backend!r}: {outcome.kind}: {outcome.detail}"


def test_float_arrays_of_atomics_start_at_whole_numbers():
    """Atomics add whole numbers to float arrays; were the arrays' own values fractions,
    the order of the additions would change the last bits of the sums (a mismatch with
    the reference that is no fault of the kernel; seed 4073 was one)."""
    case = generate(4073)
    atomic = [(param, base) for param, (base, _) in zip(case.params, case.arguments())
              if getattr(param, "role", "") == "atomic" and param.dtype.startswith("float")]
    assert atomic
    for _, base in atomic:
        assert (base == np.trunc(base)).all()
    (outcome,) = Runner(["cpu"]).run(case)
    assert outcome.kind == "ok", outcome.detail


@pytest.mark.parametrize("seed", [18524])
def test_inexact_float32_math_is_compared_to_float32_precision_in_a_float64_array(seed):
    """`np.float64(-kk.pow(a, b))` with float32 `a` and `b` (`kk.log10` and `kk.cbrt` in
    the seeds before the generator wrote dataclasses): the C library's float32 function
    and NumPy's may differ by an ulp of float32, which the float64 array keeps."""
    case = generate(seed)
    assert case.inexact_precision() == "float32"
    (outcome,) = Runner(["cpu"]).run(case)
    assert outcome.kind == "ok", outcome.detail
