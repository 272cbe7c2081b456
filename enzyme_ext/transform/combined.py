"""One kernel where one is enough: each work-item runs the augmented forward code, then
its reverse, with its tape in private memory.

Reverse mode is two kernels, the augmented forward and the reverse, with a tape in
global memory between them. But the reverse of a work-item reads only its own tape, its
shadows, and what it recomputes from constants, positions and arrays the kernel never
writes: nothing that other work-items' primal parts change. So one kernel can do both,
work-item by work-item, as Enzyme's combined mode does: one pass over the arrays and one
launch instead of two, what both halves compute (`sin(x)` in `sin(x) * x`) computed once,
and the tape, when its size is a constant (no block that pushes runs in a loop), a
private array that the optimizer turns into registers: the branch a guard took, the value
an element held before it was overwritten, never leave the work-item. A gather kernel
(the neighbours' shadow updates, transposed) runs before it, as it runs before the
reverse kernel: it reads only shadows and what it recomputes. Tapes that grow with loops
stay in the two kernels, whose launch rule sizes, measures and checks them."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import CALL, LOAD, PRIVATE, STORE
from kernelkit.ir.function import Block, Function
from kernelkit.passes.inline import inline_call

from ..signature import COMBINED, Parameter, tape_fields

MAX_PRIVATE_SLOTS = 64
"""The most float or integer slots a combined kernel's private tape may have."""


def combined_kernel(kernel: Function, augmented: Function, reverse: Function,
                    slots: tuple[int, int], float_type: T.ScalarType,
                    parts: list[list[Parameter]], parameters: list[Parameter]) -> Function:
    """The kernel that runs `augmented` and then `reverse` (with `parts`: their
    parameters) in each work-item, with `parameters` (the reverse kernel's, without the
    tape) and a private tape of `slots` (floats of `float_type`, integers)."""
    combined = Function(f"{kernel.name}.{COMBINED}", [p.name for p in parameters],
                        is_kernel=True, source_file=kernel.source_file)
    entry = combined.add_block(Block(tuple(p.type for p in parameters)))
    for parameter, value in zip(parameters, entry.params):
        value.hint = parameter.name
    own = {(p.role, p.index): value for p, value in zip(parameters, entry.params)}
    b = Builder(combined)
    b.position_at_end(entry)
    b.loc = kernel.entry.ops[0].loc if kernel.entry.ops else None
    tape = {}
    for (field, dtype), count in zip(tape_fields(float_type), (*slots, 2)):
        tape[field] = b.op(PRIVATE, [], T.ArrayType(dtype, 2, "C", space="private",
                                                    shape=(max(count, 1), 1)))
    calls = [b.op(CALL, [tape[p.field] if p.role == "tape" else own[(p.role, p.index)]
                         for p in its_parameters], T.void, {"callee": function.name})
             for function, its_parameters in zip((augmented, reverse), parts)]
    b.ret()
    for call, function in zip(calls, (augmented, reverse)):
        inline_call(combined, call, function)
    # The tape is the work-item's own: its one column, whichever work-item it is.
    b.position_before(entry.ops[0])
    column = b.constant(0, T.int64)
    arrays = set(tape.values())
    for op in combined.ops():
        if op.definition in (LOAD, STORE) and op.operands[0] in arrays:
            op.operands[2] = column
    return combined
