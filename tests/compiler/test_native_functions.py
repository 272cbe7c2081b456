"""Native host functions (`kernelkit.compiler.native`): compiled from LLVM IR once, then
loaded by every later process from the disk cache, with the addresses of the functions
they call bound in each process; a damaged entry is rebuilt; an unwritable cache still
gives working functions."""
import ctypes
import os
import subprocess
import sys
import warnings
from pathlib import Path

import kernelkit as kk
from kernelkit.compiler import native
from kernelkit.compiler.cache import SUFFIX, CacheWarning, DiskCache

ROOT = Path(kk.__file__).resolve().parent.parent

PROGRAM = """
import ctypes, sys
from kernelkit.compiler import native

if "--must-hit" in sys.argv:
    def refuse(*args):
        raise SystemExit("compiled although the disk cache should have had the functions")
    native._compile = refuse

IR = '''
declare ptr @PyLong_FromLong(i64)
define private i64 @twice(i64 %v) {
  %r = shl i64 %v, 1
  ret i64 %r
}
define ptr @kk_test_box_twice(i64 %v) {
  %d = call i64 @twice(i64 %v)
  %o = call ptr @PyLong_FromLong(i64 %d)
  ret ptr %o
}
'''
addresses = native.host_functions(IR, native.python_api("PyLong_FromLong"))
box = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_int64)(addresses["kk_test_box_twice"])
print(sorted(addresses), box(int(sys.argv[1])))
"""


def run(tmp_path: Path, cache: Path, value: int, *flags) -> subprocess.CompletedProcess:
    (tmp_path / "program.py").write_text(PROGRAM)
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(tmp_path / "program.py"), str(value), *flags],
                          capture_output=True, text=True, env=environment, cwd=tmp_path)


def test_a_second_process_loads_the_functions_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, cache, 20)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["['kk_test_box_twice']", "40"]
    (entry,) = cache.glob("*" + SUFFIX)
    second = run(tmp_path, cache, 21, "--must-hit")   # its own PyLong_FromLong, bound on load
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["['kk_test_box_twice']", "42"]
    assert list(cache.glob("*" + SUFFIX)) == [entry]


def test_a_damaged_entry_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    assert run(tmp_path, cache, 1).returncode == 0
    (entry,) = cache.glob("*" + SUFFIX)
    whole = entry.read_bytes()
    entry.write_bytes(whole[:-3])
    result = run(tmp_path, cache, 2)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "4"
    assert result.stderr.count("is damaged; it is rebuilt") == 1
    assert entry.read_bytes() == whole
    assert run(tmp_path, cache, 3, "--must-hit").stdout.split()[-1] == "6"


def test_an_unwritable_cache_directory_still_gives_working_functions(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(blocked / "cache"))
    monkeypatch.setattr(native, "disk_cache", DiskCache())
    text = "define i64 @kk_test_negate(i64 %v) {\n  %r = sub i64 0, %v\n  ret i64 %r\n}\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        addresses = native.host_functions(text, {})
    negate = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addresses["kk_test_negate"])
    assert negate(5) == -5
    assert [w.category for w in caught] == [CacheWarning]
