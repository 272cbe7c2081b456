"""Small native functions for the host, written in LLVM IR and compiled in process: code
that must run where Python code cannot (without the GIL, while an exception is being
raised, after the interpreter has shut down).

`host_functions(ir_text, symbols)` compiles a module whose external functions are given
by address (`symbols`: name -> address) and returns the address of each function it
defines. The machine code stays mapped for the life of the process, also after the
interpreter's finalization: a library may call it from its own exit handlers.

The object code is kept in the disk cache with the kernels (`cache.py`), keyed by the IR
text and LLVM's version and target: compiling it costs a process about 10 ms, loading it
well under one. The addresses of `symbols` are bound when the object is loaded, so the
object code is the same in every process."""
from __future__ import annotations

import ctypes
import hashlib
import threading

from llvmlite import binding as llvm

from .cache import CacheEntry, disk_cache

_lock = threading.Lock()
_kept: list = []   # engines and their object files; also pinned below, never freed

OPT_LEVEL = 2


def host_functions(ir_text: str, symbols: dict[str, int]) -> dict[str, int]:
    """{name: address} of every function `ir_text` defines and exports, compiled for this
    machine (or loaded from the disk cache)."""
    with _lock:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for name, address in symbols.items():
            llvm.add_symbol(name, address)
        machine = llvm.Target.from_default_triple().create_target_machine(
            opt=OPT_LEVEL, reloc="pic", codemodel="jitdefault")
        key = _cache_key(ir_text, machine)
        entry = disk_cache.load(key)
        if entry is None or entry.llvm_ir != ir_text:
            entry = _compile(ir_text, machine)
            disk_cache.store(key, entry)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
        object_file = llvm.ObjectFileRef.from_data(entry.artifact)
        engine.add_object_file(object_file)
        engine.finalize_object()
        addresses = {name: engine.get_function_address(name)
                     for name in entry.info["functions"]}
        # Keep the engine beyond the interpreter's own teardown: one reference more than
        # anything will ever drop.
        _kept.append((engine, object_file))
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
        return addresses


def _compile(ir_text: str, machine) -> CacheEntry:
    module = llvm.parse_assembly(ir_text)
    module.triple = llvm.get_process_triple()
    module.verify()
    functions = [function.name for function in module.functions
                 if not function.is_declaration and function.linkage == llvm.Linkage.external]
    return CacheEntry("", ir_text, machine.emit_object(module), False,
                      {"functions": functions})


def _cache_key(ir_text: str, machine) -> str:
    from llvmlite import __version__ as llvmlite_version
    identity = repr(("host functions", llvmlite_version, tuple(llvm.llvm_version_info),
                     llvm.get_process_triple(), str(machine.target_data), OPT_LEVEL))
    digest = hashlib.sha256(identity.encode())
    digest.update(b"\0")
    digest.update(ir_text.encode())
    return digest.hexdigest()


def python_api(*names: str) -> dict[str, int]:
    """The addresses of CPython C-API functions, for `symbols`."""
    return {name: ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
            for name in names}
