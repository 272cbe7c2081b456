"""Whether a kernel can tell its work-groups apart: what a backend may change about the
work-group shape without changing any result.

A kernel observes its work-groups when it uses local memory, barriers or subgroup
operations (a subgroup is made of work-items of one group), asks for its
local or group index (other than inside its global index, `group_id * size + local_id`
with the work-group's own size), or reads the work-group's size (`kk.groupsize()`, which
the frontend notes in `Module.notes`, since it folds to constants). A kernel that does
none of these computes the same results whatever the shape of its work-groups, so a CPU
may iterate its work-items in the order that suits it best. (The driver also counts a
kernel a plugin transformed as observing them: its transform may have built code for one
group shape.)"""
from __future__ import annotations

from ..ir.definitions import (ADD, BARRIER, BARRIER_ANY, GROUP_ID, LOCAL_ID, LOCALMEM, MUL,
                              Trait)
from ..ir.function import Module
from ..ir.ops import Op, constant_value, is_op

NOTE = "kernelkit.work_groups_observed"
"""The key of `Module.notes` (and of a compiled kernel's notes) that says so."""


def observes_work_groups(module: Module, workgroupsize: tuple[int, ...]) -> bool:
    """Whether the module's kernel observes its work-groups (see the module's text)."""
    if module.notes.get(NOTE):
        return True
    users: dict = {}
    ops = [op for function in module.functions.values() for op in function.ops()]
    for op in ops:
        if op.definition in (LOCALMEM, BARRIER, BARRIER_ANY) or op.has(Trait.SUBGROUP):
            return True
        for operand in op.all_operands():
            users.setdefault(operand, []).append(op)
    return any(op.definition in (GROUP_ID, LOCAL_ID) and
               not all(_in_global_index(op, user, workgroupsize, users)
                       for user in users.get(op, []))
               for op in ops)


def _in_global_index(position: Op, user: Op, workgroupsize, users: dict) -> bool:
    """Whether `user` of a local or group id is part of `group_id * size + local_id`
    along the id's axis, with the work-group's size along it."""
    axis = position.attrs["axis"]
    if is_op(position, LOCAL_ID):
        return _global_index(user, axis, workgroupsize)
    if not is_op(user, MUL) or constant_value(_other(user, position)) != workgroupsize[axis]:
        return False
    return all(_global_index(add, axis, workgroupsize) for add in users.get(user, []))


def _global_index(add: Op, axis: int, workgroupsize) -> bool:
    if not is_op(add, ADD):
        return False
    local = [v for v in add.operands if is_op(v, LOCAL_ID)]
    product = [v for v in add.operands if is_op(v, MUL)]
    return len(local) == 1 and len(product) == 1 and local[0].attrs["axis"] == axis and \
        any(is_op(v, GROUP_ID) and v.attrs["axis"] == axis for v in product[0].operands) \
        and workgroupsize[axis] in [constant_value(v) for v in product[0].operands]


def _other(op: Op, value) -> object:
    first, second = op.operands
    return second if first is value else first
