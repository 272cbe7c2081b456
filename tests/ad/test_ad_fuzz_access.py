"""The AD fuzzer's access family (enzyme_ext.fuzz): fixed seeds whose kernels read other
work-items' elements (permuted `x[j, i]`, mirrored and neighbouring indices, a local tile
read transposed) and whose plans pass one array for two read parameters (allowed) or for
a written and a read one (refused) must pass every check: forward against reverse mode,
both against finite differences, under the CPU's race detector. And the fuzzer must
report what it is for: derivatives that are wrong alike in both modes, a reverse mode
that disagrees with forward, a race, aliasing autodiff did not refuse. Reproduce a seed
with `python -m enzyme_ext.fuzz --show N --races`."""
import ast

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, fuzz
from kernelkit.errors import LaunchError
from kernelkit.fuzz.generator import ArraySpec, Options
from kernelkit.fuzz.runner import make_backends

# seed -> what its kernel and plan exercise (its outcome's `patterns:` and `checks:`)
SEEDS = {
    14: {"permuted", "permuted-write", "mirrored", "neighbour-guarded", "shared-read",
         "aliasing-refused", "fd"},
    8: {"permuted", "mirrored", "neighbour-clamped", "neighbour-guarded", "shared-read", "fd"},
    5: {"permuted", "tile-transposed", "neighbour-clamped", "neighbour-guarded"},
    10: {"permuted", "permuted-write", "mirrored", "tile-transposed"},
}


def exercised(outcome) -> set[str]:
    """The patterns and checks a passing outcome lists."""
    tags = set()
    for line in outcome.detail.splitlines():
        for prefix in ("checks: ", "patterns: "):
            if line.startswith(prefix):
                tags.update(line[len(prefix):].split())
    return tags


@pytest.fixture(scope="module")
def race_detecting_cpu():
    return kk.CPU(debug="races")


@pytest.fixture(scope="module")
def outcomes(race_detecting_cpu):
    return {seed: fuzz.check_case(fuzz.make_case(seed, family="access"), race_detecting_cpu)
            for seed in SEEDS}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_a_seed_passes_every_check_of_what_it_exercises(outcomes, seed):
    outcome = outcomes[seed]
    assert outcome.kind == "pass", f"seed {seed}: {outcome.kind}: {outcome.detail}"
    assert SEEDS[seed] <= exercised(outcome), outcome.detail


def test_the_seeds_read_through_every_index_map_and_both_kinds_of_shared_array(outcomes):
    tags = set().union(*(exercised(outcome) for outcome in outcomes.values()))
    assert {"permuted", "mirrored", "neighbour-guarded", "neighbour-clamped",
            "permuted-write", "tile-transposed", "shared-read", "aliasing-refused",
            "fd"} <= tags


# -- what the fuzzer must report ----------------------------------------------------------------


def scaling_shadows(monkeypatch, factor: float, modes) -> None:
    """Make the fuzzer's autodiff leave every shadow, within its view, `factor` times
    what it should hold after a run in one of `modes`."""
    real = fuzz.autodiff

    def wrong(mode, launch, *args, **kwargs):
        result = real(mode, launch, *args, **kwargs)
        kk.synchronize(launch.backend)
        if mode in modes:
            for argument in args:
                if isinstance(argument, Duplicated):
                    argument.shadow[...] *= factor
        return result

    monkeypatch.setattr(fuzz, "autodiff", wrong)


def test_derivatives_wrong_alike_in_both_modes_fail_the_finite_differences(monkeypatch):
    # Doubled in both modes, <s, J t> and <J^T s, t> still agree: only finite
    # differences can tell.
    scaling_shadows(monkeypatch, 2.0, (Forward, Reverse))
    outcome = fuzz.check_case(fuzz.make_case(51, family="access"), kk.CPU())
    assert outcome.kind == "fd-mismatch", outcome.detail


def test_a_reverse_mode_that_disagrees_with_forward_mode_is_a_mismatch(monkeypatch):
    scaling_shadows(monkeypatch, 1.5, (Reverse,))
    outcome = fuzz.check_case(fuzz.make_case(7, family="access"), kk.CPU())
    assert outcome.kind == "mismatch", outcome.detail


def test_aliasing_that_autodiff_does_not_refuse_is_a_failure(monkeypatch):
    real = fuzz.autodiff

    def accepting_shared_memory(mode, launch, *args, **kwargs):
        try:
            return real(mode, launch, *args, **kwargs)
        except LaunchError as error:
            if "share memory" not in str(error):
                raise

    monkeypatch.setattr(fuzz, "autodiff", accepting_shared_memory)
    outcome = fuzz.check_case(fuzz.make_case(47, family="access"), kk.CPU())
    assert outcome.kind == "aliasing-not-refused", outcome.detail
    assert "autodiff ran instead of refusing them" in outcome.detail


RACY = '''
@kk.kernel
def racy(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]
    y[(i + 1) % len(y)] += x[i]
'''


def test_a_race_the_detector_reports_is_a_failure(race_detecting_cpu):
    # Item i adds into y[i + 1], which item i + 1 writes: a race in the plain launch (the
    # kernelkit reference, which only watches local memory, accepts it).
    case = fuzz.AccessCase(0, ast.parse(RACY), "racy",
                           [ArraySpec("y", "float64", (8,), "", "out", (8,)),
                            ArraySpec("x", "float64", (8,), "", "in", (8,))],
                           (8,), (4,), Options(specials=False))
    outcome = fuzz.check_case(case, race_detecting_cpu)
    assert outcome.kind == "race", outcome.detail
    assert "data race on element" in outcome.detail


def test_the_finite_differences_tell_a_kink_from_a_wrong_slope(monkeypatch):
    # |x| at x = 0 exactly: the central differences say 0, either mode may say +-1. Not
    # a failure, and not checked.
    source = '''
@kk.kernel
def kink(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = abs(x[i]) + 0.5 * x[i]
'''
    case = fuzz.AccessCase(1, ast.parse(source), "kink",
                           [ArraySpec("y", "float64", (4,), "", "out", (4,)),
                            ArraySpec("x", "float64", (4,), "", "in", (4,))],
                           (4,), (4,), Options(specials=False))
    monkeypatch.setattr(fuzz.AccessCase, "arguments",
                        lambda self: [(np.zeros(4), np.zeros(4)), (np.zeros(4), np.zeros(4))])
    assert fuzz.plan_for(case).duplicated == [0, 1]   # (the plan of seed 1)
    outcome = fuzz.check_case(case, kk.CPU())
    assert outcome.kind == "pass", outcome.detail
    assert "fd-not-smooth" in exercised(outcome), outcome.detail


def test_every_derivative_kernel_of_a_seed_compiles_for_cuda_or_runs_there():
    # Without a GPU, CUDABackend.compile_only("sm_80", "sm_90"): forward, augmented
    # forward and reverse kernels compiled for both; with one, every check runs there too.
    cuda = make_backends(["cuda"])
    if not cuda:
        pytest.skip(kk.backend_unavailable_reason("cuda"))
    [(label, backend)] = cuda.items()
    case = fuzz.make_case(47, family="access")
    outcome, products = fuzz.check_case_with_products(case, kk.CPU(), label="cpu")
    on_cuda = fuzz.check_on_cuda(case, backend, label, outcome, products)
    assert on_cuda.kind == ("compiled" if label == "cuda-compile-only" else "pass"), \
        on_cuda.detail
