"""masked-loops: a loop whose only per-item difference is its own exit condition keeps
every work-item until all are done (a `barrier_any` vote decides), so that it becomes a
loop all work-items run alike; loops with another per-item way out, or under a per-item
branch, are left alone."""
import kernelkit as kk
from kernelkit.analysis.uniformity import divergent_region, varying_values
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.passes import run_passes

F32 = T.ArrayType(T.float32, 1, "C")


def masked(kernel):
    module = translate_kernel(kernel, (F32, T.weak_int), (16,))
    run_passes(module, ["inline", "simplify", "dce", "cse", "simplify", "dce", "masked-loops",
                        "loop-barriers", "split-barriers"], verify=True)
    return module.kernel


def opcodes(function):
    return [op.opcode for op in function.ops()]


def grid_stride(a, n):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(i, n, 64):
        acc += a[p]
    a[i] = acc


def per_item_break(a, n):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(n):
        if a[p] > i:
            break
        acc += a[p]
    a[i] = acc


def under_a_per_item_branch(a, n):
    i = kk.index(kk.Global)
    if a[i] > 0:
        k = 0
        while k < i:
            k += 1
        a[i] = k


def test_a_grid_stride_loop_votes_and_becomes_uniform():
    kernel = masked(grid_stride)
    assert opcodes(kernel).count("barrier_any") == 1
    # Every trip starts at the vote: loop-barriers adds no barrier of its own, which a
    # target looping over work-items would run as a second pass over the group.
    assert opcodes(kernel).count("barrier") == 0
    (vote,) = [op for op in kernel.ops() if op.opcode == "barrier_any"]
    assert vote not in varying_values(kernel)             # every work-item gets one answer
    assert not divergent_region(kernel, varying_values(kernel)) & \
        {b for b in kernel.blocks if any(op.opcode == "barrier_any" for op in b.ops)}


def test_loops_with_another_way_out_or_under_a_branch_are_left_alone():
    for kernel in (per_item_break, under_a_per_item_branch):
        assert "barrier_any" not in opcodes(masked(kernel)), kernel.__name__
