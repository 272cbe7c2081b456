"""How many tape slots a work-item may need: the pushes of each block times how often
it can run, which is known at launch for loops counted up to a bound computed from
arguments, array shapes and constants.

Each block contributes its slots times the trip counts of the loops around it (its own
loop's header runs once more than the body). A loop whose trip count cannot be known
at launch (a `while` on data, a bound that depends on the work-item or on memory) is
counted as `max_iterations`, or the launch rule measures the launch (a run on copies of
the arrays the kernel writes, counting); the augmented kernel's counts tell whether the
tape was enough: an overflow is an error naming the loop, never a truncated tape."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernelkit.analysis.loops import counted_loop, natural_loops
from kernelkit.ir import types as T
from kernelkit.ir.definitions import COMPARISONS, CONST, DIM
from kernelkit.ir.fold import fold
from kernelkit.ir.function import Function
from kernelkit.ir.ops import Op, Value, constant_value, is_op

from .combined import MAX_PRIVATE_SLOTS
from .stacks import TapePlan


class NotAtLaunch(Exception):
    """The value depends on something a launch's arguments do not tell."""


@dataclass(frozen=True, eq=False)
class LoopBound:
    line: int
    file: str
    trip_count: object      # (arguments) -> int, or None when not known at launch

    def at(self, arguments, max_iterations: int) -> int:
        if self.trip_count is None:
            return max_iterations
        try:
            return self.trip_count(arguments)
        except NotAtLaunch:
            return max_iterations


@dataclass(frozen=True)
class TapeLayout:
    """The slots one work-item may use: `terms` are (floats, integers, loops, headers)
    where the block runs (trip + 1 for each loop in `headers`, trip for the others)."""
    kernel: str
    terms: tuple
    loops: tuple
    gather: bool = False    # a gather kernel runs before the reverse kernel (gather.py)
    # The shadows the gather kernel updates, as (primal position, whether it writes all
    # of it, reading none, where the ndrange is its shape: `plugin.gathered`), and the
    # arrays the kernel overwrites whole (outputs.py).
    gathered: tuple = ()
    whole_outputs: tuple = ()
    float_type: T.ScalarType = T.float64    # of the tape's float slots (`stacks.py`)
    # The augmented kernel is the primal kernel with tape parameters: it pushes nothing,
    # and no custom rule's forward function stands for a call. A launch may run the
    # primal kernel instead (its launcher's fast path, the program's own results).
    primal: bool = False

    def constant_slots(self) -> tuple[int, int] | None:
        """(float slots, integer slots) where no block that pushes runs in a loop (the
        same for every launch), else None."""
        if any(loops for _, _, loops, _ in self.terms):
            return None
        return (sum(floats for floats, _, _, _ in self.terms),
                sum(integers for _, integers, _, _ in self.terms))

    @property
    def combined(self) -> bool:
        """Whether one kernel does the primal and the reverse, with a private tape
        (`combined.py`)."""
        slots = self.constant_slots()
        return slots is not None and max(slots) <= MAX_PRIVATE_SLOTS

    def unknown_loops(self) -> list[LoopBound]:
        return [loop for loop in self.loops if loop.trip_count is None]

    def slots(self, arguments, max_iterations: int) -> tuple[int, int]:
        """(float slots, integer slots) for a launch with `arguments` (None: loops whose
        trip counts are not constants count as `max_iterations`)."""
        trips = {loop: loop.at(arguments, max_iterations) for loop in self.loops}
        floats = integers = 0
        for block_floats, block_integers, loops, headers in self.terms:
            runs = math.prod(trips[loop] + (loop in headers) for loop in loops)
            floats += block_floats * runs
            integers += block_integers * runs
        return floats, integers


def tape_layout(kernel: Function, plan: TapePlan) -> TapeLayout:
    loops = natural_loops(kernel)
    bounds = {header: LoopBound(header.ops[0].loc.line if header.ops[0].loc else 0,
                                kernel.source_file, _trip_count(kernel, header, body))
              for header, body in loops.items()}
    terms = []
    for block in kernel.reachable_blocks():
        floats, integers = plan.slots(block)
        if not floats and not integers:
            continue
        around = tuple(bounds[h] for h, body in loops.items() if block in body)
        headers = frozenset({bounds[block]}) if block in loops else frozenset()
        terms.append((floats, integers, around, headers))
    return TapeLayout(kernel.name, tuple(terms), tuple(bounds.values()))


_NORMALIZED = {("lt", True): "lt", ("le", True): "le", ("gt", True): "gt", ("ge", True): "ge",
               ("lt", False): "ge", ("le", False): "gt", ("gt", False): "le",
               ("ge", False): "lt"}
_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _trip_count(kernel: Function, header, body):
    counted = counted_loop(header, body)
    if counted is None:
        return None
    variable = counted.variable
    if not all(isinstance(v.type, T.ScalarType) and v.type.is_integer
               for v in (variable.counter, variable.start, variable.step, counted.bound)):
        return None    # a float counter or bound: measured, not worked out
    try:
        for value in (variable.start, variable.step, counted.bound):
            _host_value(kernel, value, None, check=True)
    except NotAtLaunch:
        return None
    name = next((n for n, d in COMPARISONS.items() if d is counted.comparison), None)
    if name not in _SWAPPED:
        return None
    if counted.bound_on_left:
        name = _SWAPPED[name]
    comparison = _NORMALIZED[(name, counted.continues_on_true)]

    def trip_count(arguments) -> int:
        start, step, bound = (int(_host_value(kernel, v, arguments)) for v in
                              (variable.start, variable.step, counted.bound))
        step = -step if variable.subtracts else step
        if comparison in ("lt", "le") and step > 0:
            span = bound - start + (comparison == "le")
            return max(0, -(-span // step))
        if comparison in ("gt", "ge") and step < 0:
            span = start - bound + (comparison == "ge")
            return max(0, -(-span // -step))
        raise NotAtLaunch   # a step away from the bound: only a break ends it
    return trip_count


def _host_value(kernel: Function, value: Value, arguments, check: bool = False):
    """`value` computed on the host from the launch's arguments (`arguments` None: from
    constants alone). With `check`, only whether it can be, from some arguments."""
    if value in kernel.params or is_op(value, DIM):
        param = value.operands[0] if is_op(value, DIM) else value
        if param not in kernel.params or \
                not isinstance(value.type, T.ScalarType) or is_op(param, DIM):
            raise NotAtLaunch
        if check:
            return None
        if arguments is None:
            raise NotAtLaunch
        argument = arguments[kernel.params.index(param)]
        return np.shape(argument)[value.attrs["axis"]] if is_op(value, DIM) else argument
    if is_op(value, CONST):
        return constant_value(value)
    if isinstance(value, Op) and value.definition.fold is not None and value.is_pure:
        operands = [_host_value(kernel, v, arguments, check) for v in value.operands]
        if check:
            return None
        result = fold(value.definition, operands, [v.type for v in value.operands], value.type)
        if result is None:
            raise NotAtLaunch
        return result
    raise NotAtLaunch
