"""Small native functions for the host, written in LLVM IR and compiled in process: code
that must run where Python code cannot (without the GIL, while an exception is being
raised, after the interpreter has shut down).

`host_functions(ir_text, symbols)` compiles a module whose external functions are given
by address (`symbols`: name -> address) and returns the address of each function it
defines. The machine code stays mapped for the life of the process, also after the
interpreter's finalization: a library may call it from its own exit handlers."""
from __future__ import annotations

import ctypes
import threading

from llvmlite import binding as llvm

_lock = threading.Lock()
_kept: list = []   # engines and their modules; also pinned below, never freed


def host_functions(ir_text: str, symbols: dict[str, int]) -> dict[str, int]:
    """{name: address} of every function `ir_text` defines, compiled for this machine."""
    with _lock:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for name, address in symbols.items():
            llvm.add_symbol(name, address)
        module = llvm.parse_assembly(ir_text)
        module.triple = llvm.get_process_triple()
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        addresses = {function.name: engine.get_function_address(function.name)
                     for function in module.functions if not function.is_declaration}
        # Keep the engine beyond the interpreter's own teardown: one reference more than
        # anything will ever drop.
        _kept.append(engine)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
        return addresses


def python_api(*names: str) -> dict[str, int]:
    """The addresses of CPython C-API functions, for `symbols`."""
    return {name: ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
            for name in names}
