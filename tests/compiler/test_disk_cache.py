"""The disk cache, across processes: a second process loads what the first compiled;
editing a device function in another file, a captured constant or a config flag gives a
new entry; a damaged entry is reported once, rebuilt and replaced; an unwritable cache
directory leaves compilation working with one warning; two processes compiling the same
kernel at once both succeed; editing a third party's target or plugin gives new keys;
`python -m kernelkit cache info|clear`."""
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.compiler import driver
from kernelkit.compiler.cache import SUFFIX, CacheWarning, DiskCache, decode

ROOT = Path(kk.__file__).resolve().parent.parent

HELPERS = """
SCALE = {scale}

def shift(v):
    return v + {shift}
"""

KERNEL = """
import sys
import numpy as np
import kernelkit as kk
import kernelkit.compiler.driver as driver
from helpers import SCALE, shift

if "--must-hit" in sys.argv:
    def refuse(*args):
        raise SystemExit("compiled although the disk cache should have had the kernel")
    driver.generate = refuse

@kk.kernel
def scaled(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = shift(x[i] * SCALE)

backend = kk.CPU(threads=1, debug="--debug" in sys.argv)
x = np.arange(8, dtype=np.float32)
y = np.zeros(8, np.float32)
scaled(backend, 4)(y, x, ndrange=8)
kk.synchronize(backend)
print(" ".join(str(int(v)) for v in y))
"""


def write_program(directory: Path, scale=2, shift=1) -> None:
    (directory / "helpers.py").write_text(HELPERS.format(scale=scale, shift=shift))
    (directory / "program.py").write_text(KERNEL)


def run(directory: Path, cache: Path, *flags, check=True) -> subprocess.CompletedProcess:
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(cache),
                       PYTHONPATH=os.pathsep.join([str(directory), str(ROOT)]))
    result = subprocess.run([sys.executable, str(directory / "program.py"), *flags],
                            capture_output=True, text=True, env=environment, cwd=directory)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def entries(cache: Path) -> list[Path]:
    """The cache's kernel entries (the runtime keeps its own native functions there too)."""
    def is_kernel(path):
        entry = decode(path.read_bytes())
        return entry is None or "functions" not in entry.info
    return sorted(path for path in cache.glob("*" + SUFFIX) if is_kernel(path))


def test_a_second_process_loads_the_kernel_the_first_compiled(tmp_path):
    write_program(tmp_path)
    cache = tmp_path / "cache"
    assert run(tmp_path, cache).stdout.split() == [str(v * 2 + 1) for v in range(8)]
    assert len(entries(cache)) == 1
    assert run(tmp_path, cache, "--must-hit").stdout.split() == [str(v * 2 + 1) for v in range(8)]
    assert len(entries(cache)) == 1


def test_editing_a_device_function_in_another_file_gives_a_new_entry(tmp_path):
    write_program(tmp_path, shift=1)
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    write_program(tmp_path, shift=5)
    assert run(tmp_path, cache).stdout.split() == [str(v * 2 + 5) for v in range(8)]
    assert len(entries(cache)) == 2
    write_program(tmp_path, shift=1)                  # back: the first entry is found again
    assert run(tmp_path, cache, "--must-hit").stdout.split() == [str(v * 2 + 1) for v in range(8)]
    write_program(tmp_path, shift=7)                  # a third version is not in the cache
    assert "compiled although" in run(tmp_path, cache, "--must-hit", check=False).stderr


def test_a_changed_captured_constant_or_config_flag_gives_a_new_entry(tmp_path):
    write_program(tmp_path, scale=2)
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    write_program(tmp_path, scale=3)
    assert run(tmp_path, cache).stdout.split() == [str(v * 3 + 1) for v in range(8)]
    run(tmp_path, cache, "--debug")
    assert len(entries(cache)) == 3
    run(tmp_path, cache, "--debug", "--must-hit")


def test_a_damaged_entry_is_reported_once_rebuilt_and_replaced(tmp_path):
    write_program(tmp_path)
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    (entry,) = entries(cache)
    whole = entry.read_bytes()
    entry.write_bytes(whole[:len(whole) // 2])                 # truncated
    result = run(tmp_path, cache)
    assert result.stdout.split() == [str(v * 2 + 1) for v in range(8)]
    assert result.stderr.count("is damaged; it is rebuilt") == 1
    assert entry.read_bytes() == whole                          # replaced by a good entry
    assert "damaged" not in run(tmp_path, cache, "--must-hit").stderr


def test_an_unwritable_cache_directory_warns_once_and_keeps_compiling(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(blocked / "cache"))
    monkeypatch.setattr(driver, "disk_cache", DiskCache())

    @kk.kernel
    def add_one(a):
        i = kk.index(kk.Global)
        a[i] += 1

    backend = kk.CPU(threads=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for size in (1, 2, 3):                      # three compilations, one warning
            a = np.zeros(4, np.int64)
            add_one(backend, size)(a, ndrange=4)
            kk.synchronize(backend)
            assert list(a) == [1, 1, 1, 1]
    cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(cache_warnings) == 1
    assert "kept in memory only" in str(cache_warnings[0].message)


def test_two_processes_compiling_the_same_kernel_at_once_both_succeed(tmp_path):
    write_program(tmp_path)
    cache = tmp_path / "cache"
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(cache),
                       PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    processes = [subprocess.Popen([sys.executable, str(tmp_path / "program.py")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=environment, cwd=tmp_path) for _ in range(4)]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert out.split() == [str(v * 2 + 1) for v in range(8)]
    assert len(entries(cache)) == 1
    assert not list(cache.glob("*.tmp"))


def test_cache_info_and_clear_on_the_command_line(tmp_path):
    write_program(tmp_path)
    cache = tmp_path / "cache"
    run(tmp_path, cache)
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "kernelkit", *args], capture_output=True,
                              text=True, env=environment, check=True).stdout

    stored = len(list(cache.glob("*" + SUFFIX)))   # the kernel's, and native functions'
    info = cli("cache", "info")
    assert str(cache) in info and f"entries:   {stored}" in info
    assert f"removed {stored} entr" in cli("cache", "clear")
    assert list(cache.glob("*" + SUFFIX)) == []
    assert "entries:   0" in cli("cache", "info")


@pytest.mark.parametrize("damage", [b"", b"not a cache entry", None])
def test_decoding_rejects_anything_but_a_whole_entry(damage):
    from kernelkit.compiler.cache import CacheEntry, decode, encode
    entry = CacheEntry("ir", "llvm", b"\x00artifact", True, {"locations": [[3, 4, "f.py"]]})
    data = encode(entry)
    assert decode(data) == entry
    broken = data[:-1] + bytes([data[-1] ^ 1]) if damage is None else damage
    assert decode(broken) is None



def test_a_changed_compiler_gives_new_keys(monkeypatch):
    from kernelkit.compiler import cache
    backend = kk.CPU(threads=1)

    def add_one(a):
        i = kk.index(kk.Global)
        a[i] += 1

    job = backend.compiler_job(add_one, (kk.ir.types.ArrayType(kk.ir.types.int64, 1, "C"),),
                               workgroupsize=(4,))
    before = cache.cache_key("ir text", job)
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "another code generator")
    assert cache.cache_key("ir text", job) != before


def test_editing_adding_or_removing_a_compiler_source_file_gives_new_keys(tmp_path, monkeypatch):
    import importlib.util
    from types import SimpleNamespace

    from kernelkit.compiler import cache
    package = tmp_path / "kernelkit"
    (package / "passes").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    pass_file = package / "passes" / "fold.py"
    pass_file.write_text("FOLD = 1\n")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(
        submodule_search_locations=[str(package)] if name == "kernelkit" else None))

    def fingerprint():
        return cache.compiler_fingerprint.__wrapped__()

    first = fingerprint()
    assert fingerprint() == first
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "fold.cpython-311.pyc").write_bytes(b"bytecode")
    assert fingerprint() == first                   # compiled bytecode is not source
    status = pass_file.stat()
    pass_file.write_text("FOLD = 2\n")              # the same size, a new time
    os.utime(pass_file, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))
    edited = fingerprint()
    assert edited != first
    (package / "passes" / "new.py").write_text("")
    added = fingerprint()
    assert added not in (first, edited)
    (package / "passes" / "new.py").unlink()
    assert fingerprint() == edited


THIRD_PARTY_CODE = """
from dataclasses import dataclass

from backends.cpu.target import CPUTarget
from kernelkit.compiler.plugins import Plugin


@dataclass(frozen=True, slots=True)
class VendorTarget(CPUTarget):
    name: str = "vendor"


class VendorPlugin(Plugin):
    name = "vendor"
    marker = "vendor_marker"
    UNROLL = {unroll}
"""


def test_editing_a_third_party_target_or_plugin_gives_new_keys(tmp_path, monkeypatch):
    import importlib.util

    from kernelkit.compiler import cache
    source = tmp_path / "vendor_codegen.py"
    source.write_text(THIRD_PARTY_CODE.format(unroll=4))
    spec = importlib.util.spec_from_file_location("vendor_codegen", source)
    vendor = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "vendor_codegen", vendor)
    spec.loader.exec_module(vendor)

    def add_one(a):
        i = kk.index(kk.Global)
        a[i] += 1

    job = kk.CPU(threads=1).compiler_job(
        add_one, (kk.ir.types.ArrayType(kk.ir.types.int64, 1, "C"),), workgroupsize=(4,))
    vendor_job = type(job)(job.source, type(job.config)(vendor.VendorTarget.host(),
                                                        workgroupsize=(4,)))
    plugins = (vendor.VendorPlugin(),)

    def keys():
        """The keys a new process would compute (it looks at each package once)."""
        cache.package_fingerprint.cache_clear()
        return cache.cache_key("ir text", vendor_job), cache.cache_key("ir text", job, plugins)

    target_key, plugin_key = keys()
    assert keys() == (target_key, plugin_key)
    status = source.stat()
    source.write_text(THIRD_PARTY_CODE.format(unroll=8))    # the same size, a new time
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))
    edited_target_key, edited_plugin_key = keys()
    assert edited_target_key != target_key
    assert edited_plugin_key != plugin_key


def test_kernelkits_own_targets_add_no_fingerprint_to_the_compilers():
    from backends.cpu.target import CPUTarget
    from backends.cuda.target import PTXTarget
    from kernelkit.compiler.cache import code_fingerprint
    nothing = code_fingerprint(object)
    assert CPUTarget.host().fingerprint() == PTXTarget("sm_90").fingerprint() == nothing
