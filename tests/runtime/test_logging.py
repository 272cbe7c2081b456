"""kernelkit's log (`kernelkit/logs.py`): a line per compile with its time, one per stage
at DEBUG, disk-cache hits, misses and damaged entries, a WARNING for a slow compile,
nothing for a warm launch; KERNELKIT_LOG writes it to stderr, and without it kernelkit
adds no handler but a NullHandler."""
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.compiler import driver
from kernelkit.compiler.cache import CacheWarning
from kernelkit.ir import types as T
from kernelkit.logs import level_from_environment

STAGES = ("frontend", "IR passes", "disk cache lookup", "LLVM lowering", "LLVM optimization",
          "code generation", "disk cache store", "load")


@pytest.fixture
def log(caplog, tmp_path, monkeypatch):
    """kernelkit's records from DEBUG up, with a disk cache of the test's own."""
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path))
    # Where KERNELKIT_LOG is set, the records stop at its handler: caplog is the root's.
    monkeypatch.setattr(logging.getLogger("kernelkit"), "propagate", True)
    caplog.set_level(logging.DEBUG, logger="kernelkit")
    return caplog


def messages(caplog, logger: str, level: int = logging.DEBUG) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == logger and record.levelno == level]


def job_of(function, log):
    """The CPU job of `function` over one int64 array, with what starting the backend
    logged (the runtime's own native functions, in the first test) cleared."""
    job = kk.CPU(threads=1).compiler_job(function, (T.ArrayType(T.int64, 1, "C"),),
                                         workgroupsize=(4,))
    log.clear()
    return job


def test_only_the_first_launch_logs_a_compile_with_the_kernels_name_and_time(log):
    @kk.kernel
    def count_up(a):
        i = kk.index(kk.Global)
        a[i] += 1

    backend = kk.CPU(threads=1)
    a = np.zeros(8, np.int64)
    log.clear()
    count_up(backend, 4)(a, ndrange=8)
    (line,) = messages(log, "kernelkit.compile", logging.INFO)
    assert line.startswith("kernel 'count_up' for cpu: compiled in ")
    assert line.endswith(" s") and float(line.split()[-2]) > 0
    log.clear()
    for _ in range(3):
        count_up(backend, 4)(a, ndrange=8)
    kk.synchronize(backend)
    assert list(a) == [4] * 8
    assert log.records == []


def test_debug_logs_each_stage_then_a_disk_cache_miss_and_later_a_hit(log):
    def add_two(a):
        i = kk.index(kk.Global)
        a[i] += 2

    job = job_of(add_two, log)
    driver.build(job)
    stages = [line.removeprefix("kernel 'add_two' for cpu: ").split(" took ")[0]
              for line in messages(log, "kernelkit.compile") if " took " in line]
    assert stages == list(STAGES)
    (miss,) = [line for line in messages(log, "kernelkit.cache") if "miss" in line]
    (stored,) = [line for line in messages(log, "kernelkit.cache") if "stored" in line]
    assert miss.removeprefix("disk cache miss: ") == stored.removeprefix("disk cache stored: ")
    log.clear()
    driver.build(job)                                   # as a second process would
    assert messages(log, "kernelkit.cache") == [f"disk cache hit: {miss.split(': ')[1]}"]
    (line,) = messages(log, "kernelkit.compile", logging.INFO)
    assert line.startswith("kernel 'add_two' for cpu: loaded from the disk cache in ")


def test_a_damaged_disk_cache_entry_is_logged_as_rebuilt(log):
    def add_three(a):
        i = kk.index(kk.Global)
        a[i] += 3

    job = job_of(add_three, log)
    driver.build(job)
    (entry,) = [line.split(": ")[1] for line in messages(log, "kernelkit.cache")
                if "stored" in line]
    with open(entry, "r+b") as file:
        file.truncate(10)
    log.clear()
    with pytest.warns(CacheWarning, match="is damaged"):
        driver.build(job)
    assert messages(log, "kernelkit.cache", logging.INFO) == [
        f"disk cache entry damaged, rebuilding it: {entry}"]
    (line,) = messages(log, "kernelkit.compile", logging.INFO)
    assert line.startswith("kernel 'add_three' for cpu: compiled in ")


def test_a_compile_slower_than_the_threshold_is_a_warning_naming_the_kernel(log, monkeypatch):
    monkeypatch.setattr(driver, "SLOW_COMPILE_SECONDS", 0.0)

    def add_four(a):
        i = kk.index(kk.Global)
        a[i] += 4

    driver.build(job_of(add_four, log))
    (warning,) = messages(log, "kernelkit.compile", logging.WARNING)
    assert warning.startswith("kernel 'add_four' for cpu took ")
    assert " s to compile (" in warning
    assert warning.endswith("it is in the disk cache now, so later runs load it instead")


def test_an_unknown_kernelkit_log_value_warns_and_logs_nothing():
    with pytest.warns(UserWarning, match="KERNELKIT_LOG='loud' is not one of debug, info"):
        assert level_from_environment("loud") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert level_from_environment("") is None
        assert level_from_environment(" Debug ") == logging.DEBUG


PROGRAM = """
import logging
import numpy as np
import kernelkit as kk

@kk.kernel
def add_one(a):
    i = kk.index(kk.Global)
    a[i] += 1

add_one(kk.CPU(threads=1), 4)(np.zeros(4), ndrange=4)
print([type(handler).__name__ for handler in logging.getLogger("kernelkit").handlers])
"""


@pytest.mark.parametrize("setting", ["info", None])
def test_kernelkit_log_writes_to_stderr_and_unset_only_a_null_handler_is_added(tmp_path,
                                                                               setting):
    environment = {name: value for name, value in os.environ.items()
                   if name != "KERNELKIT_LOG"}
    environment["KERNELKIT_CACHE_DIR"] = str(tmp_path / "cache")
    if setting is not None:
        environment["KERNELKIT_LOG"] = setting
    (tmp_path / "program.py").write_text(PROGRAM)
    result = subprocess.run([sys.executable, str(tmp_path / "program.py")], capture_output=True,
                            text=True, env=environment)
    assert result.returncode == 0, result.stderr
    if setting is None:
        assert result.stdout.strip() == "['NullHandler']"
        assert result.stderr == ""
    else:
        assert result.stdout.strip() == "['NullHandler', 'StreamHandler']"
        assert "[kernelkit.compile] INFO: kernel 'add_one' for cpu: compiled in " \
            in result.stderr
        assert "DEBUG" not in result.stderr
