"""Differential fuzzing on every CI run: a fixed set of generated kernels (see
kernelkit.fuzz) on every backend, each compared with the plain-Python reference run of
the same source. A failing seed is reported by its number; reproduce it with
`python -m kernelkit.fuzz --seeds N --backend cpu`, read it with `--show N`, reduce it
with `--shrink N`."""
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
