"""The CPU's race detector, part of debug mode (`CPU(debug="races")`, or
`KERNELKIT_DEBUG=races`): within one launch, two work-items that touch one array element,
at least one of them writing, not both atomically and with no barrier ordering them,
are an error (`kernelkit.errors.RaceError`) naming the kernel, the array and index, both
work-items and both source lines.

What orders two accesses: the program order of one work-item, and a barrier between two
work-items of one group (accesses in different barrier intervals of a group; intervals
are counted as the group runs, so a barrier in a loop starts a new one each trip).
Nothing orders two work-items of different groups within a launch. Private arrays are a
work-item's own and are not watched; local arrays are a group's own, watched per group.

How it works, in two halves that share the layout defined here:

- The kernel's side (`RaceInstrumentation`, used by `group.py`): before each load,
  store and atomic of a global or local array element, the kernel writes the element's
  indices into the launch's error record and calls `kernelkit_race_access(detector,
  address, site, group, work-item, barriers passed)`. The site is a number naming the
  operation (its source line, whether it reads, writes or is atomic, and its array),
  listed in the compiled kernel's facts (`race_sites`) next to the bounds checks'
  locations; the group counts the barriers it has passed. Reads of kk.Const arrays are
  recorded only where another array argument overlaps one (`const_memory_is_written`):
  else nothing the launch writes is what they read. The instrumentation is there only
  when the job's target says so (`CPUTarget.races`, part of the cache key): a normal
  build is unchanged.
- The launch's side (`RaceDetector`): the function the kernel calls is Python, through
  ctypes, and keeps for each element touched (keyed by address, so arrays that overlap
  share their elements) the last write and enough of the reads and atomics to tell
  whether any of them conflicts with a new access (`conflicting`). The first race found
  marks the error record, which stops the launch like a failed bounds check.

Why Python and not native shadow memory: the rules (which accesses conflict, what a
barrier orders) are a few readable functions, with no layout of shadow state to keep in
step between LLVM IR and Python; the cost (2-4 microseconds an access on a 2-core
Xeon VM, the call into Python a quarter of it) is paid only in this mode, on the sizes
a test or a debugging session runs. To keep the history exact and small, race mode
runs each launch on one thread, its groups in order (`CPU` sets `threads=1`), and
without the passes that add barriers of the compiler's own (`loop-barriers`,
`masked-loops`: they would order what the kernel does not), so every barrier the
detector counts is one the kernel has; and the work-item loops are not vectorized (each
access is recorded before it happens). The kernels build at optimization level 0
(`target.build_level`): the detector's calls take the time, and LLVM's pipeline took seconds
over a kernel of a few hundred recorded accesses."""
from __future__ import annotations

import ast
import ctypes
import enum
import functools
import itertools
import linecache
import weakref

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.llvm_types import declared, i64
from kernelkit.errors import RaceError
from kernelkit.ir import types as T
from kernelkit.ir.definitions import LOAD, LOCALMEM, STORE, Trait
from kernelkit.ir.ops import is_op
from kernelkit.runtime.bounds import ERROR_RECORD_FIELDS, MAX_DIMENSIONS
from kernelkit.runtime.geometry import number_of_groups

ACCESS_FUNCTION = "kernelkit_race_access"
"""The function an instrumented kernel calls before each access it records:
`i64 (i64 detector, i64 address, i64 site, i64 group, i64 item, i64 barriers)`, which
returns nonzero where the launch is to stop (a race was found)."""

# The launch's error record (`kernelkit.runtime.bounds`) grows by the race detector's
# words: the number of the launch's detector; whether reads of kk.Const arrays are
# recorded (`const_memory_is_written`); then the indices of the access being recorded
# (written by the kernel before each call, read only to report a race).
DETECTOR_WORD = ERROR_RECORD_FIELDS
CONST_WORD = ERROR_RECORD_FIELDS + 1
INDEX_WORDS = ERROR_RECORD_FIELDS + 2
RECORD_WORDS = INDEX_WORDS + MAX_DIMENSIONS

RACE_FOUND = 2
"""The error record's flag where a race was found (a failed bounds check sets 1)."""


def detects_races(target) -> bool:
    """Whether kernels compiled for `target` record their accesses: a `CPUTarget` made
    with `races=True`; a target of its own that borrows the CPU's code generator (see
    tests/compiler/test_target.py) does not."""
    return getattr(target, "races", False)


class Kind(enum.IntEnum):
    READ = 0
    WRITE = 1
    ATOMIC = 2


def access_kind(op) -> Kind:
    if op.has(Trait.ATOMIC):
        return Kind.ATOMIC
    if op.definition is LOAD:
        return Kind.READ
    assert op.definition is STORE, f"not an array access: {op!r}"
    return Kind.WRITE


# -- the kernel's side --------------------------------------------------------------------


class RaceInstrumentation:
    """The calls a kernel compiled for race detection makes, and the table of its access
    sites (`sites`, JSON-friendly, kept with the compiled kernel as `race_sites`: per
    site, [location number, kind, array (`describe_array`), the array's dimensions]).
    `locations` is the entry point builder's list of source locations (shared with the
    bounds checks)."""

    def __init__(self, module: ir.Module, locations: list):
        self.module = module
        self.locations = locations
        self.sites: list = []
        self.site_numbers: dict = {}    # op -> its site number
        self.detector = None            # the launch's detector number (an i64)
        self.const_watched = None       # whether reads of kk.Const arrays are recorded
        self.error_record = None
        self.barriers = None            # the barriers the group has passed (an i64 slot)

    def start(self, builder: ir.IRBuilder, error_record: ir.Value) -> None:
        """At the group function's entry: read the detector's number from the record."""
        self.error_record = error_record
        self.detector = builder.load(self.word(builder, DETECTOR_WORD), typ=i64)
        watched = builder.load(self.word(builder, CONST_WORD), typ=i64)
        self.const_watched = builder.icmp_signed("!=", watched, ir.Constant(i64, 0))
        self.barriers = builder.alloca(i64, name="barriers_passed")

    def group_started(self, builder: ir.IRBuilder) -> None:
        builder.store(ir.Constant(i64, 0), self.barriers)

    def barrier_passed(self, builder: ir.IRBuilder) -> None:
        """The group's work-items have all reached a barrier: a new interval begins."""
        passed = builder.load(self.barriers, typ=i64)
        builder.store(builder.add(passed, ir.Constant(i64, 1)), self.barriers)

    def access(self, builder: ir.IRBuilder, op, function, address: ir.Value, indices: list,
               group: ir.Value, item: ir.Value) -> None:
        """Record that work-item `item` (its number in the group) of group `group` is about
        to access the element at `address` (at `indices`) with `op`. A read of a kk.Const
        array is recorded only where the launch says so (`const_memory_is_written`)."""
        if op.operands[0].type.const:
            watched = builder.function.append_basic_block("const_watched")
            after = builder.function.append_basic_block("const_recorded")
            builder.cbranch(self.const_watched, watched, after)
            builder.position_at_end(watched)
            self.record(builder, op, function, address, indices, group, item)
            builder.branch(after)
            builder.position_at_end(after)
        else:
            self.record(builder, op, function, address, indices, group, item)

    def record(self, builder: ir.IRBuilder, op, function, address: ir.Value, indices: list,
               group: ir.Value, item: ir.Value) -> None:
        for axis, index in enumerate(indices):
            builder.store(index, self.word(builder, INDEX_WORDS + axis))
        site = ir.Constant(i64, self.site(op, function))
        stop = builder.call(self.access_function(),
                            [self.detector, builder.ptrtoint(address, i64), site, group, item,
                             builder.load(self.barriers, typ=i64)])
        # After a race, the launch stops (as after a failed bounds check).
        stopped = builder.function.append_basic_block("race_found")
        going_on = builder.function.append_basic_block("no_race")
        builder.cbranch(builder.icmp_signed("!=", stop, ir.Constant(i64, 0)), stopped, going_on)
        builder.position_at_end(stopped)
        builder.ret_void()
        builder.position_at_end(going_on)

    def site(self, op, function) -> int:
        number = self.site_numbers.get(op)
        if number is None:
            self.locations.append(op.loc)
            number = self.site_numbers[op] = len(self.sites)
            array = op.operands[0]
            self.sites.append([len(self.locations) - 1, int(access_kind(op)),
                               describe_array(array, function), array.type.ndim])
        return number

    def word(self, builder: ir.IRBuilder, number: int) -> ir.Value:
        return builder.gep(self.error_record, [ir.Constant(i64, number)], source_etype=i64)

    def access_function(self) -> ir.Function:
        function = declared(self.module, ACCESS_FUNCTION, i64, [i64] * 6)
        function.attributes.add("nounwind")
        return function


def describe_array(array, function) -> list:
    """[kind, name, line] of the array an access reaches: ["argument", its parameter's
    name, None], ["local", the variable it was assigned to (or None), the line of its
    kk.localmem], or ["array", None, None] where it is neither."""
    if array in function.params:
        return ["argument", function.arg_names[function.params.index(array)], None]
    if is_op(array, LOCALMEM):
        loc = array.loc
        return ["local", _assigned_name(loc), loc.line if loc else None]
    return ["array", None, None]


def _assigned_name(loc) -> str | None:
    """The name in `name = kk.localmem(...)` on the source line at `loc`, if it is one."""
    if loc is None or not loc.file:
        return None
    try:
        statement = ast.parse(linecache.getline(loc.file, loc.line).strip())
    except SyntaxError:
        return None
    if len(statement.body) == 1 and isinstance(statement.body[0], (ast.Assign, ast.AnnAssign)):
        node = statement.body[0]
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            return targets[0].id
    return None


# -- the launch's side --------------------------------------------------------------------

# An access: (group number, work-item number in the group, barriers its group had
# passed, site number).
GROUP, ITEM, INTERVAL, SITE = range(4)

# What the detector keeps of an element: a list of seven accesses (or None): the last
# plain write, then the plain reads and then the atomics, each kind as an access set of
# three (see `unordered_in`). Lists, not objects: the detector's work is most of what
# an access costs, and objects made and read per access doubled it.
LAST_WRITE = 0
READS = 1
ATOMICS = 4
LAST, OTHER, EARLIER = 0, 1, 2      # an access set's members


def unordered(earlier: tuple, group: int, item: int, interval: int) -> bool:
    """Whether an `earlier` access and one now by (`group`, `item`, `interval`) may happen
    in either order: they are of different work-items, and no barrier is between them
    (a barrier orders only work-items of one group)."""
    return earlier[GROUP] != group or \
        (earlier[ITEM] != item and earlier[INTERVAL] == interval)


def unordered_in(history: list, kept: int, group: int, item: int, interval: int):
    """One access of the set at `history[kept:kept + 3]` that is unordered with an access
    now by (`group`, `item`, `interval`), or None.

    The accesses of a set (reads, or atomics) do not conflict with each other, and groups
    run one after another, each group's intervals in order; so three of them tell
    exactly whether any of all of them is unordered with a new access: the last; another
    work-item's in the last one's group and interval (where there is one); and one of a
    group before the last one's (where there is one), unordered with every access of a
    later group."""
    last = history[kept + LAST]
    if last is None:
        return None
    if last[GROUP] != group:
        return last
    earlier = history[kept + EARLIER]
    if earlier is not None:
        return earlier
    if last[INTERVAL] != interval:
        return None     # the group's earlier intervals are ordered before this one
    if last[ITEM] != item:
        return last
    return history[kept + OTHER]   # another work-item's, in this interval (or None)


def keep(history: list, kept: int, access: tuple) -> None:
    """Add `access` to the set at `history[kept:kept + 3]` (see `unordered_in`)."""
    last = history[kept + LAST]
    if last is not None:
        if last[GROUP] != access[GROUP]:
            history[kept + EARLIER] = last
            history[kept + OTHER] = None
        elif last[INTERVAL] != access[INTERVAL]:
            history[kept + OTHER] = None
        elif last[ITEM] != access[ITEM]:
            history[kept + OTHER] = last
    history[kept + LAST] = access


def conflicting(history: list, kind: Kind, group: int, item: int, interval: int):
    """An access in `history` that one of `kind` now by (`group`, `item`, `interval`)
    conflicts with, or None: a write conflicts with every kind, a read with writes and
    atomics, an atomic with plain accesses (two atomics never conflict).

    Of the writes, only the last is kept: an access that conflicts with an earlier write
    but not with the last one finds the last one conflicting with that earlier one,
    which was found then (the first race ends the launch)."""
    write = history[LAST_WRITE]
    if write is not None and unordered(write, group, item, interval):
        return write
    if kind != Kind.ATOMIC:
        found = unordered_in(history, ATOMICS, group, item, interval)
        if found is not None:
            return found
    if kind != Kind.READ:
        return unordered_in(history, READS, group, item, interval)
    return None


def remember(history: list, kind: Kind, access: tuple) -> None:
    if kind == Kind.WRITE:
        history[LAST_WRITE] = access
    else:
        keep(history, READS if kind == Kind.READ else ATOMICS, access)


def const_memory_is_written(argtypes: tuple, args: tuple) -> bool:
    """Whether the memory of a kk.Const array argument may overlap that of another array
    argument, which the kernel may write. Where none does, what the kernel reads from
    kk.Const arrays no work-item writes in the launch, and those reads need no record
    (most of a stencil's reads, say)."""
    arrays = [(argtype.const, np.asarray(arg)) for argtype, arg in zip(argtypes, args)
              if isinstance(argtype, T.ArrayType)]
    return any(np.may_share_memory(read_only, other)
               for index, (const, read_only) in enumerate(arrays) if const
               for other_index, (other_const, other) in enumerate(arrays)
               if other_index != index and not other_const)


_detectors: dict[int, weakref.ref] = {}   # a launch's number -> its detector
_numbers = itertools.count(1)


class RaceDetector:
    """What one launch's accesses did to each element (see the module's docstring).
    `record` is the launch's error record, with the detector's number in it: the launch
    passes it in place of the plain error record and keeps the detector until it has
    run."""

    def __init__(self, kernel: str, compiled, ndrange: tuple, workgroupsize: tuple,
                 argtypes: tuple, args: tuple):
        self.kernel = kernel
        self.compiled = compiled
        self.sizes = tuple(workgroupsize)                       # work-items of a group
        self.groups = number_of_groups(ndrange, workgroupsize)  # groups along each axis
        sites = compiled.info.get("race_sites", [])
        self.kinds = [Kind(kind) for _, kind, _, _ in sites]
        self.local = [array[0] == "local" for _, _, array, _ in sites]
        self.ndims = [ndim for _, _, _, ndim in sites]
        self.record = np.zeros(RECORD_WORDS, np.int64)
        number = next(_numbers)
        self.record[DETECTOR_WORD] = number
        self.record[CONST_WORD] = const_memory_is_written(argtypes, args)
        _detectors[number] = weakref.ref(self, lambda _: _detectors.pop(number, None))
        self.elements: dict[int, list] = {}        # address -> history, global memory
        self.local_elements: dict[int, list] = {}  # the same for the group's local memory
        self.local_group = -1
        self.race: tuple | None = None   # (access, earlier access, index)
        self.failure: BaseException | None = None
        self.stopped = False

    def access(self, address: int, site: int, group: int, item: int, interval: int) -> None:
        """Work-item `item` of group `group`, having passed `interval` barriers, accesses
        the element at `address` at `site`: remember it, or find the race it makes."""
        if self.local[site]:
            if group != self.local_group:   # a new group: new local memory
                self.local_elements.clear()
                self.local_group = group
            elements = self.local_elements
        else:
            elements = self.elements
        kind = self.kinds[site]
        history = elements.get(address)
        if history is None:
            history = elements[address] = [None] * 7
        else:
            earlier = conflicting(history, kind, group, item, interval)
            if earlier is not None:
                self.found((group, item, interval, site), earlier)
                return
        remember(history, kind, (group, item, interval, site))

    def found(self, access: tuple, earlier: tuple) -> None:
        """The first race: `access` conflicts with `earlier`; the kernel wrote the
        element's indices into the record before it called."""
        ndim = self.ndims[access[SITE]]
        index = tuple(int(value) for value in self.record[INDEX_WORDS:INDEX_WORDS + ndim])
        self.race = (access, earlier, index)
        self.stop()

    def stop(self) -> None:
        """Mark the error record (where no bounds check failed first): the launch stops."""
        self.stopped = True
        if self.record[0] == 0:
            self.record[0] = RACE_FOUND

    def failed(self) -> bool:
        return self.record[0] == RACE_FOUND

    def error(self) -> BaseException:
        """The RaceError of the race found (or what went wrong recording accesses)."""
        if self.failure is not None:
            return self.failure
        return race_error(self.kernel, self.compiled, self.race, self.work_item)

    def work_item(self, group: int, item: int) -> tuple:
        """The global index of work-item `item` of group `group` (both numbered in C
        order, as the group function numbers them)."""
        group_index = np.unravel_index(group, self.groups)
        local_index = np.unravel_index(item, self.sizes)
        return tuple(int(g) * size + int(l)
                     for g, size, l in zip(group_index, self.sizes, local_index))


def _access(detector: int, address: int, site: int, group: int, item: int,
            interval: int) -> int:
    """What `ACCESS_FUNCTION` is: the kernel's call into its launch's detector."""
    reference = _detectors.get(detector)
    recorder = reference() if reference is not None else None
    if recorder is None or recorder.stopped:
        return 1   # a race was found already (or the launch is gone): stop
    try:
        recorder.access(address, site, group, item, interval)
    except BaseException as error:  # (ctypes would print it and go on) raised by the launch
        recorder.failure = error
        recorder.stop()
    return recorder.stopped


_ACCESS = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_int64] * 6)(_access)


@functools.lru_cache(maxsize=1)
def provide_access_function() -> None:
    """Make `ACCESS_FUNCTION` known to the JIT by name (before a kernel that calls it is
    loaded)."""
    llvm.add_symbol(ACCESS_FUNCTION, ctypes.cast(_ACCESS, ctypes.c_void_p).value)


# -- the report ---------------------------------------------------------------------------

_VERBS = {Kind.READ: ("reads", "read"), Kind.WRITE: ("writes", "wrote"),
          Kind.ATOMIC: ("updates atomically", "updated atomically")}


def race_error(kernel: str, compiled, race: tuple, work_item) -> RaceError:
    """The error for `race` (an access, the earlier one it conflicts with, the element's
    index) in `kernel`, compiled as `compiled`; `work_item(group, item)` gives a
    work-item's global index."""
    access, earlier, index = race
    sites = compiled.info["race_sites"]
    locations = compiled.info.get("locations", [])

    def where(site: int):
        loc = locations[sites[site][0]]
        if loc is None:
            return None, None, None
        return loc.file, loc.line, linecache.getline(loc.file, loc.line).strip()

    kind, earlier_kind = Kind(sites[access[SITE]][1]), Kind(sites[earlier[SITE]][1])
    array = array_name(sites[access[SITE]][2])
    file, line, text = where(access[SITE])
    earlier_file, earlier_line, earlier_text = where(earlier[SITE])
    items = (work_item(earlier[GROUP], earlier[ITEM]), work_item(access[GROUP], access[ITEM]))
    earlier_array = array_name(sites[earlier[SITE]][2])
    through = f" (as {earlier_array})" if earlier_array != array else ""
    same_group = access[GROUP] == earlier[GROUP]
    atomic = Kind.ATOMIC in (kind, earlier_kind)
    order = ("they are in one work-group, with no barrier between the two accesses"
             if same_group else
             "they are in different work-groups, and a barrier orders only the work-items "
             "of one group")
    earlier_where = f"at {earlier_file}:{earlier_line}:\n    {earlier_text}\n" \
        if earlier_file else "(at a line kernelkit does not know)\n"
    message = (f"data race on element {index} of {array}: work-item {items[1]} "
               f"{_VERBS[kind][0]} it here, and work-item {items[0]} "
               f"{_VERBS[earlier_kind][1]} it{through} {earlier_where}"
               f"and nothing orders the two: {order}"
               f"{'; only one of the two is atomic' if atomic else ''}")
    update = (file, line) == (earlier_file, earlier_line)   # a read-modify-write, say
    return RaceError(message, array=array, index=index, work_items=items,
                     lines=((earlier_file, earlier_line), (file, line)), kernel=kernel,
                     file=file, line=line, source_line=text,
                     hint=race_hint(atomic, same_group, update))


def array_name(array: list) -> str:
    """How a message names an array `describe_array` described."""
    kind, name, line = array
    if kind == "argument":
        return f"argument '{name}'"
    if kind == "local":
        made = f" (kk.localmem at line {line})" if line else ""
        return f"local array '{name}'{made}" if name else f"the local array{made}"
    return "an array"


def race_hint(atomic: bool, same_group: bool, update: bool) -> str:
    """What to do: make the accesses atomic, or order them; the likelier first (an
    `update`, both accesses on one line, is a read-modify-write like `a[i] += v`)."""
    if atomic:
        combine = ("an element that work-items update atomically needs atomics for every "
                   "access that may run at the same time (kk.atomic_add, kk.atomic_exchange ...)")
    else:
        combine = ("where several work-items add to one element, make each update atomic: "
                   "kk.atomic_add(array, index, value) instead of array[index] += value")
    if same_group:
        order = ("where one work-item reads what another writes, put a barrier, "
                 "kk.synchronize(), between the write and the read")
    else:
        order = ("where one reads what a work-item of another group writes, split the "
                 "kernel into two launches (kk.synchronize() orders only one group)")
    return f"{combine}; {order}" if atomic or update else f"{order}; {combine}"
