"""The external functions and data an object file refers to but does not define.

The JIT (`target.py`'s loader) binds each of them to the address the process gives for
its name, and to 0 where the process has none, without an error: a call to an
unresolved libcall jumped to address 0. The loader checks them first with this list.

llvmlite reads an object file's sections but not its symbols, so the symbol tables of
the three formats LLVM writes for a JIT host are read here: ELF (Linux), Mach-O (macOS),
COFF (Windows). Weak references are left out: they may stay 0. Names are the C names
(Mach-O's leading underscore is taken off)."""
from __future__ import annotations

import struct


def undefined_symbols(object_code: bytes) -> set[str]:
    """The names `object_code` needs from outside itself."""
    if object_code[:4] == b"\x7fELF":
        names = _elf(object_code)
    elif object_code[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
        names = _mach_o(object_code)
    else:
        machine = struct.unpack_from("<H", object_code)[0]
        assert machine in _COFF_MACHINES, f"object code of an unknown format ({object_code[:4]!r})"
        names = _coff(object_code)
    return names - _LINKER_DEFINED


# Names the linker (here the JIT) defines itself, or only marks: the global offset
# table of position-independent code, PowerPC's table of contents, and the marker the
# Windows C runtime looks for in code that uses floating point.
_LINKER_DEFINED = {"_GLOBAL_OFFSET_TABLE_", ".TOC.", "_fltused"}


_ELF_SYMBOL_TABLE = 2
_ELF_WEAK = 2


def _elf(data: bytes) -> set[str]:
    wide = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if wide:
        section_offset, = struct.unpack_from(order + "Q", data, 0x28)
        section_size, section_count = struct.unpack_from(order + "HH", data, 0x3A)
    else:
        section_offset, = struct.unpack_from(order + "I", data, 0x20)
        section_size, section_count = struct.unpack_from(order + "HH", data, 0x2E)

    def section(index: int) -> tuple[int, int, int, int]:
        """(type, offset, size, link) of section `index`."""
        at = section_offset + index * section_size
        if wide:
            _, kind, _, _, offset, size, link = struct.unpack_from(order + "IIQQQQI", data, at)
        else:
            _, kind, _, _, offset, size, link = struct.unpack_from(order + "IIIIIII", data, at)
        return kind, offset, size, link

    names = set()
    for index in range(section_count):
        kind, offset, size, link = section(index)
        if kind != _ELF_SYMBOL_TABLE:
            continue
        _, strings, _, _ = section(link)
        entry = 24 if wide else 16
        for at in range(offset + entry, offset + size, entry):   # entry 0 is the null symbol
            if wide:
                name, info, _, defined_in = struct.unpack_from(order + "IBBH", data, at)
            else:
                name, _, _, info, _, defined_in = struct.unpack_from(order + "IIIBBH", data, at)
            if defined_in == 0 and name and info >> 4 != _ELF_WEAK:
                names.add(_c_string(data, strings + name))
    return names


_MACH_O_SYMBOL_TABLE = 0x2
_MACH_O_TYPE, _MACH_O_EXTERNAL, _MACH_O_DEBUG = 0x0E, 0x01, 0xE0
_MACH_O_WEAK_REFERENCE = 0x40


def _mach_o(data: bytes) -> set[str]:
    wide = data[0] == 0xCF
    command_count, = struct.unpack_from("<I", data, 16)
    at = 32 if wide else 28
    names = set()
    for _ in range(command_count):
        command, size = struct.unpack_from("<II", data, at)
        if command == _MACH_O_SYMBOL_TABLE:
            symbols, count, strings, _ = struct.unpack_from("<IIII", data, at + 8)
            entry = 16 if wide else 12
            for symbol in range(symbols, symbols + count * entry, entry):
                name, kind, _, description = struct.unpack_from("<IBBH", data, symbol)
                value, = struct.unpack_from("<Q" if wide else "<I", data, symbol + 8)
                if (kind & (_MACH_O_DEBUG | _MACH_O_TYPE)) == 0 and kind & _MACH_O_EXTERNAL \
                        and value == 0 and not description & _MACH_O_WEAK_REFERENCE:
                    names.add(_c_string(data, strings + name).removeprefix("_"))
        at += size
    return names


_COFF_MACHINES = {0x8664, 0xAA64, 0x14C}
_COFF_EXTERNAL = 2


def _coff(data: bytes) -> set[str]:
    symbols, count = struct.unpack_from("<II", data, 8)
    strings = symbols + 18 * count
    names = set()
    index = 0
    while index < count:
        at = symbols + 18 * index
        short, value, section, _, storage, auxiliary = struct.unpack_from("<8sIhHBB", data, at)
        if section == 0 and storage == _COFF_EXTERNAL and value == 0:
            if short[:4] == b"\0\0\0\0":
                names.add(_c_string(data, strings + struct.unpack_from("<I", short, 4)[0]))
            else:
                names.add(short.rstrip(b"\0").decode())
        index += 1 + auxiliary
    return names


def _c_string(data: bytes, at: int) -> str:
    return data[at:data.index(b"\0", at)].decode()
