"""What made an augmented forward kernel slow to compile, checked by the shape of its LLVM
IR rather than by a clock.

The augmented kernel of a kernel with uniform loops pushes onto its tape on each trip
(branch decisions, counters), so every such loop does work per work-item and the CPU's
loop-barriers pass turns it inside out: the group function (backends/cpu/group.py) runs
a region per loop and keeps the loops' uniform values in slots across the regions. Where
LLVM found every slot live around the group loop and around the region dispatch, each
one became a phi there with an operand for every way out of every region, and LLVM's SLP
vectorizer spent seconds in that web (a fuzzed kernel with ten such loops: 2.4 of its
2.6 s of optimization). The checks read the group function as lowered, with its slots
promoted to SSA values as LLVM's pipeline first does (SROA)."""
import numpy as np
import pytest
from llvmlite import binding as llvm

import kernelkit as kk
from backends.cpu.fp_environment import GROUPS_SUFFIX
from backends.cpu.regions import RegionPlan
from enzyme_ext import compiler_job_from_backend
from enzyme_ext.jobs import derivative_job
from kernelkit.compiler.driver import compile_job
from kernelkit.ir.definitions import BARRIER
from kernelkit.ir.parser import parse_module


def trips(n, m):
    for a in range(n % 7, 6):
        for b in range((n - a) % 7, 6):
            if b > m:
                break
    return 2.0


@kk.kernel
def nested_uniform_loops(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    s = 0.0
    for k in range(n % 5, 4):
        s += trips(n + k, k)
    y[i] = y[i] * x[i] + s


ACTIVITIES = ("duplicated", "const", "const")


@pytest.fixture(scope="module")
def augmented(tmp_path_factory):
    """The augmented kernel's final typed IR and its group function as lowered, with
    its allocas promoted to SSA values."""
    directory = tmp_path_factory.mktemp("augmented")
    backend = kk.CPU(threads=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELKIT_DUMP", str(directory / "dump"))
        patch.setenv("KERNELKIT_CACHE_DIR", str(directory / "cache"))
        y, x = np.ones(100), np.ones(100)
        argtypes = nested_uniform_loops.argument_types(backend, (y, x, 3))
        parent = compiler_job_from_backend(backend, nested_uniform_loops.function, argtypes,
                                           workgroupsize=(64,))
        compile_job(derivative_job(parent, "augmented", ACTIVITIES, (argtypes[0], None, None)))
    (dump,) = (directory / "dump").iterdir()
    typed = parse_module(sorted(dump.glob("*.kkir"))[-1].read_text()).kernel
    lowered = llvm.parse_assembly((dump / "llvm.ll").read_text())
    promote = llvm.create_new_module_pass_manager()
    promote.add_sroa_pass()
    target = backend.target()
    promote.run(lowered, llvm.create_pass_builder(target.machine(),
                                                  llvm.create_pipeline_tuning_options()))
    # The group function, behind the wrapper that sets the floating-point environment.
    (function,) = [f for f in lowered.functions if f.name.endswith(GROUPS_SUFFIX)]
    return typed, function


def phis(block) -> list[str]:
    return [i.name for i in block.instructions if i.opcode == "phi"]


def test_the_augmented_kernel_of_nested_uniform_loops_runs_in_regions(augmented):
    typed, _ = augmented
    assert sum(op.definition is BARRIER for op in typed.ops()) >= 4


def test_nothing_but_the_group_number_goes_round_the_group_loop(augmented):
    _, function = augmented
    (loop,) = [b for b in function.blocks if b.name == "group_loop"]
    assert sorted(phis(loop)) == ["group", "group0"]


def test_the_region_dispatch_carries_each_uniform_value_once(augmented):
    typed, function = augmented
    plan = RegionPlan(typed)
    assert plan.uniform
    dispatches = [b for b in function.blocks if b.name.startswith("next_region")]
    assert len(dispatches) == 2      # a full group's and a partial group's
    for dispatch in dispatches:
        # The region number, each kept uniform value's `current` copy and each vote.
        assert len(phis(dispatch)) <= 1 + len(plan.uniform) + len(plan.unanimous)

