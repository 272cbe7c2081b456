"""guard-versioning: a kernel whose loop sits under a per-item guard made of index
arithmetic (`if i < n:`, `if i >= n: return`) gets a second version, `<kernel>.interior`,
where the guard is an `assume` and the loop is uniform (so loop-barriers turns it inside
out); guards on loaded values, and kernels without such loops, get none."""
import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.passes import run_passes

F32 = T.ArrayType(T.float32, 1, "C")


def versions(kernel):
    module = translate_kernel(kernel, (F32, T.weak_int), (16,))
    run_passes(module, ["inline", "simplify", "dce", "cse", "simplify", "dce",
                        "guard-versioning", "loop-barriers"], verify=True)
    return module


def guarded(a, k):
    i = kk.index(kk.Global)
    if i < a.shape[0] and i % 2 == 0:
        acc = 0.0
        for p in range(k):
            acc += a[p]
        a[i] = acc


def early_return(a, k):
    i = kk.index(kk.Global)
    if i >= a.shape[0]:
        return
    acc = 0.0
    for p in range(k):
        acc += a[p]
    a[i] = acc


def guard_on_a_loaded_value(a, k):
    i = kk.index(kk.Global)
    if a[i] > 0:
        for p in range(k):
            a[i] += 1.0


def guard_without_a_loop(a, k):
    i = kk.index(kk.Global)
    if i < a.shape[0]:
        a[i] = a[i] * 2


def count(module, opcode, function):
    return sum(op.opcode == opcode for op in module.functions[function].ops())


def test_a_guarded_loop_gets_a_version_that_assumes_the_guard(ir_text):
    module = versions(guarded)
    assert list(module.functions) == ["guarded", "guarded.interior"]
    assert count(module, "assume", "guarded.interior") == 1   # both conditions, one select
    assert count(module, "barrier", "guarded.interior") == 2  # the loop is uniform there
    assert count(module, "barrier", "guarded") == 0           # and per item in the original
    assert count(module, "assume", "guarded") == 0
    assert "select" in ir_text(module)                        # `and` without a branch


def test_an_early_return_guard_is_assumed_false():
    module = versions(early_return)
    interior = module.functions["early_return.interior"]
    (assume,) = [op for op in interior.ops() if op.opcode == "assume"]
    assert assume.operands[0].opcode == "not"
    assert count(module, "barrier", "early_return.interior") == 2


def test_no_version_for_guards_on_loaded_values_or_without_loops():
    assert list(versions(guard_on_a_loaded_value).functions) == ["guard_on_a_loaded_value"]
    assert list(versions(guard_without_a_loop).functions) == ["guard_without_a_loop"]
