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
object code is the same in every process.

`builtin_function(address, name, flags)` makes such a function a CPython builtin, which
Python code calls with no conversion of its arguments (the backends' launch calls)."""
from __future__ import annotations

import ctypes
import functools
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


# -- CPython builtins from native code ---------------------------------------------------
#
# A builtin function (`PyCFunction_NewEx`) calls its C function with no conversion of its
# arguments at all: the cheapest call a Python caller can make into native code, for
# calls made on every launch.

METH_O = 0x0008
"""A builtin of one argument: its C function is `PyObject *f(PyObject *self, PyObject *arg)`."""
METH_FASTCALL = 0x0080
"""A builtin of CPython's vectorcall protocol: its C function is
`PyObject *f(PyObject *self, PyObject *const *args, Py_ssize_t count)`."""


class _MethodDefinition(ctypes.Structure):
    """CPython's `PyMethodDef`."""

    _fields_ = [("name", ctypes.c_char_p), ("function", ctypes.c_void_p),
                ("flags", ctypes.c_int), ("doc", ctypes.c_char_p)]


# A builtin keeps the address of its definition, not the definition: each is kept here
# for the life of the process, one per native function and name.
_method_definitions: dict[tuple, _MethodDefinition] = {}


def builtin_function(address: int, name: str, flags: int, bound: object = None,
                     doc: str | None = None):
    """The CPython builtin function `name` whose C function is the native code at
    `address` (`host_functions`), called as `flags` says (`METH_O`, `METH_FASTCALL`);
    `bound`, if given, is the `self` it passes (the builtin keeps it alive). CPython
    only."""
    key = (address, name, flags, doc)
    with _lock:
        definition = _method_definitions.get(key)
        if definition is None:
            definition = _method_definitions[key] = _MethodDefinition(
                name.encode(), address, flags, None if doc is None else doc.encode())
    new = _new_function(ctypes.c_void_p if bound is None else ctypes.py_object)
    return new(ctypes.addressof(definition), bound, None)   # (None: NULL, no module)


@functools.cache
def _new_function(self_type):
    """CPython's `PyCFunction_NewEx(definition, self, module)`, its `self` passed as
    `self_type` (`c_void_p`: None is NULL)."""
    address = python_api("PyCFunction_NewEx")["PyCFunction_NewEx"]
    return ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, self_type,
                             ctypes.c_void_p)(address)
