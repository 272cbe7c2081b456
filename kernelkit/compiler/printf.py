"""Printing from a kernel with a C-style `printf`: a kernel print's format ('{}' per
value, as `str.format`) turned into a printf format and its arguments, and the
constant strings they point to. Where printf comes from is the target's."""
from __future__ import annotations

from llvmlite import ir

from .llvm_types import i8, i32, i64


def printf_arguments(builder, format: str, values, string):
    """Turn a kernel print format ('{}' per value) into a printf format and arguments."""
    pieces = format.replace("%", "%%").split("{}")
    pieces = [p.replace("{{", "{").replace("}}", "}") for p in pieces]
    text = pieces[0]
    args = []
    for (value, type), piece in zip(values, pieces[1:]):
        if type.is_bool:
            text += "%s"
            args.append(builder.select(value, string("True"), string("False")))
        elif type.is_float:
            text += "%g"
            args.append(value if type.bits == 64 else builder.fpext(value, ir.DoubleType()))
        elif type.is_signed:
            text += "%lld"
            args.append(value if type.bits == 64 else builder.sext(value, i64))
        else:
            text += "%llu"
            args.append(value if type.bits == 64 else builder.zext(value, i64))
        text += piece
    return text, args


def global_string(module: ir.Module, cache: dict, text: str) -> ir.Value:
    """A pointer to `text` as a NUL-terminated constant of the module (one per text)."""
    if text not in cache:
        data = bytearray(text.encode() + b"\0")
        constant = ir.Constant(ir.ArrayType(i8, len(data)), data)
        variable = ir.GlobalVariable(module, constant.type, f"str{len(cache)}")
        variable.global_constant = True
        variable.linkage = "private"
        variable.initializer = constant
        cache[text] = variable.gep([ir.Constant(i32, 0), ir.Constant(i32, 0)])
    return cache[text]
