"""KERNELKIT_DUMP writes a kernel's module at every stage; `python -m kernelkit opt`
replays passes on a dumped module offline and prints byte-identical results to the
compiler's own; unknown passes, unknown targets and unparsable files are clear errors."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.__main__ import main
from kernelkit.compiler.driver import GENERIC_PASSES

ROOT = Path(kk.__file__).resolve().parent.parent


@kk.kernel
def dumped_scan(out, x: kk.Const, n):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, 32)
    total = 0.0
    for p in range(n):
        scratch[li] = x[p, i]
        kk.synchronize()
        total += scratch[(li + 1) % 32]
        kk.synchronize()
    out[i] = total


def dump_kernel(backend, tmp_path, monkeypatch, group=32) -> Path:
    """Compile `dumped_scan` with KERNELKIT_DUMP set; each test uses its own group size,
    so that the kernel is compiled (not found in memory) and dumped."""
    monkeypatch.setenv("KERNELKIT_DUMP", str(tmp_path / "dump"))
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path / "cache"))
    x = np.ones((4, 64), np.float32)
    out = np.zeros(64, np.float32)
    kk.code_ir(dumped_scan, backend, out, x, 4, ndrange=64, workgroupsize=group)
    (directory,) = (tmp_path / "dump").iterdir()
    return directory


@pytest.mark.parametrize("target", ["cpu", "sm_90"])
def test_dump_has_every_stage_and_opt_replays_it_byte_for_byte(target, tmp_path, monkeypatch,
                                                                capsys):
    backend = kk.CPU(threads=1) if target == "cpu" else kk.CUDABackend.compile_only(target)
    directory = dump_kernel(backend, tmp_path, monkeypatch)
    stages = sorted(p.name for p in directory.glob("*.kkir"))
    own = backend.target() if target == "cpu" else backend.targets[0]
    passes = GENERIC_PASSES + own.passes()
    assert stages == ["00-frontend.kkir"] + [f"{i + 1:02d}-{name}.kkir"
                                             for i, name in enumerate(passes)]
    assert (directory / "llvm.ll").read_text().startswith("; ModuleID")
    assert "define" in (directory / "llvm-optimized.ll").read_text()
    final = (directory / stages[-1]).read_text()

    assert main(["opt", str(directory / stages[0]), "--target", target]) == 0
    assert capsys.readouterr().out == final

    middle = 3
    remaining = ",".join(passes[middle:])
    assert main(["opt", str(directory / stages[middle]), "-p", remaining]) == 0
    assert capsys.readouterr().out == final


def test_opt_on_the_command_line(tmp_path, monkeypatch):
    directory = dump_kernel(kk.CPU(threads=1), tmp_path, monkeypatch, group=16)
    stages = sorted(directory.glob("*.kkir"))
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "kernelkit", "opt", str(stages[0])],
                            capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr
    assert result.stdout == stages[-1].read_text()


def test_unknown_pass_is_an_error_listing_the_known_ones(tmp_path, monkeypatch, capsys):
    directory = dump_kernel(kk.CPU(threads=1), tmp_path, monkeypatch, group=8)
    assert main(["opt", str(directory / "00-frontend.kkir"), "-p", "inline,unroll"]) == 1
    error = capsys.readouterr().err
    assert "unknown pass 'unroll'" in error and "cse, dce, guard-versioning, hoist-loads, inline" in error


def test_a_file_that_does_not_parse_is_an_error_with_line_and_column(tmp_path, capsys):
    broken = tmp_path / "broken.kkir"
    broken.write_text('kernel @k() -> void file "f" {\n^bb0():\n  %1 = nonsense : i64\n}\n')
    assert main(["opt", str(broken), "-p", "dce"]) == 1
    assert f"{broken}:3:8: unknown operation 'nonsense'" in capsys.readouterr().err


def test_unknown_target_is_an_error(tmp_path, capsys):
    assert main(["opt", str(tmp_path / "none.kkir"), "--target", "riscv"]) == 1
    assert "no installed backend compiles for the target 'riscv'" in capsys.readouterr().err
