"""The AD fuzzer's program check (enzyme_ext.fuzz.check_program): a seed's kernel launched
two or three times by a Python program (the same arrays again, a ping-pong, inputs
through copies, an output read at its neighbours and overwritten), differentiated with
`autodiff(Reverse, program, ...)`, must give bit for bit the derivatives of the same
launches differentiated one by one with `ReverseSplit`. The seeds below reach the forms
a program's reverse pass has of its own (`program.Zeros`): a reverse kernel that leaves
the shadow of an output it overwrites whole unzeroed, and a gather kernel that stores
into a shadow known to hold zeros. And the check must fail where that reverse pass is
wrong. Reproduce a seed with `python -m enzyme_ext.fuzz --show N --family F`."""
import pytest

import kernelkit as kk
from enzyme_ext import fuzz
from enzyme_ext.program import Zeros
from enzyme_ext.signature import GATHER_STORED, REVERSE_UNZEROED

# (family, seed) -> the program check's tags on its passing outcome
SEEDS = {
    ("kernelkit", 25): {"program", REVERSE_UNZEROED},
    ("kernelkit", 41): {"program", "program-copies", REVERSE_UNZEROED},
    ("kernelkit", 31): {"program", "program-overwritten"},
    ("access", 3): {"program", "program-ping-pong", "program-copies"},
    ("access", 2): {"program", "program-copies", "program-overwritten"},
}


def checks(outcome) -> set[str]:
    return {tag for line in outcome.detail.splitlines() if line.startswith("checks: ")
            for tag in line[len("checks: "):].split()}


@pytest.fixture(scope="module")
def cpu():
    return kk.CPU()


@pytest.fixture(scope="module")
def outcomes(cpu):
    return {(family, seed): fuzz.check_case(fuzz.make_case(seed, family=family), cpu)
            for family, seed in SEEDS}


@pytest.mark.parametrize("family, seed", sorted(SEEDS))
def test_a_program_of_the_seed_s_launches_has_their_derivatives_one_by_one(outcomes, family,
                                                                           seed):
    outcome = outcomes[(family, seed)]
    assert outcome.kind == "pass", f"{family} seed {seed}: {outcome.kind}: {outcome.detail}"
    assert SEEDS[(family, seed)] <= checks(outcome), outcome.detail


def test_an_overwritten_output_reaches_both_forms_of_a_program_s_reverse_pass(outcomes, cpu):
    """The neighbours' kernel gathers by stores and the halving leaves its shadow
    unzeroed, before the seed's kernel reads it."""
    assert outcomes[("kernelkit", 31)].kind == "pass"
    backend = fuzz.program_backend(cpu)
    neighbours = fuzz.program_kernels(fuzz._NEIGHBOURS[1](backend)) | \
        fuzz.program_kernels(fuzz._NEIGHBOURS[2](backend))
    assert {GATHER_STORED, REVERSE_UNZEROED} <= neighbours
    assert REVERSE_UNZEROED in fuzz.program_kernels(fuzz._halve(backend))


def test_a_shadow_left_unzeroed_and_read_is_a_program_mismatch(monkeypatch):
    """Without zeroing what is zero in value only, the first of two launches that
    overwrite an output whole reads the adjoint the second's reverse kernel left."""
    monkeypatch.setattr(Zeros, "zero_in_memory", lambda self, shadow: None)
    outcome = fuzz.check_case(fuzz.make_case(25, family="kernelkit"), kk.CPU())
    assert outcome.kind == "program-mismatch", outcome.detail
    assert REVERSE_UNZEROED in outcome.detail and "one by one" in outcome.detail
