"""Checks the structural invariants of the IR. A failure is a compiler bug, not a user
error, so it raises `IRVerificationError` with the printed function attached."""
from __future__ import annotations

from ..analysis.dominance import block_dominators, dominates
from .function import Function, Module
from .ops import BINARY_OPS, COMPARE_OPS, Op, Value
from .types import ScalarType, bool_


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
    if op.opcode in BINARY_OPS:
        a, b = op.operands
        if op.opcode not in ("shl", "shr") and a.type != b.type:
            return [f"{op.opcode} of {a.type.name} and {b.type.name}"]
    elif op.opcode in COMPARE_OPS:
        if op.operands[0].type != op.operands[1].type or op.type != bool_:
            return [f"{op.opcode} compares {op.operands[0].type.name} with {op.operands[1].type.name}"]
    elif op.opcode == "cbr":
        if op.operands[0].type != bool_:
            return [f"cbr on a {op.operands[0].type.name}"]
    elif op.opcode == "ret":
        returned = op.operands[0].type.name if op.operands else "void"
        if returned != function.return_type.name:
            return [f"ret of {returned} in a function returning {function.return_type.name}"]
    elif op.opcode == "call" and module is not None:
        callee = module.functions.get(op.attrs["callee"])
        if callee is None:
            return [f"call to unknown function @{op.attrs['callee']}"]
        if [v.type for v in op.operands] != [p.type for p in callee.params]:
            return [f"call to @{callee.name} with wrong argument types"]
    elif op.opcode == "select":
        if op.operands[1].type != op.operands[2].type or not isinstance(op.type, ScalarType):
            return ["select of different types"]
    return []


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
