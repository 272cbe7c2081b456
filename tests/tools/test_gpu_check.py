"""tools/gpu_check.py, the one command that checks a machine with a GPU: run here, where
its CUDA steps compile without running (or run, where there is a GPU), it writes its
report with each step's status and summary, and stops a step that outruns the budget."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gpu_check(tmp_path, *arguments):
    report = tmp_path / "report.md"
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"),
                             "--report", str(report), "--jobs", "1", *arguments],
                            capture_output=True, text=True, timeout=300)
    return result, report.read_text()


def test_the_gpu_check_writes_a_report_with_each_step_s_summary(tmp_path):
    result, report = gpu_check(tmp_path, "--only", "fuzz", "--fuzz-seeds", "0:2",
                               "--budget", "240")
    assert result.returncode == 0, report
    assert "| kernelkit.fuzz on CUDA | passed |" in report
    assert "2 seeds in" in report and "- commit:" in report


def test_a_step_past_its_share_of_the_budget_is_stopped_and_reported(tmp_path):
    result, report = gpu_check(tmp_path, "--only", "fuzz", "--fuzz-seeds", "0:5000",
                               "--budget", "8")
    assert result.returncode == 1
    assert "| kernelkit.fuzz on CUDA | stopped after its 8 s |" in report
