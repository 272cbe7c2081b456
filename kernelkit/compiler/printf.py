"""Printing from a kernel with a C-style `printf`: a kernel print's format (`{}` or
`{:spec}` per value, as `str.format`; `kernelkit.ir.print_format`) turned into a printf
format and its arguments, and the constant strings they point to. Where printf comes from
is the target's."""
from __future__ import annotations

from llvmlite import ir

from ..ir.print_format import conversion, fields
from .llvm_types import i8, i32, i64


def printf_arguments(builder, format: str, values, string):
    """Turn a kernel print format (`{}` or `{:spec}` per value) into a printf format and
    arguments."""
    text, args = "", []
    values = iter(values)
    for literal, spec in fields(format):
        if spec is None:
            text += literal.replace("%", "%%")
            continue
        value, type = next(values)
        converted = conversion(spec, type)
        text += converted.text
        if converted.passed_as == "string":
            args.append(builder.select(value, string("True"), string("False")))
        elif converted.passed_as == "double":
            args.append(_as_double(builder, value, type))
        elif type.is_bool:
            args.append(builder.zext(value, i64))
        elif type.bits < 64:
            args.append(builder.sext(value, i64) if type.is_signed else
                        builder.zext(value, i64))
        else:
            args.append(value)
    return text, args


def _as_double(builder, value, type):
    if type.is_float:
        return value if type.bits == 64 else builder.fpext(value, ir.DoubleType())
    if type.is_bool:
        return builder.uitofp(value, ir.DoubleType())
    return builder.sitofp(value, ir.DoubleType()) if type.is_signed else \
        builder.uitofp(value, ir.DoubleType())


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
