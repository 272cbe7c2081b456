"""Where a work-item is, as IR: its number in the ndrange and in its group, its group's
number, and whether an access touches an element no other work-item does."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import ADD, GROUP_ID, LOCAL_ID, MUL, NDRANGE
from kernelkit.ir.ops import Value, constant_value, is_op


def linear_work_item(b: Builder, workgroupsize: tuple[int, ...]) -> Value:
    """The work-item's number in the ndrange, row-major (the last axis fastest, as the
    GPU's threads are numbered)."""
    linear = None
    for axis, size in enumerate(workgroupsize):
        group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
        local = b.op(LOCAL_ID, [], T.int64, {"axis": axis})
        index = b.binary("add", b.binary("mul", group, b.constant(size, T.int64)), local)
        if linear is None:
            linear = index
        else:
            extent = b.op(NDRANGE, [], T.int64, {"axis": axis})
            linear = b.binary("add", b.binary("mul", linear, extent), index)
    return linear


def linear_local_item(b: Builder, workgroupsize: tuple[int, ...]) -> Value:
    """The work-item's number in its group, row-major."""
    linear = None
    for axis, size in enumerate(workgroupsize):
        local = b.op(LOCAL_ID, [], T.int64, {"axis": axis})
        linear = local if linear is None else \
            b.binary("add", b.binary("mul", linear, b.constant(size, T.int64)), local)
    return linear


def unflatten(b: Builder, flat: Value, shape: tuple[int, ...]) -> list[Value]:
    """The indices of element `flat` of a C-ordered array of `shape`."""
    indices = []
    for extent in reversed(shape[1:]):
        indices.insert(0, b.binary("mod", flat, b.constant(extent, T.int64)))
        flat = b.binary("floordiv", flat, b.constant(extent, T.int64))
    return [flat, *indices]


def global_axis(value: Value, workgroupsize: tuple[int, ...]) -> int | None:
    """The axis whose global index `value` is (`group_id * size + local_id`, size the
    work-group's along that axis), or None. A local id alone is not one, nor a group id
    times another number: work-items of different groups share those."""
    if not is_op(value, ADD):
        return None
    for product, local in (value.operands, reversed(value.operands)):
        if is_op(local, LOCAL_ID) and is_op(product, MUL):
            for group, size in (product.operands, reversed(product.operands)):
                axis = local.attrs["axis"]
                if is_op(group, GROUP_ID) and group.attrs["axis"] == axis and \
                        constant_value(size) == workgroupsize[axis]:
                    return axis
    return None


def own_element(indices: list[Value], workgroupsize: tuple[int, ...]) -> bool:
    """Whether an access at `indices` is at the work-item's own element: index k is the
    global index along axis k, for every axis of the ndrange. Only that map gives every
    work-item an element no other reaches through it or through another such access: a
    permutation would not (work-items (i, j) and (j, i) both reach x[i, j] when one reads
    x[i, j] and the other x[j, i])."""
    return [global_axis(index, workgroupsize) for index in indices] == \
        list(range(len(workgroupsize)))


def linear_group(b: Builder, workgroupsize: tuple[int, ...]) -> Value:
    """The work-group's number, row-major over the groups of the ndrange."""
    linear = None
    for axis, size in enumerate(workgroupsize):
        group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
        if linear is None:
            linear = group
            continue
        extent = b.op(NDRANGE, [], T.int64, {"axis": axis})
        groups = b.binary("floordiv", b.binary("add", extent, b.constant(size - 1, T.int64)),
                          b.constant(size, T.int64))
        linear = b.binary("add", b.binary("mul", linear, groups), group)
    return linear


def partial_group(b: Builder, workgroupsize: tuple[int, ...]) -> Value:
    """Whether the work-group reaches past the ndrange on some axis (its missing
    work-items do not run)."""
    partial = None
    for axis, size in enumerate(workgroupsize):
        group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
        end = b.binary("mul", b.binary("add", group, b.constant(1, T.int64)),
                       b.constant(size, T.int64))
        past = b.compare("gt", end, b.op(NDRANGE, [], T.int64, {"axis": axis}))
        partial = past if partial is None else b.binary("or", partial, past)
    return partial
