"""The tape as the derivative kernels see it: what the augmented forward kernel pushes
(`TapePlan`, decided while the reverse kernel is built), and the two stacks it pushes
onto and the reverse kernel pops from (`Stacks`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import CAST, DIM, LOAD, PRIVATE, STORE
from kernelkit.ir.function import Block, Function
from kernelkit.ir.ops import Value, is_op
from kernelkit.ir.rewriter import Rewriter

from ..signature import tape_float_type

FLOATS, INTEGERS = 0, 1   # the two stacks of the tape


@dataclass(frozen=True)
class CountedHeader:
    """A loop header the reverse kernel goes back through without popping an edge: its
    counter starts at `start` (the same everywhere in the kernel) and moves by the
    constant `step` each time round, so the reverse counts it back down and leaves the
    loop where it reaches `start`. Where the loop is left, the forward kernel pushes the
    counter's last value."""
    counter: object          # the header's parameter
    start: object
    step: int                # signed: the counter goes round as counter + step
    entry: tuple             # (predecessor, successor index) from outside the loop
    latch: tuple             # the edge round the loop
    body: frozenset


@dataclass
class TapePlan:
    """What the augmented forward kernel pushes, block by block, decided while the
    reverse kernel is built (which asks for the values)."""
    pushes: dict = field(default_factory=dict)        # block -> [values, in pop order]
    edge_numbers: dict = field(default_factory=dict)  # block -> [(pred, successor index)]
    exits: list = field(default_factory=list)          # blocks that return
    # Counted loops the reverse runs with a counter of its own: header -> CountedHeader;
    # and the blocks their exits lead to -> the headers whose counters they push.
    counted: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)

    @property
    def uses_tape(self) -> bool:
        return bool(self.edge_numbers) or len(self.exits) > 1 or bool(self.counters) or \
            any(self.pushes.values())

    @property
    def float_type(self) -> T.ScalarType:
        """The type of the tape's float slots (`signature.tape_float_type`)."""
        return tape_float_type(v.type for values in self.pushes.values() for v in values
                               if v.type.is_float)

    def slots(self, block: Block) -> tuple[int, int]:
        """(float slots, integer slots) one run of `block` pushes."""
        floats = sum(1 for v in self.pushes.get(block, ()) if v.type.is_float)
        integers = len(self.pushes.get(block, ())) - floats
        integers += len(self.edge_numbers.get(block, ())) > 1
        integers += len(self.exits) > 1 and block in self.exits
        integers += len(self.counters.get(block, ()))
        return floats, integers


class Stacks:
    """The tape's two stacks as a kernel sees them: a private cell per stack holding
    how many slots are in use, and the tape arrays indexed [slot, work-item]."""

    def __init__(self, b: Builder, entry: Block, tape: dict, work_item: Value):
        self.b, self.tape, self.work_item = b, tape, work_item
        b.position_at_end(entry)
        self.cell = b.op(PRIVATE, [], T.ArrayType(T.int64, 1, "C", space="private", shape=(2,)))
        self.arrays = (tape["tape_floats"], tape["tape_integers"])

    def index(self, stack: int) -> Value:
        return self.b.constant(stack, T.int64)

    def set_counts(self, floats: Value, integers: Value) -> None:
        b = self.b
        b.op(STORE, [self.cell, self.index(FLOATS), floats])
        b.op(STORE, [self.cell, self.index(INTEGERS), integers])

    def push(self, value: Value) -> None:
        b = self.b
        stack = FLOATS if value.type.is_float else INTEGERS
        array = self.arrays[stack]
        top = b.op(LOAD, [self.cell, self.index(stack)], T.int64)
        # Past the capacity the last slot is overwritten, and the count goes on: the
        # launch rule finds the overflow from the counts and reports it.
        capacity = b.op(DIM, [array], T.int64, {"axis": 0})
        slot = b.binary("min", top, b.binary("sub", capacity, b.constant(1, T.int64)))
        b.op(STORE, [array, slot, self.work_item, b.cast(value, array.type.dtype)])
        b.op(STORE, [self.cell, self.index(stack), b.binary("add", top, b.constant(1, T.int64))])

    def pop(self, value_type: T.ScalarType) -> Value:
        b = self.b
        stack = FLOATS if value_type.is_float else INTEGERS
        top = b.binary("sub", b.op(LOAD, [self.cell, self.index(stack)], T.int64),
                       b.constant(1, T.int64))
        b.op(STORE, [self.cell, self.index(stack), top])
        value = b.op(LOAD, [self.arrays[stack], top, self.work_item], self.arrays[stack].type.dtype)
        return b.cast(value, value_type)

    def counts(self) -> tuple[Value, Value]:
        b = self.b
        return tuple(b.op(LOAD, [self.cell, self.index(s)], T.int64) for s in (FLOATS, INTEGERS))


def narrow_float_tape(function: Function, float_type: T.ScalarType) -> None:
    """`function`'s float tape (built as float64) made of `float_type`, which holds every
    float it pushes or pops exactly: its stores convert the pushed value to it, its loads
    give it (and the conversions after them, to the popped value's type, remain)."""
    tape = function.params[function.arg_names.index("tape_floats")]
    if tape.type.dtype == float_type:
        return
    tape.type = T.ArrayType(float_type, 2, "C")
    rewriter = Rewriter(function)
    for op in list(function.ops()):
        if not op.operands or op.operands[0] is not tape:
            continue
        if op.definition is STORE:
            value = op.operands[-1]
            pushed = value.operands[0] if is_op(value, CAST) else value
            rewriter.position_before(op)
            op.operands[-1] = rewriter.cast(pushed, float_type)
        elif op.definition is LOAD:
            op.type = float_type
