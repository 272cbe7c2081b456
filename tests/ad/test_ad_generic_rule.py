"""The generic rule: one code path for every backend, reached through
`compiler_job_from_backend`, which kernelkit's backends register as a third party's
would; the tape's record is known from the parent job before any launch; the derivative
kernels replay offline from a dump, byte for byte."""
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Active, Const, Duplicated, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk, compiler_job_from_backend, custom_vjp, tape_type)
from kernelkit.compiler.job import CompilerJob
from kernelkit.errors import BackendError, KernelkitError, LaunchError

HERE = Path(__file__).parent
ROOT = Path(kk.__file__).resolve().parent.parent


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def power_loop(y, x, n):
    i = kk.index(kk.Global)
    p = 1.0
    for _ in range(n):
        p *= x[i]
    y[i] = p


def test_the_cpu_and_cuda_backends_register_through_the_public_entry_points():
    names = {entry.name for entry in entry_points(group="enzyme_ext.backends")}
    assert {"cpu", "cuda"} <= names
    job = compiler_job_from_backend(kk.CPU(), saxpy, (np.ones(3), 2.0, np.ones(3)))
    assert isinstance(job, CompilerJob)
    assert job.source.qualname == "saxpy"


def test_a_backend_without_a_method_gets_an_error_naming_its_type_and_how_to_register():
    class Unknown:
        pass
    with pytest.raises(BackendError, match=r"Unknown.*compiler_job_from_backend.register"):
        compiler_job_from_backend(Unknown(), saxpy, ())


def test_a_third_party_backend_differentiates_through_its_registered_method(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE.parent / "backends" / "third_party"))
    from toy_backend import Serial
    try:
        differentiate_on(Serial)
    finally:
        # The toy module counts launches in a class attribute: other tests import it
        # afresh.
        sys.modules.pop("toy_backend", None)


def differentiate_on(Serial):
    calls = []

    @compiler_job_from_backend.register(Serial)
    def serial_job(backend, function, argtypes, **options):
        calls.append(function.__name__)
        return backend.compiler_job(function, argtypes, **options)

    backend = Serial()
    n = 100
    x = np.arange(n, dtype=np.float64)
    y, dy, dx = np.ones(n), np.ones(n), np.zeros(n)
    _, da, _ = autodiff(Reverse, saxpy(backend, 32), Duplicated(y, dy), Active(3.0),
                        Duplicated(x, dx), ndrange=n)
    assert calls and set(calls) == {"saxpy"}
    np.testing.assert_array_equal(y, 3.0 * x + 1)
    np.testing.assert_array_equal(dx, np.full(n, 3.0))
    np.testing.assert_array_equal(dy, np.ones(n))
    assert da == x.sum()


def test_the_tape_record_is_known_from_the_parent_job_before_any_launch():
    backend = kk.CPU()
    x = np.ones(8)
    job = compiler_job_from_backend(backend, saxpy(backend, 8), (x, 2.0, x))
    record = tape_type(job, Reverse, (Duplicated, Active, Const))
    assert record.names == ("tape_floats", "tape_integers", "tape_counts")
    assert record["tape_floats"].shape == (0,)      # saxpy needs nothing taped

    job = compiler_job_from_backend(backend, power_loop(backend, 8), (x, x, 5))
    exact = tape_type(job, ReverseSplit, (Duplicated, Duplicated, Const),
                      arguments=(x, x, 5))
    assert exact["tape_floats"].shape[0] >= 5      # the loop-carried product, each trip
    bigger = tape_type(job, ReverseSplit, (Duplicated, Duplicated, Const),
                       arguments=(x, x, 50))
    assert bigger["tape_floats"].shape[0] > exact["tape_floats"].shape[0]


@kk.kernel
def product_loop(y, x, w, n):
    """Tapes the loop-carried product each trip: float32 where x is float32; and, where
    w is float64, w's partial sums too."""
    i = kk.index(kk.Global)
    p = x[i] / x[i]
    s = w[i] * 0.0
    for _ in range(n):
        p *= x[i]
        s = s * s + w[i]
    y[i] = p + s


@pytest.mark.parametrize("w_dtype, float_type", [(np.float32, np.float32),
                                                 (np.float64, np.float64)],
                         ids=["float32 only", "float64 too"])
def test_the_tape_keeps_float32_values_as_float32(backend, w_dtype, float_type):
    """The float slots are float32 where every value taped is float32 (half the bytes
    of float64, exactly the same values), float64 where any is float64; the gradient
    through the two kernels is the same either way."""
    n, trips = 96, 4
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, n).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, n).astype(w_dtype)
    job = compiler_job_from_backend(backend, product_loop(backend, 32),
                                    (np.zeros(n, np.float32), x, w, trips))
    record = tape_type(job, ReverseSplit, (Duplicated, Duplicated, Duplicated, Const),
                       arguments=(np.zeros(n, np.float32), x, w, trips))
    assert record["tape_floats"].base == float_type
    assert record["tape_floats"].shape[0] >= trips
    forward, reverse = autodiff_thunk(ReverseSplit, product_loop(backend, 32), Duplicated,
                                      Duplicated, Duplicated, Const)
    arrays = [kk.to_backend(backend, a) for a in (np.zeros(n, np.float32), x, w)]
    shadows = [kk.to_backend(backend, np.ones(n, np.float32)),
               kk.zeros(backend, np.float32, n), kk.zeros(backend, w_dtype, n)]
    arguments = (*(Duplicated(a, s) for a, s in zip(arrays, shadows)), trips)
    try:
        tape = forward(*arguments, ndrange=n)
        assert tape.arrays["tape_floats"].dtype == float_type
        reverse(*arguments, tape=tape, ndrange=n)
    except Exception as error:
        if type(error).__name__ == "CompileOnlyError":
            pytest.skip(str(error))
        raise
    expected = trips * x.astype(np.float64) ** (trips - 1)
    np.testing.assert_allclose(kk.to_numpy(shadows[1]), expected, rtol=2e-6)


def test_reverse_is_built_from_the_two_halves_of_reverse_split():
    backend = kk.CPU()
    n = 64
    x = np.linspace(0.5, 1.5, n)
    results = []
    for split in (False, True):
        y, dy, dx = np.zeros(n), np.ones(n), np.zeros(n)
        args = (Duplicated(y, dy), Duplicated(x.copy(), dx), Const(7))
        if split:
            forward, reverse = autodiff_thunk(ReverseSplit, power_loop(backend, 16),
                                              Duplicated, Duplicated, Const)
            tape = forward(*args, ndrange=n)
            assert tape.items == n
            assert reverse(*args, tape=tape, ndrange=n) == (None, None, None)
        else:
            assert autodiff(Reverse, power_loop(backend, 16), *args, ndrange=n) == \
                (None, None, None)
        results.append(dx)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], 7 * x ** 6)


@pytest.mark.parametrize("target", ["cpu", "sm_90"])
def test_a_derivative_dumped_before_ad_replays_offline_byte_for_byte(target, tmp_path):
    """The mode and activities travel in the IR text: `python -m kernelkit opt` on the
    frontend's dump, in a fresh process with another hash seed, gives the in-process IR."""
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, numpy as np, kernelkit as kk\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from test_ad_generic_rule import power_loop\n"
        "from enzyme_ext import autodiff, Reverse, Duplicated, Const\n"
        f"b = kk.CPU() if {target!r} == 'cpu' else kk.CUDABackend.compile_only({target!r})\n"
        "x = np.ones(8); y = np.zeros(8)\n"
        "try:\n"
        "    autodiff(Reverse, power_loop(b, 8), Duplicated(y, np.ones(8)),\n"
        "             Duplicated(x, np.zeros(8)), Const(3), ndrange=8)\n"
        "except Exception as error:\n"
        "    assert type(error).__name__ == 'CompileOnlyError', error\n")
    environment = dict(os.environ, PYTHONPATH=str(ROOT), KERNELKIT_DUMP=str(tmp_path / "dump"),
                       KERNELKIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONHASHSEED="1")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=environment)
    assert result.returncode == 0, result.stderr
    directories = sorted((tmp_path / "dump").iterdir())
    modes = set()
    for directory in directories:
        stages = sorted(directory.glob("*.kkir"))
        frontend = stages[0].read_text()
        if "enzyme.derivative" not in frontend:
            continue
        modes.add("augmented" if '"augmented"' in frontend else "reverse")
        replay = subprocess.run([sys.executable, "-m", "kernelkit", "opt", str(stages[0]),
                                 "--target", target], capture_output=True, text=True,
                                env=dict(environment, PYTHONHASHSEED="2"))
        assert replay.returncode == 0, replay.stderr
        assert replay.stdout == stages[-1].read_text()
    assert modes == {"augmented", "reverse"}


def test_a_tape_too_large_to_allocate_is_an_error_saying_how_large():
    backend = kk.CPU()
    x, y = np.ones(1000), np.zeros(1000)
    with pytest.raises(KernelkitError, match=r"'power_loop': its tape needs [\d.]+ GiB"):
        autodiff(Reverse, power_loop(backend, 64), Duplicated(y, np.ones(1000)),
                 Duplicated(x, np.zeros(1000)), Const(10 ** 9), ndrange=1000)
    np.testing.assert_array_equal(y, np.zeros(1000))   # nothing ran


@kk.kernel
def accumulate_until(y, x, limit):
    """Adds x[i] to y[i] until it passes limit: a trip count that depends on data."""
    i = kk.index(kk.Global)
    v = y[i]
    while v < limit:
        v += x[i] * x[i]
    y[i] = v


def test_loops_whose_trip_counts_depend_on_data_are_measured_and_run_once():
    """Without max_iterations the launch is measured on copies of the arrays the kernel
    writes: the tape fits (5,000 trips, past the 1,024 a fixed size would assume) and the
    primal's update happens once."""
    backend = kk.CPU()
    n = 8
    x = np.full(n, 0.1)
    y = np.zeros(n)
    dy, dx = np.ones(n), np.zeros(n)
    autodiff(Reverse, accumulate_until(backend, 8), Duplicated(y, dy), Duplicated(x, dx),
             Const(50.0), ndrange=n)
    value, trips = 0.0, 0
    while value < 50.0:
        value, trips = value + 0.1 * 0.1, trips + 1
    assert trips > 1024
    np.testing.assert_array_equal(y, np.full(n, value))   # one run, not two
    np.testing.assert_allclose(dx, 2 * 0.1 * trips, rtol=1e-9)
    with pytest.raises(KernelkitError, match=r"line \d+.*max_iterations"):
        autodiff(Reverse, accumulate_until(backend, 8), Duplicated(np.zeros(n), np.ones(n)),
                 Duplicated(x, np.zeros(n)), Const(50.0), ndrange=n, max_iterations=1024)


@kk.kernel
def squares(out, a):
    i = kk.index(kk.Global)
    out[i] = a[i] * a[i]


def test_arguments_that_share_memory_with_a_differentiated_one_are_refused():
    backend = kk.CPU()
    x = np.arange(1.0, 5.0)
    for arguments in ((Duplicated(x, np.zeros(4)), Duplicated(x, np.zeros(4))),
                      (Duplicated(x, np.zeros(4)), Const(x)),
                      (Duplicated(np.zeros(4), x), Duplicated(x, np.zeros(4)))):
        with pytest.raises(LaunchError, match="share memory"):
            autodiff(Reverse, squares(backend, 4), *arguments, ndrange=4)


def test_a_tape_from_another_kernel_is_refused():
    backend = kk.CPU()
    x = np.linspace(1.0, 2.0, 8)
    forward, _ = autodiff_thunk(ReverseSplit, power_loop(backend, 8), Duplicated,
                                Duplicated, Const)
    tape = forward(Duplicated(np.zeros(8), np.ones(8)), Duplicated(x.copy(), np.zeros(8)),
                   Const(3), ndrange=8)
    _, reverse = autodiff_thunk(ReverseSplit, squares(backend, 8), Duplicated, Duplicated)
    with pytest.raises(LaunchError, match="another kernel's forward half"):
        reverse(Duplicated(np.zeros(8), np.ones(8)), Duplicated(x.copy(), np.zeros(8)),
                tape=tape, ndrange=8)


def test_an_active_integer_is_refused_with_the_float_to_pass():
    backend = kk.CPU()
    with pytest.raises(LaunchError, match=r"Active\(2\), an integer.*Active\(2.0\)"):
        autodiff(Reverse, saxpy(backend, 4), Duplicated(np.zeros(4), np.ones(4)), Active(2),
                 Duplicated(np.ones(4), np.zeros(4)), ndrange=4)


@kk.kernel
def float_counted(y, x, bound):
    i = kk.index(kk.Global)
    p = 1.0
    j = 0.0
    while j < bound:
        p *= x[i]
        j += 1.0
    y[i] = p


def test_a_loop_counted_in_floats_is_sized_by_measuring():
    """`while j < 2.5` with j += 1.0 runs 3 times: not worked out from the bound."""
    backend = kk.CPU()
    x = np.linspace(0.5, 1.5, 4)
    dx = np.zeros(4)
    autodiff(Reverse, float_counted(backend, 4), Duplicated(np.zeros(4), np.ones(4)),
             Duplicated(x.copy(), dx), Const(2.5), ndrange=4)
    np.testing.assert_allclose(dx, 3 * x ** 2)


@kk.kernel
def own_and_neighbour(y, x):
    i = kk.index(kk.Global)
    (n,) = kk.ndrange()
    y[i] = x[i] + x[(i + 1) % n]


def test_a_shadow_read_at_a_neighbour_is_updated_atomically_everywhere():
    """A plain update of d_x[i] would race with the neighbour's atomic one."""
    backend = kk.CPU()
    x = np.ones(64)
    args = (Duplicated(np.zeros(64), np.ones(64)), Duplicated(x, np.zeros(64)))
    from enzyme_ext.jobs import derivative_job
    from kernelkit.compiler.driver import compile_job
    argtypes = own_and_neighbour.argument_types(backend, (np.zeros(64), x))
    parent = compiler_job_from_backend(backend, own_and_neighbour(backend, 64), argtypes)
    shadows = tuple(backend.argument_type(a.shadow, False, "d", "k") for a in args)
    ir = compile_job(derivative_job(parent, "reverse", ("duplicated", "duplicated"),
                                    shadows)).ir
    assert ir.count("atomic.add") == 2, ir
    autodiff(Reverse, own_and_neighbour(backend, 64), *args, ndrange=64)
    np.testing.assert_array_equal(args[1].shadow, np.full(64, 2.0))


@custom_vjp
def halved(x):
    return x * 0.5


def halved_forward(x):
    return x * 0.5, (x,)


def halved_backward(residuals, g):
    return (g * 0.5,)


halved.defvjp(halved_forward, halved_backward)


@kk.kernel
def halves(y, x):
    i = kk.index(kk.Global)
    y[i] = halved(x[i])


def augmented_layout(backend, kernel, args, activities):
    from enzyme_ext.jobs import derivative_job
    from enzyme_ext.tape import tape_layout
    job = compiler_job_from_backend(backend, kernel(backend, 8), args)
    return tape_layout(derivative_job(job, "augmented", tuple(a.name for a in activities),
                                      (None,) * len(activities)))


def test_a_forward_half_that_tapes_nothing_is_the_primal_launch(monkeypatch):
    """Where the augmented kernel tapes nothing and no custom rule's forward function
    stands for a call (saxpy), ReverseSplit's forward half is the primal launch (its
    results, through the launcher's fast path), and launches of the same arrays get one
    empty tape; a
    kernel that tapes (power_loop) or calls a custom rule runs its augmented kernel."""
    from enzyme_ext import rules
    backend = kk.CPU()
    x = np.ones(8)
    assert augmented_layout(backend, saxpy, (x, 2.0, x), (Duplicated, Active, Const)).primal
    assert not augmented_layout(backend, power_loop, (x, x, 5),
                                (Duplicated, Duplicated, Const)).primal
    assert not augmented_layout(backend, halves, (x, x), (Duplicated, Duplicated)).primal

    n = 64
    xs, y0 = np.linspace(0.5, 1.5, n), np.linspace(-1.0, 1.0, n)
    launch = saxpy(backend, 16)
    forward, reverse = autodiff_thunk(ReverseSplit, launch, Duplicated, Active, Const)
    derivative_launches = []
    original = rules.Rule.launch
    monkeypatch.setattr(rules.Rule, "launch", lambda self, kernel, *rest: (
        derivative_launches.append(kernel[2].ir.split("(", 1)[0].split("@")[-1]),
        original(self, kernel, *rest)))
    tapes = []
    y, dy = np.empty(n), np.empty(n)
    for a in (2.0, 3.0):
        y[:], dy[:] = y0, 1.0
        args = (Duplicated(y, dy), Active(a), Const(xs))
        tapes.append(forward(*args, ndrange=n))
        plain = y0.copy()
        launch(plain, a, xs, ndrange=n)
        np.testing.assert_array_equal(y, plain)
        assert reverse(*args, tape=tapes[-1], ndrange=n) == (None, pytest.approx(xs.sum()),
                                                            None)
    assert tapes[0] is tapes[1] and tapes[0].items == n
    assert "saxpy.augmented" not in derivative_launches and "saxpy.reverse" in derivative_launches
