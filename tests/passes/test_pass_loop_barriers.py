"""loop-barriers: a barrier on every edge into the header of a loop that all work-items
run alike and that does per-item work; none for loops with a per-item condition or exit,
loops under a per-item branch, short constant loops, or loops without per-item work.
split-barriers then keeps the header as the place a region starts."""
import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T
from kernelkit.passes import run_passes

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def compiled(kernel, argtypes, passes=("loop-barriers",)):
    module = translate_kernel(kernel, argtypes, (16,))
    run_passes(module, ["inline", "simplify", "dce", "cse", *passes], verify=True)
    return module


def barrier_count(module) -> int:
    return sum(op.opcode == "barrier" for op in module.kernel.ops())


def scale_rows(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(k):
        acc += a[i] * p
    a[i] = acc


def test_uniform_loop_gets_a_barrier_on_its_entry_and_its_back_edge(ir_text):
    module = compiled(scale_rows, (F32_ARRAY, T.weak_int))
    assert ir_text(module) == (
        'kernel @scale_rows(a, k) -> void file "FILE" {\n'
        "^bb0(%0: array<f32, 1, C>, %1: int):\n"
        "  %2 = group_id {axis = 0} : i64\n"
        "  %3 = const 16 : i64\n"
        "  %4 = mul %2, %3 : i64\n"
        "  %5 = local_id {axis = 0} : i64\n"
        "  %6 = add %4, %5 : i64\n"
        "  %7 = const 0.0 : f32\n"
        "  %8 = const 0 : int\n"
        "  %9 = const 1 : int\n"
        "  br ^bb1()\n"
        "^bb1():\n"
        "  barrier\n"
        "  br ^bb2(%7, %8)\n"
        "^bb2(%10: f32, %11: int):\n"
        "  %12 = lt %11, %1 : bool\n"
        "  cbr %12, ^bb3(), ^bb5()\n"
        "^bb3():\n"
        "  %13 = load %0, %6 : f32\n"
        "  %14 = cast %11 : f32\n"
        "  %15 = mul %13, %14 : f32\n"
        "  %16 = add %10, %15 : f32\n"
        "  %17 = add %11, %9 : int\n"
        "  br ^bb4()\n"
        "^bb4():\n"
        "  barrier\n"
        "  br ^bb2(%16, %17)\n"
        "^bb5():\n"
        "  store %0, %6, %10\n"
        "  ret\n"
        "}\n")


def test_split_barriers_keeps_a_loop_header_entered_only_after_barriers():
    module = compiled(scale_rows, (F32_ARRAY, T.weak_int), ("loop-barriers", "split-barriers"))
    before = compiled(scale_rows, (F32_ARRAY, T.weak_int))
    assert len(module.kernel.blocks) == len(before.kernel.blocks)


def per_item_trip_count(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(i):
        acc += a[p]
    a[i] = acc


def loop_under_per_item_branch(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    if a[i] > 0:
        for p in range(k):
            acc += a[p]
    a[i] = acc


def per_item_break(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(k):
        if a[p] > i:
            break
        acc += a[p]
    a[i] = acc


def short_constant_loop(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(8):
        acc += a[i + p]
    a[i] = acc


def no_per_item_work(a, k):
    i = kk.index(kk.Global)
    total = 0
    for p in range(k):
        total += p
    a[i] = total


def test_loops_that_are_not_uniform_or_not_worth_it_get_no_barriers():
    for kernel in (per_item_trip_count, loop_under_per_item_branch, per_item_break,
                   short_constant_loop, no_per_item_work):
        assert barrier_count(compiled(kernel, (F32_ARRAY, T.weak_int))) == 0, kernel.__name__


def uniform_continue(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(k):
        if a[p] > i:
            continue
        acc += a[p]
    a[i] = acc


def long_constant_loop(a, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(100):
        acc += a[p] * i
    a[i] = acc


def test_per_item_continue_and_long_constant_loops_are_still_uniform():
    assert barrier_count(compiled(uniform_continue, (F32_ARRAY, T.weak_int))) == 2
    assert barrier_count(compiled(long_constant_loop, (F32_ARRAY, T.weak_int))) == 2
