"""Makes a second version of a kernel for work-groups whose work-items all pass its
guards: a branch on a per-item condition computed from indices and arguments alone
(`if i < n:`) around a loop. In that version the branch is gone and an `assume %c`
operation records the condition instead; with no per-item branch left around it, the
loop is one all work-items run alike, which loop-barriers can turn inside out.

A target that uses this pass evaluates each `assume`d condition for every work-item of a
group before it runs the group, and runs the second version (named `<kernel>.interior`)
only if all of them hold; other groups run the kernel as written."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.loops import natural_loops
from ..analysis.uniformity import divergent_region, varying_values
from ..ir.function import Function, Module
from ..ir.ops import Op, Successor
from .dce import DeadCode
from .pipeline import register
from .simplify import Simplify
from .uses import clone_function

SUFFIX = ".interior"
_COMPUTED = {"const", "local_id", "group_id", "ndrange", "dim", "cast", "select", "and", "or",
             "xor", "not", "add", "sub", "mul", "floordiv", "mod", "min", "max", "neg",
             "eq", "ne", "lt", "le", "gt", "ge"}


@register
@dataclass(frozen=True, slots=True)
class GuardVersioning:
    name = "guard-versioning"

    def __call__(self, module: Module) -> None:
        kernel = module.kernel
        if guard_to_assume(kernel) is None:
            return
        interior = clone_function(kernel, kernel.name + SUFFIX)
        while (guard := guard_to_assume(interior)) is not None:
            assume_guard(interior, *guard)
        versions = Module({interior.name: interior})
        Simplify()(versions)
        DeadCode()(versions)
        module.functions[interior.name] = interior


def guard_to_assume(function: Function) -> tuple[Op, int] | None:
    """The first branch on a per-item condition made of index arithmetic, with a loop on
    one side only: (the branch, the index of the successor that leads to the loop)."""
    varying = varying_values(function)
    divergent = divergent_region(function, varying)
    headers = [h for h in natural_loops(function) if h in divergent]
    if not headers:
        return None
    for block in function.blocks:
        branch = block.terminator
        if branch is None or branch.opcode != "cbr" or branch.operands[0] not in varying:
            continue
        if not _computed_from_indices(branch.operands[0], function):
            continue
        sides = [_reachable(s.block) for s in branch.successors]
        for index, side in enumerate(sides):
            if any(h in side for h in headers) and not any(h in sides[1 - index]
                                                          for h in headers):
                return branch, index
    return None


def assume_guard(function: Function, branch: Op, taken: int) -> None:
    """Replace `cbr %c, A, B` by `assume %c; br A` (or `assume !%c; br B`)."""
    block = branch.block
    condition = branch.operands[0]
    position = block.ops.index(branch)
    if taken == 1:
        condition = Op("not", [condition], condition.type, loc=branch.loc)
        condition.block = block
        block.ops.insert(position, condition)
        position += 1
    assume = Op("assume", [condition], loc=branch.loc)
    assume.block = block
    successor = branch.successors[taken]
    jump = Op("br", [], successors=[Successor(successor.block, successor.args)], loc=branch.loc)
    jump.block = block
    block.ops[position:] = [assume, jump]


def _computed_from_indices(value, function: Function) -> bool:
    stack, seen = [value], set()
    params = set(function.params)
    while stack:
        current = stack.pop()
        if current in seen or current in params:
            continue
        seen.add(current)
        if not isinstance(current, Op) or current.opcode not in _COMPUTED:
            return False
        stack.extend(current.operands)
    return True


def _reachable(start) -> set:
    seen, stack = {start}, [start]
    while stack:
        for successor in stack.pop().successors:
            if successor not in seen:
                seen.add(successor)
                stack.append(successor)
    return seen
