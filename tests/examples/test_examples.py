"""The examples run as users run them and check their own results; where the CUDA backend
cannot run they say why in one line and exit with status 2; heat diffusion and the
descents through a simulation (inverse heat, projectile) write a PNG with matplotlib and
without it; the benchmark suite's --plot draws its table, its targets combine, and its
heat-gradient case runs without its peers and leaves a wrong one out, and its AD peers
run each in a process of its own."""
import importlib.util
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

import kernelkit as kk

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT / "benchmarks"

# Each example with the arguments that keep it short, and how a line of its output that
# says its result is right begins (ad_kernel.py prints a table and then "OK").
RUNS = {
    "quickstart": ([], "outer product: OK"),
    "saxpy": ([], "saxpy: OK"),
    "heat_diffusion": (["--steps", "40"], "heat diffusion: OK"),
    "matmul_tiled": ([], "tiled matmul: OK"),
    "reduction": ([], "reduction: OK"),
    "histogram": ([], "histogram: OK"),
    "ad_kernel": ([], "OK"),
    # These two descend through a simulation: each line says it converged.
    "inverse_heat": (["--size", "32", "--steps", "125", "--iterations", "8"],
                     "inverse heat: OK"),
    "projectile": (["--steps", "50", "--budget", "4", "--iterations", "20"],
                   "projectile: OK"),
}


def test_every_example_is_run_here():
    scripts = {path.stem for path in EXAMPLES.glob("*.py") if not path.stem.startswith("_")}
    assert scripts == set(RUNS)


def load_module(path: Path, monkeypatch):
    """Import a script by its path, with its own folder importable (as `python path` has
    it), under a name of its own."""
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def png_chunks(data: bytes) -> dict[bytes, bytes]:
    """The chunks of a PNG (IDAT ones joined), after checking its signature and every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[bytes, bytes] = {}
    position = 8
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    assert b"IHDR" in chunks and b"IDAT" in chunks and b"IEND" in chunks
    return chunks


def png_size(chunks: dict[bytes, bytes]) -> tuple[int, int]:
    return struct.unpack(">II", chunks[b"IHDR"][:8])


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_example_checks_its_result_on_the_cpu(name, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # some write a PNG in the current directory
    example = load_module(EXAMPLES / f"{name}.py", monkeypatch)
    arguments, expected_line = RUNS[name]
    assert example.main(["--backend", "cpu", *arguments]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(expected_line) for line in lines), lines


def test_an_example_runs_as_a_script_from_the_repository():
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [environment.get("PYTHONPATH")] if p])
    completed = subprocess.run([sys.executable, "examples/quickstart.py"], cwd=ROOT,
                               env=environment, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["saxpy: OK (max error 0)",
                                             "outer product: OK (max error 0)"]


@pytest.mark.skipif(kk.backend_unavailable_reason("cuda") is None,
                    reason="the CUDA backend runs here")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_example_refuses_a_cuda_backend_that_cannot_run_in_one_line(name, monkeypatch,
                                                                         capsys):
    example = load_module(EXAMPLES / f"{name}.py", monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--backend", "cuda"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert "the cuda backend cannot run here: " in line
    assert line.endswith(kk.backend_unavailable_reason("cuda"))


def test_heat_diffusion_draws_the_field_at_four_steps_with_matplotlib(monkeypatch, tmp_path,
                                                                      capsys):
    pytest.importorskip("matplotlib", reason="the examples extra is not installed")
    example = load_module(EXAMPLES / "heat_diffusion.py", monkeypatch)
    out = tmp_path / "heat.png"
    assert example.main(["--steps", "40", "--out", str(out)]) == 0
    width, height = png_size(png_chunks(out.read_bytes()))
    assert width > 4 * height > 0  # four square-ish panels side by side, and a colour bar
    assert f"wrote {out} (steps 0, 5, 20, 40)" in capsys.readouterr().out


def test_heat_diffusion_writes_a_plain_png_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # `import matplotlib` now fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    example = load_module(EXAMPLES / "heat_diffusion.py", monkeypatch)
    out = tmp_path / "heat.png"
    assert example.main(["--steps", "40", "--out", str(out)]) == 0
    chunks = png_chunks(out.read_bytes())
    assert png_size(chunks) == (128, 96)
    pixels = zlib.decompress(chunks[b"IDAT"])
    row_bytes = 1 + 128 * 3   # a filter byte, then RGB
    assert len(pixels) == 96 * row_bytes
    assert pixels[1:row_bytes] == b"\xff" * (128 * 3)   # the top edge is held at 1: white
    assert "pip install kernelkit[examples]" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["inverse_heat", "projectile"])
def test_a_descent_example_draws_its_result_and_its_convergence_with_matplotlib(
        name, monkeypatch, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the examples extra is not installed")
    example = load_module(EXAMPLES / f"{name}.py", monkeypatch)
    out = tmp_path / f"{name}.png"
    assert example.main([*RUNS[name][0], "--out", str(out)]) == 0
    width, height = png_size(png_chunks(out.read_bytes()))
    assert width > 2 * height > 0   # the result, and a curve beside it
    assert f"wrote {out}\n" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["inverse_heat", "projectile"])
def test_a_descent_example_writes_a_plain_png_without_matplotlib(name, monkeypatch,
                                                                 tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    example = load_module(EXAMPLES / f"{name}.py", monkeypatch)
    out = tmp_path / f"{name}.png"
    assert example.main([*RUNS[name][0], "--out", str(out)]) == 0
    width, height = png_size(png_chunks(out.read_bytes()))
    assert width > height > 0
    assert "pip install kernelkit[examples]" in capsys.readouterr().out


def test_inverse_heat_lowers_its_loss_by_two_orders_of_magnitude(monkeypatch, tmp_path,
                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    example = load_module(EXAMPLES / "inverse_heat.py", monkeypatch)
    assert example.main(RUNS["inverse_heat"][0]) == 0
    [summary] = [line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("loss ")]
    first, _, last = summary.split()[1:4]
    assert float(last) < float(first) / 100, summary


@pytest.fixture
def benchmark_suite(monkeypatch):
    """benchmarks/run.py as a module; it imports its neighbours by their bare names."""
    yield load_module(BENCHMARKS / "run.py", monkeypatch)
    for name in ("kernels", "peers"):
        sys.modules.pop(name, None)


def timing(median: float) -> dict:
    return {"best": median * 0.9, "median": median}


def test_the_benchmark_plot_draws_result_rows_as_a_png(benchmark_suite, tmp_path):
    pytest.importorskip("matplotlib", reason="the examples extra is not installed")
    rows = [
        {"case": "saxpy", "unit": "ms", "kernelkit": timing(3e-4), "status": "PASS",
         "peers": {"numpy": timing(4e-4), "numba": timing(2e-4), "primal": None}},
        {"case": "sin_x_reverse", "unit": "ms", "kernelkit": timing(1e-3), "status": "",
         "peers": {"numpy": None, "numba": None, "primal": timing(5e-4)}},
        {"case": "import", "unit": "s", "kernelkit": timing(0.09), "status": "PASS",
         "peers": {}},
        {"case": "stencil", "unit": "ms", "kernelkit": None, "status": "ERROR",
         "peers": {"numpy": timing(2e-3), "numba": None, "primal": None}},
    ]
    out = tmp_path / "bench.png"
    benchmark_suite.plot_rows(rows, str(out), "fake rows")
    width, height = png_size(png_chunks(out.read_bytes()))
    assert width > height > 0


def test_the_benchmark_plot_without_matplotlib_says_what_to_install_before_timing(
        benchmark_suite, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(SystemExit) as exit_info:
        benchmark_suite.main(["--quick", "--case", "saxpy", "--plot"])
    assert exit_info.value.code == 2
    errors = capsys.readouterr().err
    assert "--plot needs matplotlib: pip install kernelkit[examples]" in errors
    assert "running saxpy" not in errors


def test_a_benchmark_side_runs_as_often_as_fills_its_seconds(benchmark_suite):
    runs = []
    quick = benchmark_suite.dataclasses.replace(benchmark_suite.FULL, seconds=0.0)
    timing = benchmark_suite.measure(lambda: runs.append(1), quick)
    assert len(runs) == 1 + quick.repeats == 1 + len(timing.samples)   # the warm-up first
    runs.clear()
    timing = benchmark_suite.measure(lambda: runs.append(1), benchmark_suite.FULL)
    assert len(timing.samples) == benchmark_suite.MOST_REPEATS   # (a run of microseconds)
    runs.clear()
    long = benchmark_suite.dataclasses.replace(benchmark_suite.FULL, seconds=0.05)
    timing = benchmark_suite.measure(lambda: time.sleep(0.01) or runs.append(1), long)
    assert len(timing.samples) == long.repeats   # 5 of 10 ms fill the seconds: the least


def test_all_targets_fail_when_one_fails_and_pass_when_the_others_do_not_apply(
        benchmark_suite):
    suite = benchmark_suite
    [heat] = [case for case in suite.CASES if case.name == "heat_program_gradient"]
    target = heat.targets["cpu"]
    assert target.describe("numba") == "kk/program <= 3; kk < warp, taichi"

    def verdict(**peers: float | None) -> str:
        measurement = suite.Measurement("", suite.Timing(1.0, 1.0), {
            name: None if median is None else suite.Timing(median, median)
            for name, median in peers.items()})
        return target.verdict(measurement, "numba")

    assert verdict(program=0.5, warp=2.0, taichi=3.0) == "PASS"
    assert verdict(program=0.5, warp=None, taichi=None) == "PASS"   # neither installed
    assert verdict(program=0.5, warp=2.0, taichi=0.9) == "FAIL"     # slower than a peer
    assert verdict(program=0.2, warp=2.0, taichi=3.0) == "FAIL"     # 5x the program
    assert verdict(program=None, warp=None, taichi=None) == "n/a"


class AbsentPeer:
    name = "warp"

    def unavailable_reason(self) -> str:
        return "warp-lang is not installed"


class WrongPeer:
    """A peer whose gradient is all zeros."""

    name = "taichi"

    def unavailable_reason(self) -> None:
        return None

    def prepare(self, u0, alpha, steps):
        return u0

    def gradient(self, state):
        return state

    def to_numpy(self, gradient):
        return 0 * gradient


def test_the_heat_gradient_case_runs_without_its_peers_and_leaves_a_wrong_one_out(
        benchmark_suite, monkeypatch, capsys):
    suite = benchmark_suite
    monkeypatch.setattr(suite, "ROUNDS", 1)
    monkeypatch.setattr(sys.modules["peers"], "HEAT_GRADIENT_PEERS", (AbsentPeer, WrongPeer))
    sizes = suite.Sizes(saxpy=3000, stencil=48, matmul=32, reduction=5000, launches=3,
                        repeats=1, process_repeats=1)
    measurement = suite.bench_heat_program_gradient(
        suite.Context("cpu", kk.CPU(), (), sizes, {}))
    assert measurement.error is None and measurement.correct is True
    assert measurement.peers["program"] is not None
    assert measurement.peers["warp"] is None and measurement.peers["taichi"] is None
    errors = capsys.readouterr().err
    assert "warp: skipped (warp-lang is not installed)" in errors
    assert "taichi: left out (wrong gradient)" in errors


class ProcessPeer:
    """A peer whose gradient is the id of the process it was prepared in."""

    name = "process"

    def unavailable_reason(self) -> None:
        return None

    def prepare(self, n):
        import numpy as np
        return np.full(n, os.getpid())

    def gradient(self, state):
        return state

    def to_numpy(self, gradient):
        return gradient


def run_once_where(run, sizes):
    """A stand-in for the suite's `measure`: run once, say in which process."""
    run()
    return sizes, os.getpid()


def test_an_own_process_peer_is_prepared_checked_and_timed_in_another_process(
        benchmark_suite):
    """Starting Taichi sets FTZ/DAZ and malloc's thresholds for its whole process: the AD
    peers run each in a process of its own, and must not run in the suite's."""
    peers = sys.modules["peers"]
    assert all(isinstance(make(), peers.OwnProcess)
               for make in peers.GRADIENT_PEERS + peers.HEAT_GRADIENT_PEERS)
    peer = peers.own_process(ProcessPeer)()
    try:
        assert peer.name == "process" and peer.unavailable_reason() is None
        token = peer.prepare(3)
        [child] = set(peer.to_numpy(peer.gradient(token)))
        assert child != os.getpid()
        assert peer.timed(token, run_once_where, "sizes") == ("sizes", child)
    finally:
        benchmark_suite.close_peers([peer])


def test_the_reverse_cases_pass_new_activities_and_scalars_each_call(benchmark_suite):
    """A training loop wraps its arguments anew each step, around a coefficient it may
    have just computed: a path that knew an activity or a scalar by its object would be
    faster in the benchmark than users find it."""
    import numpy as np

    from enzyme_ext import Active, Const, Duplicated, DuplicatedNoNeed
    x, dx = np.ones(4, np.float32), np.zeros(4, np.float32)
    alpha, step = np.float32(0.2), 0.5
    given = (Duplicated(x, dx), DuplicatedNoNeed(x, dx), Active(alpha), Const(step), 3)
    fresh = benchmark_suite.renewed_activities(given)
    assert [type(a) for a in fresh] == [type(a) for a in given]
    assert all(new is not old for new, old in zip(fresh[:4], given))
    assert fresh[0].value is x and fresh[0].shadow is dx and fresh[1].shadow is dx
    assert fresh[2].value == alpha and fresh[2].value is not alpha
    assert type(fresh[2].value) is np.float32
    assert fresh[3].value == step and fresh[3].value is not step
    assert fresh[4] == 3
