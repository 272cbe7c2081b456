"""The disk cache of compiled kernels: a second process launching a kernel that an
earlier one compiled loads its artifact instead of compiling it again.

An entry's key is a digest of everything that changes the artifact: kernelkit's version
and its compiler's own source files, LLVM's version, the kernel's typed IR text (every
device function it calls is inlined into it, so a changed callee in any file or a changed
captured constant changes the text), the job's source identity and config, the keys of
the plugins that ran, and fingerprints of the code of a third party's target and plugins
(`Target.fingerprint`, `Plugin.fingerprint`). (`native.py` keeps its object code here
too, under keys of its own.)

Entries live under `KERNELKIT_CACHE_DIR` (default: the user's cache directory). An entry
is one file: a magic line, the SHA-256 of the rest, a JSON header and the artifact. It
is written to a temporary file and renamed into place, so a reader sees a whole entry or
none, and two processes writing the same entry both succeed. An entry that does not
check out is reported once as a warning, rebuilt and replaced. A directory that cannot
be written makes the cache memory-only, with one warning. Hits and misses are logged to
`kernelkit.cache` at DEBUG, a damaged entry at INFO (`kernelkit/logs.py`)."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..logs import get_logger

MAGIC = b"kernelkit-cache-1\n"
SUFFIX = ".kkc"

log = get_logger("cache")


class CacheWarning(UserWarning):
    """The disk cache could not be used as asked (kernels are still compiled)."""


@dataclass(frozen=True, slots=True)
class CacheEntry:
    ir: str
    llvm_ir: str
    artifact: bytes
    uses_print: bool
    info: dict


def cache_directory() -> Path:
    configured = os.environ.get("KERNELKIT_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
        return base / "kernelkit" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "kernelkit"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelkit"


COMPILER_PACKAGES = ("kernelkit", "backends")


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A digest of the compiler's own code (kernelkit's and its backends' source files,
    by path, size and modification time): a changed code generator must not find the
    artifacts of the old one, even under the same version number. Editing, checking out
    or installing a file gives it a new modification time; the files are not read, which
    would cost a process its first launch's worth of time again (Numba's cache looks at
    its source file the same way)."""
    digest = hashlib.sha256()
    for package in COMPILER_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            _add_package_sources(digest, root)
    return digest.hexdigest()


def code_fingerprint(cls: type) -> str:
    """A digest of the code that defines `cls` outside kernelkit, its backends and the
    standard library (a third party's target or plugin): the source files, by path, size
    and modification time as `compiler_fingerprint` takes them, of the top-level package
    (or the one module file) of `cls` and of each class it derives from."""
    excluded = {*COMPILER_PACKAGES, *sys.stdlib_module_names}
    packages = {klass.__module__.partition(".")[0] for klass in cls.__mro__} - excluded
    digest = hashlib.sha256()
    for package in sorted(packages):
        digest.update(f"{package}\0{package_fingerprint(package)}\0".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def package_fingerprint(name: str) -> str:
    """A digest of the source files of the imported top-level module `name`: every one
    in its directory where it is a package, else its own file (a script's, for
    `__main__`). The code a process runs is what it imported, so one look per process."""
    module = sys.modules.get(name)
    digest = hashlib.sha256()
    if hasattr(module, "__path__"):
        for root in module.__path__:
            _add_package_sources(digest, root)
    elif getattr(module, "__file__", None):
        _add_source(digest, os.path.basename(module.__file__), module.__file__)
    return digest.hexdigest()


def _add_package_sources(digest, root: str) -> None:
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                _add_source(digest, f"{os.path.relpath(directory, root)}/{name}",
                            os.path.join(directory, name))


def _add_source(digest, label: str, path: str) -> None:
    status = os.stat(path)
    digest.update(f"{label}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())


def cache_key(ir_text: str, job, plugins: tuple = ()) -> str:
    """The key of the kernel whose typed IR is `ir_text`, compiled by `job` with
    `plugins` (the `Plugin`s that ran on it)."""
    from llvmlite import __version__ as llvmlite_version
    from llvmlite import binding as llvm

    from .. import __version__
    source = job.source
    identity = repr((__version__, compiler_fingerprint(), llvmlite_version,
                     tuple(llvm.llvm_version_info),
                     source.qualname, source.module, source.source_hash, source.argtypes,
                     source.constants, job.config, job.config.target.fingerprint(),
                     tuple((plugin.cache_key(), plugin.fingerprint()) for plugin in plugins)))
    digest = hashlib.sha256(identity.encode())
    digest.update(b"\0")
    digest.update(ir_text.encode())
    return digest.hexdigest()


class DiskCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._warned_directories: set[Path] = set()

    def path(self, key: str) -> Path:
        return cache_directory() / (key + SUFFIX)

    def load(self, key: str) -> CacheEntry | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            log.debug("disk cache miss: %s", path)
            return None
        entry = decode(data)
        if entry is not None:
            log.debug("disk cache hit: %s", path)
        else:
            log.info("disk cache entry damaged, rebuilding it: %s", path)
            warnings.warn(f"kernelkit: the cache entry {path} is damaged; it is rebuilt",
                          CacheWarning, stacklevel=4)
        return entry

    def store(self, key: str, entry: CacheEntry) -> None:
        directory = cache_directory()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=key[:16], suffix=".tmp", dir=directory)
            try:
                with os.fdopen(handle, "wb") as file:
                    file.write(encode(entry))
                os.replace(temporary, self.path(key))
            except BaseException:
                os.unlink(temporary)
                raise
            log.debug("disk cache stored: %s", self.path(key))
        except OSError as error:
            with self._lock:
                if directory in self._warned_directories:
                    return
                self._warned_directories.add(directory)
            warnings.warn(f"kernelkit: cannot write the kernel cache in {directory} ({error}); "
                          "compiled kernels are kept in memory only (set KERNELKIT_CACHE_DIR "
                          "to a writable directory)", CacheWarning, stacklevel=4)

    def entries(self) -> list[Path]:
        directory = cache_directory()
        if not directory.is_dir():
            return []
        return sorted(directory.glob("*" + SUFFIX))

    def clear(self) -> int:
        removed = 0
        for path in self.entries():
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed


def encode(entry: CacheEntry) -> bytes:
    header = json.dumps({"ir": entry.ir, "llvm_ir": entry.llvm_ir,
                         "uses_print": entry.uses_print, "info": entry.info}).encode()
    body = len(header).to_bytes(8, "little") + header + entry.artifact
    return MAGIC + hashlib.sha256(body).digest() + body


def decode(data: bytes) -> CacheEntry | None:
    """The entry in `data`, or None if it is not a whole, unchanged entry."""
    if not data.startswith(MAGIC):
        return None
    checksum, body = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if len(body) < 8 or hashlib.sha256(body).digest() != checksum:
        return None
    size = int.from_bytes(body[:8], "little")
    try:
        header = json.loads(body[8:8 + size])
    except ValueError:
        return None
    return CacheEntry(header["ir"], header["llvm_ir"], body[8 + size:], header["uses_print"],
                      header["info"])


disk_cache = DiskCache()
