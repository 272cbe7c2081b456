"""Which values differ between the work-items of a group (varying) and which are the same
for all (uniform), and which blocks only some work-items of a group reach (the divergent
region: the blocks between a branch on a varying value and the point where its paths
join again)."""
from __future__ import annotations

from ..ir import types as T
from ..ir.definitions import CBR, LOAD, Trait
from ..ir.function import Block, Function
from ..ir.ops import Value
from .dominance import post_dominators
from .loops import natural_loops



def varying_values(function: Function, assumed: frozenset = frozenset()) -> set[Value]:
    """A conservative set: everything not shown to be uniform (`assumed` are taken to be
    varying from the start)."""
    varying: set[Value] = set(assumed)
    divergent_blocks = set()
    ipdom = post_dominators(function)
    regions: dict = {}   # branch block -> its region; the graph does not change here
    loops = [(body, _used_outside(body)) for body in natural_loops(function).values()]
    incoming: dict = {}
    for block in function.blocks:
        for successor in block.terminator.successors if block.terminator else ():
            for param, arg in zip(successor.block.params, successor.args):
                incoming.setdefault(param, []).append((block, arg))
    changed = True
    while changed:
        changed = False
        for block in function.blocks:
            for op in block.ops:
                traits = op.definition.traits
                if op in varying or Trait.GROUP_UNIFORM in traits:
                    continue
                if Trait.PER_WORK_ITEM in traits or any(v in varying for v in op.operands):
                    varying.add(op)
                    changed = True
        for param, edges in incoming.items():
            if param in varying:
                continue
            # Work-items that reach a block by paths a per-item branch chose between hold
            # different values, unless every such path passes the same uniform value.
            # (Edges no per-item branch chose are taken by all work-items at once.)
            chosen = {arg for block, arg in edges
                      if block in divergent_blocks or _branches_on(block, varying)}
            if any(arg in varying for _, arg in edges) or len(chosen) > 1:
                varying.add(param)
                changed = True
        new_divergent = divergent_region(function, varying, ipdom, regions)
        if new_divergent != divergent_blocks:
            divergent_blocks = new_divergent
            changed = True
        # A loop that work-items leave at different iterations: after it, a value it
        # computes holds each work-item's own last iteration's value (however uniform it
        # is within an iteration).
        for body, used_outside in loops:
            if not used_outside <= varying and _leaves_divergently(body, varying, ipdom,
                                                                    regions):
                varying |= used_outside
                changed = True
    return varying


def _used_outside(body: set[Block]) -> set[Value]:
    """The values a loop defines that may differ from one iteration to the next and that
    code outside it reads (directly, or as what an edge out of the loop passes)."""
    defined = _changing_in_loop(body)
    used = set()
    for block in next(iter(body)).function.blocks:
        for op in block.ops:
            if block not in body:
                used.update(v for v in op.operands if v in defined)
            for successor in op.successors:
                if block not in body or successor.block not in body:
                    used.update(v for v in successor.args if v in defined)
    return used


def _changing_in_loop(body: set[Block]) -> set[Value]:
    """The loop's block parameters, its impure operations, and what is computed from
    them: everything else it defines (constants, arithmetic on values from before the
    loop, a read of a Const array, which nothing writes during the launch, at an index
    that does not change) is the same in every iteration."""
    changing = {param for block in body for param in block.params}
    ops = [op for block in body for op in block.ops if not op.is_terminator]
    changing.update(op for op in ops if not op.is_pure and not _reads_const_array(op))
    grew = True
    while grew:
        grew = False
        for op in ops:
            if op not in changing and any(v in changing for v in op.operands):
                changing.add(op)
                grew = True
    return changing


def _reads_const_array(op) -> bool:
    array = op.operands[0].type if op.definition is LOAD else None
    return isinstance(array, T.ArrayType) and array.const


def _leaves_divergently(body: set[Block], varying: set, ipdom: dict, regions: dict) -> bool:
    """Whether work-items may leave the loop at different iterations: a branch on a
    varying condition inside it is, or leads before its paths join to, a way out."""
    exiting = {block for block in body if any(s not in body for s in block.successors)}
    for block in body:
        if not _branches_on(block, varying):
            continue
        if block in exiting or _region_of(block, ipdom, regions) & exiting:
            return True
    return False


def _branches_on(block: Block, varying: set) -> bool:
    terminator = block.terminator
    return terminator.definition is CBR and terminator.operands[0] in varying


def divergent_region(function: Function, varying: set[Value], ipdom: dict | None = None,
                     regions: dict | None = None) -> set[Block]:
    """Blocks that only some work-items of a group may reach: those between a branch on
    a varying condition and the point where its paths join again (`regions` keeps each
    branch's blocks for the next call on the same graph)."""
    ipdom = post_dominators(function) if ipdom is None else ipdom
    regions = {} if regions is None else regions
    region: set[Block] = set()
    for block in function.blocks:
        if _branches_on(block, varying):
            region |= _region_of(block, ipdom, regions)
    return region


def _region_of(block: Block, ipdom: dict, regions: dict) -> set[Block]:
    if block not in regions:
        regions[block] = branch_region(block, ipdom)
    return regions[block]


def branch_region(block: Block, ipdom: dict) -> set[Block]:
    """The blocks between the branch ending `block` and the point where its paths join."""
    join = ipdom.get(block)
    region: set[Block] = set()
    stack = list(block.successors)
    while stack:
        current = stack.pop()
        if current is join or current in region:
            continue
        region.add(current)
        stack.extend(current.successors)
    return region
