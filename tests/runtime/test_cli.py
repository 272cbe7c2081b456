"""`python -m kernelkit --version` and `python -m kernelkit info`: the versions, each
installed backend and whether it runs here (why not, if not; an error, if it fails to
start), the disk cache and the CPU backend's threads."""
import os
import subprocess
import sys

import llvmlite
import numpy as np
import pytest

import kernelkit as kk
from kernelkit import backend as backends
from kernelkit.__main__ import main


def test_version_prints_kernelkits_version(capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["--version"])
    assert exit_status.value.code == 0
    assert capsys.readouterr().out == f"kernelkit {kk.__version__}\n"


def test_info_names_the_versions_the_cpu_threads_and_the_disk_cache(capsys, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"kernelkit: {kk.__version__}\n" in out
    assert f"llvmlite:  {llvmlite.__version__} (LLVM " in out
    assert f"numpy:     {np.__version__}\n" in out
    assert "  cpu: runs here\n" in out
    assert f"    threads: {kk.make_backend('cpu').threads}\n" in out
    assert f"  directory: {tmp_path}\n" in out
    assert f"  KERNELKIT_CACHE_DIR={tmp_path}\n" in out


def test_info_says_why_a_backend_cannot_run_here(capsys, monkeypatch):
    monkeypatch.setattr(backends, "backend_unavailable_reason",
                        lambda name: f"no {name} device in this test")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in kk.backend_names():
        assert f"  {name}: cannot run here: no {name} device in this test\n" in out


def test_info_reports_a_backend_that_fails_to_start_and_goes_on(capsys, monkeypatch):
    def make_backend(name):
        raise RuntimeError(f"the {name} driver fell over")

    monkeypatch.setattr(backends, "backend_unavailable_reason", lambda name: None)
    monkeypatch.setattr(backends, "make_backend", make_backend)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in kk.backend_names():
        assert f"  {name}: cannot start: RuntimeError: the {name} driver fell over\n" in out
    assert "disk cache:\n  directory: " in out


def test_python_dash_m_kernelkit_info_runs_with_or_without_a_gpu(tmp_path):
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "kernelkit", "info"], capture_output=True,
                            text=True, env=environment)
    assert result.returncode == 0, result.stderr
    for name in kk.backend_names():
        reason = kk.backend_unavailable_reason(name)
        expected = f"  {name}: cannot run here: {reason}" if reason else f"  {name}: runs here"
        assert expected in result.stdout
