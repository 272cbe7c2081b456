"""The kernel's side of the launch record: the one buffer a launch passes, laid out by
`kernelkit.runtime.arguments.ArgumentLayout` (ndrange extents, groups per axis, the
error record, the arguments).

`LaunchRecord` reads it at the start of a kernel; `record_out_of_bounds` fills its error
record (`kernelkit.runtime.bounds`); `EntryPointBuilder` is what every target's entry
point builder shares around them. How work-items map to hardware is the target's."""
from __future__ import annotations

from llvmlite import ir

from ..ir import types as T
from ..ir.function import Function
from .environment import KernelEnvironment
from .llvm_types import ArrayValue, i8, i64, llvm_type, ptr
from .printf import global_string


def c_strides(builder: ir.IRBuilder, shape: list[ir.Value]) -> list[ir.Value]:
    strides = [ir.Constant(i64, 1)]
    for extent in reversed(shape[1:]):
        strides.insert(0, builder.mul(strides[0], extent))
    return strides


class LaunchRecord:
    """The launch record (`kernelkit.runtime.arguments.ArgumentLayout`) read at the start
    of a kernel from `record`, a pointer to it: extents of the ndrange, number of groups
    per axis, the error record (debug) and the arguments."""

    def __init__(self, builder: ir.IRBuilder, record: ir.Value, layout, debug: bool):
        def load(offset, type=i64):
            address = builder.gep(record, [ir.Constant(i64, offset)], source_etype=i8)
            return builder.load(address, typ=type)
        ndim = layout.ndim
        self.extents = [load(layout.ndrange_offset(d)) for d in range(ndim)]
        self.group_counts = [load(layout.groups_offset(d)) for d in range(ndim)]
        self.error_record = load(layout.error_record_offset, ptr) if debug else None
        self.arguments = []
        for field in layout.fields:
            type = field.type
            if isinstance(type, T.ArrayType):
                data = load(field.offset, ptr)
                shape = [load(field.offset + 8 * (1 + d)) for d in range(type.ndim)]
                if type.layout == "C":
                    strides = c_strides(builder, shape)
                else:
                    strides = [load(field.offset + 8 * (1 + type.ndim + d))
                               for d in range(type.ndim)]
                self.arguments.append(ArrayValue(data, shape, strides, type))
            else:
                self.arguments.append(load(field.offset, llvm_type(type)))


class EntryPointBuilder(KernelEnvironment):
    """What every target's kernel entry point builder shares: the job's facts, the
    argument layout, the kernel arguments once read, bounds-check locations, strings."""

    def __init__(self, module: ir.Module, function: Function, job, symbol: str):
        from ..runtime.arguments import ArgumentLayout
        self.module = module
        self.function = function
        self.job = job
        self.symbol = symbol
        self.debug = job.config.debug
        self.sizes = job.config.workgroupsize
        self.ndim = len(self.sizes)
        self.layout = ArgumentLayout(tuple(p.type for p in function.params), self.ndim)
        self.locations: list = []      # source locations of bounds checks, by number
        self.strings: dict[str, ir.Value] = {}
        self.arguments: list = []
        self.error_record = None

    def argument(self, index, param):
        return self.arguments[index]

    def out_of_bounds(self, builder, loc, axis, indices, shape):
        self.locations.append(loc)
        record_out_of_bounds(builder, self.error_record, len(self.locations) - 1, axis,
                             indices, shape)

    def string(self, text: str) -> ir.Value:
        return global_string(self.module, self.strings, text)


def record_out_of_bounds(builder: ir.IRBuilder, record: ir.Value, location: int, axis: int,
                         indices: list, shape: list) -> None:
    """The first failing bounds check of a launch fills the error record (flag, location
    number, axis, ndim, indices, extents: what `ERROR_RECORD_FIELDS` describes); then the
    work-item stops."""
    flag = builder.cmpxchg(record, ir.Constant(i64, 0), ir.Constant(i64, 1),
                           "monotonic", "monotonic")
    first = builder.extract_value(flag, 1)
    write = builder.function.append_basic_block("record_error")
    leave = builder.function.append_basic_block("leave")
    builder.cbranch(first, write, leave)
    builder.position_at_end(write)
    values = [ir.Constant(i64, location), ir.Constant(i64, axis),
              ir.Constant(i64, len(indices)), *indices, *shape]
    for position, value in enumerate(values, start=1):
        builder.store(value, builder.gep(record, [ir.Constant(i64, position)],
                                         source_etype=i64))
    builder.branch(leave)
    builder.position_at_end(leave)
    builder.ret_void()
