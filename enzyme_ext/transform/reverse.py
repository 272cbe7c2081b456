"""Reverse mode: the augmented forward kernel and the reverse kernel, from one analysis.

The augmented forward kernel is the primal with pushes onto a per-work-item tape; the
reverse kernel pops them in the opposite order. The tape is a stack: whatever the
control flow (loops with any trip count, `break`, `continue`, early `return`), the
reverse kernel replays the forward path backwards.

- Control flow. A block with several predecessors pushes which edge entered it (an
  extra block parameter carries the edge's number); the reverse of the block pops it
  and goes back along that edge. A kernel with several `ret`s pushes which one it left
  by. Each primal block B has a reverse block B': its header pops what B pushed and
  recomputes what it can, its body runs the derivative rules of B's operations in
  reverse order, and its end hands the adjoints of B's parameters to the arguments of
  the edge it goes back along.
- Values. A reverse rule asks for a primal value (`Reverse.primal`). Constants and
  parameters are at hand; values the kernel's entry computes from them, the work-item
  position and arrays it never writes are recomputed once at the start of the reverse
  kernel; other values B computes that way are recomputed in B's header; everything
  else (loop-carried values, loads from arrays the kernel writes, atomics' results,
  values from other blocks) is pushed at the end of B and popped in B's header. So
  only what cannot be recomputed is taped, and `Const` arrays are re-read.
- Adjoints. An adjoint that stays in one block is an SSA value of its reverse block;
  one that crosses blocks (loop-carried values, branch arguments, kernel parameters)
  lives in a private cell, zeroed when its value's definition is reversed, so each
  iteration's value starts from zero.
- Memory. A load from a differentiated array adds the adjoint to the shadow (atomically
  unless each work-item reads its own element; an element the whole group reads, of an
  array the kernel never writes, is summed over the group first, one atomic per group);
  a store reads the shadow and zeroes it; `atomic_add` reads it. Other atomics on
  differentiated floats are an error.
- Barriers reverse to barriers, in the same place in the same uniform control flow;
  a subgroup operation to its transpose (`derivatives.SUBGROUP_TRANSPOSES`), subgroup
  operations in the same place."""
from __future__ import annotations

from collections.abc import Sequence

from kernelkit.analysis.dominance import dominates, immediate_dominators
from kernelkit.analysis.loops import counted_loop, natural_loops
from kernelkit.analysis.uniformity import varying_values
from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (ASSUME, ATOMICS, BARRIER, BARRIER_ANY, CBR, COMPARISONS,
                                      CONST,
                                      LOAD, LOCAL_ID, LOCALMEM, PRINT, PRIVATE, RET, STORE,
                                      Trait)
from kernelkit.ir.function import Block, Function, Module
from kernelkit.ir.ops import Op, Value, constant_value, is_op
from kernelkit.passes.inline import inline_call

from ..custom import VJP_MARKER
from ..signature import AUGMENTED, REVERSE, derivative_parameters
from .activity import ActivityAnalysis, analyze, array_root, source_error
from .augmented import augmented_kernel
from .custom import (NO_DERIVATIVE, VJP_RESULT, expand_vjp, is_marker, markers,
                     refuse_jvp_in_reverse)
from .derivatives import PARTIALS, SUBGROUP_TRANSPOSES, times
from .group_sum import GroupSum
from .restore import Restorer
from .positions import (linear_group, linear_local_item, linear_work_item, own_element,
                        unflatten)
from .stacks import FLOATS, INTEGERS, CountedHeader, Stacks, TapePlan


def reverse_kernels(kernel: Function, activities: list[str], shadows: list, workgroupsize,
                    module: Module, subgroups_in_hardware: bool = False,
                    finite_scalars: bool = False) -> tuple[Function, Function, TapePlan]:
    """(the augmented forward kernel, the reverse kernel, the tape plan); the group sums
    of the reverse kernel built for a target with subgroups in hardware or not
    (`group_sum.py`); with `finite_scalars`, the reverse kernel of launches whose float
    scalar arguments are all finite (`derivatives.scaled`)."""
    activity = analyze(kernel, activities)
    refuse_jvp_in_reverse(kernel, activity.values.__contains__)
    if markers(kernel, VJP_MARKER):
        expand_vjp(module, kernel, activity.values.__contains__)
        activity = analyze(kernel, activities)
    names, types = list(kernel.arg_names), [p.type for p in kernel.params]
    reverse = Reverse(kernel, activity, derivative_parameters(REVERSE, activities, names,
                                                              types, shadows),
                      tuple(workgroupsize), module, subgroups_in_hardware, finite_scalars)
    reverse.build()
    for call in reverse.calls:
        inline_call(reverse.function, call, module.functions[call.attrs["callee"]])
    augmented = augmented_kernel(kernel, reverse.plan, derivative_parameters(
        AUGMENTED, activities, names, types, shadows), tuple(workgroupsize))
    return augmented, reverse.function, reverse.plan


class Reverse:
    def __init__(self, kernel: Function, activity: ActivityAnalysis, parameters, workgroupsize,
                 module: Module, subgroups_in_hardware: bool = False,
                 finite_scalars: bool = False):
        self.kernel = kernel
        self.module = module
        self.activity = activity
        self.workgroupsize = workgroupsize
        self.subgroups_in_hardware = subgroups_in_hardware   # how groups sum (`GroupSum`)
        self.function = Function(f"{kernel.name}.{REVERSE}", [p.name for p in parameters],
                                 is_kernel=True, source_file=kernel.source_file)
        entry = self.function.add_block(Block(tuple(p.type for p in parameters)))
        self.b = Builder(self.function)
        self.params = {}     # primal parameter -> the reverse kernel's
        self.extra = {}      # (role, index or field) -> parameter
        for parameter, value in zip(parameters, entry.params):
            value.hint = parameter.name
            if parameter.role == "primal":
                self.params[kernel.params[parameter.index]] = value
            else:
                self.extra[(parameter.role, parameter.field or parameter.index)] = value
        self.shadows = {kernel.params[index]: value for (role, index), value in
                        self.extra.items() if role == "shadow"}
        # The float scalar parameters, where the launches are those whose float scalar
        # arguments are all finite: partials that need no strong-zero test.
        self.finite = frozenset(value for param, value in self.params.items()
                                if finite_scalars and _float_scalar(param.type))
        self.plan = TapePlan()
        self.order = kernel.reachable_blocks()
        predecessors = {block: [] for block in self.order}
        for block in self.order:
            for position, successor in enumerate(block.terminator.successors):
                predecessors[successor.block].append((block, position))
        self.predecessors = predecessors
        self.plan.exits = [block for block in self.order if block.terminator.definition is RET]
        self.computed_counters: dict = {}   # exit block -> [(header, builds its counter)]
        self.globals_known: dict[Value, bool] = {}    # `is_global`'s answers
        self.find_counted_loops()
        self.decided_edges = self.find_decided_edges()
        self.plan.edge_numbers = {block: edges for block, edges in predecessors.items()
                                  if len(edges) > 1 and block not in self.plan.counted
                                  and block not in self.decided_edges}
        self.local_adjoints = self.find_local_values()
        self.cells: dict[T.ScalarType, Op] = {}
        self.slots: dict[Value, tuple[Op, int]] = {}
        self.adjoints: dict[Value, Value] = {}      # SSA adjoints in the current block
        self.available: dict[Value, Value] = {}     # primal values in the current block
        self.global_values: dict[Value, Value] = {}
        self.stacks: Stacks | None = None
        self.calls: list[Op] = []         # of custom rules' backward functions
        self.counter_cell: Op | None = None   # the counted loops' counters, by header
        self.exclusive_shadows: dict = {}     # array -> whether its shadow needs no atomics
        self.restorer = Restorer(self, kernel, activity.written, workgroupsize)
        self.zeroed: dict[Op, tuple] = {}     # stores of 0 into a shadow -> (shadow, indices)
        self.varying: set | None = None       # the kernel's values that differ in a group
        # (array, its indices) -> (cell, shadow, indices): `read_by_the_whole_group`
        self.shared_elements: dict[tuple, tuple] = {}

    def find_counted_loops(self) -> None:
        """The loops the reverse runs with a counter of its own (`CountedHeader`): one
        edge in, one edge round, a constant step, a start the same everywhere, and every
        block they exit to entered only from the loop."""
        idom = immediate_dominators(self.order, {b: [p for p, _ in edges] for b, edges in
                                                 self.predecessors.items()})
        for header, body in natural_loops(self.kernel).items():
            counted = counted_loop(header, body)
            edges = self.predecessors[header]
            if counted is None or len(edges) != 2:
                continue
            inside = [edge for edge in edges if edge[0] in body]
            outside = [edge for edge in edges if edge[0] not in body]
            variable = counted.variable
            step = constant_value(variable.step)
            if len(inside) != 1 or len(outside) != 1 or not isinstance(step, int) or \
                    step == 0 or isinstance(step, bool) or not self.is_global(variable.start):
                continue
            exits = {s.block for block in body for s in block.terminator.successors
                     if s.block not in body}
            if not all(dominates(idom, header, e) and
                       all(p in body for p, _ in self.predecessors[e]) for e in exits):
                continue
            loop = self.plan.counted[header] = CountedHeader(
                variable.counter, variable.start, -step if variable.subtracts else step,
                outside[0], inside[0], frozenset(body))
            last = self.last_counter(counted, loop.step)
            for exit_block in sorted(exits, key=self.order.index):
                # Left by its condition, the loop ends where the count says; by a `break`,
                # anywhere.
                if last is None or any(p is not header for p, _ in
                                       self.predecessors[exit_block]):
                    self.plan.counters.setdefault(exit_block, []).append(header)
                else:
                    self.computed_counters.setdefault(exit_block, []).append((header, last))

    def find_decided_edges(self) -> dict:
        """Join blocks whose reverse works out which way the forward came in instead of
        popping it: two edges in, told apart by a branch on a value the same everywhere
        in the kernel (a guard on the work-item's position, `if 0 < i < n - 1:`), each
        edge reached through one side of that branch only. block -> (the condition, the
        edge taken where it holds, the other). A kernel whose only records were such
        choices tapes nothing."""
        idom = immediate_dominators(self.order, {b: [p for p, _ in edges] for b, edges in
                                                 self.predecessors.items()})
        found = {}
        for block, edges in self.predecessors.items():
            decider = idom.get(block)
            if len(edges) != 2 or block in self.plan.counted or decider is None:
                continue
            branch = decider.terminator
            if branch.definition is not CBR or not self.is_global(branch.operands[0]):
                continue
            sides = [self.side_of(edge, decider, branch, idom) for edge in edges]
            if sorted(sides, key=str) != [0, 1]:
                continue
            found[block] = (branch.operands[0], edges[sides.index(0)], edges[sides.index(1)])
        return found

    def side_of(self, edge, decider: Block, branch: Op, idom) -> int | None:
        """Which successor of `decider`'s branch (0 where the condition holds) every path
        along `edge` went through, or None."""
        predecessor, position = edge
        if predecessor is decider:
            return position
        for index, successor in enumerate(branch.successors):
            start = successor.block
            if len(self.predecessors[start]) == 1 and dominates(idom, start, predecessor):
                return index
        return None

    def last_counter(self, counted, step: int):
        """How to compute, in the reverse kernel, the value a counted loop's counter has
        when the loop is left, where its start and bound are the same everywhere in the
        kernel and it counts up to (or down to) its bound: `range(start, bound, step)` is
        left at `start + trips * step`. Then the forward kernel pushes nothing for it (a
        tiled kernel's loops over its tiles taped a counter per tile). None otherwise."""
        variable = counted.variable
        name = next(n for n, d in COMPARISONS.items() if d is counted.comparison)
        if counted.bound_on_left:
            name = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(name)
        if not counted.continues_on_true:
            name = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}.get(name)
        if (name not in ("lt", "le") or step <= 0) and (name not in ("gt", "ge") or step >= 0):
            return None
        if not all(isinstance(v.type, T.ScalarType) and v.type.is_integer and
                   not v.type.is_bool and self.is_global(v)
                   for v in (variable.start, counted.bound)):
            return None
        inclusive = name in ("le", "ge")

        def build() -> Value:
            b = self.b
            start, bound = (b.cast(self.primal(v), T.int64)
                            for v in (variable.start, counted.bound))
            distance = b.binary("sub", bound, start) if step > 0 else \
                b.binary("sub", start, bound)
            stride = b.constant(abs(step), T.int64)
            zero, one = b.constant(0, T.int64), b.constant(1, T.int64)
            if inclusive:    # trips = distance // stride + 1 where distance >= 0
                trips = b.binary("add", b.binary("floordiv", distance, stride), one)
                runs = b.compare("ge", distance, zero)
            else:            # trips = ceil(distance / stride) where distance > 0
                trips = b.binary("floordiv", b.binary("add", distance, b.binary(
                    "sub", stride, one)), stride)
                runs = b.compare("gt", distance, zero)
            trips = b.select(runs, trips, zero)
            last = b.binary("add", start, b.binary("mul", trips, b.constant(step, T.int64)))
            # As the primal's counter holds it (wrapped to its type), then as the cell does.
            return b.cast(b.cast(last, variable.counter.type), T.int64)
        return build

    def find_local_values(self) -> set:
        """Op results defined and used in one block, never as a branch argument: their
        adjoints stay SSA values of that block's reverse."""
        users: dict = {}
        for block in self.order:
            for op in block.ops:
                for operand in op.all_operands():
                    users.setdefault(operand, []).append(op)
        local = set()
        for block in self.order:
            for op in block.ops:
                uses = users.get(op, [])
                if all(use.block is block and not use.is_terminator for use in uses):
                    local.add(op)
        return local

    # -- building -----------------------------------------------------------------------

    def build(self) -> None:
        b, function = self.b, self.function
        entry = function.entry
        b.position_at_end(entry)
        self.work_item = linear_work_item(b, self.workgroupsize)
        if self.plan.counted:
            self.counter_cell = b.op(PRIVATE, [], T.ArrayType(
                T.int64, 1, "C", space="private", shape=(len(self.plan.counted),)))
        self.allocate_shadows()
        self.prologue = b.new_block()
        self.headers = {block: b.new_block() for block in self.order}
        self.bodies = {block: b.new_block() for block in self.order}
        self.epilogue = b.new_block()
        start = b.new_block()
        for block in reversed(self.order):
            self.reverse_block(block)
        # Where the reverse begins: at the reverse of the block the forward left by.
        b.position_at_end(start)
        self.dispatch(self.plan.exits, lambda exit_block: self.headers[exit_block],
                      lambda exit_block: None)
        # The epilogue: each Active scalar's adjoints summed over the group, and so is
        # each element every work-item of the group reads (added to its shadow once).
        b.position_at_end(self.epilogue)
        partials = [(self.kernel.params[index], array) for (role, index), array
                    in self.extra.items() if role == "partials"]
        adjoints = [b.cast(self.take_adjoint(param), T.float64) for param, _ in partials]
        shared = list(self.shared_elements.values())
        adjoints += [b.op(LOAD, [cell, b.constant(0, T.int64)], T.float64)
                     for cell, _, _ in shared]
        if adjoints:
            def add_up(totals: list[Value]) -> None:
                group = linear_group(b, self.workgroupsize)
                for total, (_, array) in zip(totals, partials):
                    b.op(STORE, [array, group, total])
                for total, (_, shadow, indices) in zip(totals[len(partials):], shared):
                    dtype = shadow.type.dtype
                    b.op(ATOMICS["add"], [shadow, *(self.primal(v) for v in indices),
                                          b.cast(total, dtype)], dtype)
            GroupSum(b, self.workgroupsize, self.subgroups_in_hardware).add_up(adjoints,
                                                                               add_up)
        b.ret()
        b.position_at_end(self.prologue)
        b.br(start)
        self.finish_entry()

    def allocate_shadows(self) -> None:
        """A zeroed shadow for each local or private array that holds active values: a
        private one by its work-item, a local one by the group together (each work-item
        a share, then a barrier)."""
        b = self.b
        group = 1
        for size in self.workgroupsize:
            group *= size
        local_item = None
        shared = False
        for op in self.kernel.ops():
            if op.definition not in (LOCALMEM, PRIVATE) or op not in self.activity.arrays:
                continue
            shadow = self.shadows[op] = b.op(op.definition, [], op.type, dict(op.attrs))
            count = 1
            for extent in op.type.shape:
                count *= extent
            zero = b.constant(0.0, op.type.dtype)
            if op.definition is PRIVATE:
                positions = [b.constant(e, T.int64) for e in range(count)]
            else:
                shared = True
                if local_item is None:
                    local_item = linear_local_item(b, self.workgroupsize)
                last = b.constant(count - 1, T.int64)
                # Every element gets a zero; where the group outnumbers them, several
                # work-items write the same zero.
                positions = [b.binary("min", b.binary("add", local_item,
                                                      b.constant(k * group, T.int64)), last)
                             for k in range(-(-count // group))]
            for flat in positions:
                b.op(STORE, [shadow, *unflatten(b, flat, op.type.shape), zero])
        if shared:
            b.op(BARRIER, [])

    def finish_entry(self) -> None:
        """Size the adjoint cells, zero them, set the stacks' counts; enter the prologue."""
        b = self.b
        b.position_at_end(self.function.entry)
        for dtype, cell in self.cells.items():
            count = sum(1 for c, _ in self.slots.values() if c is cell)
            cell.type = T.ArrayType(dtype, 1, "C", space="private", shape=(count,))
            zero = b.constant(0.0, dtype)
            for index in range(count):
                b.op(STORE, [cell, b.constant(index, T.int64), zero])
        if self.stacks is not None:
            counts = self.extra[("tape", "tape_counts")]
            b.position_at_end(self.function.entry)
            self.stacks.b = b
            self.stacks.set_counts(*(b.op(LOAD, [counts, b.constant(s, T.int64), self.work_item],
                                           T.int64) for s in (FLOATS, INTEGERS)))
        b.br(self.prologue)

    def dispatch(self, choices: list, target, transfer, number: Value | None = None) -> None:
        """At the builder's block: go to `target(choice)` for the choice the forward
        pushed (popped here when there are several, unless its `number` is given), after
        `transfer(choice)`."""
        b = self.b
        if len(choices) == 1:
            transfer(choices[0])
            b.br(target(choices[0]))
            return
        if number is None:
            number = self.stack().pop(T.int64)
        for position, choice in enumerate(choices):
            arm = b.new_block()
            if position == len(choices) - 1:
                b.br(arm)
            else:
                following = b.new_block()
                b.cbr(b.emit(COMPARISONS["eq"], [number, b.constant(position, T.int64)],
                             T.bool_), arm, [], following, [])
            b.position_at_end(arm)
            transfer(choice)
            b.br(target(choice))
            if position != len(choices) - 1:
                b.position_at_end(following)

    def counter_index(self, header: Block) -> Value:
        return self.b.constant(list(self.plan.counted).index(header), T.int64)

    def count_back(self, loop: CountedHeader, transfer) -> None:
        """At the end of a counted loop header's reverse: back out of the loop when the
        counter is at its start, else round again with the counter one step back."""
        b = self.b
        index = self.counter_index(loop.counter.block)
        counter = b.op(LOAD, [self.counter_cell, index], T.int64)
        start = b.cast(self.primal(loop.start), T.int64)
        leave, again = b.new_block(), b.new_block()
        b.cbr(b.emit(COMPARISONS["eq"], [counter, start], T.bool_), leave, [], again, [])
        b.position_at_end(again)
        b.op(STORE, [self.counter_cell, index,
                     b.binary("sub", counter, b.constant(loop.step, T.int64))])
        transfer(loop.latch)
        b.br(self.headers[loop.latch[0]])
        b.position_at_end(leave)
        transfer(loop.entry)
        b.br(self.headers[loop.entry[0]])

    def stack(self) -> Stacks:
        if self.stacks is None:
            tape = {field: self.extra[("tape", field)] for field in ("tape_floats",
                                                                      "tape_integers")}
            insertion = (self.b.block, self.b.before)
            self.stacks = Stacks(self.b, self.function.entry, tape, self.work_item)
            self.b.block, self.b.before = insertion
        return self.stacks

    def reverse_block(self, block: Block) -> None:
        b = self.b
        self.block = block
        self.adjoints, self.available = {}, {}
        self.plan.pushes[block] = []
        b.position_at_end(self.bodies[block])
        for op in reversed(block.ops[:-1]):
            b.loc = op.loc
            self.reverse_op(op)
        b.loc = block.ops[-1].loc if block.ops else None
        if block is self.kernel.entry:   # its parameters' adjoints are the epilogue's
            b.br(self.epilogue)
        else:
            params = [(param, self.take_adjoint(param)) for param in block.params
                      if self.activity.needs_adjoint(param)]

            def transfer(edge):
                predecessor, position = edge
                args = predecessor.terminator.successors[position].args
                for (param, adjoint) in params:
                    self.accumulate(args[block.params.index(param)], adjoint)
            for header in reversed(self.plan.counters.get(block, ())):
                b.op(STORE, [self.counter_cell, self.counter_index(header),
                             self.stack().pop(T.int64)])
            for header, last in self.computed_counters.get(block, ()):
                b.op(STORE, [self.counter_cell, self.counter_index(header), last()])
            if block in self.plan.counted:
                self.count_back(self.plan.counted[block], transfer)
            elif block in self.decided_edges:
                condition, when_true, when_false = self.decided_edges[block]
                number = b.select(self.primal(condition), b.constant(0, T.int64),
                                  b.constant(1, T.int64))
                self.dispatch([when_true, when_false], lambda edge: self.headers[edge[0]],
                              transfer, number)
            else:
                self.dispatch(self.predecessors[block], lambda edge: self.headers[edge[0]],
                              transfer)
        b.position_at_end(self.headers[block])
        b.br(self.bodies[block])

    # -- primal values ----------------------------------------------------------------------

    def primal(self, value: Value) -> Value:
        """`value` as the reverse of the current block has it: recomputed or popped."""
        if is_marker(value, NO_DERIVATIVE):
            return self.primal(value.operands[0])
        if value in self.params:
            return self.params[value]
        found = self.available.get(value) or self.global_values.get(value)
        if found is not None:
            return found
        loop = self.plan.counted.get(getattr(value, "block", None))
        if loop is not None and value is loop.counter and self.block in loop.body:
            # A counted loop's counter: the reverse's own.
            b = self.b
            insertion = (b.block, b.before)
            b.position_at_end(self.headers[self.block])
            counter = b.op(LOAD, [self.counter_cell, self.counter_index(value.block)],
                           T.int64)
            result = self.available[value] = b.cast(counter, value.type)
            b.block, b.before = insertion
            return result
        if self.is_global(value):
            return self.recompute(value, self.prologue, self.global_values)
        b = self.b
        insertion = (b.block, b.before)
        if is_op(value, CONST) or (isinstance(value, Op) and value.block is self.block and
                                   self.recomputable(value)):
            result = self.recompute(value, self.headers[self.block], self.available)
        elif self.restorer.restores(value):     # a tile's element, computed again
            b.position_at_end(self.headers[self.block])
            result = self.available[value] = self.restorer.restore(value)
        else:
            b.position_at_end(self.headers[self.block])
            result = self.available[value] = self.stack().pop(value.type)
            self.plan.pushes[self.block].append(value)
        b.block, b.before = insertion
        return result

    def recomputable(self, op: Op) -> bool:
        """Whether the reverse kernel computes `op` again rather than popping it: a load
        from an array the kernel never writes, or a pure operation (a math function
        too: computing sin(x) again measured faster than a push and a pop of it)."""
        if op.definition is LOAD:
            return array_root(self.kernel, op, op.operands[0]) not in self.activity.written
        return op.is_pure and not op.has(Trait.LOOKS_THROUGH)

    def is_global(self, value: Value) -> bool:
        """Computed at the kernel's entry from parameters, constants, positions and arrays
        the kernel never writes: the same everywhere in the kernel. (Remembered: asked
        again of each operand, deep straight-line code took exponential time.)"""
        known = self.globals_known.get(value)
        if known is None:
            if value in self.params or is_op(value, CONST):
                known = True
            else:
                known = isinstance(value, Op) and value.block is self.kernel.entry and \
                    self.recomputable(value) and all(self.is_global(v)
                                                     for v in value.operands)
            self.globals_known[value] = known
        return known

    def recompute(self, op: Op, block: Block, cache: dict) -> Value:
        operands = [self.primal(v) for v in op.operands]
        b = self.b
        insertion = (b.block, b.before)
        b.position_at_end(block)
        copy = b.op(op.definition, operands, op.type, dict(op.attrs))
        b.block, b.before = insertion
        cache[op] = copy
        return copy

    # -- adjoints -----------------------------------------------------------------------------

    def slot(self, value: Value) -> tuple[Op, Value]:
        adjoint_type = value.type.strong
        cell = self.cells.get(adjoint_type)
        if cell is None:
            b = self.b
            insertion = (b.block, b.before)
            b.position_at_end(self.function.entry)
            cell = self.cells[adjoint_type] = b.op(PRIVATE, [], T.ArrayType(
                adjoint_type, 1, "C", space="private", shape=(1,)))
            b.block, b.before = insertion
        if value not in self.slots:
            self.slots[value] = (cell, sum(1 for c, _ in self.slots.values() if c is cell))
        cell, index = self.slots[value]
        return cell, self.b.constant(index, T.int64)

    def accumulate(self, value: Value, contribution: Value) -> None:
        if not self.activity.needs_adjoint(value):
            return
        b = self.b
        adjoint_type = value.type.strong
        if contribution.type != adjoint_type:
            contribution = b.cast(contribution, adjoint_type)
        if value in self.local_adjoints:
            previous = self.adjoints.get(value)
            self.adjoints[value] = contribution if previous is None else \
                b.binary("add", previous, contribution)
            return
        cell, index = self.slot(value)
        total = b.binary("add", b.op(LOAD, [cell, index], adjoint_type), contribution)
        b.op(STORE, [cell, index, total])

    def take_adjoint(self, value: Value) -> Value:
        """The adjoint of `value`, then zero for its next definition."""
        b = self.b
        adjoint_type = value.type.strong
        if value in self.local_adjoints:
            return self.adjoints.pop(value, None) or b.constant(0.0, adjoint_type)
        cell, index = self.slot(value)
        adjoint = b.op(LOAD, [cell, index], adjoint_type)
        b.op(STORE, [cell, index, b.constant(0.0, adjoint_type)])
        return adjoint

    # -- the rules -----------------------------------------------------------------------------

    def reverse_op(self, op: Op) -> None:
        definition, b = op.definition, self.b
        if definition in (BARRIER, BARRIER_ANY):
            # The vote of synchronize_any is taped where the reverse needs it.
            b.op(BARRIER, [])
            return
        if definition in (PRINT, ASSUME, LOCALMEM, PRIVATE) or op.has(Trait.POSITION):
            return
        if is_marker(op, VJP_RESULT):
            if self.activity.needs_adjoint(op):
                self.reverse_custom(op)
            return
        if definition is LOAD:
            if self.activity.needs_adjoint(op):
                self.reverse_load(op)
            return
        if definition is STORE:
            if array_root(self.kernel, op, op.operands[0]) in self.activity.arrays:
                self.reverse_store(op)
            return
        if op.has(Trait.ATOMIC):
            if array_root(self.kernel, op, op.operands[0]) in self.activity.arrays:
                self.reverse_atomic(op)
            return
        if not self.activity.needs_adjoint(op) or self.adjoint_is_zero(op):
            return
        if op.has(Trait.SUBGROUP):
            self.reverse_subgroup(op)
            return
        rule = PARTIALS.get(definition)
        if rule is None:
            raise source_error(self.kernel, op, f"there is no derivative rule for "
                               f"'{op.opcode}' on values that carry derivatives",
                               "compute this value from Const arguments only, or give the "
                               "device function a custom rule (custom_vjp)")
        adjoint = self.take_adjoint(op)
        partials = rule(b, PrimalOperands(self, op), lambda: self.primal(op))
        for operand, partial in zip(op.operands, partials):
            if self.activity.needs_adjoint(operand):
                contribution = times(b, adjoint, partial, self.finite)
                if contribution is not None:
                    self.accumulate(operand, contribution)

    def reverse_subgroup(self, op: Op) -> None:
        """The adjoint through a subgroup operation's transpose, an exchange of the
        adjoints (`SUBGROUP_TRANSPOSES`)."""
        rule = SUBGROUP_TRANSPOSES.get(op.definition)
        if rule is None:
            raise source_error(self.kernel, op, f"there is no reverse derivative rule for "
                               f"'{op.opcode}' on values that carry derivatives",
                               "compute this value from Const arguments only")
        adjoint = self.take_adjoint(op)
        value = op.operands[0]
        if self.activity.needs_adjoint(value):
            self.accumulate(value, rule(self.b, op, adjoint, PrimalOperands(self, op),
                                        lambda: self.primal(op)))

    def reverse_custom(self, op: Op) -> None:
        """The custom rule's backward function on the residuals and the adjoint, one
        adjoint per argument (inlined once the reverse kernel is built)."""
        b = self.b
        adjoint = self.take_adjoint(op)
        count = op.attrs["residuals"]
        residuals = [self.primal(v) for v in op.operands[1:1 + count]]
        args = op.operands[1 + count:]
        packed = b.make_tuple(residuals) if op.attrs["packed"] else residuals[0]
        callee = op.attrs["backward"]
        result_type = self.module.functions[callee].return_type
        call = b.op("call", [packed, adjoint], result_type, {"callee": callee})
        self.calls.append(call)
        adjoints = [b.extract(call, i) for i in range(len(args))] \
            if isinstance(result_type, T.TupleType) else [call]
        for arg, value in zip(args, adjoints):
            self.accumulate(arg, value)

    def shadow_of(self, op: Op) -> Value:
        root = array_root(self.kernel, op, op.operands[0])
        return self.shadows[root]

    def indices(self, op: Op, values: int) -> list[Value]:
        return [self.primal(v) for v in op.operands[1:len(op.operands) - values]]

    def adjoint_is_zero(self, value: Value) -> bool:
        """Nothing used `value` (an adjoint that stays in its block) in a way that carries
        a derivative."""
        return value in self.local_adjoints and value not in self.adjoints

    def reverse_load(self, op: Op) -> None:
        b = self.b
        if self.adjoint_is_zero(op):
            return
        adjoint = self.take_adjoint(op)
        shadow = self.shadow_of(op)
        indices = self.indices(op, 0)
        dtype = shadow.type.dtype
        if self.own_element(op):
            adjoint = b.cast(adjoint, dtype)
            zeroing = self.fresh_zero(shadow, indices)
            if zeroing is not None:      # d[i] = 0 then d[i] += adjoint: d[i] = adjoint
                b.block.ops.remove(zeroing)
                b.op(STORE, [shadow, *indices, adjoint])
                return
            total = b.binary("add", b.op(LOAD, [shadow, *indices], dtype), adjoint)
            b.op(STORE, [shadow, *indices, total])
        elif self.read_by_the_whole_group(op):
            cell = self.shared_cell(op)
            zero = b.constant(0, T.int64)
            b.op(STORE, [cell, zero, b.binary("add", b.op(LOAD, [cell, zero], T.float64),
                                              b.cast(adjoint, T.float64))])
        else:
            b.op(ATOMICS["add"], [shadow, *indices, b.cast(adjoint, dtype)], dtype)

    def read_by_the_whole_group(self, op: Op) -> bool:
        """Whether a load reads one element that every work-item of the group reads
        alike (`w[0]`, `w[k]` for an argument k, `w[group]`) from a global array the
        kernel never writes: its adjoint is then summed in a private cell, then over the
        group in the epilogue, and added to the shadow once per group (an atomic per
        work-item on one address serializes a GPU's threads; Enzyme's GPU work sums in
        the group first too). Deferring the update is right because nothing reads that
        shadow before the kernel ends: the kernel neither stores into the array nor
        updates it atomically."""
        root = array_root(self.kernel, op, op.operands[0])
        if root not in self.kernel.params or root in self.activity.written:
            return False
        if self.varying is None:
            self.varying = varying_values(self.kernel)
        return all(self.is_global(index) and index not in self.varying
                   for index in op.operands[1:])

    def shared_cell(self, op: Op) -> Op:
        """The private float64 cell that sums the adjoints of the element `op` reads."""
        root = array_root(self.kernel, op, op.operands[0])
        key = (root, tuple(op.operands[1:]))
        found = self.shared_elements.get(key)
        if found is None:
            b = self.b
            insertion = (b.block, b.before)
            b.position_at_end(self.function.entry)
            cell = b.op(PRIVATE, [], T.ArrayType(T.float64, 1, "C", space="private",
                                                  shape=(1,)))
            b.op(STORE, [cell, b.constant(0, T.int64), b.constant(0.0, T.float64)])
            b.block, b.before = insertion
            found = self.shared_elements[key] = (cell, self.shadow_of(op), op.operands[1:])
        return found[0]

    def own_element(self, op: Op) -> bool:
        """Whether the shadow element a load's reverse updates is one no other work-item
        updates: every load of the array reads the work-item's own element (a private
        array's; a local array's at the work-item's local indices, a global array's at
        its global indices, index k along axis k for every axis). One load of a neighbour
        or at permuted indices (x[j, i]) makes every update of the array's shadow atomic:
        a plain update of d[i, j] would race with the other work-item's update of it."""
        root = array_root(self.kernel, op, op.operands[0])
        exclusive = self.exclusive_shadows.get(root)
        if exclusive is None:
            exclusive = self.exclusive_shadows[root] = all(
                self.own_access(load) for load in self.kernel.ops()
                if load.definition is LOAD and load.operands[0] is root)
        return exclusive

    def own_access(self, op: Op) -> bool:
        root = array_root(self.kernel, op, op.operands[0])
        indices = op.operands[1:]
        ndim = len(self.workgroupsize)
        if is_op(root, PRIVATE):
            return True
        if is_op(root, LOCALMEM):
            axes = [index.attrs["axis"] if is_op(index, LOCAL_ID) else None
                    for index in indices]
            return axes == list(range(ndim))
        return own_element(indices, self.workgroupsize)

    def reverse_store(self, op: Op) -> None:
        b = self.b
        shadow = self.shadow_of(op)
        indices = self.indices(op, 1)
        dtype = shadow.type.dtype
        adjoint = b.op(LOAD, [shadow, *indices], dtype)
        zeroing = b.op(STORE, [shadow, *indices, b.constant(0.0, dtype)])
        self.zeroed[zeroing] = (shadow, tuple(indices))
        self.accumulate(op.operands[-1], adjoint)

    def fresh_zero(self, shadow: Value, indices: list[Value]) -> Op | None:
        """The store of 0 into shadow[indices] that the reverse of a store just made, if
        nothing since read or wrote that shadow or waited at a barrier in this block: an
        adjoint accumulated there is then stored as it is. `0 + a` is not `a` in floats
        (-0.0), so this is the transform's choice, not an optimization the passes may
        make."""
        block = self.b.block
        for position in range(len(block.ops) - 1, -1, -1):
            op = block.ops[position]
            if op in self.zeroed:
                if self.zeroed[op] == (shadow, tuple(indices)):
                    return op
            if op.has(Trait.BARRIER) or op.has(Trait.CALL) or op.definition.effects.unknown \
                    or any(operand is shadow for operand in op.all_operands()):
                return None
        return None

    def reverse_atomic(self, op: Op) -> None:
        b = self.b
        if op.definition not in (ATOMICS["add"], ATOMICS["sub"]):
            raise source_error(self.kernel, op, f"{op.opcode} of a differentiated float "
                               f"array has no derivative", "use atomic_add (or atomic_sub) on "
                               "differentiated arrays, or pass the array as Const")
        if op in self.activity and any(True for _ in self.uses_of(op)):
            raise source_error(self.kernel, op, f"the result of {op.opcode} on a differentiated "
                               f"array is used: its derivative depends on the order the "
                               f"work-items ran in", "use the array's value after a "
                               "barrier or in a later kernel instead")
        shadow = self.shadow_of(op)
        dtype = shadow.type.dtype
        adjoint = b.op(LOAD, [shadow, *self.indices(op, 1)], dtype)
        if op.definition is ATOMICS["sub"]:
            adjoint = b.unary("neg", adjoint)
        self.accumulate(op.operands[-1], adjoint)

    def uses_of(self, value: Value):
        for block in self.order:
            for op in block.ops:
                if any(operand is value for operand in op.all_operands()):
                    yield op


class PrimalOperands(Sequence):
    """An operation's operands as the reverse kernel has them, each recomputed or popped
    only when a rule reads it (the rule of `a + b` reads neither)."""

    def __init__(self, reverse: Reverse, op: Op):
        self.reverse, self.op = reverse, op
        self.values: dict[int, Value] = {}

    def __len__(self) -> int:
        return len(self.op.operands)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if index not in self.values:
            self.values[index] = self.reverse.primal(self.op.operands[index])
        return self.values[index]


def _float_scalar(argtype) -> bool:
    return isinstance(argtype, T.ScalarType) and argtype.is_float
