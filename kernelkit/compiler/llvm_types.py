"""How kernelkit's types look in LLVM (llvmlite.ir): the type of a value in a register,
the type of an array element in memory, and an array's parts once read (`ArrayValue`).

Every module that builds LLVM shares these; none of them depends on a target."""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..ir import types as T

i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
ptr = ir.PointerType()


def declared(module: ir.Module, name: str, result: ir.Type, params: list[ir.Type],
             var_arg: bool = False) -> ir.Function:
    """The function `name` of `module` (an intrinsic, a library function, one of ours),
    declared as `result(params...)` where the module does not have it yet."""
    function = module.globals.get(name)
    if function is None:
        function = ir.Function(module, ir.FunctionType(result, params, var_arg=var_arg), name)
    return function


def llvm_type(type: T.IRType) -> ir.Type:
    """The type of a value in a register."""
    if isinstance(type, T.ScalarType):
        if type.is_bool:
            return i1
        if type.is_float:
            return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[type.bits]
        return ir.IntType(type.bits)
    if isinstance(type, T.TupleType):
        return ir.LiteralStructType([llvm_type(t) for t in type.elements])
    if isinstance(type, T.VoidType):
        return ir.VoidType()
    raise TypeError(f"no LLVM register type for {type.name}")


def memory_type(type: T.ScalarType) -> ir.Type:
    """The type of an array element in memory (bools are bytes, as in NumPy)."""
    return i8 if type.is_bool else llvm_type(type)


@dataclass
class ArrayValue:
    """An array in LLVM: element pointer, extents and strides (in elements)."""

    data: ir.Value
    shape: list[ir.Value]
    strides: list[ir.Value]
    type: T.ArrayType
