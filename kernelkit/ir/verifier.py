"""Checks the structural invariants of the IR. A failure is a compiler bug, not a user
error, so it raises `IRVerificationError` with the printed function attached."""
from __future__ import annotations

from .dominance import block_dominators, dominates
from .function import Function, Module
from .ops import Op, Value


class IRVerificationError(AssertionError):
    pass


def verify_module(module: Module) -> None:
    for function in module.functions.values():
        verify_function(function, module)


def verify_function(function: Function, module: Module | None = None) -> None:
    problems: list[str] = []
    defined: set[Value] = set()
    for block in function.blocks:
        defined.update(block.params)
        defined.update(block.ops)
    blocks = set(function.blocks)
    for index, block in enumerate(function.blocks):
        where = f"^bb{index}"
        if not block.ops or not block.ops[-1].is_terminator:
            problems.append(f"{where} does not end with a terminator")
        for position, op in enumerate(block.ops):
            if op.block is not block:
                problems.append(f"{where}: {op.opcode} does not know its block")
            if op.is_terminator and position != len(block.ops) - 1:
                problems.append(f"{where}: terminator {op.opcode} in the middle of the block")
            for operand in op.all_operands():
                if operand not in defined:
                    problems.append(f"{where}: {op.opcode} uses a value not defined in @{function.name}")
            for successor in op.successors:
                if successor.block not in blocks:
                    problems.append(f"{where}: {op.opcode} branches to a block of another function")
                elif [a.type for a in successor.args] != [p.type for p in successor.block.params]:
                    problems.append(f"{where}: {op.opcode} passes "
                                    f"({', '.join(a.type.name for a in successor.args)}) to a block "
                                    f"expecting ({', '.join(p.type.name for p in successor.block.params)})")
            problems.extend(f"{where}: {p}" for p in _check_types(op, function, module))
    if not problems:
        problems.extend(_check_dominance(function))
    if problems:
        from .printer import print_function
        raise IRVerificationError("invalid IR:\n  " + "\n  ".join(problems)
                                  + "\n" + print_function(function))


def _check_types(op: Op, function: Function, module: Module | None) -> list[str]:
    """What the op's definition says is wrong with it: operand count, attributes, the
    result type its rule gives, and its own checks."""
    definition = op.definition
    problem = definition.arity_problem(len(op.operands))
    if problem is not None:
        return [problem]
    missing = [name for name in definition.attributes if name not in op.attrs]
    if missing:
        return [f"{op.opcode} without the attribute{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}"]
    problems = list(definition.verify(op, module)) if definition.verify else []
    if not problems and definition.result is not None:
        expected = definition.result([v.type for v in op.operands], op.attrs)
        if expected is not None and expected != op.type:
            problems.append(f"{op.opcode} gives {op.type.name}; its operands make it "
                            f"{expected.name}")
    return problems


def _check_dominance(function: Function) -> list[str]:
    """Every use of a value is dominated by its definition: an earlier operation of the
    same block, a parameter of a dominating block, or an operation in one."""
    order = function.reachable_blocks()
    if not order:
        return []
    idom = block_dominators(function)
    position = {}
    home = {}
    for block in function.blocks:
        for param in block.params:
            home[param], position[param] = block, -1
        for index, op in enumerate(block.ops):
            home[op], position[op] = block, index

    problems = []
    names = {b: f"^bb{i}" for i, b in enumerate(function.blocks)}
    for block in order:
        for index, op in enumerate(block.ops):
            for operand in op.all_operands():
                where = home.get(operand)
                if where is None:
                    continue
                if where is block:
                    if position[operand] >= index:
                        problems.append(f"{names[block]}: {op.opcode} uses a value defined "
                                        "later in its block")
                elif not dominates(idom, where, block):
                    problems.append(f"{names[block]}: {op.opcode} uses a value from "
                                    f"{names[where]}, which does not dominate it")
    return problems
