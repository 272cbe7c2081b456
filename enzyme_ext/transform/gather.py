"""Neighbours' shadow updates gathered by the element's owner, not scattered with atomics.

The reverse of `out[i] = u[i - 1] + u[i + 1]` adds out's adjoint into u's shadow at i - 1
and i + 1, elements that the neighbouring work-items update too: each update an atomic
(on a CPU a locked compare-and-swap, and no vector loop around it). Where every update of
a shadow is an add at a constant offset from the work-item's position, made by every
work-item (in the reverse kernel's first block) or by those a test on the arguments and
the position sends down one side of the first block's branch (a boundary skipped by
`if`, as GPU users write stencils), of a value computed from the arguments and the
position alone, the updates are transposed:
- a gather kernel, launched after the augmented forward kernel and before the reverse
  kernel, gives each work-item one element of the shadow to own, at its position plus
  an anchor offset (the offset most updates have); the work-item computes again, at
  each neighbour's position, the value that neighbour would add into its element (where
  the neighbour's test sends it to the update), and adds them up in a fixed order;
- the reverse kernel leaves those updates out, but for the elements no work-item owns
  (the halo along the ndrange's edges), which it still updates atomically behind a test
  of the position; where the update's guard keeps every work-item at that edge from it
  (a stencil over the whole array whose boundary an `if` skips), it has none.
The gather kernel reads what the reverse kernel's updates read, before the reverse kernel
changes any of it: a value whose computation reads memory the reverse kernel writes first
keeps its atomic. On a work-group away from the ndrange's edges every neighbour exists,
so its code has no bounds tests (a uniform branch, taken once per group on the CPU). An
array read at one offset only (`y[i] = x[i + 1]`) is gathered too: its updates become
plain ones."""
from __future__ import annotations

from dataclasses import dataclass

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (ADD, ARITHMETIC, ATOMICS, CBR, COMPARISONS, GROUP_ID,
                                      LOAD, LOCAL_ID, NDRANGE, SELECT, STORE, SUB, UNARY,
                                      Trait)
from kernelkit.ir.function import Block, Function
from kernelkit.ir.ops import Op, Value, constant_value, is_op
from kernelkit.ir.rewriter import Rewriter

from ..signature import GATHER
from .positions import global_axis


@dataclass
class Site:
    """One atomic add into a shadow: shadow[position[axes[k]] + offsets[k] for each k] +=
    value, where `ops` compute the value (in block order); where the add is made on one
    side of the first block's branch only, where `guard` is `taken` (`guard_ops` compute
    it); `speculable` where its value may be computed where the guard is not taken too
    (its loads are the same as ones every work-item makes, whichever side it takes)."""
    atomic: Op
    axes: tuple[int, ...]
    offsets: tuple[int, ...]
    ops: list[Op]
    guard: Value | None = None
    taken: bool = True
    guard_ops: tuple[Op, ...] = ()
    speculable: bool = True

    @property
    def value(self) -> Value:
        return self.atomic.operands[-1]


def gathered_updates(function: Function, shadows: list[Value], workgroupsize
                     ) -> dict[Value, list[Site]]:
    """The shadows (of `shadows`, the reverse kernel's shadow parameters) whose every
    update can be gathered, each with its updates."""
    entry = function.entry
    # Block order: the first block's operations, then those of the blocks its branch
    # leads to (each entered from it alone).
    position = {op: index for index, op in enumerate(entry.ops)}
    sides = _sides(entry)
    for block in sides:
        position.update({op: len(position) + index for index, op in enumerate(block.ops)})
    found = {}
    for shadow in shadows:
        sites = []
        for op in function.ops():
            if not any(operand is shadow for operand in op.all_operands()):
                continue
            site = _site(op, shadow, entry, sides, position, workgroupsize)
            if site is None or (sites and site.axes != sites[0].axes):
                break
            sites.append(site)
        else:
            if sites:
                found[shadow] = sites
    return found


def _sides(entry: Block) -> list[Block]:
    """The blocks the first block's two-way branch leads to, where each is entered from
    the first block alone and without arguments: where a guarded update may be."""
    branch = entry.terminator
    if branch is None or branch.definition is not CBR or \
            any(successor.args for successor in branch.successors):
        return []
    targets = [successor.block for successor in branch.successors]
    if targets[0] is targets[1]:
        return []
    predecessors = entry.function.predecessors()
    return [block for block in targets if predecessors[block] == [entry]]


def _site(op: Op, shadow: Value, entry: Block, sides: list[Block], position: dict,
          workgroupsize) -> Site | None:
    if op.definition is not ATOMICS["add"] or op.operands[0] is not shadow or \
            not op.type.is_float or _used(op, entry):
        return None
    guard, taken, guard_ops = None, True, ()
    if op.block is not entry:
        if op.block not in sides:
            return None
        branch = entry.terminator
        guard, taken = branch.operands[0], branch.successors[0].block is op.block
        guard_ops = _computation(guard, (entry,), position)
        if guard_ops is None:
            return None
    places = [_position_plus_constant(index, workgroupsize) for index in op.operands[1:-1]]
    # The axes may come in any order (x[j, i]): every site of a shadow has the same order
    # (`gathered_updates`), so each element still has one owner, which alone updates it.
    if None in places or sorted(axis for axis, _ in places) != list(range(len(workgroupsize))):
        return None
    ops = _computation(op.operands[-1], (entry, op.block), position)
    if ops is None:
        return None
    return Site(op, tuple(axis for axis, _ in places), tuple(o for _, o in places), ops,
                guard, taken, tuple(guard_ops), guard is None or _speculable(ops, entry, sides))


def _speculable(ops: list[Op], entry: Block, sides: list[Block]) -> bool:
    """Whether each load of `ops` on a side of the first block's branch is made on the
    other side too (the same array at the same index values), or in the first block: a
    load every work-item makes, so valid at any position of the ndrange."""
    if len(sides) != 2:
        return False

    def made_in(block: Block, load: Op) -> bool:
        return any(other.definition is LOAD and len(other.operands) == len(load.operands)
                   and all(a is b for a, b in zip(other.operands, load.operands))
                   for other in block.ops)
    for load in (op for op in ops if op.definition is LOAD and op.block is not entry):
        other = sides[1] if load.block is sides[0] else sides[0]
        if not (made_in(other, load) or made_in(entry, load)):
            return False
    return True


def _used(op: Op, entry: Block) -> bool:
    return any(op in user.all_operands() for block in entry.function.blocks
               for user in block.ops)


def _position_plus_constant(value: Value, workgroupsize) -> tuple[int, int] | None:
    """(axis, c) where `value` is the global index along axis plus the constant c."""
    axis = global_axis(value, workgroupsize)
    if axis is not None:
        return axis, 0
    if not (is_op(value, ADD) or is_op(value, SUB)):
        return None
    left, right = value.operands
    if is_op(value, ADD) and isinstance(constant_value(left), int):
        left, right = right, left
    constant = constant_value(right)
    if not isinstance(constant, int) or isinstance(constant, bool):
        return None
    inner = _position_plus_constant(left, workgroupsize)
    if inner is None:
        return None
    return inner[0], inner[1] + (constant if is_op(value, ADD) else -constant)


def _computation(value: Value, blocks: tuple[Block, ...], position: dict
                 ) -> list[Op] | None:
    """The operations `value` is computed from, in block order, if it can be computed
    again at another work-item's position before the reverse kernel runs: pure
    operations and loads of argument arrays that nothing writes before them, in
    `blocks` (the first block, and the side of its branch the value is on)."""
    entry = blocks[0]
    needed, stack = set(), [value]
    while stack:
        v = stack.pop()
        if v in needed or v in entry.params:
            continue
        if not isinstance(v, Op) or v.block not in blocks:
            return None
        if v.definition is LOAD:
            if v.operands[0] not in entry.params:
                return None      # private or local memory: the work-item's own
        elif not v.is_pure:
            return None
        needed.add(v)
        stack.extend(v.operands)
    ops = sorted(needed, key=position.__getitem__)
    before = [op for block in blocks for op in block.ops]
    for load in (op for op in ops if op.definition is LOAD):
        for earlier in before[:before.index(load)]:
            if _may_write(earlier, load.operands[0]):
                return None
    return ops


def _may_write(op: Op, array: Value) -> bool:
    effects = op.definition.effects
    if effects.unknown or op.has(Trait.CALL):
        return True
    return (op.definition is STORE or op.has(Trait.ATOMIC)) and op.operands[0] is array


class Positions:
    """Builds a site's value again at another work-item's position: the global index
    along each axis replaced by the given one (None: the work-item's own)."""

    def __init__(self, b: Builder, workgroupsize: tuple[int, ...]):
        self.b, self.workgroupsize = b, workgroupsize

    def own(self, axis: int) -> Value:
        b = self.b
        group = b.op(GROUP_ID, [], T.int64, {"axis": axis})
        local = b.op(LOCAL_ID, [], T.int64, {"axis": axis})
        return b.binary("add", b.binary("mul", group, b.constant(self.workgroupsize[axis],
                                                                   T.int64)), local)

    def value_at(self, site: Site, at: list[Value | None], mapped: dict,
                 loads_at: list[Value | None] | None = None) -> Value:
        """The value `site` adds, as the work-item at `at` computes it; zero where that
        work-item's test keeps it from the update (computed only where it does not).
        With `loads_at`, the loads read at that position instead (`computed`)."""
        if site.guard is None:
            return self.computed(site.ops, site.value, at, mapped, loads_at)
        b = self.b
        guard = self.computed(site.guard_ops, site.guard, at, mapped, loads_at)
        if not site.taken:
            guard = b.compare("eq", guard, b.constant(False, T.bool_))
        zero = b.constant(0.0, site.value.type)
        if site.speculable:     # no branch in the gathering loop (a vector select)
            return b.select(guard, self.computed(site.ops, site.value, at, mapped, loads_at),
                            zero)
        update, join = b.new_block(), b.new_block()
        result = join.add_param(site.value.type, "update")
        b.cbr(guard, update, [], join, [zero])
        b.position_at_end(update)
        b.br(join, [self.computed(site.ops, site.value, at, mapped, loads_at)])
        b.position_at_end(join)
        return result

    def computed(self, ops: list[Op], value: Value, at: list[Value | None], mapped: dict,
                 loads_at: list[Value | None] | None = None) -> Value:
        """`value`, which `ops` compute, computed again at `at`; with `loads_at`, each
        load's indices computed at that position instead. A position `at` that may lie
        outside the ndrange, whose value the caller discards there, keeps every test and
        value an affine function of the work-item's position (which a CPU cuts out of
        the middle of its rows, `item_split.py`), while the loads read at a position
        inside."""
        b, copies = self.b, dict(mapped)
        inside = copies if loads_at is None else dict(mapped)
        for op in ops:
            b.loc = op.loc
            if op.definition is LOAD:
                copies[op] = inside[op] = b.op(LOAD, [inside.get(v, v) for v in op.operands],
                                               op.type, dict(op.attrs))
                continue
            copies[op] = self.moved(op, at, copies)
            if inside is not copies:
                inside[op] = self.moved(op, loads_at, inside)
        return copies.get(value, value)

    def moved(self, op: Op, at: list[Value | None], copies: dict) -> Value:
        """`op` computed again at `at`, its operands' copies in `copies`."""
        b = self.b
        axis = global_axis(op, self.workgroupsize)
        if axis is not None and at[axis] is not None:
            return at[axis]
        if op.definition in (GROUP_ID, LOCAL_ID) and at[op.attrs["axis"]] is not None:
            index, size = at[op.attrs["axis"]], b.constant(
                self.workgroupsize[op.attrs["axis"]], T.int64)
            return b.binary("floordiv" if op.definition is GROUP_ID else "mod", index, size)
        return b.op(op.definition, [copies.get(v, v) for v in op.operands], op.type,
                    dict(op.attrs))


def past(b: Builder, index: Value, delta: int, axis: int) -> Value:
    """Whether an index `delta` away from the work-item's own (which is inside) lies
    outside the ndrange along `axis`: one test, on the side `delta` points to."""
    if delta < 0:
        return b.compare("lt", index, b.constant(0, T.int64))
    return b.compare("ge", index, b.op(NDRANGE, [], T.int64, {"axis": axis}))


def past_each(b: Builder, at: dict[int, tuple[Value, int]]) -> dict[int, Value]:
    """For a position given along each axis it differs on as (the index, its offset from
    the work-item's own): axis -> whether it lies outside the ndrange along that axis."""
    return {axis: past(b, index, delta, axis) for axis, (index, delta) in at.items()}


def any_of(b: Builder, tests: dict[int, Value]) -> Value:
    """Whether any of `tests` holds (a position outside the ndrange along some axis)."""
    outside = None
    for test in tests.values():
        outside = test if outside is None else b.binary("or", outside, test)
    return outside


def shifted(b: Builder, own: list[Value], shift: dict[int, int]
            ) -> dict[int, tuple[Value, int]]:
    """axis -> (own index + offset, offset) along the axes `shift` moves along."""
    return {axis: (b.binary("add", own[axis], b.constant(delta, T.int64)), delta)
            for axis, delta in shift.items() if delta}


def anchor(sites: list[Site]) -> tuple[int, ...]:
    """The offsets most of the sites have (the first such, in block order)."""
    counts = {}
    for site in sites:
        counts[site.offsets] = counts.get(site.offsets, 0) + 1
    return max(counts, key=counts.__getitem__)


def shifts(sites: list[Site], own: tuple[int, ...], sign: int) -> list[dict[int, int]]:
    """For each site, axis -> sign * (anchor offset - site offset) along that axis."""
    return [{axis: sign * (a - o) for axis, a, o in zip(site.axes, own, site.offsets)}
            for site in sites]


def owned_whole(sites: list[Site], workgroupsize) -> bool:
    """Whether each work-item of the gather kernel owns its own element of the shadow
    (index k its global index along axis k, for every axis): then a launch whose ndrange
    is the shadow's shape stores into every element of it."""
    return sites[0].axes == tuple(range(len(workgroupsize))) and not any(anchor(sites))


def gather_kernel(reverse: Function, updates: dict[Value, list[Site]], workgroupsize,
                  stored: bool = False) -> Function:
    """The kernel that adds each gathered shadow's updates up at their owners' elements:
    the reverse kernel's parameters, each work-item adding into the element at its
    position plus the anchor offset the values its neighbours' updates would add. The
    `stored` kernel is for shadows known to hold zeros (`program.py`): it does not read
    them, and stores `0.0 + total`, the bits the other one would leave."""
    ndim = len(workgroupsize)
    gather = Function(reverse.name.rsplit(".", 1)[0] + f".{GATHER}", list(reverse.arg_names),
                      is_kernel=True, source_file=reverse.source_file)
    entry = gather.add_block(Block(tuple(p.type for p in reverse.params)))
    for mine, theirs in zip(entry.params, reverse.params):
        mine.hint = theirs.hint
    mapped = dict(zip(reverse.params, entry.params))
    b = Builder(gather)
    b.position_at_end(entry)
    b.loc = next(iter(updates.values()))[0].atomic.loc
    positions = Positions(b, workgroupsize)
    own = [positions.own(axis) for axis in range(ndim)]
    for shadow, sites in updates.items():
        offsets = anchor(sites)
        total = None
        for site, shift in zip(sites, shifts(sites, offsets, 1)):
            at = shifted(b, own, shift)
            if at:
                # The neighbour's value where it exists, else zero: computed at the
                # neighbour's position, its loads at the work-item's own index along the
                # axes the neighbour lies outside on (a load any work-item may make;
                # where a CPU knows that no test holds, the neighbour's index).
                tests = past_each(b, at)
                inside = {axis: b.select(tests[axis], own[axis], index)
                          for axis, (index, _) in at.items()}
                value = positions.value_at(
                    site, _per_axis({axis: index for axis, (index, _) in at.items()}, ndim),
                    mapped, _per_axis(inside, ndim))
                value = b.select(any_of(b, tests), b.constant(0.0, value.type), value)
            else:
                value = positions.value_at(site, [None] * ndim, mapped)
            total = value if total is None else b.binary("add", total, value)
        target = mapped[shadow]
        element = [b.binary("add", own[axis], b.constant(offset, T.int64))
                   for axis, offset in zip(sites[0].axes, offsets)]
        current = b.constant(0.0, target.type.dtype) if stored else \
            b.op(LOAD, [target, *element], target.type.dtype)
        b.op(STORE, [target, *element, b.binary("add", current,
                                                b.cast(total, target.type.dtype))])
    b.ret()
    return gather


def _per_axis(at: dict[int, Value], ndim: int) -> list[Value | None]:
    return [at.get(axis) for axis in range(ndim)]


def leave_out(reverse: Function, updates: dict[Value, list[Site]], workgroupsize) -> None:
    """The reverse kernel without the updates the gather kernel makes: each update stays
    only where its element has no owner (the halo: the owner's position lies outside the
    ndrange), behind that test, atomic (neighbouring work-items may update the element
    too). Along a row most work-items are away from its ends: a CPU cuts the tests out of
    the row there (`item_split.py`). Where the update's guard keeps every work-item whose
    shifted element lies outside from making it (a stencil over the whole array that
    skips its boundary with `if`: the interior's neighbours are all inside), it is left
    out altogether (`never_past`)."""
    rewriter = Rewriter(reverse)
    positions = Positions(rewriter, workgroupsize)
    for sites in updates.values():
        for site, shift in zip(sites, shifts(sites, anchor(sites), -1)):
            atomic = site.atomic
            if not any(shift.values()) or never_past(site, shift, workgroupsize):
                # At the anchor the work-item owns the element; and a work-item whose
                # element has no owner never makes the update where its guard says.
                atomic.block.ops.remove(atomic)
                continue
            block = atomic.block
            rest = rewriter.split_block_after(atomic)
            block.ops.remove(atomic)
            rewriter.position_at_end(block)
            rewriter.loc = atomic.loc
            own = [positions.own(axis) for axis in range(len(workgroupsize))]
            halo = rewriter.insert_block_after(block, Block())
            rewriter.cbr(any_of(rewriter, past_each(rewriter, shifted(rewriter, own, shift))),
                         halo, [], rest, [])
            atomic.block = halo
            halo.ops.append(atomic)
            rewriter.position_at_end(halo)
            rewriter.br(rest)


# -- updates guarded away from the halo ------------------------------------------------------
# A work-item's own index along an axis lies in [0, ndrange). Its element shifted by d lies
# outside the ndrange exactly where the index is one of the |d| at that edge: ndrange - 1,
# ..., ndrange - d for d > 0; 0, ..., -d - 1 for d < 0. `never_past` works the guard out
# with the index set to each of them, as a linear form (base, offset): base None for a
# constant, ("ndrange", axis) for an extent, ("own", axis) for another axis's index.
_MOST_SHIFT = 4    # (wider shifts keep their halo test)
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def never_past(site: Site, shift: dict[int, int], workgroupsize) -> bool:
    """Whether no work-item whose element shifted by `shift` lies outside the ndrange
    passes the site's guard to its update (`guard` == `taken`): along each axis it is
    shifted on, every index at that edge makes the guard decide against it."""
    if site.guard is None:
        return False
    for axis, delta in shift.items():
        if not delta:
            continue
        if abs(delta) > _MOST_SHIFT:
            return False
        edge = [(("ndrange", axis), -k) for k in range(1, delta + 1)] if delta > 0 else \
            [(None, k) for k in range(-delta)]
        for own in edge:
            if _Guard(axis, own, workgroupsize).decide(site.guard) is not (not site.taken):
                return False
    return True


class _Guard:
    """The values of a guard's computation where the work-item's own index along `axis`
    is `own`: linear forms for integers, True or False for conditions, None where the
    index alone does not decide them."""

    def __init__(self, axis: int, own: tuple, workgroupsize):
        self.axis, self.own, self.workgroupsize = axis, own, workgroupsize
        self.known: dict[Value, object] = {}

    def decide(self, value: Value):
        if value not in self.known:
            self.known[value] = None      # (a cycle through block parameters: unknown)
            self.known[value] = self.evaluate(value)
        return self.known[value]

    def evaluate(self, value: Value):
        place = _position_plus_constant(value, self.workgroupsize)
        if place is not None:
            axis, offset = place
            if axis == self.axis:
                return (self.own[0], self.own[1] + offset)
            return (("own", axis), offset)
        if not isinstance(value, Op):
            return None
        constant = constant_value(value)
        if isinstance(constant, bool):
            return constant
        if isinstance(constant, int):
            return (None, constant)
        definition, operands = value.definition, value.operands
        name = definition.name
        if definition is NDRANGE:
            return (("ndrange", value.attrs["axis"]), 0)
        if definition is ADD or definition is SUB:
            left, right = (self.decide(operand) for operand in operands)
            if not (isinstance(left, tuple) and isinstance(right, tuple)):
                return None
            if right[0] is None:
                return (left[0], left[1] + right[1] if name == "add" else left[1] - right[1])
            if left[0] is None and name == "add":
                return (right[0], right[1] + left[1])
            return None
        if definition is COMPARISONS.get(name):
            left, right = (self.decide(operand) for operand in operands)
            if isinstance(left, tuple) and isinstance(right, tuple) and left[0] == right[0]:
                return _COMPARE[name](left[1], right[1])
            return None
        if definition is SELECT:
            condition, if_true, if_false = operands
            chosen = self.decide(condition)
            if chosen is True or chosen is False:
                return self.decide(if_true if chosen else if_false)
            # `a or b` is select(a, a, b), `a and b` select(a, b, a): each side known
            # where the condition is what picked it.
            yes = True if if_true is condition else self.decide(if_true)
            no = False if if_false is condition else self.decide(if_false)
            return yes if yes is not None and yes == no and type(yes) is type(no) else None
        if definition in (ARITHMETIC["and"], ARITHMETIC["or"]) and value.type == T.bool_:
            left, right = (self.decide(operand) for operand in operands)
            if name == "and":
                return False if False in (left, right) else (True if left is right is True
                                                             else None)
            return True if True in (left, right) else (False if left is right is False
                                                       else None)
        if definition is UNARY["not"]:
            inner = self.decide(operands[0])
            return None if inner is None else not inner
        return None
