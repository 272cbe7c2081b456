"""AD fuzzing on every CI run: kernelkit's generated kernels of a fixed set of seeds,
differentiated by enzyme_ext in forward and in reverse mode on the CPU, must satisfy the
dot-product identity <s, J t> == <J^T s, t>, and the AD runs' primal results must be a
plain launch's (see enzyme_ext.fuzz). Reproduce a failing seed with
`python -m enzyme_ext.fuzz --seeds N`, read it with `python -m enzyme_ext.fuzz --show N`."""
import pytest

import kernelkit as kk
from enzyme_ext.fuzz import FAILURES, make_case, plan_for, check_case
from kernelkit.fuzz.generator import ArraySpec

# The seeds below 45 whose kernels have a float32 or float64 array to differentiate
# (most of the others have none); about 20 s.
SEEDS = [seed for seed in range(45)
         if any(isinstance(p, ArraySpec) and p.dtype in ("float32", "float64")
                for p in make_case(seed).params)]


@pytest.fixture(scope="module")
def outcomes():
    backend = kk.CPU()
    return {seed: check_case(make_case(seed), backend) for seed in SEEDS}


@pytest.mark.parametrize("seed", SEEDS)
def test_forward_and_reverse_mode_agree(outcomes, seed):
    outcome = outcomes[seed]
    assert outcome.kind not in FAILURES, f"seed {seed}: {outcome.kind}: {outcome.detail}"


def test_most_seeds_are_checked_not_refused(outcomes):
    """Refusals (synchronize_any, atomic min/max of differentiated floats, ...) are not
    failures, but at least half of the seeds must be differentiated and checked."""
    assert all(plan_for(make_case(seed)) is not None for seed in SEEDS)
    checked = [seed for seed, outcome in outcomes.items() if outcome.kind == "pass"]
    assert len(checked) >= len(SEEDS) / 2, {seed: o.kind for seed, o in outcomes.items()}
