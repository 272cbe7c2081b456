"""Keeps every work-item of a group in a loop until all of them are done with it, when
the loop's own exit condition is its only per-item difference (a grid-stride loop
`for p in range(i, n, stride)`, a `while` on a per-item value). A work-item that would
have left waits, its values unchanged, until a `barrier_any` says no work-item goes on;
then all leave together. The loop is then one all work-items run alike, which
loop-barriers can turn inside out on targets that run a group's work-items one after
another. Results are unchanged: a waiting work-item does nothing.

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
from ..ir.definitions import ADD, ARITHMETIC, BARRIER_ANY, BR, CBR, CONST, MUL, NOT
from ..ir.function import Block, Function, Module
from ..ir.ops import Op, Successor
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
    branch = header.ops.pop()
    condition = branch.operands[0]
    body, exit_ = branch.successors[inside], branch.successors[1 - inside]
    loc = branch.loc

    def op(definition, operands, type=T.void, block=header, successors=None, attrs=None):
        made = Op(definition, operands, type, attrs, successors, loc=loc)
        block.append(made)
        return made

    for block in function.blocks:
        for successor in block.terminator.successors if block.terminator else ():
            if successor.block is header:
                false = Op(CONST, [], T.bool_, {"value": False}, loc=loc)
                block.insert_before_terminator(false)
                successor.args = [*successor.args, false]
    params = list(header.params)
    done = header.add_param(T.bool_, "done")
    if inside == 1:
        condition = op(NOT, [condition], T.bool_)
    go = op(ARITHMETIC["and"], [op(NOT, [done], T.bool_), condition], T.bool_)
    any_go = op(BARRIER_ANY, [go], T.bool_)
    decide, guard = Block(), Block()
    for new in (guard, decide):
        new.function = function
        function.blocks.insert(function.blocks.index(header) + 1, new)
    op(BR, [], successors=[Successor(decide)])
    op(CBR, [any_go], block=decide, successors=[Successor(guard), exit_])
    true = op(CONST, [], T.bool_, block=guard, attrs={"value": True})
    skip = Successor(header, [*params, true])
    op(CBR, [go], block=guard, successors=[body, skip])
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
    loc = guard.terminator.loc
    iteration = header.add_param(p.type, "iteration")
    one = guard.insert_before_terminator(Op(CONST, [], p.type, {"value": 1}, loc=loc))
    following = guard.insert_before_terminator(Op(ADD, [iteration, one], p.type, loc=loc))
    for block, successor in edges:
        if successor is skip or block in body:
            successor.args = [*successor.args, following]
        else:
            zero = block.insert_before_terminator(Op(CONST, [], p.type, {"value": 0},
                                                     loc=loc))
            successor.args = [*successor.args, zero]
    offset = Op(MUL, [iteration, step], p.type, loc=loc)
    current = Op(ADD, [start, offset], p.type, loc=loc)
    for position, made in enumerate((offset, current)):
        made.block = header
        header.ops.insert(position, made)
    for op in function.ops():
        if op is not current:
            op.map_operands({p: current})
    remove_dead_code(function)  # the counter `p` itself, now that nothing reads it
