"""The IR's text form: deterministic, free of runtime pointers, one op per line.

    kernel @saxpy(y, a, x) -> void file "saxpy.py" {
    ^bb0(%0: array<f32, 1, C>, %1: float, %2: array<f32, 1, C, const>):
      %3 = local_id {axis = 0} : i64 @5
      ...
    }
"""
from __future__ import annotations

import json

from .definitions import CONST
from .function import Function, Module
from .ops import Op, Value
from .types import IRType


def print_module(module: Module) -> str:
    return "\n".join(print_function(f) for f in module.functions.values())


def print_function(function: Function) -> str:
    names: dict[Value, str] = {}
    block_names = {b: f"^bb{i}" for i, b in enumerate(function.blocks)}

    def name(value: Value) -> str:
        if value not in names:
            names[value] = f"%{len(names)}"
        return names[value]

    kind = "kernel" if function.is_kernel else "func"
    disjoint = " disjoint_arrays" if function.disjoint_arrays else ""
    lines = [f"{kind} @{function.name}({', '.join(function.arg_names)}) -> "
             f"{function.return_type.name} file {json.dumps(function.source_file)}"
             f"{disjoint} {{"]
    for block in function.blocks:
        params = ", ".join(f"{name(p)}: {p.type.name}" for p in block.params)
        lines.append(f"{block_names[block]}({params}):")
        for op in block.ops:
            lines.append("  " + _print_op(op, name, block_names, function.source_file))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _print_op(op: Op, name, block_names, source_file: str) -> str:
    text = f"{name(op)} = {op.opcode}" if not _is_void(op.type) else op.opcode
    constant = op.definition is CONST
    if constant:
        text += " " + format_attr(op.attrs["value"])
    elif op.operands:
        text += " " + ", ".join(name(v) for v in op.operands)
    for successor in op.successors:
        args = ", ".join(name(v) for v in successor.args)
        text += f"{',' if op.operands or text.endswith(')') else ''} {block_names[successor.block]}({args})"
    attrs = {k: v for k, v in op.attrs.items() if not (constant and k == "value")}
    if attrs:
        text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in sorted(attrs.items())) + "}"
    if not _is_void(op.type):
        text += f" : {op.type.name}"
    if op.loc is not None:
        where = "" if op.loc.file in ("", source_file) else json.dumps(op.loc.file) + ":"
        text += f" @{where}{op.loc.line}:{op.loc.column}"
    return text


def _is_void(type: IRType) -> bool:
    return type.name == "void"


def format_attr(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else f'"{value}"'
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, IRType):
        return f"type<{value.name}>"
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute {value!r}")
