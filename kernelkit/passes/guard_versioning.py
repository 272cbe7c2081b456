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
from ..ir.definitions import (ARITHMETIC, ASSUME, BR, CAST, CBR, COMPARISONS, CONST, DIM,
                              GROUP_ID, LOCAL_ID, NDRANGE, NOT, SELECT, UNARY)
from ..ir.function import Function, Module
from ..ir.ops import Op, Successor
from ..ir.rewriter import Rewriter, clone_function
from .dce import DeadCode
from .pipeline import register
from .simplify import Simplify

SUFFIX = ".interior"
# What a guard may be computed with: work-item positions, extents and cheap arithmetic.
INDEX_ARITHMETIC = {CONST, LOCAL_ID, GROUP_ID, NDRANGE, DIM, CAST, SELECT, UNARY["not"],
                    UNARY["neg"],
                    *(ARITHMETIC[name] for name in ("and", "or", "xor", "add", "sub", "mul",
                                                    "floordiv", "mod", "min", "max")),
                    *COMPARISONS.values()}


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
        if branch is None or branch.definition is not CBR or branch.operands[0] not in varying:
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
    rewriter = Rewriter(function)
    rewriter.position_before(branch)
    rewriter.loc = branch.loc
    condition = branch.operands[0]
    if taken == 1:
        condition = rewriter.op(NOT, [condition], condition.type)
    rewriter.op(ASSUME, [condition])
    successor = branch.successors[taken]
    rewriter.replace_op(branch, Op(BR, [], successors=[Successor(successor.block,
                                                                  successor.args)],
                                   loc=branch.loc))


def _computed_from_indices(value, function: Function) -> bool:
    stack, seen = [value], set()
    params = set(function.params)
    while stack:
        current = stack.pop()
        if current in seen or current in params:
            continue
        seen.add(current)
        if not isinstance(current, Op) or current.definition not in INDEX_ARITHMETIC:
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
