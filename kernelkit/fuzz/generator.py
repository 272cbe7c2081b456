"""Random valid kernels: one seed gives one `Case` (a module of device functions and a
kernel, as a Python AST, with its arguments and launch geometry).

Every expression is typed as the reference will run it (NumPy scalars, NEP 50; see
`scalars`), and the generator only writes kernels whose meaning both sides define:
integer divisors are made non-zero, shift counts stay below the width, float -> int
casts are guarded against nan, inf and out-of-range values, array indices are reduced
into range, Python ints mixed with a NumPy integer fit in it, each work-item writes
only its own output elements, local memory is written at the item's own slot and read
after a barrier, and barriers and subgroup operations sit only under conditions every
item of a group agrees on (never after a `return` some items may take). Values from
inexact math functions never decide a branch or an integer.

A share of the seeds (`SUBGROUP_SHARE`, drawn apart from the rest, so that the others'
kernels stay as they were) write subgroup operations (`kk.shuffle`, `kk.subgroup_sum`
...) and `kk.subgroup_index()`, with work-groups of 5 to 198 items, more often than not
a partial number of subgroups, and ndranges that cut the last group short. Their device
functions may have subgroup operations too (`Function.collective`), under the same
rules inside; a call of such a function counts as one of the caller's subgroup
operations, so it is written only where one may be, and only as a statement of its own
(a call inside an expression could sit in a short-circuited operand).

Nodes carry what the shrinker must know: `_kk_type` (the scalar type), `_kk_pinned`
(a statement a valid kernel cannot lose: a while loop's step, without which it would
not end; the reference catches every other loss, see emulation) and
`_kk_whole` (an expression, such as a guard, that may be replaced as a whole but
not by one of its parts)."""
from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass, field

import numpy as np

from . import scalars as S
from .subgroups import FUNCTIONS as SUBGROUP_FUNCTIONS
from .subgroups import REDUCTIONS as SUBGROUP_REDUCTIONS
from .subgroups import SHUFFLES, VOTES

SUBGROUP_SHARE = 0.35
"""The share of seeds whose kernels have subgroup operations."""

# -- the case ----------------------------------------------------------------------------


@dataclass
class ArraySpec:
    name: str
    dtype: str
    base_shape: tuple[int, ...]
    view: str            # Python slice text applied to the base ('' for none), or '.T'
    role: str            # 'in' (kk.Const), 'out' or 'atomic'
    shape: tuple[int, ...]
    atomic: str = ""     # the one atomic operation an 'atomic' array takes


@dataclass
class ScalarSpec:
    name: str
    type: str
    value: object        # a Python int/float or a NumPy scalar


@dataclass
class Options:
    float16: bool = False
    specials: bool = True        # nan, inf, -0.0 among float inputs
    max_statements: int = 6
    max_depth: int = 2


@dataclass
class Case:
    seed: int
    module: ast.Module
    kernel_name: str
    params: list
    ndrange: tuple[int, ...]
    workgroupsize: tuple[int, ...]
    options: Options = field(default_factory=Options)

    def kernel_source(self) -> str:
        return HEADER + ast.unparse(self.module) + "\n"

    def reference_source(self) -> str:
        # `kk` and `math` are the reference's own (see emulation), given to the module;
        # vectors are kernelkit's host ones (NumPy arrays)
        return ("import dataclasses\nimport numpy as np\n"
                "from kernelkit.fuzz.generator import Record\n"
                "from kernelkit.lang import random as kk_random\n"
                "from kernelkit.lang import scalars as kk_scalars\n"
                "from kernelkit.lang import vectors as kk_vectors\n\n\n" +
                ast.unparse(to_reference(self.module)) + "\n")

    def inexact_precision(self) -> str | None:
        """The narrowest float type inexact math computed in ('float16', 'float32' or
        'float64'); None when there is none. A result stored into a float64 array may
        come from a float32 `kk.cbrt`, an ulp of float32 away from NumPy's."""
        types = {getattr(node, "_kk_type", None) for node in ast.walk(self.module)
                 if getattr(node, "_kk_inexact", False)}
        for name in ("float16", "float32", "float64"):
            if name in types:
                return name
        return "float64" if types else None

    def arguments(self) -> list:
        """Fresh argument values: (base array, view) pairs for arrays, scalars as they are."""
        rng = np.random.default_rng(self.seed)
        values = []
        for param in self.params:
            if isinstance(param, ScalarSpec):
                values.append(param.value)
            else:
                base = random_array(rng, param.dtype, param.base_shape,
                                    self.options.specials and param.role == "in")
                if param.role == "atomic" and S.is_float(param.dtype):
                    # Whole numbers, as the atomics add: every sum is exact, so the
                    # order in which work-items add cannot change the result.
                    base = np.trunc(base)
                values.append((base, apply_view(base, param.view)))
        return values

    def describe(self) -> str:
        """The kernel's source, then how it is launched: each argument (an array's base
        and view, its first values) and the launch line."""
        lines = [self.kernel_source().rstrip(), "", "# launch:"]
        for param, value in zip(self.params, self.arguments()):
            if isinstance(param, ArraySpec):
                view = f"{param.name}_base{param.view}" if param.view else f"{param.name}_base"
                lines.append(f"#   {param.name} = {view}  # base {param.dtype} "
                             f"{param.base_shape} ({param.role}): "
                             f"{value[0].ravel()[:8].tolist()}...")
            else:
                lines.append(f"#   {param.name} = {value!r}")
        lines.append(f"#   {self.kernel_name}(backend, {self.workgroupsize})"
                     f"({', '.join(p.name for p in self.params)}, ndrange={self.ndrange})")
        return "\n".join(lines)

    def copy(self) -> "Case":
        clone = copy.copy(self)
        clone.module = copy.deepcopy(self.module)
        return clone


HEADER = ("import dataclasses\nimport math\nimport numpy as np\nimport kernelkit as kk\n"
          "from kernelkit.fuzz.generator import Record\n\n\n")


@dataclass(frozen=True)
class Record:
    """The dataclass generated kernels make, replace and read (`statement_struct`)."""
    first: object
    second: object


RECORD_FIELDS = ("first", "second")


def apply_view(base, view: str):
    if not view:
        return base
    if view == ".T":
        return base.T
    return eval(f"base{view}", {"base": base})   # a slice written by the generator


def random_array(rng, dtype: str, shape, specials: bool):
    size = int(np.prod(shape))
    if dtype == "bool":
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    if S.is_integer(dtype):
        low, high = S.integer_range(dtype)
        kind = rng.integers(0, 3, size)
        small = rng.integers(-20, 21, size)
        full = rng.integers(low, high, size, dtype=np.dtype(dtype), endpoint=True).astype(object)
        edges = np.array([low, high, 0, 1, low + 1, high - 1], dtype=object)[
            rng.integers(0, 6, size)]
        values = np.where(kind == 0, small, np.where(kind == 1, full, edges))
        return np.array([int(v) % 2**S.bits(dtype) for v in values], dtype=object) \
            .astype(np.uint64).astype(dtype).reshape(shape)
    kind = rng.integers(0, 10, size)
    values = np.where(kind < 4, rng.integers(-8, 9, size).astype(np.float64),
                      rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size))
    if specials:
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30, -3e38, 6e4, 1e-30])
        values = np.where(kind == 9, special[rng.integers(0, len(special), size)], values)
    with np.errstate(all="ignore"):
        return values.astype(dtype).reshape(shape)


# -- the reference's copy of a module ------------------------------------------------------


class _ToReference(ast.NodeTransformer):
    """Barriers become `yield` (the reference runs a work-group's items as generators),
    `kk.synchronize_any(c)` becomes `(yield kk.any_of(c))`, a subgroup operation such
    as `kk.shuffle_down(v, d)` becomes `(yield kk.subgroup_call('shuffle_down', site, v,
    d))`, each local-memory allocation is named by its place, so a group's items share
    it, and vectors, the scalar functions and random draws are kernelkit's host versions
    (NumPy). A device function that yields is a generator: a call of it, `f(x)`, becomes
    `(yield from kk.device_call(site, f(x)))`, which names its meetings by the call's
    place too, so that items meet in it only when they came by the same call."""

    def __init__(self):
        self.generators: set[str] = set()    # the device functions that yield

    def visit_FunctionDef(self, node):
        # a module defines a function before the functions that call it
        self.generic_visit(node)
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
            self.generators.add(node.name)
        return node

    def visit_Expr(self, node):
        self.generic_visit(node)
        if _is_kk_call(node.value, "synchronize"):
            return ast.Expr(ast.Yield(ast.Constant(_site(node))))
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_kk_call(node, "synchronize_any"):
            return ast.Yield(ast.Call(_attribute("kk", "any_of"),
                                      node.args + [ast.Constant(_site(node))], []))
        if _is_kk_call(node, "localmem"):
            return ast.Call(node.func, node.args + [ast.Constant(_site(node))], [])
        for operation, function in SUBGROUP_FUNCTIONS.items():
            if _is_kk_call(node, function):
                return ast.Yield(ast.Call(_attribute("kk", "subgroup_call"),
                                          [ast.Constant(operation), ast.Constant(_site(node)),
                                           *node.args], []))
        if isinstance(node.func, ast.Name) and node.func.id in self.generators:
            return ast.YieldFrom(ast.Call(_attribute("kk", "device_call"),
                                          [ast.Constant(_site(node)), node], []))
        if any(_is_kk_call(node, name) for name in ("vec2", "vec3", "vec4")):
            node.func = _attribute("kk_vectors", node.func.attr)
        if any(_is_kk_call(node, name) for name in SCALAR_FUNCTIONS):
            node.func = _attribute("kk_scalars", node.func.attr)
        if isinstance(node.func, ast.Attribute) and _is_kk_attribute(node.func.value, "random"):
            node.func = _attribute("kk_random", node.func.attr)
        return node


# The functions of `lang.scalars` (and `kk.random`'s): the reference calls kernelkit's
# host versions, which compute with NumPy.
SCALAR_FUNCTIONS = ("round", "frac", "step", "nonzero", "smoothstep", "erfinv", "erfcinv",
                    "bitcast")


def _is_kk_attribute(node, name: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == name
            and isinstance(node.value, ast.Name) and node.value.id == "kk")


def _site(node) -> str:
    return f"{node.lineno}:{node.col_offset}"


def _is_kk_call(node, name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == name and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "kk")


def to_reference(module: ast.Module) -> ast.Module:
    module = copy.deepcopy(module)
    # line numbers name the localmem sites; unparse and parse to number them afresh
    module = ast.parse(ast.unparse(module))
    return ast.fix_missing_locations(_ToReference().visit(module))


# -- typed AST nodes -----------------------------------------------------------------------


def _attribute(base: str, name: str) -> ast.Attribute:
    return ast.Attribute(ast.Name(base, ast.Load()), name, ast.Load())


def _call(function, *args) -> ast.Call:
    return ast.Call(function, list(args), [])


def typed(node, t: str, interval=None, inexact=False, uniform=False, whole=False):
    node._kk_type = t
    node._kk_interval = interval if t == S.WEAK_INT else None
    node._kk_inexact = inexact
    node._kk_uniform = uniform
    node._kk_whole = whole
    return node


def info(node):
    return (node._kk_type, node._kk_interval, node._kk_inexact, node._kk_uniform)


def _name(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def _literal(value) -> ast.Constant:
    return ast.Constant(value)


def _fits(interval, t: str) -> bool:
    if not S.is_integer(t):
        return True
    low, high = S.integer_range(t)
    return interval is not None and low <= interval[0] and interval[1] <= high


INTERVAL_LIMIT = 2**62


def _interval_of(op: str, a, b):
    """A weak int operation's result interval, or None if it could leave 64 bits."""
    (a0, a1), (b0, b1) = a, b
    if op == "+":
        r = (a0 + b0, a1 + b1)
    elif op == "-":
        r = (a0 - b1, a1 - b0)
    elif op == "*":
        products = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
        r = (min(products), max(products))
    elif op == "//":
        if b0 <= 0:
            return None
        r = (min(a0 // b0, a0 // b1), max(a1 // b0, a1 // b1))
    elif op == "%":
        if b0 <= 0:
            return None
        r = (0, b1 - 1)
    elif op == "**":
        m = max(abs(a0), abs(a1), 1)
        if b0 < 0 or m > 2**20:
            return None
        r = (-(m ** b1), m ** b1)
    elif op == "<<":
        if b0 < 0:
            return None
        r = (min(a0, a0 << b1), max(a1, a1 << b1))
    elif op == ">>":
        r = (min(a0, 0), max(a1, 0))
    elif op == "&":
        if a0 >= 0 or b0 >= 0:
            r = (0, max(a1 if a0 >= 0 else b1, 0) if a0 >= 0 and b0 >= 0
                 else (a1 if a0 >= 0 else b1))
        else:
            r = (-2**63, 2**63 - 1)
    elif op in ("|", "^"):
        m = max(abs(a0), abs(a1), abs(b0), abs(b1))
        width = 1 << m.bit_length()
        r = (-width, width)
    else:
        return None
    if r[0] < -INTERVAL_LIMIT or r[1] > INTERVAL_LIMIT:
        return None
    return r


MATH_UNARY = ("sqrt", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs",
              "erf", "erfc", "gamma", "lgamma", "cbrt", "exp2", "degrees", "radians")
MATH_BINARY = ("pow", "atan2", "hypot", "fmod", "copysign")
MATH_TO_INT = ("floor", "ceil", "trunc")
MATH_PREDICATES = ("isnan", "isinf", "isfinite")
KK_UNARY = ("sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
            "tan", "atan", "sinh", "cosh", "tanh", "asinh", "cbrt")
KK_EXACT = ("fabs", "floor", "ceil", "trunc", "rint")
KK_BINARY = ("fmin", "fmax", "copysign", "fmod", "hypot", "atan2", "pow")
EXACT_MATH = ("fabs", "copysign", "fmod", "degrees", "radians", "fmin", "fmax")
# arguments that keep a function in its domain (and its results finite and varied)
DOMAIN_GUARDS = {"sqrt": "abs", "log": "abs1", "log2": "abs1", "log10": "abs1",
                 "log1p": "abs", "asin": "unit", "acos": "unit", "atanh": "unit",
                 "acosh": "abs1", "exp": "small", "expm1": "small", "exp2": "small",
                 "sinh": "small", "cosh": "small", "gamma": "small", "pow": "small"}


# -- generation context --------------------------------------------------------------------


@dataclass
class Var:
    name: str
    type: str
    interval: tuple | None
    inexact: bool
    uniform: bool
    fixed: bool = False          # geometry names and loop counters: never reassigned


@dataclass
class Loop:
    collective: bool     # every item of a group runs the same iterations: barriers and
    uniform: bool        # subgroup operations may be in it


@dataclass
class Function:
    """A device function, as its callers see it. A `collective` one has subgroup
    operations: every item of a group calls it together, and every call passes the
    parameters named in `uniform` a value the same on all of them. A `varying` one's
    result may differ between items given the same arguments (it reads the lane, or
    exchanges values)."""
    name: str
    params: list[tuple[str, str]]     # (name, type); a type 'array:<name>' passes an input
    returns: tuple[str, ...]          # one type, or several for a tuple
    inexact: bool = True              # its body uses inexact math
    collective: bool = False
    uniform: frozenset[str] = frozenset()
    varying: bool = False


class Context:
    def __init__(self, kernel: bool):
        self.kernel = kernel
        self.scopes: list[dict[str, Var]] = [{}]
        self.uniform_control = True
        self.loops: list[Loop] = []
        self.barriers_left = 0
        self.subgroups_left = 0      # subgroup operations still to write
        self.subgroup_results: set[str] = set()
        self.arrays: dict[str, ArraySpec] = {}
        self.localmem: list[tuple[str, str]] = []     # (name, dtype)
        self.function: Function | None = None
        self.pending: list[tuple[ast.stmt, dict, str]] = []   # hoisted values, see hoist
        self.in_phase = False      # between a local-memory write's barrier and the next

    def variables(self):
        seen = {}
        for scope in self.scopes:
            seen.update(scope)
        return list(seen.values())

    def declare(self, var: Var):
        self.scopes[-1][var.name] = var

    def barriers_allowed(self) -> bool:
        return (self.kernel and self.uniform_control and self.barriers_left > 0
                and all(loop.collective for loop in self.loops))

    def subgroups_allowed(self) -> bool:
        """Also where a call of a device function with subgroup operations may go: only
        kernels and such functions have any left to write."""
        return (self.uniform_control and self.subgroups_left > 0
                and all(loop.collective for loop in self.loops))

    def collectives_allowed(self) -> bool:
        """Whether a barrier or a subgroup operation is still to come and may go here
        (what decides that a branch or a loop is made one every item takes alike)."""
        return self.barriers_allowed() or self.subgroups_allowed()

    def jumps_allowed(self) -> bool:
        """break/continue: where they cannot split a group at a later barrier, nor skip
        the barrier that ends a local-memory phase."""
        if not self.loops or (self.in_phase and self.loops[-1].collective):
            return False
        return not self.loops[-1].collective or self.uniform_control

    def return_allowed(self) -> bool:
        """A return some items may take: never before a barrier or subgroup operation
        still to come (in a device function, one that has them, as in the kernel)."""
        return (self.barriers_left <= 0 and self.subgroups_left <= 0 and not self.in_phase
                and not any(loop.collective for loop in self.loops))


class Retry(Exception):
    """This choice cannot be made valid here; the caller picks another."""


class Generator:
    def __init__(self, seed: int, options: Options | None = None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.options = options or Options()
        self.dtypes = ["bool", *S.INTEGERS, *S.FLOATS] + (["float16"] if self.options.float16
                                                         else [])
        self.functions: list[Function] = []
        self.counter = 0
        self.subgroups = random.Random(f"subgroups {seed}").random() < SUBGROUP_SHARE
        self.nesting = 0      # array reads inside indices: kept shallow

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- the case --------------------------------------------------------------------------

    def case(self) -> Case:
        rng = self.rng
        ndim = 1 if self.chance(0.7) else 2
        if self.subgroups:
            workgroupsize, ndrange = self.subgroup_geometry(ndim)
        elif ndim == 1:
            workgroupsize = (rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 32, 64]),)
            ndrange = (rng.randint(1, 3 * workgroupsize[0] + 5),)
        else:
            workgroupsize = (rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 2, 4, 5, 8]))
            ndrange = tuple(rng.randint(1, 2 * w + 3) for w in workgroupsize)
        params = self.parameters(ndrange)
        body = []
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            body.append(self.device_function(params))
        body.append(self.kernel(params, ndrange, workgroupsize))
        module = ast.fix_missing_locations(ast.Module(body, []))
        return Case(self.seed, module, f"fuzz_{self.seed}", params, ndrange, workgroupsize,
                    self.options)

    def subgroup_geometry(self, ndim: int) -> tuple[tuple, tuple]:
        """Work-groups of one to four subgroups, mostly not a multiple of 32 items (a
        partial last subgroup), and an ndrange that cuts the last group short."""
        rng = self.rng
        if ndim == 1:
            workgroupsize = (rng.choice([8, 31, 32, 33, 40, 48, 64, 70, 96, 100, 128]),)
            ndrange = (rng.randint(1, 3 * workgroupsize[0] + 5),)
        else:
            workgroupsize = (rng.choice([1, 2, 3, 4, 6]), rng.choice([5, 8, 11, 16, 33]))
            ndrange = tuple(rng.randint(1, 2 * w + 3) for w in workgroupsize)
        return workgroupsize, ndrange

    def parameters(self, ndrange) -> list:
        rng = self.rng
        params = []
        for k in range(rng.randint(1, 2)):
            dtype = rng.choice(self.dtypes)
            params.append(self.view_spec(f"out{k}", dtype, ndrange, "out"))
        for k in range(rng.randint(1, 3)):
            dtype = rng.choice(self.dtypes)
            ndim = 1 if self.chance(0.75) else 2
            shape = (rng.randint(1, 40),) if ndim == 1 else (rng.randint(1, 7), rng.randint(1, 7))
            params.append(self.view_spec(f"a{k}", dtype, shape, "in"))
        if self.chance(0.35):
            for k in range(rng.randint(1, 2)):
                dtype = rng.choice(["int32", "int64", "uint32", "uint64", "float32", "float64"])
                shape = (rng.randint(1, 6),)
                # one operation per array keeps its final values independent of the order
                operation = rng.choice(["add", "add", "min", "max", "and_", "or_", "xor"])
                if S.is_float(dtype):
                    operation = rng.choice(["add", "min", "max"])
                params.append(ArraySpec(f"acc{k}", dtype, shape, "", "atomic", shape, operation))
        for k in range(rng.randint(0, 3)):
            kind = rng.random()
            if kind < 0.35:
                value = rng.choice([rng.randint(-20, 20), rng.randint(0, 300),
                                    rng.randint(-2**40, 2**40)])
            elif kind < 0.6:
                value = rng.choice([rng.uniform(-10, 10), float(rng.randint(-5, 5)), 0.5, 1e10])
            else:
                dtype = rng.choice(self.dtypes)
                if dtype == "bool":
                    value = np.bool_(self.chance(0.5))
                elif S.is_integer(dtype):
                    low, high = S.integer_range(dtype)
                    value = np.dtype(dtype).type(rng.choice([rng.randint(-10, 10) % (high + 1)
                                                             if low == 0 else rng.randint(-10, 10),
                                                             rng.randint(low, high)]))
                else:
                    value = np.dtype(dtype).type(rng.uniform(-100, 100))
            params.append(ScalarSpec(f"s{k}", S.type_of(value), value))
        return params

    def view_spec(self, name, dtype, shape, role) -> ArraySpec:
        rng = self.rng
        choice = rng.random()
        if len(shape) == 1:
            if choice < 0.6:
                return ArraySpec(name, dtype, shape, "", role, shape)
            step = rng.choice([2, 3, -1, -2])
            start = rng.randint(0, 2)
            n = shape[0]
            if step > 0:
                base = (start + (n - 1) * step + 1 + rng.randint(0, 2),)
                return ArraySpec(name, dtype, base, f"[{start}:{start + n * step}:{step}]", role,
                                 shape)
            base = (n * -step + start,)
            return ArraySpec(name, dtype, base, f"[{base[0] - 1 - start}::{step}][:{n}]", role,
                             shape)
        if choice < 0.5:
            return ArraySpec(name, dtype, shape, "", role, shape)
        if choice < 0.8:
            return ArraySpec(name, dtype, (shape[1], shape[0]), ".T", role, shape)
        return ArraySpec(name, dtype, (shape[0], 2 * shape[1]), "[:, ::2]", role, shape)

    # -- functions -------------------------------------------------------------------------

    def device_function(self, params) -> ast.FunctionDef:
        rng = self.rng
        name = f"device{len(self.functions)}"
        inputs = [p for p in params if isinstance(p, ArraySpec) and p.role == "in"]
        fparams = []
        for k in range(rng.randint(1, 3)):
            fparams.append((f"p{k}", rng.choice(self.dtypes + [S.WEAK_INT, S.WEAK_FLOAT])))
        array_param = None
        if inputs and self.chance(0.3):
            array_param = rng.choice(inputs)
            fparams.append(("arr", f"array:{array_param.name}"))
        returns = tuple(rng.choice(self.dtypes) for _ in range(1 if self.chance(0.7) else 2))
        function = Function(name, fparams, returns)
        ctx = Context(kernel=False)
        ctx.function = function
        if self.subgroups:
            ctx.subgroups_left = rng.choice([0, 1, 1, 2])
            function.collective = ctx.subgroups_left > 0
        if function.collective:
            function.uniform = frozenset(pname for pname, ptype in fparams
                                         if not ptype.startswith("array:") and self.chance(0.5))
        for pname, ptype in fparams:
            if ptype.startswith("array:"):
                spec = copy.copy(array_param)
                spec.name = pname
                ctx.arrays[pname] = spec
            else:
                interval = (-2**31, 2**31) if ptype == S.WEAK_INT else None
                # only a collective function asks which of its values are uniform; the
                # others never do, and take every parameter to be
                uniform = pname in function.uniform if function.collective else True
                ctx.declare(Var(pname, ptype, interval, False, uniform))
        body = self.statements(ctx, rng.randint(1, 4), depth=0)
        while ctx.subgroups_left > 0:
            body += self.retrying(lambda: self.emit(ctx, lambda: self.statement_subgroup(ctx,
                                                                                       0)))
        body += self.retrying(lambda: self.emit(ctx, lambda: self.return_statement(ctx)))
        function.inexact = any(getattr(n, "_kk_inexact", False) for s in body
                               for n in ast.walk(s))
        function.varying = function.collective or self.varies_between_items(body)
        definition = ast.FunctionDef(name, ast.arguments([], [ast.arg(p) for p, _ in fparams],
                                                         None, [], [], None, []),
                                     body, [], None)
        self.functions.append(function)
        return definition

    def varies_between_items(self, body: list[ast.stmt]) -> bool:
        """Whether `body` (of a device function, which reads no index) calls
        `kk.subgroup_index()` or a function whose result varies."""
        varying = {f.name for f in self.functions if f.varying}
        return any(_is_kk_call(node, "subgroup_index") or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in varying) for statement in body for node in ast.walk(statement))

    def retrying(self, make, fallback=None):
        for _ in range(50):
            try:
                return make()
            except Retry:
                continue
        if fallback is None:
            raise RuntimeError(f"seed {self.seed}: the generator found no valid choice")
        return fallback()

    def return_statement(self, ctx) -> ast.Return:
        if ctx.kernel:
            return ast.Return(None)
        values = [self.returned_value(ctx, t) for t in ctx.function.returns]
        if len(values) == 1:
            return ast.Return(values[0])
        return ast.Return(ast.Tuple(values, ast.Load()))

    def returned_value(self, ctx, t: str):
        """A value of type `t` to return; in a collective function, mostly one that shows
        the results of its subgroup operations (where they can be made a `t`)."""
        value = self.expression(ctx, 2)
        if ctx.subgroup_results and self.chance(0.8):
            try:
                return self.cast(ctx, self.with_subgroup_results(ctx, value), t)
            except Retry:
                pass
        return self.cast(ctx, value, t)

    def kernel(self, params, ndrange, workgroupsize) -> ast.FunctionDef:
        rng = self.rng
        ctx = Context(kernel=True)
        ctx.ndim = len(ndrange)
        ctx.workgroupsize = workgroupsize
        body = []
        for p in params:
            if isinstance(p, ArraySpec):
                ctx.arrays[p.name] = p
            else:
                interval = (p.value, p.value) if p.type == S.WEAK_INT else None
                ctx.declare(Var(p.name, p.type, interval, False, True, fixed=True))

        def geometry(text, names, uniform):
            statement = ast.parse(text).body[0]
            body.append(statement)
            for n in names:
                ctx.declare(Var(n, "int64", None, False, uniform, fixed=True))

        if ctx.ndim == 1:
            geometry("i = kk.index(kk.Global)", ["i"], False)
            geometry("li = kk.index(kk.Local)", ["li"], False)
            geometry("g = kk.index(kk.Group)", ["g"], True)
            geometry(f"c = min(np.int64({workgroupsize[0]}), kk.ndrange()[0] - g * "
                     f"{workgroupsize[0]})", ["c"], True)
            ctx.own = "i"
            ctx.local_slot = ["li"]
            ctx.active = ["c"]
        else:
            style = rng.choice(["NTuple", "Cartesian"])
            geometry(f"i, j = kk.index(kk.Global, kk.{style})", ["i", "j"], False)
            geometry(f"li, lj = kk.index(kk.Local, kk.{style})", ["li", "lj"], False)
            geometry(f"g0, g1 = kk.index(kk.Group, kk.{style})", ["g0", "g1"], True)
            geometry("gi = kk.index(kk.Global)", ["gi"], False)
            geometry("lin = kk.index(kk.Local, kk.Linear)", ["lin"], False)
            for axis, g in enumerate(("g0", "g1")):
                geometry(f"c{axis} = min(np.int64({workgroupsize[axis]}), kk.ndrange()[{axis}] - "
                         f"{g} * {workgroupsize[axis]})", [f"c{axis}"], True)
            ctx.own = "i, j"
            ctx.local_slot = ["li", "lj"]
            ctx.active = ["c0", "c1"]
        ctx.barriers_left = rng.choice([0, 0, 1, 2, 3])
        if self.subgroups:
            ctx.subgroups_left = rng.randint(1, 4)
        if ctx.barriers_left:
            for k in range(rng.randint(1, 2)):
                dtype = rng.choice(self.dtypes)
                shape = workgroupsize[0] if ctx.ndim == 1 else tuple(workgroupsize)
                statement = ast.parse(f"lm{k} = kk.localmem(np.{dtype}, {shape})").body[0]
                body.append(statement)
                ctx.localmem.append((f"lm{k}", dtype))
        body += self.statements(ctx, rng.randint(2, self.options.max_statements), depth=0)
        while ctx.barriers_left > 0:
            body += self.emit(ctx, lambda: self.barrier_section(ctx, depth=0))
        while ctx.subgroups_left > 0:
            body += self.retrying(lambda: self.emit(ctx, lambda: self.statement_subgroup(ctx,
                                                                                       0)))
        for p in params:
            if isinstance(p, ArraySpec) and p.role == "out":
                body += self.emit(ctx, lambda: self.output_store(ctx, p, final=True))
        args = []
        for p in params:
            annotation = _attribute("kk", "Const") if isinstance(p, ArraySpec) and \
                p.role == "in" else None
            args.append(ast.arg(p.name, annotation))
        decorator = _attribute("kk", "kernel")
        return ast.FunctionDef(f"fuzz_{self.seed}", ast.arguments([], args, None, [], [], None,
                                                                  []),
                               body, [decorator], None)

    # -- statements ------------------------------------------------------------------------

    def statements(self, ctx, count: int, depth: int) -> list[ast.stmt]:
        out = []
        for _ in range(count):
            for _attempt in range(20):
                try:
                    out += self.emit(ctx, lambda: self.statement(ctx, depth))
                    break
                except Retry:
                    continue
        return out

    def emit(self, ctx, make) -> list[ast.stmt]:
        """The statements `make` gives, after the values its expressions hoisted."""
        saved, ctx.pending = ctx.pending, []
        try:
            made = make()
            made = made if isinstance(made, list) else [made]
            return [statement for statement, _, _ in ctx.pending] + made
        except Retry:
            for _, scope, name in ctx.pending:
                scope.pop(name, None)
            raise
        finally:
            ctx.pending = saved

    def hoist(self, ctx, node):
        """A name for `node`'s value (assigned just before the statement being written),
        so that a guard can read it twice without doubling the expression."""
        if isinstance(node, (ast.Name, ast.Constant)):
            return node
        name = self.fresh("h")
        t, interval, inexact, uniform = info(node)
        statement = ast.Assign([_store(name)], node)
        var = Var(name, t, interval, inexact, uniform and ctx.uniform_control)
        ctx.declare(var)
        ctx.pending.append((statement, ctx.scopes[-1], name))
        return typed(_name(name), t, interval, inexact, var.uniform)

    def statement(self, ctx, depth: int) -> list[ast.stmt]:
        rng = self.rng
        choices = [("declare", 6), ("assign", 3), ("if", 2 if depth < 3 else 0),
                   ("for", 2 if depth < 3 else 0), ("while", 1 if depth < 3 else 0),
                   ("tuple", 1), ("vector", 1), ("struct", 0.8)]
        if ctx.kernel:
            choices += [("store", 3), ("atomic", 2 if self.atomics(ctx) else 0),
                        ("private", 0.5 if depth < 2 else 0)]
            if ctx.barriers_allowed():
                choices += [("barrier", 3), ("any", 1)]
        if ctx.subgroups_allowed():
            choices += [("subgroup", 3)]
        if ctx.jumps_allowed():
            choices += [("jump", 1.5)]
        if ctx.return_allowed() and (depth > 0 or not ctx.kernel):
            choices += [("return", 0.7 if ctx.kernel else 1)]
        if self.functions:
            choices += [("call", 1.5)]
        kinds, weights = zip(*choices)
        kind = rng.choices(kinds, weights)[0]
        return getattr(self, "statement_" + kind)(ctx, depth)

    def statement_declare(self, ctx, depth):
        value = self.expression(ctx, rng_depth(self))
        return [self.declare(ctx, value)]

    def declare(self, ctx, value, name=None) -> ast.stmt:
        t, interval, inexact, uniform = info(value)
        if t == S.PY_BOOL:
            value = self.cast(ctx, value, "bool")
            t, interval, inexact, uniform = info(value)
        name = name or self.fresh("v")
        if t == S.WEAK_INT:
            low, high = interval
            interval = (min(low, 0), max(high, 1))
        ctx.declare(Var(name, t, interval, inexact, uniform and ctx.uniform_control))
        return ast.Assign([_store(name)], value)

    def statement_assign(self, ctx, depth):
        candidates = [v for v in ctx.variables() if not v.fixed]
        if not candidates:
            raise Retry
        var = self.rng.choice(candidates)
        need_uniform = var.uniform
        value = self.expression(ctx, rng_depth(self), uniform=need_uniform or None,
                                exact=(not var.inexact) or None)
        if need_uniform and not (value._kk_uniform and ctx.uniform_control):
            raise Retry
        if var.type == S.WEAK_INT:
            value = self.into_interval(self.to_weak_int(ctx, value), var.interval)
        else:
            t = value._kk_type
            if self.chance(0.4) and t != S.PY_BOOL:
                for op in ("+", "-", "*", "^", "|", "&"):
                    if self.chance(0.4) and S.binary_result(op, var.type, t) == var.type and \
                            (t != S.WEAK_INT or _fits(value._kk_interval, var.type)):
                        if value._kk_inexact and not var.inexact:
                            break
                        return [ast.AugAssign(_store(var.name), _OPS[op](), value)]
            value = self.cast(ctx, value, var.type)
        if value._kk_inexact and not var.inexact:
            raise Retry
        return [ast.Assign([_store(var.name)], value)]

    def statement_store(self, ctx, depth):
        outputs = [a for a in ctx.arrays.values() if a.role == "out"]
        return [self.output_store(ctx, self.rng.choice(outputs))]

    def output_store(self, ctx, spec, final=False) -> ast.stmt:
        target = ast.Subscript(_name(spec.name), self.own_index(ctx, spec), ast.Store())
        for _ in range(10):
            value = self.expression(ctx, self.rng.randint(1, self.options.max_depth))
            if final and ctx.subgroup_results and self.chance(0.8):
                value = self.with_subgroup_results(ctx, value)
            t = value._kk_type
            if not final and self.chance(0.3) and t != S.PY_BOOL:
                for op in ("+", "*", "-", "^"):
                    if S.binary_result(op, spec.dtype, t) == spec.dtype and \
                            (t != S.WEAK_INT or _fits(value._kk_interval, spec.dtype)):
                        return ast.AugAssign(target, _OPS[op](), value)
            try:
                return ast.Assign([target], self.cast(ctx, value, spec.dtype))
            except Retry:
                continue
        return ast.Assign([target], self.cast(ctx, self.literal_of(ctx, spec.dtype), spec.dtype))

    def own_index(self, ctx, spec):
        """The work-item's own element: `i` or `i, j`, at times counted from the end."""
        own = ctx.own.split(", ")
        if self.chance(0.15):
            axis = len(own) - 1
            size = f"len({spec.name})" if axis == 0 else f"{spec.name}.shape[{axis}]"
            own[axis] = f"{own[axis]} - {size}"
        return ast.parse(", ".join(own), mode="eval").body

    def statement_if(self, ctx, depth):
        uniform = ctx.collectives_allowed() and self.chance(0.4)
        test = self.condition(ctx, uniform=uniform or None)
        uniform = test._kk_uniform
        saved = ctx.uniform_control
        ctx.uniform_control = saved and uniform
        branches = []
        try:
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                ctx.scopes.append({})
                try:
                    branches.append(self.block(ctx, depth))
                finally:
                    ctx.scopes.pop()
        finally:
            ctx.uniform_control = saved
        node = ast.If(test, branches[0], [])
        current = node
        for block in branches[1:-1]:
            nested = ast.If(self.condition(ctx, uniform=uniform or None), block, [])
            current.orelse = [nested]
            current = nested
        if len(branches) > 1:
            current.orelse = branches[-1]
        return [node]

    def block(self, ctx, depth) -> list[ast.stmt]:
        statements = self.statements(ctx, self.rng.randint(1, 2), depth + 1)
        if ctx.barriers_allowed() and self.chance(0.3):
            statements += self.emit(ctx, lambda: self.barrier_section(ctx, depth + 1))
        return statements or [ast.Pass()]

    def statement_for(self, ctx, depth):
        rng = self.rng
        collective = ctx.collectives_allowed() and self.chance(0.5)
        uniform = True if collective else None
        start = self.small_int(ctx, uniform, 0, 6) if self.chance(0.5) else None
        stop = self.small_int(ctx, uniform, 0, 8)
        step = None
        if self.chance(0.4):
            if self.chance(0.5):
                step = _literal(rng.choice([1, 2, 3, -1, -2, -3]))
                typed(step, S.WEAK_INT, (step.value, step.value), uniform=True)
            else:
                magnitude = self.small_int(ctx, uniform, 0, 2)
                step = typed(ast.BinOp(magnitude, ast.Add(), _literal(1)), S.WEAK_INT,
                             (1, 3), uniform=magnitude._kk_uniform, whole=True)
                if self.chance(0.5):
                    step = typed(ast.UnaryOp(ast.USub(), step), S.WEAK_INT, (-3, -1),
                                 uniform=step._kk_uniform, whole=True)
            if start is None:
                start = typed(_literal(0), S.WEAK_INT, (0, 0), uniform=True)
        bounds = [b for b in (start, stop, step) if b is not None]
        if step is not None and step._kk_interval[1] < 0:
            bounds[0], bounds[1] = bounds[1], bounds[0]
        loop_uniform = all(b._kk_uniform for b in bounds)
        name = self.fresh("k")
        low = min([0] + [b._kk_interval[0] for b in bounds[:2]])
        high = max(b._kk_interval[1] for b in bounds[:2])
        iterator = _call(_name("range"), *bounds)
        return [self.loop_body(ctx, depth, ast.For(_store(name), iterator, [], [], None),
                               Var(name, S.WEAK_INT, (low, high), False, loop_uniform,
                                   fixed=True), collective, loop_uniform)]

    def loop_body(self, ctx, depth, node, counter, collective, loop_uniform):
        """A loop that is not collective counts as varying control: items may leave it
        at different iterations, so what it assigns differs per item after it."""
        saved = ctx.uniform_control
        ctx.uniform_control = saved and loop_uniform and collective
        ctx.loops.append(Loop(collective, loop_uniform))
        ctx.scopes.append({})
        try:
            if counter is not None:
                ctx.declare(counter)
            node.body += self.statements(ctx, self.rng.randint(1, 2), depth + 1)
            if collective and ctx.barriers_left > 0:
                node.body += self.emit(ctx, lambda: self.barrier_section(ctx, depth + 1))
                node.body += self.statements(ctx, self.rng.randint(0, 1), depth + 1)
            if ctx.subgroups_allowed() and self.chance(0.5):
                node.body += self.retrying(lambda: self.emit(
                    ctx, lambda: self.statement_subgroup(ctx, depth + 1)), list)
            if not node.body:
                node.body.append(ast.Pass())
        finally:
            ctx.scopes.pop()
            ctx.loops.pop()
            ctx.uniform_control = saved
        return node

    def statement_while(self, ctx, depth):
        collective = ctx.collectives_allowed() and self.chance(0.4)
        bound = self.small_int(ctx, True if collective else None, 0, 6)
        counter = self.fresh("w")
        init = ast.Assign([_store(counter)], _literal(0))
        test = ast.Compare(_name(counter), [ast.Lt()], [bound])
        uniform = bound._kk_uniform
        if not collective and self.chance(0.4):
            extra = self.condition(ctx)
            uniform = uniform and extra._kk_uniform
            test = ast.BoolOp(ast.And(), [test, extra])
        step = ast.AugAssign(_store(counter), ast.Add(), _literal(1))
        step._kk_pinned = True
        node = ast.While(test, [step], [])
        var = Var(counter, S.WEAK_INT, (0, bound._kk_interval[1] + 1), False,
                  uniform and collective, fixed=True)
        ctx.declare(var)
        return [init, self.loop_body(ctx, depth, node, None, collective, uniform)]

    def statement_jump(self, ctx, depth):
        jump = ast.Break() if self.chance(0.5) else ast.Continue()
        if self.chance(0.8):
            uniform = True if ctx.loops[-1].collective else None
            return [ast.If(self.condition(ctx, uniform=uniform), [jump], [])]
        return [jump]

    def statement_return(self, ctx, depth):
        statement = self.return_statement(ctx)
        if self.chance(0.7):
            return [ast.If(self.condition(ctx), [statement], [])]
        return [statement]

    def statement_tuple(self, ctx, depth):
        values = [self.expression(ctx, rng_depth(self)) for _ in range(self.rng.randint(2, 3))]
        values = [self.cast(ctx, v, "bool") if v._kk_type == S.PY_BOOL else v for v in values]
        names = [self.fresh("t") for _ in values]
        packed = self.fresh("tup")
        statements = [ast.Assign([_store(packed)], ast.Tuple(values, ast.Load()))]
        if self.chance(0.5):
            statements.append(ast.Assign([ast.Tuple([_store(n) for n in names], ast.Store())],
                                         _name(packed)))
        else:
            statements += [ast.Assign([_store(n)], ast.Subscript(_name(packed), _literal(k),
                                                                 ast.Load()))
                           for k, n in enumerate(names)]
        for n, v in zip(names, values):
            t, interval, inexact, uniform = info(v)
            if t == S.WEAK_INT:
                interval = (min(interval[0], 0), max(interval[1], 1))
            ctx.declare(Var(n, t, interval, inexact, uniform and ctx.uniform_control))
        return statements

    def statement_vector(self, ctx, depth):
        """A vector of values of one type, elements of it assigned and updated in place
        (at constant indices, or at one known only at run time), and its elements read
        back into names."""
        rng = self.rng
        t = rng.choice([d for d in self.dtypes if d not in ("bool", "float16")])
        size = rng.randint(2, 4)
        values = [self.cast(ctx, self.expression(ctx, rng_depth(self)), t) for _ in range(size)]
        name = self.fresh("vec")
        constructor = _call(_attribute("kk", f"vec{size}"), *values)
        constructor.keywords = [ast.keyword("dtype", _attribute("np", t))]
        statements = [ast.Assign([_store(name)], constructor)]
        for _ in range(rng.randint(1, 2)):
            index = self.index(ctx, size, _literal(size), None)
            target = ast.Subscript(_name(name), index, ast.Store())
            value = self.cast(ctx, self.expression(ctx, rng_depth(self)), t)
            values.append(value)
            if self.chance(0.5):
                statements.append(ast.AugAssign(target, _OPS[rng.choice("+-*")](), value))
            else:
                statements.append(ast.Assign([target], value))
        inexact = any(v._kk_inexact for v in values)
        uniform = all(v._kk_uniform for v in values) and ctx.uniform_control
        names = [self.fresh("e") for _ in range(size)]
        if self.chance(0.5):
            statements.append(ast.Assign([ast.Tuple([_store(n) for n in names], ast.Store())],
                                         _name(name)))
        else:
            names = names[:1]
            index = self.index(ctx, size, _literal(size), None)
            statements.append(ast.Assign([_store(names[0])],
                                         ast.Subscript(_name(name), index, ast.Load())))
            uniform = uniform and index._kk_uniform
        for n in names:
            ctx.declare(Var(n, t, None, inexact, uniform))
        return statements

    def statement_struct(self, ctx, depth):
        """A `Record` made of two values; maybe a field replaced (`dataclasses.replace`)
        and the record made again on one side of an `if`, so that it is joined after it;
        its fields read back into names."""
        rng = self.rng
        types = [rng.choice([d for d in self.dtypes if d != "float16"]) for _ in RECORD_FIELDS]

        def values():
            return [self.cast(ctx, self.expression(ctx, rng_depth(self)), t) for t in types]
        made = values()
        held = [[value] for value in made]      # every value each field may hold
        name = self.fresh("rec")
        statements = [ast.Assign([_store(name)], _call(_name("Record"), *made))]
        if self.chance(0.4):
            position = rng.randrange(len(RECORD_FIELDS))
            value = self.cast(ctx, self.expression(ctx, rng_depth(self)), types[position])
            held[position] = [value]
            replace = ast.Call(_attribute("dataclasses", "replace"), [_name(name)],
                               [ast.keyword(RECORD_FIELDS[position], value)])
            statements.append(ast.Assign([_store(name)], replace))
        uniform = ctx.uniform_control
        if self.chance(0.4):
            condition = self.condition(ctx)
            uniform = uniform and condition._kk_uniform
            again = values()
            for field_values, value in zip(held, again):
                field_values.append(value)
            statements.append(ast.If(condition, [ast.Assign([_store(name)],
                                                            _call(_name("Record"), *again))],
                                     []))
        for field_name, t, field_values in zip(RECORD_FIELDS, types, held):
            read = self.fresh("f")
            statements.append(ast.Assign([_store(read)], ast.Attribute(
                _name(name), field_name, ast.Load())))
            ctx.declare(Var(read, t, None, any(v._kk_inexact for v in field_values),
                            uniform and all(v._kk_uniform for v in field_values)))
        return statements

    def statement_call(self, ctx, depth, functions=None):
        """A call of one of `functions` (by default those that may be called here: a
        collective one only where a subgroup operation may be, as which it counts)."""
        functions = functions or [f for f in self.functions
                                  if not f.collective or ctx.subgroups_allowed()]
        if not functions:
            raise Retry
        function = self.rng.choice(functions)
        call = self.call(ctx, function)
        if len(function.returns) == 1:
            statement = self.declare(ctx, typed(call, function.returns[0], None,
                                                call._kk_inexact, call._kk_uniform))
            names = [statement.targets[0].id]
        else:
            names = [self.fresh("r") for _ in function.returns]
            for n, t in zip(names, function.returns):
                ctx.declare(Var(n, t, None, call._kk_inexact, call._kk_uniform and
                                ctx.uniform_control))
            statement = ast.Assign([ast.Tuple([_store(n) for n in names], ast.Store())], call)
        if function.collective:
            ctx.subgroups_left -= 1
            ctx.subgroup_results.update(names)
        return [statement]

    def call(self, ctx, function: Function) -> ast.Call:
        args = []
        for pname, ptype in function.params:
            if ptype.startswith("array:"):
                source = ptype.split(":", 1)[1]
                if source not in ctx.arrays:
                    raise Retry
                args.append(_name(source))
            else:
                uniform = True if pname in function.uniform else None
                value = self.expression(ctx, self.rng.randint(0, 2), uniform=uniform)
                if ptype == S.WEAK_INT:
                    value = self.into_interval(self.to_weak_int(ctx, value), (-2**31, 2**31))
                else:
                    value = self.cast(ctx, value, ptype)
                if uniform and not value._kk_uniform:
                    raise Retry
                args.append(value)
        uniform = all(getattr(a, "_kk_uniform", True) for a in args) and not function.varying
        inexact = function.inexact or any(getattr(a, "_kk_inexact", False) for a in args)
        node = _call(_name(function.name), *args)
        return typed(node, function.returns[0], None, inexact, uniform)

    def atomics(self, ctx):
        return [a for a in ctx.arrays.values() if a.role == "atomic"]

    def statement_atomic(self, ctx, depth):
        spec = self.rng.choice(self.atomics(ctx))
        op = spec.atomic
        if op == "add":   # additions and subtractions commute with each other
            op = self.rng.choice(["add", "add", "sub"])
        index = self.index(ctx, spec.shape[0], _literal(spec.shape[0]), None)
        value = self.expression(ctx, rng_depth(self), exact=True)
        if S.is_float(spec.dtype) and op in ("add", "sub"):
            # small integers: float sums that are exact in any order
            value = self.small_int(ctx, None, -8, 8)
        value = self.cast(ctx, value, spec.dtype)
        return [ast.Expr(_call(_attribute("kk", f"atomic_{op}"), _name(spec.name), index, value))]

    def statement_private(self, ctx, depth):
        dtype = self.rng.choice(self.dtypes)
        size = self.rng.randint(1, 5)
        name = self.fresh("pv")
        counter = self.fresh("q")
        statements = [ast.Assign([_store(name)], _call(_attribute("kk", "private"),
                                                       _attribute("np", dtype), _literal(size)))]
        ctx.scopes.append({})
        try:
            ctx.declare(Var(counter, S.WEAK_INT, (0, size), False, True, fixed=True))
            fill = self.emit(ctx, lambda: ast.Assign(
                [ast.Subscript(_name(name), _name(counter), ast.Store())],
                self.cast(ctx, self.expression(ctx, 2), dtype)))
        finally:
            ctx.scopes.pop()
        statements.append(ast.For(_store(counter), _call(_name("range"), _literal(size)),
                                  fill, [], None))
        inexact = fill[-1].value._kk_inexact

        def read():
            index = self.index(ctx, size, _literal(size), None)
            return self.declare(ctx, typed(ast.Subscript(_name(name), index, ast.Load()), dtype,
                                           None, inexact, False))

        for _ in range(self.rng.randint(1, 2)):
            statements += self.emit(ctx, read)
        return statements

    # -- barriers --------------------------------------------------------------------------

    def barrier_section(self, ctx, depth, in_loop=False) -> list[ast.stmt]:
        """Each item writes its own slot, a barrier, reads any active item's slot, a
        barrier before the next write."""
        ctx.barriers_left -= 1
        if not ctx.localmem or self.chance(0.15):
            return [self.barrier()]
        if self.chance(0.2):
            return self.statement_any(ctx, depth, inside=True)
        name, dtype = self.rng.choice(ctx.localmem)
        own = [_name(n) for n in ctx.local_slot]
        slot = own[0] if len(own) == 1 else ast.Tuple(own, ast.Load())
        def write():
            value = self.cast(ctx, self.expression(ctx, rng_depth(self)), dtype)
            statement = ast.Assign([ast.Subscript(_name(name), slot, ast.Store())], value)
            return statement

        statements = self.retrying(lambda: self.emit(ctx, write))
        inexact = statements[-1].value._kk_inexact
        statements.append(self.barrier())
        saved = ctx.barriers_left, ctx.in_phase
        ctx.barriers_left, ctx.in_phase = 0, True
        def read():
            indices = []
            for axis, (local, active) in enumerate(zip(ctx.local_slot, ctx.active)):
                shift = self.small_int(ctx, None, 0, 9)
                indices.append(typed(ast.BinOp(ast.BinOp(_name(local), ast.Add(), shift),
                                               ast.Mod(), _name(active)), "int64", whole=True))
            index = indices[0] if len(indices) == 1 else ast.Tuple(indices, ast.Load())
            value = typed(ast.Subscript(_name(name), index, ast.Load()), dtype, None, inexact,
                          False)
            statement = self.declare(ctx, value)
            return statement

        for _ in range(self.rng.randint(1, 2)):
            statements += self.emit(ctx, read)
        statements += self.statements(ctx, self.rng.randint(0, 2), depth + 1)
        ctx.barriers_left, ctx.in_phase = saved
        statements.append(self.barrier())
        return statements

    def barrier(self) -> ast.stmt:
        statement = ast.Expr(_call(_attribute("kk", "synchronize")))
        return statement

    def statement_barrier(self, ctx, depth):
        return self.barrier_section(ctx, depth)

    def statement_any(self, ctx, depth, inside=False):
        if not inside:
            ctx.barriers_left -= 1
        condition = self.condition(ctx)
        call = typed(_call(_attribute("kk", "synchronize_any"), condition), "bool",
                     uniform=True, whole=True)
        if self.chance(0.3):
            return [self.declare(ctx, call)]
        ctx.scopes.append({})
        try:
            body = self.statements(ctx, self.rng.randint(1, 3), depth + 1)
            if ctx.barriers_left > 0 and self.chance(0.5):
                body += self.emit(ctx, lambda: self.barrier_section(ctx, depth + 1))
        finally:
            ctx.scopes.pop()
        node = ast.If(call, body or [ast.Pass()], [])
        if self.chance(0.4):
            ctx.scopes.append({})
            try:
                node.orelse = self.statements(ctx, 1, depth + 1) or [ast.Pass()]
            finally:
                ctx.scopes.pop()
        return [node]

    # -- subgroups --------------------------------------------------------------------------

    def statement_subgroup(self, ctx, depth):
        """A subgroup operation (where every item of the group reaches it): its result a
        new name, or a shuffle's the shuffled variable's own again (`v += kk.shuffle_down(v,
        d)`, the steps of a sum by hand); or a call of a device function that has them."""
        rng = self.rng
        collective = [f for f in self.functions if f.collective]
        if collective and self.chance(0.5):
            return self.statement_call(ctx, depth, collective)
        operation = rng.choice(list(SUBGROUP_FUNCTIONS))
        function = _attribute("kk", SUBGROUP_FUNCTIONS[operation])
        target = None
        if operation in VOTES:
            call = _call(function, self.condition(ctx))
            result, inexact = ("uint32" if operation == "ballot" else "bool"), False
        else:
            if operation in SHUFFLES and self.chance(0.4):
                target = self.shuffled_variable(ctx)
            if target is not None:
                value = typed(_name(target.name), target.type, None, target.inexact, False)
            else:
                value = self.varying_value(ctx, exact=True if operation == "sum" else None)
            if operation in SUBGROUP_REDUCTIONS and S.is_bool(value._kk_type):
                raise Retry
            arguments = [value]
            if operation in SHUFFLES:
                arguments.append(self.shuffle_amount(ctx, operation))
            call = _call(function, *arguments)
            result, inexact = _STRONG.get(value._kk_type, value._kk_type), value._kk_inexact
        typed(call, result, None, inexact, False)
        ctx.subgroups_left -= 1
        if target is None:
            name = self.fresh("sg")
            ctx.declare(Var(name, result, None, inexact, False))
            ctx.subgroup_results.add(name)
            return [ast.Assign([_store(name)], call)]
        ops = [op for op in ("+", "^") if S.binary_result(op, result, result) == result
               and not S.is_bool(result)]
        if ops and self.chance(0.6):
            return [ast.AugAssign(_store(target.name), _OPS[rng.choice(ops)](), call)]
        return [ast.Assign([_store(target.name)], call)]

    def with_subgroup_results(self, ctx, value):
        """`value` combined with up to three results of subgroup operations in scope, so
        that an output shows them."""
        results = [v for v in ctx.variables() if v.name in ctx.subgroup_results]
        for var in self.rng.sample(results, min(3, len(results))):
            result = typed(_name(var.name), var.type, None, var.inexact, False)
            for op in self.rng.sample(["+", "-", "^"], 3):
                try:
                    value = self.binary(op, result, value)
                    break
                except Retry:
                    continue
        return value

    def varying_value(self, ctx, exact):
        """A value to exchange, mostly one that may differ between items. `exact` for a
        float sum: its rounding in the tree's one order is compared bit for bit."""
        def varying():
            value = self.expression(ctx, self.rng.randint(1, self.options.max_depth),
                                    exact=exact)
            if value._kk_uniform:
                raise Retry
            return value
        return self.retrying(varying, lambda: self.expression(ctx, 1, exact=exact))

    def shuffled_variable(self, ctx) -> Var | None:
        """A variable of a NumPy type that may vary between items, to shuffle in place."""
        candidates = [v for v in ctx.variables()
                      if not v.fixed and not v.uniform and not S.is_weak(v.type)]
        return self.rng.choice(candidates) if candidates else None

    def shuffle_amount(self, ctx, operation: str):
        """A shuffle's source lane (`kk.shuffle`) or its delta or mask: mostly one that
        reaches a lane, at times one beyond the subgroup or a negative one, at times
        whatever integer the kernel computes."""
        rng = self.rng
        choice = rng.random()
        if choice < 0.4:
            value = rng.choice({"shuffle": [0, 1, 7, 31, 32, 40, -1],
                                "shuffle_xor": [1, 2, 4, 8, 16, 3, 31, 32]}.get(
                                    operation, [1, 2, 4, 8, 16, 0, 5, 31, 33, -1]))
            return typed(_literal(value), S.WEAK_INT, (value, value), uniform=True)
        if choice < 0.55 and operation == "shuffle":
            lane = _call(_attribute("kk", "subgroup_index"))
            shift = rng.randint(1, 33)
            return typed(ast.BinOp(ast.BinOp(lane, ast.Add(), _literal(shift)), ast.Mod(),
                                   _literal(rng.choice([32, 32, 40]))), "int64", whole=True)
        if choice < 0.8:
            return self.small_int(ctx, None, -2, 34)
        amount = self.expression(ctx, rng_depth(self), exact=True)
        if not S.is_integer(amount._kk_type):
            amount = self.to_weak_int(ctx, amount)
        return amount

    # -- expressions -----------------------------------------------------------------------

    def expression(self, ctx, depth: int, uniform=None, exact=None, want=None):
        """A typed expression. `uniform`: the same on every item of a group. `exact`: no
        inexact math in it (it may decide a branch or an integer)."""
        for _ in range(30):
            try:
                node = self.expression_once(ctx, depth, uniform, exact)
            except Retry:
                depth = max(0, depth - 1) if self.chance(0.3) else depth
                continue
            if uniform and not node._kk_uniform:
                continue
            if exact and node._kk_inexact:
                continue
            return node
        return self.literal()

    def expression_once(self, ctx, depth, uniform, exact):
        if depth <= 0 or self.chance(0.15):
            return self.leaf(ctx, uniform)
        kinds = [("binary", 6), ("unary", 1), ("compare", 1.2), ("cast", 1.5), ("ifexp", 0.8),
                 ("minmax", 0.8), ("math", 0.35 if exact is not True else 0),
                 ("math_exact", 0.5), ("builtin", 0.8)]
        if self.functions:
            kinds.append(("call", 0.4))
        kind = self.rng.choices(*zip(*kinds))[0]
        return getattr(self, "expression_" + kind)(ctx, depth - 1, uniform, exact)

    def leaf(self, ctx, uniform):
        rng = self.rng
        kinds = [("literal", 2), ("variable", 5), ("array", 4 if self.nesting < 2 else 0),
                 ("length", 0.4), ("geometry", 0.3 if ctx.kernel else 0)]
        if self.subgroups:
            kinds.append(("lane", 0.4))
        kind = rng.choices(*zip(*kinds))[0]
        if kind == "variable" and ctx.subgroup_results and self.chance(0.4):
            # the results of subgroup operations, so that the outputs show them
            candidates = [v for v in ctx.variables() if v.name in ctx.subgroup_results
                          and (not uniform or v.uniform)]
            if candidates:
                var = rng.choice(candidates)
                return typed(_name(var.name), var.type, var.interval, var.inexact, var.uniform)
        if kind == "lane":
            if uniform or self.chance(0.25):
                return typed(_call(_attribute("kk", "subgroup_size")), "int64", uniform=True)
            return typed(_call(_attribute("kk", "subgroup_index")), "int64", uniform=False)
        if kind == "variable":
            candidates = [v for v in ctx.variables() if not uniform or v.uniform]
            if candidates:
                var = rng.choice(candidates)
                return typed(_name(var.name), var.type, var.interval, var.inexact, var.uniform)
        if kind == "array":
            inputs = [a for a in ctx.arrays.values() if a.role == "in"]
            if ctx.kernel and not uniform and self.chance(0.2):
                inputs += [a for a in ctx.arrays.values() if a.role == "out"]
            if inputs:
                spec = rng.choice(inputs)
                return self.array_read(ctx, spec, uniform)
        if kind == "geometry":
            axis = rng.randrange(ctx.ndim)
            function = rng.choice(["groupsize", "ndrange"])
            return typed(ast.Subscript(_call(_attribute("kk", function)), _literal(axis),
                                       ast.Load()), "int64", uniform=True)
        if kind == "length":
            arrays = [a for a in ctx.arrays.values() if a.role == "in"]
            if arrays:
                spec = rng.choice(arrays)
                if self.chance(0.5) or len(spec.shape) == 1:
                    return typed(_call(_name("len"), _name(spec.name)), S.WEAK_INT,
                                 (spec.shape[0], spec.shape[0]), uniform=True)
                return typed(ast.Subscript(_attribute(spec.name, "shape"), _literal(1),
                                           ast.Load()), S.WEAK_INT,
                             (spec.shape[1], spec.shape[1]), uniform=True)
        return self.literal()

    def array_read(self, ctx, spec, uniform):
        if spec.role == "out":
            index = self.own_index(ctx, spec)
            return typed(ast.Subscript(_name(spec.name), index, ast.Load()), spec.dtype)
        indices = []
        for axis, extent in enumerate(spec.shape):
            if self.chance(0.3):
                size = _literal(extent)
            elif axis == 0 and self.chance(0.5):
                size = _call(_name("len"), _name(spec.name))
            else:
                size = ast.Subscript(_attribute(spec.name, "shape"), _literal(axis), ast.Load())
            indices.append(self.index(ctx, extent, size, uniform))
        index = indices[0] if len(indices) == 1 else ast.Tuple(indices, ast.Load())
        return typed(ast.Subscript(_name(spec.name), index, ast.Load()), spec.dtype,
                     uniform=all(i._kk_uniform for i in indices))

    def index(self, ctx, extent: int, size, uniform):
        rng = self.rng
        choice = rng.random()
        if choice < 0.1:
            value = rng.randint(-extent, extent - 1)
            return typed(_literal(value), S.WEAK_INT, (value, value), uniform=True, whole=True)
        if choice < 0.4 and ctx.kernel and not uniform:
            base = _name(rng.choice(["i", "li"] if ctx.ndim == 1 else ["i", "j", "li", "lj"]))
            shift = self.small_int(ctx, None, -3, 5)
            node = ast.BinOp(ast.BinOp(base, ast.Add(), shift), ast.Mod(), size)
            return typed(node, "int64", uniform=False, whole=True)
        value = self.nested_weak_int(ctx, uniform)
        node = ast.BinOp(value, ast.Mod(), size)
        if self.chance(0.2):   # a negative index counts from the end
            node = ast.BinOp(node, ast.Sub(), copy.deepcopy(size))
        return typed(node, S.WEAK_INT, (-extent, extent), uniform=value._kk_uniform, whole=True)

    def nested_weak_int(self, ctx, uniform):
        """A short exact expression made a Python int, one level deeper."""
        self.nesting += 1
        try:
            return self.to_weak_int(ctx, self.expression(ctx, self.rng.randint(0, 1),
                                                         uniform=uniform, exact=True))
        finally:
            self.nesting -= 1

    def small_int(self, ctx, uniform, low: int, high: int):
        """A Python int in [low, high] (a loop bound, a shift)."""
        if self.chance(0.35):
            value = self.rng.randint(low, high)
            return typed(_literal(value), S.WEAK_INT, (value, value), uniform=True)
        value = self.nested_weak_int(ctx, uniform)
        node = ast.BinOp(ast.BinOp(value, ast.Mod(), _literal(high - low + 1)), ast.Add(),
                         _literal(low)) if low else ast.BinOp(value, ast.Mod(),
                                                              _literal(high + 1))
        return typed(node, S.WEAK_INT, (low, high), uniform=value._kk_uniform, whole=True)

    def literal(self, t: str | None = None):
        rng = self.rng
        if t is None:
            t = S.WEAK_INT if self.chance(0.6) else S.WEAK_FLOAT
        if t == S.WEAK_INT:
            value = rng.choice([rng.randint(0, 10), rng.randint(-10, 10), rng.randint(-128, 255),
                                rng.choice([127, 128, 255, 256, -129, 2**31 - 1, 2**31,
                                            -2**31, 65535, 2**40])])
            return typed(_literal(value), t, (value, value), uniform=True)
        value = rng.choice([rng.randint(-10, 10) / 2, round(rng.uniform(-100, 100), 3), 0.1,
                            -0.0, 1e-7, 3.5e38, 1e300, 2.0**-1030])
        return typed(_literal(float(value)), t, uniform=True)

    def literal_of(self, ctx, t: str):
        if S.is_weak(t):
            return self.literal(t)
        return self.cast(ctx, self.literal(), t)

    def condition(self, ctx, uniform=None):
        return self.retrying(lambda: self.condition_once(ctx, uniform),
                             lambda: typed(_literal(True), S.PY_BOOL, uniform=True))

    def condition_once(self, ctx, uniform=None):
        rng = self.rng
        choice = rng.random()
        if choice < 0.55:
            node = self.expression_compare(ctx, rng_depth(self), uniform, True)
        elif choice < 0.7:
            parts = [self.condition(ctx, uniform) for _ in range(rng.randint(2, 3))]
            node = typed(ast.BoolOp(rng.choice([ast.And(), ast.Or()]), parts), S.PY_BOOL,
                         uniform=all(p._kk_uniform for p in parts))
        elif choice < 0.8:
            inner = self.condition(ctx, uniform)
            node = typed(ast.UnaryOp(ast.Not(), inner), S.PY_BOOL, uniform=inner._kk_uniform)
        elif choice < 0.87:
            inner = self.expression(ctx, rng_depth(self), uniform=uniform, exact=True)
            if inner._kk_type == S.PY_BOOL:
                raise Retry
            name = rng.choice(MATH_PREDICATES)
            node = typed(_call(_attribute("math", name), inner), S.PY_BOOL,
                         uniform=inner._kk_uniform)
        else:
            node = self.expression(ctx, rng_depth(self), uniform=uniform, exact=True)
        if uniform and not node._kk_uniform:
            raise Retry
        return node

    def expression_compare(self, ctx, depth, uniform, exact):
        rng = self.rng
        operands = [self.expression(ctx, depth, uniform, exact=True)
                    for _ in range(2 if self.chance(0.8) else 3)]
        if self.chance(0.2) and S.is_integer(operands[0]._kk_type):
            operands[1] = self.literal(S.WEAK_INT)
        types = [o._kk_type for o in operands]
        # a chain gives the type of the comparison that ends it: all must agree
        results = {S.comparison_result(a, b) for a, b in zip(types, types[1:])}
        if len(results) != 1 or None in results:
            raise Retry
        result = results.pop()
        ops = [rng.choice([ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq])()
               for _ in operands[1:]]
        return typed(ast.Compare(operands[0], ops, operands[1:]), result,
                     uniform=all(o._kk_uniform for o in operands))

    def expression_binary(self, ctx, depth, uniform, exact):
        rng = self.rng
        op = rng.choices(list(_OPS), [5, 4, 4, 1.5, 1.2, 1.2, 0.5, 1, 1, 1, 0.8, 0.8])[0]
        left = self.expression(ctx, depth, uniform, exact)
        right = self.expression(ctx, depth, uniform, exact)
        return self.binary(op, left, right)

    def binary(self, op, left, right):
        for operand in (left, right):
            if operand._kk_type == S.PY_BOOL:
                raise Retry
        lt, rt = left._kk_type, right._kk_type
        result = S.binary_result(op, lt, rt)
        if result is None:
            raise Retry
        both_weak = S.is_weak(lt) and S.is_weak(rt)
        if op in ("//", "%", "/"):
            # NumPy integers and Python numbers raise on a zero divisor
            if S.is_integer(result) or result == "bool" or (both_weak and S.is_integer(rt)):
                right = self.nonzero(right)
            elif both_weak:
                right = self.nonzero_float(right)
            if (left._kk_inexact or right._kk_inexact) and op != "/":
                raise Retry
        if op == "**":
            if both_weak and S.is_float(result):
                raise Retry
            if not S.is_float(result):
                value = rng_choice(self, [0, 1, 2, 3])
                right = typed(_literal(value), S.WEAK_INT, (value, value), uniform=True)
        if op in ("<<", ">>"):
            if not (S.is_integer(lt) or lt == "bool") or not (S.is_integer(rt) or rt == "bool"):
                raise Retry
            if isinstance(right, ast.Constant) or self.chance(0.4):
                width = 62 if S.is_weak(lt) else S.bits(lt)
                value = self.rng.randint(0, width - 1)
                if S.is_integer(lt) and not S.is_weak(lt) and self.chance(0.15):
                    # by the width or more: NumPy's 0 (or -1), not the hardware's shift
                    value = self.rng.choice([width, width + 1, 2 * width - 1, 127])
                right = typed(_literal(value), S.WEAK_INT, (value, value), uniform=True)
            else:
                right = typed(ast.BinOp(right, ast.BitAnd(), _literal(7)),
                              S.binary_result("&", rt, S.WEAK_INT),
                              (0, 7), uniform=right._kk_uniform, whole=True)
        left, right = self.fit_weak(left, right), self.fit_weak(right, left)
        lt, rt = left._kk_type, right._kk_type
        result = S.binary_result(op, lt, rt)
        if result is None:
            raise Retry
        interval = None
        if result == S.WEAK_INT:
            interval = _interval_of(op, left._kk_interval, right._kk_interval)
            if interval is None:
                raise Retry
        inexact = left._kk_inexact or right._kk_inexact or (op == "**" and S.is_float(result))
        node = ast.BinOp(left, _OPS[op](), right)
        node._kk_inexact_op = op == "**" and S.is_float(result)
        return typed(node, result, interval, inexact,
                     left._kk_uniform and right._kk_uniform)

    def fit_weak(self, node, other):
        """A Python int mixed with a NumPy integer must fit in it (NumPy raises otherwise):
        make it an int64 where it might not."""
        if node._kk_type != S.WEAK_INT:
            return node
        ot = other._kk_type
        if ot in S.INTEGERS and not _fits(node._kk_interval, ot):
            return typed(_call(_attribute("np", "int64"), node), "int64", None,
                         node._kk_inexact, node._kk_uniform)
        return node

    def nonzero(self, node):
        """An integer divisor that is never zero: (x & 63) + 1."""
        t = node._kk_type
        if t == S.WEAK_INT and node._kk_interval[0] > 0:
            return node
        if S.is_float(t):
            raise Retry
        masked = ast.BinOp(node, ast.BitAnd(), _literal(63))
        mt = S.binary_result("&", t, S.WEAK_INT)
        if mt is None:
            raise Retry
        result = S.binary_result("+", mt, S.WEAK_INT)
        return typed(ast.BinOp(masked, ast.Add(), _literal(1)), result, (1, 64),
                     node._kk_inexact, node._kk_uniform, whole=True)

    def nonzero_float(self, node):
        """A Python float divisor that is never zero (Python raises where NumPy gives inf)."""
        t = node._kk_type
        guarded = ast.BinOp(_call(_name("abs"), node), ast.Add(), _literal(1.0))
        return typed(guarded, S.WEAK_FLOAT if t == S.WEAK_FLOAT else
                     S.binary_result("+", t, S.WEAK_FLOAT), None, node._kk_inexact,
                     node._kk_uniform, whole=True)

    def expression_unary(self, ctx, depth, uniform, exact):
        operand = self.expression(ctx, depth, uniform, exact)
        op = self.rng.choice(["-", "~", "abs"])
        t = operand._kk_type
        if t == S.PY_BOOL:
            raise Retry
        result = S.unary_result(op, t)
        if result is None:
            raise Retry
        interval = None
        if result == S.WEAK_INT:
            low, high = operand._kk_interval
            interval = {"-": (-high, -low), "~": (-high - 1, -low - 1),
                        "abs": (0 if low <= 0 <= high else min(abs(low), abs(high)),
                                max(abs(low), abs(high)))}[op]
        if op == "abs":
            node = _call(_name("abs"), operand)
        else:
            node = ast.UnaryOp(ast.USub() if op == "-" else ast.Invert(), operand)
        return typed(node, result, interval, operand._kk_inexact, operand._kk_uniform)

    def expression_cast(self, ctx, depth, uniform, exact):
        operand = self.expression(ctx, depth, uniform, exact)
        target = self.rng.choice(self.dtypes + [S.WEAK_INT, S.WEAK_FLOAT, S.WEAK_INT])
        if target == S.WEAK_INT:
            return self.to_weak_int(ctx, operand)
        return self.cast(ctx, operand, target)

    def expression_ifexp(self, ctx, depth, uniform, exact):
        test = self.condition(ctx, uniform)
        body = self.expression(ctx, depth, uniform, exact)
        if body._kk_type == S.PY_BOOL:
            raise Retry
        orelse = self.expression(ctx, depth, uniform, exact)
        if body._kk_type == S.WEAK_INT:
            orelse = self.to_weak_int(ctx, orelse)
            interval = (min(body._kk_interval[0], orelse._kk_interval[0]),
                        max(body._kk_interval[1], orelse._kk_interval[1]))
        else:
            orelse = self.cast(ctx, orelse, body._kk_type)
            interval = None
        return typed(ast.IfExp(test, body, orelse), body._kk_type, interval,
                     body._kk_inexact or orelse._kk_inexact,
                     test._kk_uniform and body._kk_uniform and orelse._kk_uniform)

    def expression_minmax(self, ctx, depth, uniform, exact):
        first = self.expression(ctx, depth, uniform, exact)
        t = first._kk_type
        if t == S.PY_BOOL:
            raise Retry
        others = []
        for _ in range(self.rng.choice([1, 1, 2])):
            other = self.expression(ctx, depth, uniform, exact)
            others.append(self.to_weak_int(ctx, other) if t == S.WEAK_INT else self.cast(ctx, other, t))
        operands = [first] + others
        interval = None
        if t == S.WEAK_INT:
            interval = (min(o._kk_interval[0] for o in operands),
                        max(o._kk_interval[1] for o in operands))
        name = self.rng.choice(["min", "max"])
        return typed(_call(_name(name), *operands), t, interval,
                     any(o._kk_inexact for o in operands), all(o._kk_uniform for o in operands))

    def expression_math(self, ctx, depth, uniform, exact):
        rng = self.rng
        operand = self.expression(ctx, depth, uniform)
        t = operand._kk_type
        if rng.random() < 0.5 and t in self.dtypes and S.is_float(t):
            name = rng.choice(KK_UNARY + KK_BINARY)
            module = rng.choice(["kk", "kk", "np"]) if name in _NUMPY_NAMES else "kk"
            function = _NUMPY_NAMES.get(name, name) if module == "np" else name
            args = [self.domain(ctx, name, operand)]
            if name in KK_BINARY:
                second = self.cast(ctx, self.expression(ctx, depth, uniform), t)
                args.append(self.domain(ctx, name, second))
            node = _call(_attribute(module, function), *args)
            inexact = name not in KK_EXACT + EXACT_MATH or any(a._kk_inexact for a in args)
            node._kk_inexact_op = name not in KK_EXACT + EXACT_MATH
            return typed(node, t, None, inexact, all(a._kk_uniform for a in args))
        if t == S.PY_BOOL:
            raise Retry
        name = rng.choice(MATH_UNARY + MATH_BINARY)
        args = [self.domain(ctx, name, operand)]
        if name in MATH_BINARY:
            args.append(self.domain(ctx, name, self.expression(ctx, depth, uniform)))
            if args[-1]._kk_type == S.PY_BOOL:
                raise Retry
        node = _call(_attribute("math", name), *args)
        node._kk_inexact_op = name not in EXACT_MATH
        return typed(node, S.WEAK_FLOAT, None,
                     name not in EXACT_MATH or any(a._kk_inexact for a in args),
                     all(a._kk_uniform for a in args))

    def expression_math_exact(self, ctx, depth, uniform, exact):
        """math.floor/ceil/trunc (a Python int, from a guarded float) and kk.floor ..."""
        operand = self.expression(ctx, depth, uniform, exact=True)
        t = operand._kk_type
        if S.is_float(t) and t != S.WEAK_FLOAT and self.chance(0.5):
            name = self.rng.choice(KK_EXACT)
            return typed(_call(_attribute("kk", name), operand), t, None, False,
                         operand._kk_uniform)
        if not S.is_float(t):
            operand = self.cast(ctx, operand, S.WEAK_FLOAT)
        guarded = self.guard_float(ctx, operand, -2.0**31, 2.0**31)
        name = self.rng.choice(MATH_TO_INT)
        return typed(_call(_attribute("math", name), guarded), S.WEAK_INT, (-2**31, 2**31),
                     False, operand._kk_uniform, whole=True)

    def expression_builtin(self, ctx, depth, uniform, exact):
        """The scalar functions of `kk` (`lang.scalars`) on a float of a NumPy type, a
        float's bits (`kk.bitcast`, of a value that is not NaN, whose bits are the
        hardware's), and bounded random integers in kernels."""
        rng = self.rng
        if ctx.kernel and self.chance(0.15):
            low = rng.randint(-100, 100)
            node = _call(ast.Attribute(_attribute("kk", "random"), "integers", ast.Load()),
                         _literal(rng.randint(0, 2**40)), _name("i"), _literal(low),
                         _literal(low + rng.randint(0, 300)))
            return typed(node, "int64", None, False, False)
        operand = self.expression(ctx, depth, uniform, exact)
        t = operand._kk_type
        if t not in self.dtypes or not S.is_float(t) or t == "float16":
            raise Retry
        name = rng.choice(["round", "frac", "step", "nonzero", "smoothstep", "bitcast"] +
                          (["erfinv", "erfcinv"] if exact is not True else []))
        uniform_result = operand._kk_uniform
        if name == "bitcast":
            value = self.hoist(ctx, operand)
            zero = self.cast(ctx, self.literal(S.WEAK_FLOAT), t)
            guarded = ast.IfExp(ast.Compare(value, [ast.Eq()], [copy.deepcopy(value)]), value,
                                zero)
            target = {"float32": "int32", "float64": "uint64"}[t] if self.chance(0.5) else \
                {"float32": "uint32", "float64": "int64"}[t]
            node = _call(_attribute("kk", "bitcast"), guarded, _attribute("np", target))
            return typed(node, target, None, operand._kk_inexact, uniform_result)
        args = [operand]
        if name == "smoothstep":
            edges = [self.cast(ctx, self.expression(ctx, depth, uniform, exact), t)
                     for _ in range(2)]
            args = edges + args
            uniform_result = all(a._kk_uniform for a in args)
        node = _call(_attribute("kk", name), *args)
        inexact = name in ("erfinv", "erfcinv") or any(a._kk_inexact for a in args)
        node._kk_inexact_op = name in ("erfinv", "erfcinv")
        return typed(node, t, None, inexact, uniform_result)

    def expression_call(self, ctx, depth, uniform, exact):
        # a device function being written is not in the list yet: no recursion; one with
        # subgroup operations is called by a statement of its own (statement_call)
        candidates = [f for f in self.functions if len(f.returns) == 1 and not f.collective]
        if not candidates:
            raise Retry
        return self.call(ctx, self.rng.choice(candidates))

    def domain(self, ctx, name, node):
        guard = DOMAIN_GUARDS.get(name)
        if guard is None or self.chance(0.2):
            return node
        t = node._kk_type
        if guard == "abs":
            return typed(_call(_name("abs"), node), S.unary_result("abs", t) or t, None,
                         node._kk_inexact, node._kk_uniform)
        if guard == "abs1":
            inner = _call(_name("abs"), node)
            result = S.binary_result("+", S.unary_result("abs", t) or t, S.WEAK_FLOAT)
            return typed(ast.BinOp(inner, ast.Add(), _literal(1.0)), result, None,
                         node._kk_inexact, node._kk_uniform)
        if guard == "unit" or guard == "small":
            if node._kk_inexact:
                return node
            bound = 1.0 if guard == "unit" else 20.0
            base = node if S.is_float(t) else self.cast(ctx, node, S.WEAK_FLOAT)
            return self.guard_float(ctx, base, -bound, bound, fallback=0.5)
        return node

    # -- casts -----------------------------------------------------------------------------

    def guard_float(self, ctx, node, low: float, high: float, fallback=0.0):
        """`x if low < x < high else fallback`: nan, inf and out-of-range values never
        reach a conversion that is undefined for them."""
        if node._kk_inexact:
            raise Retry
        node = self.hoist(ctx, node)
        t = node._kk_type
        copy_ = copy.deepcopy(node)
        test = ast.Compare(_literal(low), [ast.Lt(), ast.Lt()], [copy_, _literal(high)])
        fallback_node = _literal(fallback)
        if t != S.WEAK_FLOAT:
            fallback_node = _call(_attribute("np", t), fallback_node)
        return typed(ast.IfExp(test, node, fallback_node), t, None, False, node._kk_uniform,
                     whole=True)

    def to_weak_int(self, ctx, node):
        t = node._kk_type
        if t == S.WEAK_INT:
            return node
        if t == "uint64":
            node = typed(_call(_attribute("np", "int64"), node), "int64", None, node._kk_inexact,
                         node._kk_uniform)
            t = "int64"
        if S.is_float(t):
            node = self.guard_float(ctx, node, -2.0**31, 2.0**31)
            interval = (-2**31, 2**31)
        else:
            interval = S.integer_range(t) if t != S.PY_BOOL else (0, 1)
        return typed(_call(_name("int"), node), S.WEAK_INT, interval, False, node._kk_uniform,
                     whole=True)

    def into_interval(self, node, interval):
        low, high = interval
        if node._kk_interval[0] >= low and node._kk_interval[1] <= high:
            return node
        assert low <= 0 and high >= 1
        return typed(ast.BinOp(node, ast.Mod(), _literal(high + 1)), S.WEAK_INT, (0, high),
                     node._kk_inexact, node._kk_uniform, whole=True)

    def cast(self, ctx, node, target: str):
        """`node` as exactly `target` (what a store, an assignment or a parameter needs)."""
        t = node._kk_type
        if t == target:
            return node
        if target == S.WEAK_INT:
            return self.to_weak_int(ctx, node)
        if target == S.WEAK_FLOAT:
            return typed(_call(_name("float"), node), S.WEAK_FLOAT, None, node._kk_inexact,
                         node._kk_uniform, whole=True)
        if target == "bool":
            if node._kk_inexact:
                raise Retry
            return typed(_call(_attribute("np", "bool_"), node), "bool", None, False,
                         node._kk_uniform, whole=True)
        if target in S.INTEGERS:
            if S.is_float(t):
                low, high = S.integer_range(target)
                node = self.guard_float(ctx, node, float(low) - 1.0, float(high) + 1.0)
            elif t == S.WEAK_INT and not _fits(node._kk_interval, target):
                node = typed(_call(_attribute("np", "int64"), node), "int64", None,
                             node._kk_inexact, node._kk_uniform)
        return typed(_call(_attribute("np", target), node), target, None, node._kk_inexact,
                     node._kk_uniform, whole=True)


# The NumPy type a Python number is converted to (as a subgroup operation does).
_STRONG = {S.WEAK_INT: "int64", S.WEAK_FLOAT: "float64", S.PY_BOOL: "bool"}

_OPS = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv,
        "%": ast.Mod, "**": ast.Pow, "&": ast.BitAnd, "|": ast.BitOr, "^": ast.BitXor,
        "<<": ast.LShift, ">>": ast.RShift}
_NUMPY_NAMES = {"sqrt": "sqrt", "exp": "exp", "sin": "sin", "cos": "cos", "log": "log",
                "tanh": "tanh", "atan": "arctan", "fmin": "fmin", "fmax": "fmax",
                "hypot": "hypot", "copysign": "copysign"}


def rng_depth(generator) -> int:
    return generator.rng.randint(0, generator.options.max_depth)


def rng_choice(generator, values):
    return generator.rng.choice(values)


def generate(seed: int, options: Options | None = None) -> Case:
    """The case of `seed`: the same kernel and arguments on every call."""
    return Generator(seed, options).case()
