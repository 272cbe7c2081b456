"""Keeps every work-item of a group in a loop until all of them are done with it, when
the loop's own exit condition is its only per-item difference (a grid-stride loop
`for p in range(i, n, stride)`, a `while` on a per-item value). A work-item that would
have left waits, its values unchanged, until a `barrier_any` says no work-item goes on;
then all leave together. The loop is then one all work-items run alike, each trip
starting at the vote: on a target that runs a group's work-items one after another, a
trip is one pass over the group (loop-barriers adds no barrier of its own to it).
Results are unchanged: a waiting work-item does nothing.

    H(x...): ...; cbr %c, ^body(a...), ^exit(b...)
becomes
    H(x..., %done): ...; %go = and(not %done, %c); %any = barrier_any %go; br ^H2
    H2: cbr %any, ^guard, ^exit(b...)
    guard: cbr %go, ^body(a...), H(x..., true)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.loops import induction_variable, natural_loops
from ..analysis.uniformity import divergent_region, varying_values
from ..ir import types as T
from ..ir.definitions import ADD, ARITHMETIC, BARRIER_ANY, CBR, CONST, MUL, NOT
from ..ir.function import Block, Function, Module
from ..ir.ops import Successor
from ..ir.rewriter import Rewriter
from .dce import remove_dead_code
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class MaskedLoops:
    name = "masked-loops"

    def __call__(self, module: Module) -> None:
        for function in module.functions.values():
            if function.is_kernel:
                while (loop := next_loop_to_mask(function)) is not None:
                    mask_loop(function, *loop)


def next_loop_to_mask(function: Function):
    """(header, inside successor index) of a loop whose header exits on a per-item
    condition and that is otherwise reached alike by all work-items; None if none."""
    varying = varying_values(function)
    for header, body in natural_loops(function).items():
        branch = header.terminator
        if branch.definition is not CBR or branch.operands[0] not in varying:
            continue
        inside = [s.block in body for s in branch.successors]
        if inside.count(True) != 1:
            continue
        if any(s not in body for block in body if block is not header
               for s in block.successors):
            continue  # another way out (break, return)
        if any(not op.definition.removable_when_unused for op in header.ops[:-1]):
            continue  # the header runs again for waiting work-items
        if header in divergent_region(function, varying - {branch.operands[0]}):
            continue  # not every work-item reaches the loop
        return header, inside.index(True)
    return None


def mask_loop(function: Function, header: Block, inside: int) -> None:
    branch = header.terminator
    condition = branch.operands[0]
    body, exit_ = branch.successors[inside], branch.successors[1 - inside]
    rewriter = Rewriter(function)
    rewriter.loc = branch.loc
    rewriter.erase(branch)
    for block in function.blocks:
        for successor in block.terminator.successors if block.terminator else ():
            if successor.block is header:
                rewriter.position_before_terminator(block)
                false = rewriter.op(CONST, [], T.bool_, {"value": False})
                successor.args = [*successor.args, false]
    params = list(header.params)
    done = header.add_param(T.bool_, "done")
    rewriter.position_at_end(header)
    if inside == 1:
        condition = rewriter.op(NOT, [condition], T.bool_)
    go = rewriter.op(ARITHMETIC["and"], [rewriter.op(NOT, [done], T.bool_), condition], T.bool_)
    any_go = rewriter.op(BARRIER_ANY, [go], T.bool_)
    guard = rewriter.insert_block_after(header, Block())
    decide = rewriter.insert_block_after(header, Block())
    rewriter.br(decide)
    rewriter.position_at_end(decide)
    rewriter.op(CBR, [any_go], successors=[Successor(guard), exit_])
    rewriter.position_at_end(guard)
    true = rewriter.op(CONST, [], T.bool_, {"value": True})
    skip = Successor(header, [*params, true])
    rewriter.op(CBR, [go], successors=[body, skip])
    count_iterations(function, header, guard, skip, params)


def count_iterations(function: Function, header: Block, guard: Block, skip: Successor,
                     params: list) -> None:
    """Counters `p` that start at `s` and step by a uniform `d` (`for p in range(i, n,
    stride)`) are recomputed from one counter `q` of iterations that all work-items share:
    p = s + q * d. Neighbouring work-items' `p` then differ by their starts alone (their
    accesses `x[p]` are neighbours in memory), and waiting work-items need no `p` of
    their own. A counter that the code after the loop reads (or a value made from it) is
    left as it is: for a waiting work-item it would have moved on."""
    body = natural_loops(function)[header]
    varying = varying_values(function)
    edges = [(block, successor) for block in function.blocks if block.terminator
             for successor in block.terminator.successors if successor.block is header]
    for p in params:
        variable = induction_variable(header, body, p, excluded=(skip,))
        if variable is None or variable.subtracts or variable.step in varying or \
                _made_in(variable.step, body) or \
                any(_used_outside(v, body) for v in _derived_from(p, body)):
            continue
        _recompute_from_iterations(function, header, guard, body, edges, skip, p,
                                   variable.start, variable.step)
        return  # one shared counter per loop is enough


def _made_in(value, body) -> bool:
    """Whether the loop defines `value` (the header could not use it)."""
    return getattr(value, "block", None) in body


def _derived_from(value, body) -> set:
    """`value` and every value the loop computes from it."""
    derived, changed = {value}, True
    while changed:
        changed = False
        for block in body:
            for op in block.ops:
                if op not in derived and any(v in derived for v in op.operands):
                    derived.add(op)
                    changed = True
    return derived


def _used_outside(value, body) -> bool:
    function = next(iter(body)).function
    for block in function.blocks:
        for op in block.ops:
            uses = list(op.operands) + [a for s in op.successors for a in s.args]
            if value in uses and block not in body:
                return True
            if block in body and op.is_terminator and any(
                    value in s.args for s in op.successors if s.block not in body):
                return True
    return False


def _recompute_from_iterations(function, header, guard, body, edges, skip, p, start, step):
    rewriter = Rewriter(function)
    rewriter.loc = guard.terminator.loc
    iteration = header.add_param(p.type, "iteration")
    rewriter.position_before_terminator(guard)
    one = rewriter.op(CONST, [], p.type, {"value": 1})
    following = rewriter.op(ADD, [iteration, one], p.type)
    for block, successor in edges:
        if successor is skip or block in body:
            successor.args = [*successor.args, following]
        else:
            rewriter.position_before_terminator(block)
            zero = rewriter.op(CONST, [], p.type, {"value": 0})
            successor.args = [*successor.args, zero]
    rewriter.position_before(header.ops[0])
    offset = rewriter.op(MUL, [iteration, step], p.type)
    current = rewriter.op(ADD, [start, offset], p.type)
    rewriter.replace_all_uses(p, current)
    remove_dead_code(function)  # the counter `p` itself, now that nothing reads it
