"""`python -m enzyme_ext.fuzz`: differential fuzzing of enzyme_ext on generated kernels:
forward mode against reverse mode, and both against finite differences; a program of
several launches of a kernel against the launches differentiated one by one.

    python -m enzyme_ext.fuzz --seeds 0:300 [--jobs 2] [--timeout 60] [--family access]
                              [--races] [--backend cpu|cuda]
    python -m enzyme_ext.fuzz --show 123 [--family access] [--races]

Kernels (`--family`), one per seed:

- `access` (the default): kernelkit's generated kernels (`kernelkit.fuzz.generator`) with
  the accesses through which work-items reach each other's elements, where a reverse
  pass must update an adjoint atomically or gather it (a plain update is right only at
  the identity map of the work-item's own index): arrays shaped like the ndrange (square
  in 2-D) read at permuted indices (`x[j, i]`), mirrored ones (`x[len(x) - 1 - i]`) and
  neighbours (`x[i + 1]` guarded by `i + 1 < len(x)`, or clamped: `x[min(i + 1, n - 1)]`),
  each input through one style of maps (`STYLES`: own beside transposed reads, transposed
  only, own beside neighbours, ...); outputs written at a permutation of the own index
  (`y[j, i] = ...`); and a local tile
  written at the work-item's own local index and, after `kk.synchronize()`, read
  transposed (`tile[lj, li]`), mirrored or at a neighbour. Every element is still
  written by one work-item (no primal races), and the final value of each float output
  depends on those reads. Float inputs hold no whole numbers (floor, casts and
  comparisons then seldom sit on a jump), and half of the kernels compute only in
  float64, for the finite differences. Some inputs come in pairs on bases of one shape
  and dtype: two inputs, or an input beside an output.
- `kernelkit`: `python -m kernelkit.fuzz`'s kernels as they are (its generator keeps
  integer divisors non-zero, casts guarded, indices in range, ...).

Float inputs hold no nan, inf or huge specials (they make every product nan or inf and
so check nothing). The float32/float64 arrays (all, or a random subset) are
`Duplicated`, the rest `Const` (wrapped or passed plain). Where two inputs have bases of
one shape and dtype, half of the seeds pass one array for both (each with a shadow of
its own; both Duplicated or both not): autodiff must accept that, and the derivative
with respect to the array is the sum of the two shadows. Where an output and an input
would share elements, half of the seeds also pass one array for both, once the checks
below have passed without: autodiff must then refuse, in both modes, with a kernelkit
error naming the two and saying they share memory, and must have run nothing.

With J the Jacobian of (initial contents of the differentiated arrays) -> (their final
contents), a tangent t (normal, times max(1, |x|) elementwise, so a step h t is relative)
and an adjoint seed s (normal):

    <s, J t>  (autodiff(Forward, ...): the shadows carry t in and J t out)
      ==
    <J^T s, t>  (autodiff(Reverse, ...): the shadows carry s in and J^T s out)

up to rounding: |lhs - rhs| <= rtol * (sum |s_k (J t)_k| + sum |(J^T s)_k t_k|), rtol
1e-9 where the kernel computes only in float64 and 1e-4 where float32 appears. In the
float64 kernels both must also equal the central differences (phi(h) - phi(-h)) / 2h of
phi(e) = <s, final contents from the initial ones moved by e t>, at steps h from 1e-6
(relative, as t scales with x) down to 1e-12 by half decades: a kernel may turn too
fast for the larger ones (sin(x**3) with x near 800), rounding swamps the smaller. The
estimate is the middle of the three consecutive steps that agree best, and the
tolerance is twice their spread (what truncation and rounding did there) plus phi's
rounding (2^-44 of sum |s_k y_k|, divided by the step). Where phi has a kink or a jump
at the point (a branch on a differentiated value, floor or a cast at a whole number,
abs at 0: the slope's change across the point does not shrink with the step), forward
and reverse mode may each take either side: the point is not checked against finite
differences (`fd-not-smooth`), only forward against reverse. Every run starts from
fresh copies of the same inputs; the primal results of both AD runs must equal a plain
launch's (bit for bit, or to the kernelkit fuzzer's tolerance where the kernel uses
inexact math); shadow elements outside an array's view must be left alone.

Where the plan has a Duplicated array the kernel writes, a Python program then launches
the kernel two or three times (`ProgramPlan`: the same arrays again, or an output and an
input of one shape, dtype and view swapped after each launch; inputs maybe through
temporaries filled by `kk.copyto`; outputs maybe read at their neighbours and
overwritten by two small kernels of this module), differentiated by `autodiff(Reverse,
program, ...)`; its shadows and the arrays' final contents must be bit for bit those of
the same launches differentiated one by one with `ReverseSplit` (`check_program`). A
program's reverse pass has kernels of its own (`program.Zeros`): the reverse kernel
that leaves an overwritten output's shadow unzeroed, the gather kernel that stores into
a shadow known to hold zeros; the one-by-one launches never use them. The program check
runs on a CPU that runs work-groups one after another (atomic adjoint updates then add
in one order).

`--races` runs every launch under the CPU's race detector (`kk.CPU(debug="races")`,
`backends/cpu/races.py`): a race found in any launch (plain, derivative or finite
difference) is the seed's failure. `--backend cuda` also differentiates each seed on
CUDA: where there is a GPU, every check above runs on it too and its products must
equal the CPU's; without one, on `CUDABackend.compile_only("sm_80", "sm_90")`, the
forward, augmented forward, reverse (and gather) kernels must compile for both.

Outcomes: `pass`; `compiled` (CUDA without a GPU); `refused` (enzyme_ext raised a
kernelkit error that is not an internal compiler error: counted by message); `singular`
(one product is nan or inf where the primal results hold inf or nan themselves, from
finite inputs: derivatives are not defined there); `invalid` (the kernelkit reference
refused the kernel: the generator's fault) and `no-float` (nothing to differentiate):
none of these a failure. The failures: `mismatch` (forward and reverse disagree),
`fd-mismatch` (they agree, but not with the finite differences), `nonfinite` (nan/inf in
one mode's product only), `primal-mismatch`, `shadow-outside-view`, `race`,
`aliasing-not-refused`, `sharing-refused` (two read parameters given one array were
refused), `program-mismatch` (a program's derivative or results are not its launches'
one by one), `program-error` (one of the two raised), `backend-mismatch`,
`compile-error` (CUDA refuses what the CPU differentiates), `internal-error`,
`primal-error` (the plain launch itself failed), `crash`, `hang`. A passing outcome's
detail lists what was checked (`checks:`: fd, fd-loose, fd-not-smooth, fd-nonfinite,
fd-float32, shared-read, aliasing-refused; program, program-ping-pong, program-copies,
program-overwritten, program-refused, and gather-stored and reverse-unzeroed where the
seed's kernel took those forms in the program's reverse pass) and the access patterns
of its kernel (`patterns:`); the summary counts both over the passing seeds.

Seeds run in worker processes as in `kernelkit.fuzz`: a worker that crashes or runs a
seed past `--timeout` seconds is replaced, and that seed is reported as a crash or hang."""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import math
import re
import signal
import sys
import threading
import time
import traceback
from collections import Counter

import numpy as np

import kernelkit as kk
from enzyme_ext import (Const, Duplicated, Forward, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk)
from enzyme_ext.program import _is_array
from enzyme_ext.rules import _rules
from enzyme_ext.signature import GATHER_STORED, REVERSE_UNZEROED
from kernelkit.errors import CompileOnlyError, KernelkitError, RaceError
from kernelkit.fuzz.generator import (HEADER, ArraySpec, Case, Generator, Options, ScalarSpec,
                                      Var, apply_view, generate, typed)
from kernelkit.fuzz.runner import TOLERANCE, Outcome, compare, make_backends
from kernelkit.fuzz.workers import parse_seeds, run_seeds_in_workers

FAILURES = ("mismatch", "fd-mismatch", "nonfinite", "primal-mismatch", "shadow-outside-view",
            "race", "aliasing-not-refused", "sharing-refused", "program-mismatch",
            "program-error", "backend-mismatch", "compile-error", "internal-error",
            "primal-error", "crash", "hang")
NOT_CHECKED = ("compiled", "refused", "singular", "invalid", "no-float")
FLOATS = ("float32", "float64")
RTOL = {"float64": 1e-9, "float32": 1e-4}

FD_STEPS = tuple(1e-6 * 10 ** (-k / 2) for k in range(13))   # 1e-6 down to 1e-12
FD_ROUNDING = 2.0 ** -44  # of sum |s_k y_k|: how far phi's rounding may go
FD_LOOSE = 1e-3          # a tolerance above this much of the terms' magnitude checks little


# -- the access family ------------------------------------------------------------------------

_ANY = ("own", "permuted", "mirrored", "neighbour-guarded", "neighbour-clamped")
STYLES = {
    # The index maps the reads of one shaped input use, by the ndrange's dimensions. A
    # reverse pass may update an adjoint plainly only where every read of the array is
    # at the identity map ("own"); the styles make the mixes that decide it common: own
    # beside permuted reads (two work-items update each element: atomics), permuted reads
    # only (one work-item each, another's: the gather form), own beside neighbours.
    1: {"mirror": ("own", "mirrored"), "mirrored": ("mirrored",),
        "stencil": ("own", "neighbour-guarded", "neighbour-clamped"),
        "any": tuple(kind for kind in _ANY if kind != "permuted")},
    2: {"transpose": ("own", "permuted"), "transposed": ("permuted",),
        "mirror": ("own", "mirrored"),
        "stencil": ("own", "neighbour-guarded", "neighbour-clamped"),
        "any": _ANY},
}


@dataclasses.dataclass
class AccessCase(Case):
    """A case of the access family: its float inputs and outputs hold no whole numbers,
    and it names the access patterns its kernel has."""
    patterns: frozenset = frozenset()

    def arguments(self) -> list:
        values = super().arguments()
        rng = np.random.default_rng([self.seed, 0xF1])
        for param, value in zip(self.params, values):
            if isinstance(param, ArraySpec) and param.dtype in FLOATS and param.role != "atomic":
                base = value[0]
                offsets = rng.uniform(0.1, 0.4, base.shape) * rng.choice([-1.0, 1.0], base.shape)
                base[...] = np.where(base == np.trunc(base), base + offsets, base)
        return values


class AccessGenerator(Generator):
    """kernelkit's kernel generator, whose kernels also read arrays shaped like the
    ndrange at other work-items' elements, write some outputs at a permutation of the own
    index, and share a local tile read at other work-items' slots (see the module
    docstring). The accesses keep the kernel free of primal races: permuted and
    neighbouring reads are of inputs only (never written), a permuted output is read and
    written at its one permuted index only, and the tile is written once, before a
    barrier, and only read after it."""

    def __init__(self, seed: int, options: Options | None = None):
        super().__init__(seed, options)
        # Its own group shapes, small ones; subgroup operations come with the kernelkit
        # family's kernels.
        self.subgroups = False
        if self.chance(0.5):   # the kernel computes in float64 only: finite differences check it
            self.dtypes = [d for d in self.dtypes if d != "float32"]
        self.shaped: dict[str, tuple[str, ...]] = {}   # input shaped like the ndrange -> its reads
        self.permuted_outputs: set[str] = set()
        self.tile_values: list[Var] = []
        self.tile_placed = False
        self.patterns: set[str] = set()

    def float_type(self) -> str:
        return "float32" if "float32" in self.dtypes and self.chance(0.25) else "float64"

    def case(self) -> AccessCase:
        rng = self.rng
        if self.chance(0.3):
            workgroupsize = (rng.choice([1, 2, 3, 4, 5, 8, 16]),)
            ndrange = (rng.randint(2, 3 * workgroupsize[0] + 5),)
        else:
            side = rng.choice([1, 2, 3, 4, 8])
            workgroupsize = (side, side) if self.chance(0.6) else (side, rng.choice([1, 2, 4, 5]))
            n = rng.randint(2, 2 * max(workgroupsize) + 3)
            ndrange = (n, n)
        params = self.parameters(ndrange)
        body = [self.device_function(params) for _ in range(rng.choice([0, 0, 1, 1, 2]))]
        body.append(self.kernel(params, ndrange, workgroupsize))
        module = ast.fix_missing_locations(ast.Module(body, []))
        return AccessCase(self.seed, module, f"fuzz_{self.seed}", params, ndrange, workgroupsize,
                          self.options, frozenset(self.patterns))

    def parameters(self, ndrange) -> list:
        rng = self.rng
        params = super().parameters(ndrange)
        outputs = [p for p in params if isinstance(p, ArraySpec) and p.role == "out"]
        for output in outputs:
            if self.chance(0.8):
                output.dtype = self.float_type()
            if self.chance(0.3):
                self.permuted_outputs.add(output.name)
                self.patterns.add("permuted-write" if len(ndrange) == 2 else "mirrored-write")
        shaped = [self.view_spec(f"x{k}", self.float_type(), ndrange, "in")
                  for k in range(rng.randint(1, 2))]
        if self.chance(0.5):
            shaped.append(self.twin(f"x{len(shaped)}", shaped[0]))
        float_outputs = [p for p in outputs if p.dtype in FLOATS]
        if float_outputs and self.chance(0.5):
            shaped.append(self.twin("y0", rng.choice(float_outputs)))
        styles = STYLES[len(ndrange)]
        self.shaped.update((p.name, styles[rng.choice(sorted(styles))]) for p in shaped)
        scalars = next((k for k, p in enumerate(params) if isinstance(p, ScalarSpec)), len(params))
        return params[:scalars] + shaped + params[scalars:]

    def twin(self, name: str, spec: ArraySpec) -> ArraySpec:
        """An input on a base of `spec`'s shape and dtype, so that a plan may pass one array
        for both: through the same view, or where the base is square maybe the other of
        the plain and the transposed one."""
        view = spec.view
        square = len(spec.base_shape) == 2 and spec.base_shape[0] == spec.base_shape[1]
        if square and view in ("", ".T") and self.chance(0.5):
            view = ".T" if view == "" else ""
        return ArraySpec(name, spec.dtype, spec.base_shape, view, "in", spec.shape)

    # -- the accesses ------------------------------------------------------------------------

    def array_read(self, ctx, spec, uniform):
        if ctx.kernel and not uniform and spec.name in self.shaped and self.chance(0.85):
            return self.shaped_read(ctx, spec)
        return super().array_read(ctx, spec, uniform)

    def shaped_read(self, ctx, spec) -> ast.expr:
        """A read of an input shaped like the ndrange at one of the index maps its style
        allows (`STYLES`): the work-item's own element, the transposed one, a mirrored one
        or a neighbour (guarded or clamped at the edge), or in the style `any` a
        permutation and one of the others."""
        rng = self.rng
        style = self.shaped[spec.name]
        kind = rng.choice(style)
        index = ["i", "j"][:ctx.ndim]
        if kind == "permuted" or (style == _ANY and kind != "own" and self.chance(0.5)):
            index.reverse()
            self.patterns.add("permuted")
        own = ", ".join(index)
        axis = rng.randrange(ctx.ndim)
        extent = f"len({spec.name})" if axis == 0 else f"{spec.name}.shape[{axis}]"
        at = index[axis]
        guard = None
        if kind == "mirrored":
            index[axis] = f"{extent} - 1 - {at}"
        elif kind == "neighbour-clamped":
            index[axis] = (f"min({at} + 1, {extent} - 1)" if self.chance(0.5)
                           else f"max({at} - 1, 0)")
        elif kind == "neighbour-guarded":
            if self.chance(0.5):
                index[axis], guard = f"{at} + 1", f"{at} + 1 < {extent}"
            else:
                index[axis], guard = f"{at} - 1", f"{at} > 0"
        text = f"{spec.name}[{', '.join(index)}]"
        if guard is not None:
            fallback = f"{spec.name}[{own}]" if self.chance(0.5) else f"np.{spec.dtype}(0.0)"
            text = f"({text} if {guard} else {fallback})"
        if kind not in ("own", "permuted"):
            self.patterns.add(kind)
        return typed(ast.parse(text, mode="eval").body, spec.dtype, whole=True)

    def own_index(self, ctx, spec):
        if spec.name not in self.permuted_outputs:
            return super().own_index(ctx, spec)
        text = "j, i" if ctx.ndim == 2 else f"len({spec.name}) - 1 - i"
        return ast.parse(text, mode="eval").body

    def shaped_term(self, ctx, dtype: str) -> ast.expr:
        """A float of `dtype` computed from reads of the shaped inputs and of the tile, at
        other work-items' elements: what makes the outputs depend on them."""
        rng = self.rng
        shaped = [spec for name, spec in ctx.arrays.items() if name in self.shaped]
        leaves = [self.shaped_read(ctx, rng.choice(shaped)) for _ in range(rng.randint(1, 3))]
        if self.tile_values and self.chance(0.7):
            var = rng.choice(self.tile_values)
            leaves.append(typed(ast.Name(var.name, ast.Load()), var.type, None, var.inexact))
        term = leaves[0]
        for leaf in leaves[1:]:
            operator = rng.choice(["+", "-", "*", "*"])
            if operator == "-" and ast.unparse(leaf) == ast.unparse(term):
                # x - x is 0 exactly, but reverse mode adds +a and -a into d_x one after
                # the other: where a is large (x - x times 1e19 from elsewhere in the
                # kernel), the seed d_x held is rounded away, and forward and reverse
                # differ by rounding that the terms' magnitude does not show
                operator = "+"
            term = self.binary(operator, term, leaf)
        if self.chance(0.3):
            function = ast.Attribute(ast.Name("kk", ast.Load()), rng.choice(["sin", "cos", "tanh"]),
                                     ast.Load())
            term = typed(ast.Call(function, [term], []), term._kk_type, None, True)
            term._kk_inexact_op = True
        return self.cast(ctx, term, dtype)

    def output_store(self, ctx, spec, final=False):
        store = super().output_store(ctx, spec, final)
        if not final or spec.dtype not in FLOATS or not self.chance(0.85):
            return store
        target = ast.Subscript(ast.Name(spec.name, ast.Load()), self.own_index(ctx, spec),
                               ast.Store())
        operator = self.rng.choice([ast.Add, ast.Sub, ast.Mult])
        return [store, ast.AugAssign(target, operator(), self.shaped_term(ctx, spec.dtype))]

    def statements(self, ctx, count: int, depth: int) -> list[ast.stmt]:
        # The kernel's first statements after its geometry: where control flow is uniform
        # and the tile's one barrier may go.
        if ctx.kernel and not self.tile_placed:
            self.tile_placed = True
            if self.chance(0.6):
                tile = self.emit(ctx, lambda: self.tile_section(ctx))
                return tile + super().statements(ctx, count, depth)
        return super().statements(ctx, count, depth)

    def tile_section(self, ctx) -> list[ast.stmt]:
        """A local tile each work-item writes at its own local index, a barrier, and reads
        of it at other work-items' slots (each a variable later expressions may use)."""
        dtype = self.float_type()
        name = self.fresh("tile")
        shape = tuple(ctx.workgroupsize) if ctx.ndim == 2 else ctx.workgroupsize[0]
        value = self.shaped_term(ctx, dtype)
        slot = ast.parse(", ".join(ctx.local_slot), mode="eval").body
        statements = [ast.parse(f"{name} = kk.localmem(np.{dtype}, {shape})").body[0],
                      ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), slot, ast.Store())],
                                 value),
                      ast.parse("kk.synchronize()").body[0]]
        reads = [self.tile_read(ctx, name) for _ in range(self.rng.randint(1, 2))]
        if self.chance(0.5):   # beside the others: its adjoint has several updaters
            reads.insert(self.rng.randint(0, len(reads)), f"{name}[{', '.join(ctx.local_slot)}]")
        for read in reads:
            var = Var(self.fresh("tv"), dtype, None, value._kk_inexact, False)
            statements.append(ast.parse(f"{var.name} = {read}").body[0])
            ctx.declare(var)
            self.tile_values.append(var)
        return statements

    def tile_read(self, ctx, name: str) -> str:
        """A read of the tile at another active work-item's slot: transposed (square
        work-groups), mirrored, or a neighbour guarded or clamped at the group's edge."""
        rng = self.rng
        slot, active = list(ctx.local_slot), list(ctx.active)
        own = ", ".join(slot)
        kinds = ["mirrored", "neighbour-guarded", "neighbour-clamped"]
        if ctx.ndim == 2 and ctx.workgroupsize[0] == ctx.workgroupsize[1]:
            kinds += ["transposed"] * 3
        kind = rng.choice(kinds)
        self.patterns.add(f"tile-{kind}")
        if kind == "transposed":
            return (f"({name}[{slot[1]}, {slot[0]}] if {slot[1]} < {active[0]} and "
                    f"{slot[0]} < {active[1]} else {name}[{own}])")
        axis = rng.randrange(ctx.ndim)
        at, count = slot[axis], active[axis]
        if kind == "mirrored":
            slot[axis] = f"{count} - 1 - {at}"
            return f"{name}[{', '.join(slot)}]"
        if kind == "neighbour-clamped":
            slot[axis] = f"min({at} + 1, {count} - 1)" if self.chance(0.5) else f"max({at} - 1, 0)"
            return f"{name}[{', '.join(slot)}]"
        if self.chance(0.5):
            slot[axis], guard = f"{at} + 1", f"{at} + 1 < {count}"
        else:
            slot[axis], guard = f"{at} - 1", f"{at} > 0"
        return f"({name}[{', '.join(slot)}] if {guard} else {name}[{own}])"


def make_case(seed: int, options: Options | None = None, family: str = "kernelkit") -> Case:
    """The case of `seed` in `family` ('kernelkit' or 'access'), with float inputs free of
    specials (nan, inf, 1e30 make both products nan or inf, and so check nothing)."""
    if family == "access":
        case = AccessGenerator(seed, options).case()
    else:
        case = generate(seed, options)
    case.options = dataclasses.replace(case.options, specials=False)
    return case


FAMILIES = ("access", "kernelkit")


# -- the plan of one seed ----------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """Which arrays are Duplicated, whether Const ones are wrapped, the tangents and the
    adjoint seeds (over each array's whole base), which parameters are given another's
    array (`shared`: parameter -> the parameter whose array it is given; two inputs only),
    and the (written, read) parameters that are given one array to check that autodiff
    refuses them (`aliased`)."""
    duplicated: list[int]
    wrap_const: bool
    tangents: dict
    seeds: dict
    shared: dict = dataclasses.field(default_factory=dict)
    aliased: tuple[int, int] | None = None

    def groups(self) -> list[tuple[int, list[int]]]:
        """The differentiated arrays: (the parameter whose array it is, the Duplicated
        parameters given it)."""
        groups: dict[int, list[int]] = {}
        for k in self.duplicated:
            groups.setdefault(self.shared.get(k, k), []).append(k)
        return sorted(groups.items())


def plan_for(case) -> Plan | None:
    rng = np.random.default_rng([case.seed, 0xAD])
    floats = [k for k, p in enumerate(case.params)
              if isinstance(p, ArraySpec) and p.dtype in FLOATS]
    if not floats:
        return None
    if rng.random() < 0.5:
        duplicated = floats
    else:
        duplicated = [k for k in floats if rng.random() < 0.5] or \
            [floats[rng.integers(len(floats))]]
    if isinstance(case, AccessCase):
        # its outputs depend on the shaped inputs, and autodiff refuses a derivative stored
        # into an array that is not differentiated (the kernelkit family checks that)
        duplicated = sorted(set(duplicated) | {k for k in floats if case.params[k].role == "out"})
    wrap_const = bool(rng.random() < 0.5)
    initial = case.arguments()
    tangents, seeds = {}, {}
    for k in duplicated:
        p = case.params[k]
        scale = np.maximum(1.0, np.abs(initial[k][0].astype(np.float64)))
        tangents[k] = (rng.standard_normal(p.base_shape) * scale).astype(p.dtype)
        seeds[k] = rng.standard_normal(p.base_shape).astype(p.dtype)
    plan = Plan(list(duplicated), wrap_const, tangents, seeds)
    read_pairs, written_pairs = _pairs(case)
    if read_pairs and rng.random() < 0.5:
        _share(plan, *read_pairs[rng.integers(len(read_pairs))])
    if written_pairs and rng.random() < 0.5:
        plan.aliased = written_pairs[rng.integers(len(written_pairs))]
    return plan


def _pairs(case) -> tuple[list, list]:
    """The parameters one array could be passed for: pairs of inputs on bases of one shape
    and dtype, and (output, input) pairs whose views of one base would share elements."""
    arrays = [(k, p) for k, p in enumerate(case.params) if isinstance(p, ArraySpec)]
    read, written = [], []
    for k, p in arrays:
        for m, q in arrays:
            if k == m or (p.dtype, p.base_shape) != (q.dtype, q.base_shape) or q.role != "in":
                continue
            if p.role == "in" and k < m:
                read.append((k, m))
            elif p.role == "out":
                base = np.zeros(p.base_shape)
                if np.shares_memory(apply_view(base, p.view), apply_view(base, q.view)):
                    written.append((k, m))
    return read, written


def _share(plan: Plan, first: int, second: int) -> None:
    """Give `second` the array of `first`. Both are differentiated or neither (a Const
    one's reads would be left out of a derivative with respect to the array): one tangent
    for the array, both shadows start with it; the adjoint of the array's final contents
    is `first`'s seed, and `second`'s shadow starts at zero."""
    plan.shared[second] = first
    members = [k for k in (first, second) if k in plan.duplicated]
    if not members:
        return
    plan.tangents[first] = plan.tangents[members[0]]
    plan.seeds[first] = plan.seeds[members[0]]
    plan.tangents[second] = plan.tangents[first].copy()
    plan.seeds[second] = np.zeros_like(plan.seeds[first])
    plan.duplicated = sorted(set(plan.duplicated) | {first, second})


def rtol_for(case) -> tuple[str, float]:
    """float32 where any float32 value can take part (a parameter, a cast, a local array)."""
    source = case.kernel_source()
    uses32 = "float32" in source or any(
        (isinstance(p, ArraySpec) and p.dtype == "float32") or
        (isinstance(p, ScalarSpec) and p.type == "float32") for p in case.params)
    precision = "float32" if uses32 else "float64"
    return precision, RTOL[precision]


def _view_mask(param) -> np.ndarray:
    """True at the base elements the array's view covers."""
    mask = np.zeros(param.base_shape, dtype=bool)
    apply_view(mask, param.view)[...] = True
    return mask


# -- the launches of one seed ------------------------------------------------------------------


class Runs:
    """The launches of one case's kernel on one backend, each on fresh copies of the
    arguments the plan gives."""

    def __init__(self, case, plan: Plan, backend, launch):
        self.case, self.plan, self.backend, self.launch = case, plan, backend, launch
        self.initial = case.arguments()
        self.masks = {}   # the elements of each differentiated array that its parameters see
        for owner, members in plan.groups():
            self.masks[owner] = np.logical_or.reduce([_view_mask(case.params[k])
                                                      for k in members])

    def modes(self):
        return (("forward", Forward, self.plan.tangents), ("reverse", Reverse, self.plan.seeds))

    def arguments(self, step: float = 0.0, alias: tuple[int, int] | None = None):
        """(bases, values): a base on the backend for each parameter not given another's
        array (by parameter), and the argument values. With `step`, each differentiated
        array is moved by step times its tangent, where its parameters see it."""
        givers = dict(self.plan.shared)
        if alias is not None:
            givers[alias[1]] = alias[0]

        def owner(k):
            while k in givers:
                k = givers[k]
            return k

        bases = {}
        for k, (param, argument) in enumerate(zip(self.case.params, self.initial)):
            if isinstance(param, ArraySpec) and k not in givers:
                base = np.array(argument[0], copy=True)
                if step and k in self.masks:
                    base = (base + step * self.plan.tangents[k] * self.masks[k]).astype(param.dtype)
                bases[k] = kk.to_backend(self.backend, base)
        values = [apply_view(bases[owner(k)], param.view) if isinstance(param, ArraySpec)
                  else argument for k, (param, argument) in enumerate(zip(self.case.params,
                                                                          self.initial))]
        return bases, values

    def plain(self, step: float = 0.0) -> dict:
        """The arrays' final contents after a plain launch (NumPy, by parameter)."""
        bases, values = self.arguments(step)
        self.launch(*values, ndrange=self.case.ndrange)
        kk.synchronize(self.backend)
        return _to_numpy(bases)

    def prepare(self, shadow_bases: dict, alias: tuple[int, int] | None = None):
        """(bases, shadows, the arguments wrapped in their activities) for one AD run."""
        bases, values = self.arguments(alias=alias)
        shadows = {k: kk.to_backend(self.backend, np.array(shadow_bases[k], copy=True))
                   for k in self.plan.duplicated}
        wrapped = []
        for k, value in enumerate(values):
            if k in shadows:
                wrapped.append(Duplicated(value, apply_view(shadows[k], self.case.params[k].view)))
            elif self.plan.wrap_const:
                wrapped.append(Const(value))
            else:
                wrapped.append(value)
        return bases, shadows, wrapped

    def differentiate(self, mode, shadow_bases: dict) -> tuple[dict, dict]:
        """The arrays' and shadows' final contents after autodiff in `mode`."""
        bases, shadows, wrapped = self.prepare(shadow_bases)
        autodiff(mode, self.launch, *wrapped, ndrange=self.case.ndrange)
        kk.synchronize(self.backend)
        return _to_numpy(bases), _to_numpy(shadows)


def _to_numpy(arrays: dict) -> dict:
    return {k: np.array(kk.to_numpy(a)) for k, a in arrays.items()}


# -- checking one seed -------------------------------------------------------------------------


@dataclasses.dataclass
class Products:
    """The two sides of the dot-product identity and their terms' magnitudes."""
    forward: float           # <s, J t>
    reverse: float           # <J^T s, t>
    forward_scale: float     # sum |s_k (J t)_k|
    reverse_scale: float     # sum |(J^T s)_k t_k|


def _normalize(message: str) -> str:
    """An error message with its kernel names, lines and numbers taken out, to count
    refusals by kind."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


def _error_message(error: BaseException) -> str:
    return getattr(error, "message", None) or str(error)


def classify_error(error: BaseException) -> str:
    """race (the race detector's report), refused (any other clean kernelkit error) or
    internal-error."""
    if isinstance(error, RaceError):
        return "race"
    text = str(error).lower()
    if isinstance(error, KernelkitError) and "bug in kernelkit" not in text \
            and "internal compiler error" not in text:
        return "refused"
    return "internal-error"


def _describe(error: BaseException, traceback_: bool) -> str:
    text = f"{type(error).__name__}: {error}"
    if traceback_:
        frames = traceback.extract_tb(error.__traceback__)[-4:]
        text += "\n" + "".join(traceback.format_list(frames))
    return text


def check_case(case, backend, details: list | None = None) -> Outcome:
    """The outcome of one case on `backend` (details, if a list, receives lines telling
    what was run and found)."""
    return check_case_with_products(case, backend, details)[0]


def check_case_with_products(case, backend, details: list | None = None,
                             label: str | None = None) -> tuple[Outcome, Products | None]:
    """`check_case`'s outcome (labelled `label`, by default the backend's name) and, where
    the identity was checked, its products (for another backend's to be compared)."""
    from kernelkit.fuzz.reference import forget_module, load_module, run_reference
    label = label or backend.name
    plan = plan_for(case)
    if plan is None:
        return Outcome(case.seed, label, "no-float", "no float32/float64 array"), None
    _note(details, _describe_plan(case, plan))
    try:
        run_reference(case, case.arguments())
    except Exception as error:  # the reference refused the kernel: the generator's fault
        return Outcome(case.seed, "reference", "invalid", _describe(error, False)), None
    namespace = load_module(case.kernel_source(), f"enzyme_ext_fuzz_{case.seed}")
    try:
        launch = namespace[case.kernel_name](backend, case.workgroupsize)
        return _check_runs(Runs(case, plan, backend, launch), label, details)
    finally:
        forget_module(namespace)


def _note(details: list | None, text: str) -> None:
    if details is not None:
        details.append(text)


def _describe_plan(case, plan: Plan) -> str:
    names = [p.name for p in case.params]
    text = (f"Duplicated: {', '.join(names[k] for k in plan.duplicated)}; Const arguments "
            f"{'wrapped in Const' if plan.wrap_const else 'passed plain'}")
    for second, first in plan.shared.items():
        text += f"; '{names[second]}' is given the array of '{names[first]}'"
    if plan.aliased:
        written, read = plan.aliased
        text += (f"; then '{names[written]}' and '{names[read]}' given one array, to be "
                 f"refused")
    return text


def _check_runs(runs: Runs, label: str, details) -> tuple[Outcome, Products | None]:
    case, plan, seed = runs.case, runs.plan, runs.case.seed
    try:
        plain = runs.plain()
    except Exception as error:
        kind = "race" if isinstance(error, RaceError) else "primal-error"
        return Outcome(seed, label, kind, "plain launch: " + _describe(error, True)), None
    results = {}
    for mode_label, mode, shadow_bases in runs.modes():
        try:
            results[mode_label] = runs.differentiate(mode, shadow_bases)
        except Exception as error:
            kind = classify_error(error)
            detail = f"{mode_label}: " + _describe(error, kind != "refused")
            if kind == "refused" and plan.shared and "share memory" in _error_message(error):
                kind = "sharing-refused"   # arrays that are only read may share memory
            elif kind == "refused":
                detail = f"{mode_label}: {_normalize(_error_message(error))}\n" + detail
            return Outcome(seed, label, kind, detail), None

    # the primal results of the AD runs are the plain launch's
    inexact = case.inexact_precision()
    for mode_label, (bases, _) in results.items():
        for k, want in plain.items():
            problem = compare(want, bases[k], inexact)
            if problem:
                return Outcome(seed, label, "primal-mismatch",
                               f"{mode_label}: {case.params[k].name}: {problem}"), None

    # shadows outside the views are left alone
    for k in plan.duplicated:
        param = case.params[k]
        outside = ~_view_mask(param)
        for mode_label, mode, before in runs.modes():
            after = results[mode_label][1][k]
            changed = outside & ~((after == before[k]) | (np.isnan(after) & np.isnan(before[k])))
            if changed.any():
                return Outcome(seed, label, "shadow-outside-view",
                               f"{mode_label}: d_{param.name} changed at base elements "
                               f"{np.argwhere(changed)[:4].tolist()} outside its view "
                               f"{param.view!r}"), None

    products, failure = _identity(runs, plain, results, label, details)
    if failure is not None:
        return failure, None
    checks = []
    if math.isfinite(products.forward) and math.isfinite(products.reverse):
        precision, _ = rtol_for(case)
        if precision == "float64":
            tag, text = _finite_differences(runs, plain, products)
            _note(details, "finite differences: " + text)
            if tag == "fd-mismatch":
                return Outcome(seed, label, tag, text), products
            checks.append(tag)
        else:
            checks.append("fd-float32")
    if plan.shared:
        checks.append("shared-read")
    if plan.aliased is not None:
        problem = _aliasing_problem(runs)
        if problem is not None:
            return Outcome(seed, label, "aliasing-not-refused", problem), products
        checks.append("aliasing-refused")
    kind, tags, text = check_program(runs, details)
    if kind in FAILURES:
        return Outcome(seed, label, kind, text), products
    checks += tags + (["program-refused"] if kind == "refused" else [])
    patterns = sorted(getattr(case, "patterns", ()))
    detail = f"{products.forward!r} {products.reverse!r}" if math.isfinite(products.forward) \
        else f"both products non-finite: {products.forward} {products.reverse}"
    detail += f"\nchecks: {' '.join(checks)}\npatterns: {' '.join(patterns)}"
    return Outcome(seed, label, "pass", detail), products


def _identity(runs: Runs, plain: dict, results: dict, label: str,
              details) -> tuple[Products, Outcome | None]:
    """The dot-product identity <s, J t> == <J^T s, t> over each differentiated array's
    elements its parameters see; for an array given to several parameters, J t is any
    one's forward shadow (they must agree) and J^T s the sum of their reverse shadows.
    Where the primal results hold inf or nan (from finite inputs: a division by zero),
    the derivatives there are not defined, and a product's nan (0 * inf in one mode
    only) checks nothing: `singular`."""
    case, plan, seed = runs.case, runs.plan, runs.case.seed
    forward_terms, reverse_terms = [], []
    for owner, members in plan.groups():
        mask = runs.masks[owner]
        tangent = plan.tangents[owner][mask].astype(np.float64)
        seed_values = plan.seeds[owner][mask].astype(np.float64)
        forward = [results["forward"][1][k][mask].astype(np.float64) for k in members]
        for k, other in zip(members[1:], forward[1:]):
            if not np.array_equal(other, forward[0], equal_nan=True):
                return None, Outcome(seed, label, "mismatch",
                                     f"forward: the shadows of '{case.params[members[0]].name}' "
                                     f"and '{case.params[k].name}', given one array, differ")
        gradient = np.sum([results["reverse"][1][k][mask].astype(np.float64) for k in members],
                          axis=0)
        with np.errstate(all="ignore"):
            forward_terms.append(seed_values * forward[0])
            reverse_terms.append(gradient * tangent)
        names = "+".join(case.params[k].name for k in members)
        _note(details, f"  {names} ({case.params[owner].dtype}): <s, Jt> part "
                       f"{_sum(forward_terms[-1])!r}, <J^T s, t> part {_sum(reverse_terms[-1])!r}")
    forward_terms, reverse_terms = np.concatenate(forward_terms), np.concatenate(reverse_terms)
    with np.errstate(all="ignore"):
        products = Products(_sum(forward_terms), _sum(reverse_terms),
                            float(np.sum(np.abs(forward_terms))),
                            float(np.sum(np.abs(reverse_terms))))
    lhs, rhs = products.forward, products.reverse
    precision, rtol = rtol_for(case)
    scale = products.forward_scale + products.reverse_scale
    _note(details, f"<s, J t> = {lhs!r} (forward), <J^T s, t> = {rhs!r} (reverse); "
                   f"sum of |terms| {scale!r}; rtol {rtol} ({precision})")
    finite = (math.isfinite(lhs), math.isfinite(rhs))
    if finite == (False, False):
        return products, None
    if finite != (True, True):
        text = f"<s, J t> = {lhs!r} (forward), <J^T s, t> = {rhs!r} (reverse)"
        singular = [case.params[owner].name for owner, _ in plan.groups()
                    if not np.all(np.isfinite(plain[owner][runs.masks[owner]]))]
        if singular:
            return products, Outcome(seed, label, "singular",
                                     f"{text}; the primal results of {', '.join(singular)} "
                                     f"hold inf or nan")
        return products, Outcome(seed, label, "nonfinite", text)
    error = abs(lhs - rhs)
    if error > rtol * scale + 1e-300:
        return products, Outcome(
            seed, label, "mismatch",
            f"<s, J t> = {lhs!r} (forward) but <J^T s, t> = {rhs!r} (reverse): difference "
            f"{error:.3g}, {error / scale if scale else math.inf:.3g} of the terms' magnitude "
            f"{scale:.3g} (rtol {rtol})")
    return products, None


def _sum(terms: np.ndarray) -> float:
    if not np.all(np.isfinite(terms)):
        with np.errstate(all="ignore"):
            return float(np.sum(terms))
    return math.fsum(terms.tolist())


def _finite_differences(runs: Runs, plain: dict, products: Products) -> tuple[str, str]:
    """(tag, description): central differences of phi(e) = <s, final contents from the
    initial ones moved by e t> against both products. The steps go from FD_STEPS[0] (a
    relative 1e-6, as t scales with x) down by half decades: a kernel may vary too fast
    for the first (sin(x**3) with x near 800 turns by radians at a relative 1e-6), and
    rounding swamps the last. The estimate is the middle one of the three consecutive
    steps that agree best, trusted to twice their spread plus phi's rounding
    (FD_ROUNDING of sum |s_k y_k|, divided by the step). Tags: fd (checked), fd-loose
    (checked, to a tolerance over FD_LOOSE of the terms' magnitude), fd-not-smooth and
    fd-nonfinite (not checked), fd-mismatch (a failure)."""
    plan = runs.plan

    def phi(finals: dict) -> float:
        terms = [plan.seeds[owner][runs.masks[owner]].astype(np.float64) *
                 finals[owner][runs.masks[owner]] for owner, _ in plan.groups()]
        return _sum(np.concatenate(terms))

    with np.errstate(all="ignore"):
        middle = phi(plain)
        magnitude = sum(float(np.sum(np.abs(plan.seeds[owner][runs.masks[owner]] *
                                            plain[owner][runs.masks[owner]])))
                        for owner, _ in plan.groups())
        sides = [(phi(runs.plain(h)), phi(runs.plain(-h))) for h in FD_STEPS]
    slopes = [(plus - minus) / (2 * h) for h, (plus, minus) in zip(FD_STEPS, sides)]
    # |phi(h) - 2 phi(0) + phi(-h)| / h: the change of slope across the point. It shrinks
    # with h where phi is smooth; a kink keeps it, a jump makes it grow.
    bends = [abs(plus - 2 * middle + minus) / h for h, (plus, minus) in zip(FD_STEPS, sides)]
    triples = [k for k in range(len(FD_STEPS) - 2)
               if all(math.isfinite(value) for value in slopes[k:k + 3] + bends[k:k + 3])]
    if not math.isfinite(middle) or not triples:
        return "fd-nonfinite", f"phi is not finite near the point: {middle}, {sides}"
    best = min(triples, key=lambda k: max(slopes[k:k + 3]) - min(slopes[k:k + 3]))
    slope, spread = slopes[best + 1], max(slopes[best:best + 3]) - min(slopes[best:best + 3])
    smallest = FD_STEPS[best + 2]
    scale = max(products.forward_scale, products.reverse_scale, abs(slope))
    tolerance = 2 * spread + FD_ROUNDING * magnitude / smallest + 1e-12 * scale
    steps = f"steps {FD_STEPS[best]:.3g} to {smallest:.3g}"
    if bends[best + 2] > 0.3 * bends[best] and bends[best + 2] > tolerance:
        return "fd-not-smooth", (f"a kink or jump near the point: across it the slope changes "
                                 f"by {bends[best]:.3g} and {bends[best + 2]:.3g} at {steps}")
    text = (f"(phi(h) - phi(-h)) / 2h = {slope!r} at h = {FD_STEPS[best + 1]:.3g} (spread "
            f"{spread:.3g} over {steps}); tolerance {tolerance:.3g} of terms' magnitude "
            f"{scale:.3g}")
    error = max(abs(slope - products.forward), abs(slope - products.reverse))
    if error > tolerance:
        return "fd-mismatch", (f"finite differences give {slope!r} but <s, J t> = "
                               f"{products.forward!r} (forward) and <J^T s, t> = "
                               f"{products.reverse!r} (reverse): difference {error:.3g}; "
                               + text)
    return ("fd-loose" if tolerance > FD_LOOSE * scale else "fd"), text


def _aliasing_problem(runs: Runs) -> str | None:
    """None where autodiff refuses, in both modes and before running anything, the plan's
    written and read parameters given one array; else what happened instead."""
    written, read = runs.plan.aliased
    names = (runs.case.params[written].name, runs.case.params[read].name)
    pair = f"'{names[0]}' (written) and '{names[1]}' (read) given one array"
    for mode_label, mode, shadow_bases in runs.modes():
        bases, shadows, wrapped = runs.prepare(shadow_bases, alias=runs.plan.aliased)
        before = _to_numpy({**bases, **{("shadow", k): s for k, s in shadows.items()}})
        try:
            autodiff(mode, runs.launch, *wrapped, ndrange=runs.case.ndrange)
            kk.synchronize(runs.backend)
        except Exception as error:
            message = _error_message(error)
            if classify_error(error) != "refused" or "share memory" not in message or \
                    not all(f"'{name}'" in message for name in names):
                return (f"{mode_label}: {pair}: expected autodiff to refuse them for sharing "
                        f"memory, got {_describe(error, True)}")
            after = _to_numpy({**bases, **{("shadow", k): s for k, s in shadows.items()}})
            if any(not np.array_equal(before[k], after[k], equal_nan=True) for k in before):
                return f"{mode_label}: {pair}: refused, but after writing to the arrays"
            continue
        return f"{mode_label}: {pair}: autodiff ran instead of refusing them"
    return None


# -- programs of several launches ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProgramPlan:
    """How the program check's program (`_program_launches`) launches a case's kernel:
    `launches` times in a row over the same arrays; where `swap` names an (output, input)
    pair of parameters on bases of one shape, dtype and view, their arrays trade places
    after each launch (a ping-pong: each launch overwrites what the one before it read).
    The read-only Duplicated inputs `copied` reach the launches through temporaries the
    program fills with `kk.copyto` (their shadows are the program's own: zeros a gather
    kernel may store into). Then each output in `overwritten` is read at its neighbours
    into a temporary (`_NEIGHBOURS`), which a last kernel halves back into it (`_halve`):
    in the reverse pass, the halving's kernel leaves the output's shadow unzeroed, the
    neighbours' gather kernel stores into it, and the case's kernel reads what it
    stored."""
    launches: int
    swap: tuple[int, int] | None
    copied: tuple[int, ...]
    overwritten: tuple[int, ...]

    def describe(self, case) -> str:
        names = [p.name for p in case.params]
        text = f"{self.launches} launches"
        if self.swap is not None:
            text += f", '{names[self.swap[0]]}' and '{names[self.swap[1]]}' swapped after each"
        if self.copied:
            text += f", {', '.join(repr(names[k]) for k in self.copied)} through copies"
        if self.overwritten:
            text += (f", then {', '.join(repr(names[k]) for k in self.overwritten)} read at "
                     f"neighbours and overwritten")
        return text


def program_plan_for(case, plan: Plan) -> ProgramPlan | None:
    """The program check's plan, where the case's plan has a Duplicated array the kernel
    writes (else None: what a program's reverse pass optimizes is the overwrites)."""
    params = case.params
    if not any(params[k].role != "in" for k in plan.duplicated):
        return None
    rng = np.random.default_rng([case.seed, 0x9A])
    swaps = [(o, i) for o, p in enumerate(params) for i, q in enumerate(params)
             if isinstance(p, ArraySpec) and isinstance(q, ArraySpec) and p.role == "out"
             and q.role == "in" and p.dtype in FLOATS
             and (p.dtype, p.base_shape, p.view) == (q.dtype, q.base_shape, q.view)]
    swap = swaps[rng.integers(len(swaps))] if swaps and rng.random() < 0.75 else None
    swapped = set(swap or ())
    # All or none: a gather kernel stores only where every shadow it updates holds zeros.
    copied = tuple(k for k in plan.duplicated if params[k].role == "in"
                   and k not in swapped) if rng.random() < 0.5 else ()
    overwritten = tuple(k for k in plan.duplicated if params[k].role == "out"
                        and len(params[k].shape) in _NEIGHBOURS and k not in swapped) \
        if rng.random() < 0.5 else ()
    return ProgramPlan(int(rng.choice([2, 3])), swap, copied, overwritten)


@kk.kernel
def _neighbours_1d(total, y: kk.Const):
    i = kk.index(kk.Global)
    if i + 1 < len(y):
        total[i] = y[i] + y[i + 1]
    else:
        total[i] = y[i]


@kk.kernel
def _neighbours_2d(total, y: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    if i + 1 < y.shape[0]:
        total[i, j] = y[i, j] + y[i + 1, j]
    else:
        total[i, j] = y[i, j]


# By rank: kernels whose reverse gathers into y's shadow (`transform/gather.py`).
_NEIGHBOURS = {1: _neighbours_1d, 2: _neighbours_2d}


@kk.kernel
def _halve(y, total: kk.Const):
    """Overwrites y whole (`transform/outputs.py`)."""
    at = kk.index(kk.Global, kk.NTuple)
    y[at] = 0.5 * total[at]


def _program_launches(case, program_plan: ProgramPlan, values: list, launch, step,
                      copy) -> None:
    """The program check's program (see `ProgramPlan`) over the argument `values`:
    `step(launch, arguments, ndrange, written)` launches (`written`: the positions of
    the arguments it may write), `copy(destination, source)` copies."""
    values, swap = list(values), program_plan.swap
    for k in program_plan.copied:
        temporary = kk.zeros_like(values[k])
        copy(temporary, values[k])
        values[k] = temporary
    written = {k for k, p in enumerate(case.params)
               if isinstance(p, ArraySpec) and p.role != "in"}
    for _ in range(program_plan.launches):
        step(launch, values, case.ndrange, written)
        if swap is not None:
            values[swap[0]], values[swap[1]] = values[swap[1]], values[swap[0]]
    for k in program_plan.overwritten:
        y = values[k]
        total, shape = kk.zeros_like(y), np.shape(y)
        step(_NEIGHBOURS[len(shape)](launch.backend), [total, y], shape, {0})
        step(_halve(launch.backend), [y, total], shape, {0})


class ProgramRun:
    """The arrays of one run of the program check: a fresh base of each array parameter
    (none given another's: the plan's `shared` is not followed) with its view, made once
    so that every launch is given the same array objects, and the shadows of the plan's
    Duplicated arrays holding its adjoint seeds."""

    def __init__(self, runs: Runs, backend):
        case, plan = runs.case, runs.plan
        self.case, self.backend = case, backend
        self.bases, self.shadow_bases, self.values, self.shadows = {}, {}, [], {}
        for k, (param, argument) in enumerate(zip(case.params, runs.initial)):
            if not isinstance(param, ArraySpec):
                self.values.append(argument)
                continue
            self.bases[k] = kk.to_backend(backend, np.array(argument[0], copy=True))
            self.values.append(apply_view(self.bases[k], param.view))
            if k in plan.duplicated:
                self.shadow_bases[k] = kk.to_backend(backend, np.array(plan.seeds[k], copy=True))
                self.shadows[k] = apply_view(self.shadow_bases[k], param.view)

    def results(self) -> tuple[dict, dict]:
        """The bases' and the shadows' contents (NumPy, by parameter)."""
        kk.synchronize(self.backend)
        return _to_numpy(self.bases), _to_numpy(self.shadow_bases)


def _differentiated(run: ProgramRun, launch, program_plan: ProgramPlan,
                    wrap_const: bool) -> tuple[dict, dict]:
    """`run.results()` after `autodiff(Reverse, program, ...)` of the program."""
    def program(*values):
        _program_launches(run.case, program_plan, values, launch,
                          lambda f, arguments, ndrange, _: f(*arguments, ndrange=ndrange),
                          kk.copyto)

    wrapped = [Duplicated(value, run.shadows[k]) if k in run.shadows else
               Const(value) if wrap_const else value for k, value in enumerate(run.values)]
    autodiff(Reverse, program, *wrapped)
    return run.results()


def _one_by_one(run: ProgramRun, launch, program_plan: ProgramPlan) -> tuple[dict, dict]:
    """`run.results()` after the program's launches differentiated one by one, as
    `ReverseSplit` halves: the augmented forward halves in order, then the reverse halves
    in the opposite order, each after every array is put back to what it held after its
    launch; then the temporaries' adjoints added into their sources' shadows, in NumPy.
    A float array a launch writes gets a zeroed shadow at its first launch where it has
    none, as in a program. What `check_program` compares the program's derivative with."""
    shadows = {id(run.values[k]): shadow for k, shadow in run.shadows.items()}
    copies, steps = [], []

    def copy(destination, source):
        kk.copyto(destination, source)
        shadows[id(destination)] = kk.zeros_like(destination)
        copies.append((source, destination))

    def step(f, arguments, ndrange, written):
        activities = []
        for k, value in enumerate(arguments):
            if _is_array(value) and id(value) not in shadows and k in written and \
                    np.dtype(value.dtype).name in FLOATS:
                shadows[id(value)] = kk.zeros_like(value)
            activities.append(Duplicated(value, shadows[id(value)])
                              if _is_array(value) and id(value) in shadows else Const(value))
        forward, reverse = autodiff_thunk(ReverseSplit, f, *activities)
        tape = forward(*activities, ndrange=ndrange)
        steps.append((activities, reverse, tape, ndrange, run.results()[0]))

    _program_launches(run.case, program_plan, run.values, launch, step, copy)
    for activities, reverse, tape, ndrange, contents in reversed(steps):
        for k, base in run.bases.items():
            kk.copyto(base, contents[k])
        reverse(*activities, tape=tape, ndrange=ndrange)
    for k, base in run.bases.items():
        kk.copyto(base, steps[-1][-1][k])
    bases, shadow_bases = run.results()
    for source, temporary in copies:
        k = next(k for k, value in enumerate(run.values) if value is source)
        apply_view(shadow_bases[k], run.case.params[k].view)[...] += \
            kk.to_numpy(shadows[id(temporary)])
    return bases, shadow_bases


@functools.lru_cache(maxsize=None)
def _one_thread_cpu(debug: bool):
    return kk.CPU(threads=1, debug=debug)


def program_backend(backend):
    """The backend of the program check: a CPU running work-groups one after another,
    so that atomic adjoint updates add in one order and the derivatives compare bit for
    bit; None elsewhere (the check runs on the CPU only)."""
    if not isinstance(backend, kk.CPU):
        return None
    return backend if backend.threads == 1 else _one_thread_cpu(backend.debug)


def program_kernels(launch) -> set[str]:
    """The derivative kernels (by mode) that the rules of `launch` compiled so far: a
    program's reverse pass compiles GATHER_STORED and REVERSE_UNZEROED on first need."""
    found = set()
    for rule in _rules.get(launch, {}).values():
        for _, plan in rule._plans.entries.values():
            found.update(plan.kernels)
    return found


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.itemsize}")


def check_program(runs: Runs, details=None) -> tuple[str, list[str], str]:
    """(kind, tags, detail): the case's kernel launched two or three times by a Python
    program (`ProgramPlan`), differentiated by `autodiff(Reverse, program, ...)`, against
    the same launches differentiated one by one with `ReverseSplit` (`_one_by_one`): the
    shadows and the arrays' final contents must agree bit for bit. This checks the
    program's reverse pass, which leaves some shadows unzeroed and gathers into others
    by stores (`program.Zeros`), against launches that zero and add as they go. Kinds:
    `pass`, with tags: program, and program-ping-pong, program-copies and
    program-overwritten as the plan has them, gather-stored and reverse-unzeroed where
    the case's kernel had those forms in the program's reverse pass; `not-applicable`
    (no Duplicated array the kernel writes, or not on a CPU); `refused` (both refused
    it: a kernelkit error, not a failure); the failures `program-error` (one side
    raised) and `program-mismatch`."""
    case, plan = runs.case, runs.plan
    backend = program_backend(runs.backend)
    program_plan = program_plan_for(case, plan)
    if backend is None or program_plan is None:
        return "not-applicable", [], ""
    _note(details, f"program: {program_plan.describe(case)}")
    launch = runs.launch.kernel(backend, case.workgroupsize)
    errors, results = {}, {}
    for side in ("program", "one by one"):
        try:
            run = ProgramRun(runs, backend)
            results[side] = _differentiated(run, launch, program_plan, plan.wrap_const) \
                if side == "program" else _one_by_one(run, launch, program_plan)
        except Exception as error:
            errors[side] = error
        if side == "program":
            kernels = program_kernels(launch) & {GATHER_STORED, REVERSE_UNZEROED}
    if errors:
        kinds = {side: classify_error(error) for side, error in errors.items()}
        text = "; ".join(f"{side}: {_describe(error, kinds[side] != 'refused')}"
                         for side, error in errors.items())
        if len(errors) == 2 and set(kinds.values()) == {"refused"}:
            return "refused", [], text
        return "program-error", [], text
    tags = ["program"] + [f"program-{name}" for name, used in (
        ("ping-pong", program_plan.swap), ("copies", program_plan.copied),
        ("overwritten", program_plan.overwritten)) if used] + sorted(kernels)
    _note(details, f"program: {' '.join(tags)}")
    (bases, shadows), (expected_bases, expected_shadows) = \
        results["program"], results["one by one"]
    for prefix, got, expected in (("", bases, expected_bases),
                                  ("d_", shadows, expected_shadows)):
        for k in expected:
            differ = np.argwhere(_bits(got[k]) != _bits(expected[k]))
            if len(differ):
                at = tuple(int(n) for n in differ[0])
                return "program-mismatch", tags, (
                    f"{prefix}{case.params[k].name}: the program's "
                    f"{'derivative' if prefix else 'final contents'} differs from the "
                    f"launches' one by one at {len(differ)} base elements, first {list(at)}: "
                    f"{got[k][at]!r}, one by one {expected[k][at]!r} "
                    f"({program_plan.describe(case)}; {' '.join(tags)})")
    return "pass", tags, ""


# -- CUDA ---------------------------------------------------------------------------------------


def check_on_cuda(case, backend, label: str, cpu: Outcome,
                  cpu_products: Products | None) -> Outcome:
    """The seed's outcome on CUDA, given the CPU's. With a GPU, every check runs there too
    and its products must equal the CPU's; on a compile-only backend (`label`
    'cuda-compile-only') every derivative kernel must compile."""
    if cpu.kind in ("invalid", "no-float"):
        return Outcome(case.seed, label, cpu.kind, "as on the CPU")
    if label == "cuda-compile-only":
        return _check_compiles(case, backend, label, cpu)
    outcome, products = check_case_with_products(case, backend, label=label)
    if outcome.kind != "pass" or cpu_products is None:
        return outcome
    precision, rtol = rtol_for(case)
    inexact = case.inexact_precision()
    rtol = max(rtol, TOLERANCE[inexact]) if inexact else rtol
    for side in ("forward", "reverse"):
        on_cpu, on_gpu = getattr(cpu_products, side), getattr(products, side)
        scale = getattr(cpu_products, f"{side}_scale") + getattr(products, f"{side}_scale")
        if not (math.isfinite(on_cpu) and math.isfinite(on_gpu)):
            continue
        if abs(on_cpu - on_gpu) > rtol * scale + 1e-300:
            return Outcome(case.seed, label, "backend-mismatch",
                           f"{side}: {on_gpu!r} on CUDA, {on_cpu!r} on the CPU (rtol {rtol}, "
                           f"terms' magnitude {scale:.3g})")
    return outcome


def _check_compiles(case, backend, label: str, cpu: Outcome) -> Outcome:
    from kernelkit.fuzz.reference import forget_module, load_module
    plan = plan_for(case)
    namespace = load_module(case.kernel_source(), f"enzyme_ext_fuzz_{case.seed}_cuda")
    try:
        launch = namespace[case.kernel_name](backend, case.workgroupsize)
        runs = Runs(case, plan, backend, launch)
        for mode_label, mode, shadow_bases in runs.modes():
            try:
                runs.differentiate(mode, shadow_bases)
            except Exception as error:
                if isinstance(error, CompileOnlyError):
                    continue
                kind = classify_error(error)
                if kind == "refused" and cpu.kind != "refused":
                    kind = "compile-error"   # the CPU differentiates it
                return Outcome(case.seed, label, kind,
                               f"{mode_label}: " + _describe(error, kind != "refused"))
            return Outcome(case.seed, label, "internal-error",
                           f"{mode_label}: a compile-only backend launched a kernel")
        if plan.aliased is not None and cpu.kind == "pass":
            problem = _aliasing_problem(runs)
            if problem is not None:
                return Outcome(case.seed, label, "aliasing-not-refused", problem)
    finally:
        forget_module(namespace)
    return Outcome(case.seed, label, "compiled",
                   f"forward and reverse kernels compiled for {', '.join(backend.archs)}")


# -- worker processes ---------------------------------------------------------------------------


def make_cpu(races: bool):
    """The CPU backend, under its race detector where `races`."""
    return kk.CPU(debug="races") if races else kk.CPU()


def check_seed(seed: int, cpu, cuda: dict | None = None, options: Options | None = None,
               family: str = "access", details: list | None = None) -> list[Outcome]:
    """The outcomes of one seed: on the CPU, and on CUDA where `cuda` gives a backend
    (label -> backend, as `kernelkit.fuzz.runner.make_backends` makes it)."""
    try:
        case = make_case(seed, options, family)
    except Exception as error:  # the generator itself failed
        return [Outcome(seed, "generator", "invalid", f"{type(error).__name__}: {error}")]
    outcome, products = check_case_with_products(case, cpu, details, label="cpu")
    outcomes = [outcome]
    for label, backend in (cuda or {}).items():
        outcomes.append(check_on_cuda(case, backend, label, outcome, products))
    return outcomes


def worker(args) -> None:
    """Read seeds from stdin, one a line; for each, print START, its outcomes, END."""
    from kernelkit.fuzz.runner import use_private_cache
    use_private_cache()
    cpu = make_cpu(args.races)
    cuda = make_backends(["cuda"]) if args.backend == "cuda" else None
    out = sys.stdout
    for line in sys.stdin:
        seed = int(line)
        print(f"START {seed}", file=out, flush=True)
        try:
            outcomes = check_seed(seed, cpu, cuda, options_from(args), args.family)
        except Exception as error:  # a failure of the fuzzer's own checks
            outcomes = [Outcome(seed, "cpu", "internal-error", _describe(error, True))]
        for outcome in outcomes:
            print("RESULT " + json.dumps(outcome.__dict__), file=out, flush=True)
        print(f"END {seed}", file=out, flush=True)


def options_from(args) -> Options:
    return Options(max_statements=args.max_statements, max_depth=args.max_depth)


def worker_command(args) -> list[str]:
    command = [sys.executable, "-m", "enzyme_ext.fuzz", "--worker", "--family", args.family,
               "--backend", args.backend, "--max-statements", str(args.max_statements),
               "--max-depth", str(args.max_depth)]
    return command + (["--races"] if args.races else [])


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def refusal_key(outcome: Outcome) -> str:
    return outcome.detail.splitlines()[0] if outcome.detail else ""


def run_seeds(args) -> int:
    seeds = parse_seeds(args.seeds)
    lock = threading.Lock()
    outcomes: dict[tuple[int, str], Outcome] = {}
    start = time.monotonic()

    def report(outcome: Outcome):
        with lock:
            outcomes[(outcome.seed, outcome.backend)] = outcome
            first = outcome.detail.splitlines()[0] if outcome.detail else ""
            if outcome.kind in FAILURES:
                print(f"seed {outcome.seed}: {outcome.backend} {outcome.kind}: {first[:300]}",
                      flush=True)
            elif args.verbose:
                print(f"seed {outcome.seed}: {outcome.backend} {outcome.kind}: {first[:200]}",
                      flush=True)
            done = len({seed for seed, _ in outcomes})
            if not args.quiet and done % 50 == 0 and outcome.backend in ("cpu", "reference"):
                elapsed = time.monotonic() - start
                failing = len({o.seed for o in outcomes.values() if o.kind in FAILURES})
                print(f"... {done} seeds, {failing} failing, {done / elapsed:.2f} kernels/s",
                      flush=True)

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        run_seeds_in_workers(seeds, args.batch, args.jobs, worker_command(args), "cpu",
                             args.timeout, report)
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: the summary of the seeds done so far
        with lock:
            done = dict(outcomes)
        seeds = sorted({seed for seed, _ in done})
        print(f"\ninterrupted after {len(seeds)} seeds")
        outcomes = done
    finally:
        signal.signal(signal.SIGTERM, previous)
    elapsed = time.monotonic() - start
    print(summary(outcomes, seeds, elapsed, args))
    return 1 if any(o.kind in FAILURES for o in outcomes.values()) else 0


def summary(outcomes: dict, seeds, elapsed: float, args) -> str:
    """The counts by backend and outcome, what the passing seeds checked, the refusals by
    message and the failing seeds."""
    lines = [f"\n{len(seeds)} seeds in {elapsed:.1f} s ({len(seeds) / elapsed:.2f} kernels/s, "
             f"{args.jobs} job(s)); family {args.family}; backend {args.backend}"
             f"{' under the race detector' if args.races else ''}"]
    labels = sorted({label for _, label in outcomes}, key=lambda l: (l != "cpu", l))
    for label in labels:
        mine = [o for (_, l), o in outcomes.items() if l == label]
        counts = Counter(o.kind for o in mine)
        lines.append(f"{label}:")
        passes = [o for o in mine if o.kind == "pass"]
        for kind in ("pass", *NOT_CHECKED, *FAILURES):
            if counts.get(kind):
                lines.append(f"  {kind:20} {counts[kind]}")
            if kind == "pass" and passes:
                zero = sum(o.detail.startswith("0.0 0.0") for o in passes)
                nonfinite = sum(o.detail.startswith("both products non-finite") for o in passes)
                lines.append(f"  {'':20} (of which {zero} with both products 0, {nonfinite} "
                             f"with both non-finite)")
        for heading, prefix in (("checks", "checks: "), ("patterns", "patterns: ")):
            tags = Counter(tag for o in passes for line in o.detail.splitlines()
                           if line.startswith(prefix) for tag in line[len(prefix):].split())
            if tags:
                lines.append(f"  {heading} of passing seeds: " +
                             ", ".join(f"{tag} {n}" for tag, n in sorted(tags.items())))
    refusals = Counter(refusal_key(o) for o in outcomes.values() if o.kind == "refused")
    if refusals:
        lines.append("refusals by message:")
        for message, n in refusals.most_common():
            lines.append(f"  {n:5}  {message}")
    failing = sorted((o for o in outcomes.values() if o.kind in FAILURES),
                     key=lambda o: (o.seed, o.backend))
    if failing:
        lines.append("failing seeds:")
        for o in failing:
            first = o.detail.splitlines()[0] if o.detail else ""
            lines.append(f"  {o.seed} {o.backend}: {o.kind}: {first[:240]}")
    return "\n".join(lines)


def show(args) -> int:
    try:
        case = make_case(args.show, options_from(args), args.family)
    except Exception as error:
        print(f"seed {args.show}: the generator failed: {type(error).__name__}: {error}")
        return 1
    if args.source:
        with open(args.source) as file:
            # without the imports kernel_source puts first (the reference gives its own)
            lines = [line for line in file.read().splitlines()
                     if line not in HEADER.splitlines()]
            case.module = ast.parse("\n".join(lines))
    print(case.describe())
    details: list[str] = []
    try:
        cpu = make_cpu(args.races)
        outcome, products = check_case_with_products(case, cpu, details, label="cpu")
        outcomes = [outcome]
        if args.backend == "cuda":
            for label, backend in make_backends(["cuda"]).items():
                outcomes.append(check_on_cuda(case, backend, label, outcome, products))
    except Exception as error:
        outcomes = [Outcome(case.seed, "cpu", "internal-error", _describe(error, True))]
    print()
    for line in details:
        print(f"# {line}")
    for outcome in outcomes:
        print(f"# outcome ({outcome.backend}): {outcome.kind}")
        for line in outcome.detail.splitlines():
            print(f"#   {line}")
    return 1 if any(o.kind in FAILURES for o in outcomes) else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m enzyme_ext.fuzz",
                                     description="Differential fuzzing of enzyme_ext: forward "
                                                 "against reverse mode (the dot-product "
                                                 "identity) and against finite differences, "
                                                 "on generated kernels.")
    parser.add_argument("--seeds", default="0:100", help="a:b, or a list a,b,c (default 0:100)")
    parser.add_argument("--family", choices=FAMILIES, default="access",
                        help="access: kernels whose work-items read each other's elements "
                             "(permuted, neighbouring, a shared tile) and arrays passed for "
                             "two parameters (default); kernelkit: kernelkit.fuzz's kernels")
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: also on CUDA (compile-only without a GPU)")
    parser.add_argument("--races", action="store_true",
                        help="run every CPU launch under the race detector "
                             "(kk.CPU(debug='races')); a race is a failure")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a seed may take before it counts as a hang")
    parser.add_argument("--batch", type=int, default=50, help="seeds per worker process")
    parser.add_argument("--max-statements", type=int, default=Options.max_statements)
    parser.add_argument("--max-depth", type=int, default=Options.max_depth)
    parser.add_argument("--show", type=int, metavar="SEED",
                        help="print a seed's kernel, run it and print the details")
    parser.add_argument("--source", metavar="FILE",
                        help="with --show: run this kernel source (same kernel name and "
                             "parameters) on the seed's arguments instead, to reduce a "
                             "failing kernel by hand")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.backend == "cuda" and not make_backends(["cuda"]):
        print("--backend cuda: no GPU, and CUDABackend.compile_only cannot compile here "
              "either (kk.backend_unavailable_reason('cuda') says why)")
        return 2
    if args.show is not None:
        return show(args)
    return run_seeds(args)


if __name__ == "__main__":
    sys.exit(main())
