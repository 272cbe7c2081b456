"""Inlines every device-function call into the kernel, so that the kernel is one
function (device functions may not recurse, so this terminates). A call through a
reference that `kk.deferred` made is a call of the referenced function. A function the
kernel still refers to afterwards (a `deferred` reference a plugin's marker holds) stays
in the module, with its own calls inlined too."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.definitions import BR, CALL, CALL_REF, DEFERRED, RET
from ..ir.function import Block, Function, Module
from ..ir.ops import Op, Successor, is_op
from ..ir.rewriter import Rewriter, clone_op
from .pipeline import register


@register
@dataclass(frozen=True, slots=True)
class Inline:
    name = "inline"

    def __call__(self, module: Module) -> None:
        kept = [module.kernel]
        for function in kept:
            inline_calls(function, module)
            for op in function.ops():
                if op.definition is DEFERRED:
                    referenced = module.functions[op.attrs["function"]]
                    if referenced not in kept:
                        kept.append(referenced)
        # Device functions are now part of the kernel.
        module.functions = {function.name: function for function in kept}


def inline_calls(function: Function, module: Module) -> None:
    """Every call in `function`, inlined (with the calls of what it inlines)."""
    while True:
        call = next((op for op in function.ops() if op.definition is CALL or
                     op.definition is CALL_REF and _direct_reference(op)), None)
        if call is None:
            return
        if call.definition is CALL_REF:
            call = _as_direct_call(call)
        inline_call(function, call, module.functions[call.attrs["callee"]])


def _direct_reference(call: Op) -> bool:
    """A call through a reference made right there by `deferred` (not one chosen at run
    time): it calls the referenced function."""
    reference = call.operands[0]
    return is_op(reference, DEFERRED)


def _as_direct_call(call: Op) -> Op:
    reference, *args = call.operands
    direct = Op(CALL, args, call.type, {"callee": reference.attrs["function"]}, loc=call.loc)
    Rewriter(call.block.function).replace_op(call, direct)
    return direct


def inline_call(caller: Function, call: Op, callee: Function) -> None:
    """The callee's blocks take the call's place: the caller's block branches into
    them, and their returns branch to a new block holding what followed the call."""
    rewriter = Rewriter(caller)
    block = call.block
    continuation = rewriter.split_block_after(call)
    if call.type.name != "void":
        rewriter.replace_all_uses(call, continuation.add_param(call.type))
    rewriter.erase(call)

    values = dict(zip(callee.params, call.operands))
    blocks = {}
    clones = []
    previous = block
    for callee_block in callee.blocks:
        clone = previous = rewriter.insert_block_after(previous, Block())
        blocks[callee_block] = clone
        clones.append(clone)
    for callee_block, clone in zip(callee.blocks, clones):
        if callee_block is not callee.entry:
            for param in callee_block.params:
                values[param] = clone.add_param(param.type, param.hint)
    for callee_block, clone in zip(callee.blocks, clones):
        for op in callee_block.ops:
            if op.definition is RET:
                clone.append(Op(BR, [], successors=[Successor(
                    continuation, [values.get(v, v) for v in op.operands])], loc=op.loc))
            else:
                clone.append(clone_op(op, values, blocks))
    # Values used before they were cloned (a use in a block laid out before its def).
    for clone in clones:
        for op in clone.ops:
            op.map_operands(values)
    rewriter.position_at_end(block)
    rewriter.loc = call.loc
    rewriter.br(clones[0])
