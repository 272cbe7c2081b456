"""One definition per kind of operation: what its operands are, the type it gives, what
it does to memory and to the other work-items, how it is checked and how it folds.

Passes, backends and the verifier ask an operation's definition (`op.definition`) or
its traits; they never compare opcode strings. A kind is named as the IR text prints it:
`add`, `load`, and, for the families, one kind per member: `math.sqrt`, `atomic.add`.

Adding an operation is one `define(...)` here; its LLVM lowering is one entry in the
lowering's table, and the verifier checks it from this definition alone."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from . import fold as evaluate
from . import types as T
from .math_functions import MATH_FUNCTIONS
from .subgroups import REDUCTIONS, VOTES

if TYPE_CHECKING:
    from .function import Module
    from .ops import Op


class Trait(enum.Enum):
    """Facts about a kind of operation that passes ask."""

    # Members are singletons: hashing by identity (in C) keeps trait lookups, which
    # passes make for every operation, as cheap as a set membership can be.
    __hash__ = object.__hash__

    TERMINATOR = enum.auto()      # ends a block
    CONSTANT = enum.auto()        # a compile-time value (attrs['value'])
    ARITHMETIC = enum.auto()      # a binary operation on two numbers
    COMMUTATIVE = enum.auto()     # f(a, b) == f(b, a)
    COMPARISON = enum.auto()      # compares two numbers, gives a bool
    UNARY = enum.auto()           # an operation on one number
    MATH = enum.auto()            # a function of MATH_FUNCTIONS
    EXPENSIVE = enum.auto()       # worth a branch: not executed speculatively
    POSITION = enum.auto()        # where the work-item is (local_id, group_id, ndrange)
    PER_WORK_ITEM = enum.auto()   # differs between work-items whatever its operands
    GROUP_UNIFORM = enum.auto()   # the same for every work-item of a group
    ATOMIC = enum.auto()          # an atomic read-modify-write
    BARRIER = enum.auto()         # every work-item of the group waits here
    ALLOCATION = enum.auto()      # a new array (local: per group, private: per work-item)
    CALL = enum.auto()            # calls a function of the module
    LOOKS_THROUGH = enum.auto()   # the value is one of its operands (tuple, extract)
    SUBGROUP = enum.auto()        # exchanges values within the subgroup (`ir/subgroups.py`):
                                  # every work-item of the group reaches it


@dataclass(frozen=True, slots=True)
class Effects:
    """What an operation does beyond giving its result. `reads` and `writes` name the
    operand roles whose memory it touches; `unknown` marks effects that must keep their
    place and count (printing, calls, markers, assumptions)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    barrier: bool = False
    allocates: bool = False
    unknown: bool = False

    @property
    def none(self) -> bool:
        return not (self.reads or self.writes or self.barrier or self.allocates or self.unknown)


NO_EFFECTS = Effects()

# A result-type rule: the operation's operand types and attributes -> the type it gives,
# or None where the operation states its own type (a cast, a constant, a call).
ResultRule = Callable[[list[T.IRType], dict], "T.IRType | None"]
# A verify hook: the operation and its module (None when checked alone) -> what is
# wrong with it.
VerifyHook = Callable[["Op", "Module | None"], list[str]]
# A fold hook: constant operands (NumPy scalars), their types and the result type ->
# the constant result, or None to leave the operation to run time.
FoldHook = Callable[[list, list[T.IRType], T.IRType], object]


@dataclass(frozen=True, eq=False, slots=True)
class OpDefinition:
    name: str
    # Roles of the operands, in order; one role ending in '*' takes as many operands as
    # the others leave (the indices of an access).
    operands: tuple[str, ...] = ()
    result: ResultRule | None = None
    effects: Effects = NO_EFFECTS
    traits: frozenset[Trait] = frozenset()
    attributes: tuple[str, ...] = ()      # attributes every operation of the kind has
    verify: VerifyHook | None = None
    fold: FoldHook | None = None
    # The member of a family (a math function's entry; an atomic's operation).
    member: object = field(default=None)
    # Derived from the effects and traits (asked for every operation by most passes).
    is_terminator: bool = field(init=False)
    # No effects: removable when unused, and two with equal operands are equal.
    is_pure: bool = field(init=False)
    # Pure, or only reading memory (an unused load can go, but not merge with another:
    # a store or barrier between two loads changes what they read).
    removable_when_unused: bool = field(init=False)

    def __post_init__(self):
        effects, terminator = self.effects, Trait.TERMINATOR in self.traits
        object.__setattr__(self, "is_terminator", terminator)
        object.__setattr__(self, "is_pure", effects.none and not terminator)
        object.__setattr__(self, "removable_when_unused", not (
            effects.writes or effects.barrier or effects.allocates or effects.unknown
            or terminator))

    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    def operand(self, op: Op, role: str):
        """The operand of `op` that plays `role` (a role without '*'): counted from the
        start before the variadic role, from the end after it."""
        position = self.operands.index(role)
        variadic = next((i for i, r in enumerate(self.operands) if r.endswith("*")), None)
        if variadic is not None and position > variadic:
            return op.operands[position - len(self.operands)]
        return op.operands[position]

    def arity_problem(self, count: int) -> str | None:
        variadic = any(role.endswith("*") for role in self.operands)
        fixed = len(self.operands) - variadic
        if count == fixed or (variadic and count > fixed):
            return None
        wanted = f"at least {fixed}" if variadic else str(fixed)
        return f"{self.name} takes {wanted} operands, has {count}"

    def __repr__(self) -> str:
        return f"<definition {self.name}>"


DEFINITIONS: dict[str, OpDefinition] = {}


def define(name: str, operands: tuple[str, ...] = (), result: ResultRule | None = None,
           effects: Effects = NO_EFFECTS, traits: tuple[Trait, ...] = (),
           attributes: tuple[str, ...] = (), verify: VerifyHook | None = None,
           fold: FoldHook | None = None, member: object = None) -> OpDefinition:
    assert name not in DEFINITIONS, name
    definition = OpDefinition(name, operands, result, effects, frozenset(traits), attributes,
                              verify, fold, member)
    DEFINITIONS[name] = definition
    return definition


# -- result-type rules ----------------------------------------------------------------------

def same_as_first(types, attrs):
    return types[0]


def boolean(types, attrs):
    return T.bool_


def nothing(types, attrs):
    return T.void


def index_type(types, attrs):
    return T.int64


def element_of_array(types, attrs):
    return types[0].dtype if isinstance(types[0], T.ArrayType) else None


def same_as_second(types, attrs):
    return types[1]


def element_of_tuple(types, attrs):
    if isinstance(types[0], T.TupleType) and 0 <= attrs.get("index", -1) < len(types[0].elements):
        return types[0].elements[attrs["index"]]
    return None


def tuple_of_operands(types, attrs):
    if "shape" in attrs:   # a vector or matrix (`T.VectorType`)
        return T.VectorType(tuple(types), tuple(attrs["shape"]))
    return T.TupleType(tuple(types))


# -- verify hooks -----------------------------------------------------------------------------

def _same_operand_types(op: Op, module: Module | None) -> list[str]:
    first, second = op.operands[0].type, op.operands[1].type
    if first != second:
        return [f"{op.opcode} of {first.name} and {second.name}"]
    return []


def _integer_or_bool_operands(op: Op, module: Module | None) -> list[str]:
    kinds = [v.type for v in op.operands]
    if not all(isinstance(t, T.ScalarType) and not t.is_float for t in kinds):
        return [f"{op.opcode} of {', '.join(t.name for t in kinds)}: integers or bools only"]
    return []


def _scalar_operands(op: Op, module: Module | None) -> list[str]:
    if not all(isinstance(v.type, T.ScalarType) for v in op.operands):
        return [f"{op.opcode} of {', '.join(v.type.name for v in op.operands)}: numbers only"]
    return []


def _all_of(*hooks: VerifyHook) -> VerifyHook:
    def verify(op: Op, module: Module | None) -> list[str]:
        return [problem for hook in hooks for problem in hook(op, module)]
    return verify


def _array_access(extra_operands: int) -> VerifyHook:
    """An array, one integer index per dimension, then `extra_operands` values of the
    array's element type."""
    def verify(op: Op, module: Module | None) -> list[str]:
        array = op.operands[0].type
        if not isinstance(array, T.ArrayType):
            return [f"{op.opcode} of a {array.name}, not an array"]
        indices = op.operands[1:len(op.operands) - extra_operands]
        problems = []
        if len(indices) != array.ndim:
            problems.append(f"{op.opcode} of a {array.ndim}-dimensional array with "
                            f"{len(indices)} indices")
        if not all(isinstance(i.type, T.ScalarType) and i.type.is_integer for i in indices):
            problems.append(f"{op.opcode} with an index that is not an integer")
        for value in op.operands[len(op.operands) - extra_operands:]:
            if value.type != array.dtype:
                problems.append(f"{op.opcode} of a {value.type.name} into an array of "
                                f"{array.dtype.name}")
        return problems
    return verify


def _writable_array(op: Op, module: Module | None) -> list[str]:
    array = op.operands[0].type
    if isinstance(array, T.ArrayType) and array.const:
        return [f"{op.opcode} into a const array"]
    return []


def _select(op: Op, module: Module | None) -> list[str]:
    condition, if_true, if_false = (v.type for v in op.operands)
    problems = [] if condition == T.bool_ else [f"select on a {condition.name}"]
    if if_true != if_false or not isinstance(if_true, T.ScalarType):
        problems.append("select of different types")
    return problems


def _condition_is_bool(op: Op, module: Module | None) -> list[str]:
    if op.operands[0].type != T.bool_:
        return [f"{op.opcode} on a {op.operands[0].type.name}"]
    return []


def _call(op: Op, module: Module | None) -> list[str]:
    if module is None:
        return []
    callee = module.functions.get(op.attrs["callee"])
    if callee is None:
        return [f"call to unknown function @{op.attrs['callee']}"]
    if [v.type for v in op.operands] != [p.type for p in callee.params]:
        return [f"call to @{callee.name} with wrong argument types"]
    if op.type != callee.return_type:
        return [f"call to @{callee.name} gives {op.type.name}, it returns "
                f"{callee.return_type.name}"]
    return []


def _return(op: Op, module: Module | None) -> list[str]:
    function = op.block.function if op.block is not None else None
    returned = op.operands[0].type.name if op.operands else "void"
    if function is not None and returned != function.return_type.name:
        return [f"ret of {returned} in a function returning {function.return_type.name}"]
    return []


def _bitcast(op: Op, module: Module | None) -> list[str]:
    source, result = op.operands[0].type, op.type
    if not (isinstance(source, T.ScalarType) and isinstance(result, T.ScalarType)) or \
            source.is_bool or result.is_bool or source.bits != result.bits:
        return [f"bitcast of {source.name} to {result.name}: numbers of one size only"]
    return []


def _constant(op: Op, module: Module | None) -> list[str]:
    if not isinstance(op.type, T.ScalarType):
        return [f"a constant of type {op.type.name}"]
    return []


def _allocation(space: str) -> VerifyHook:
    def verify(op: Op, module: Module | None) -> list[str]:
        if not (isinstance(op.type, T.ArrayType) and op.type.space == space):
            return [f"{op.opcode} gives a {op.type.name}, not a {space} array"]
        return []
    return verify


# -- the operations -----------------------------------------------------------------------

CONST = define("const", result=None, traits=(Trait.CONSTANT,), attributes=("value",),
               verify=_constant)

_COMMUTATIVE = {"add", "mul", "min", "max", "and", "or", "xor"}
_BITWISE = {"and", "or", "xor"}
_EXPENSIVE_ARITHMETIC = {"pow", "truediv"}
ARITHMETIC: dict[str, OpDefinition] = {}
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "min", "max",
              "and", "or", "xor"):
    ARITHMETIC[_name] = define(
        _name, ("lhs", "rhs"), same_as_first,
        traits=(Trait.ARITHMETIC,) + ((Trait.COMMUTATIVE,) if _name in _COMMUTATIVE else ())
        + ((Trait.EXPENSIVE,) if _name in _EXPENSIVE_ARITHMETIC else ()),
        verify=_all_of(_scalar_operands, _same_operand_types,
                       *((_integer_or_bool_operands,) if _name in _BITWISE else ())),
        fold=evaluate.binary(_name))
for _name in ("shl", "shr"):   # the shift amount may have another integer type
    ARITHMETIC[_name] = define(_name, ("value", "amount"), same_as_first,
                               traits=(Trait.ARITHMETIC,), verify=_integer_or_bool_operands,
                               fold=evaluate.binary(_name))
ADD, SUB, MUL = ARITHMETIC["add"], ARITHMETIC["sub"], ARITHMETIC["mul"]

COMPARISONS: dict[str, OpDefinition] = {
    name: define(name, ("lhs", "rhs"), boolean,
                 traits=(Trait.COMPARISON,)
                 + ((Trait.COMMUTATIVE,) if name in ("eq", "ne") else ()),
                 verify=_all_of(_scalar_operands, _same_operand_types),
                 fold=evaluate.binary(name))
    for name in ("eq", "ne", "lt", "le", "gt", "ge")}

UNARY: dict[str, OpDefinition] = {
    "neg": define("neg", ("value",), same_as_first, traits=(Trait.UNARY,),
                  verify=_scalar_operands, fold=evaluate.unary("neg")),
    "not": define("not", ("value",), boolean, traits=(Trait.UNARY,),
                  verify=_scalar_operands, fold=evaluate.unary("not")),
    "invert": define("invert", ("value",), same_as_first, traits=(Trait.UNARY,),
                     verify=_integer_or_bool_operands, fold=evaluate.unary("invert")),
    "abs": define("abs", ("value",), same_as_first, traits=(Trait.UNARY,),
                  verify=_scalar_operands, fold=evaluate.unary("abs")),
}
NOT = UNARY["not"]

CAST = define("cast", ("value",), None, verify=_scalar_operands, fold=evaluate.cast)
# The same bits read as another type of their size (NumPy's `view`).
BITCAST = define("bitcast", ("value",), None, verify=_bitcast, fold=evaluate.bitcast)
SELECT = define("select", ("condition", "if_true", "if_false"), same_as_second,
                verify=_select, fold=evaluate.select)

MATH: dict[str, OpDefinition] = {
    function.name: define(
        f"math.{function.name}", tuple(("x", "y")[:function.arity]),
        boolean if function.predicate else same_as_first,
        traits=(Trait.MATH, Trait.EXPENSIVE),
        verify=_scalar_operands,
        fold=evaluate.math_function(function.name) if function.exact else None,
        member=function)
    for function in MATH_FUNCTIONS.values()}

LOCAL_ID = define("local_id", (), index_type, attributes=("axis",),
                  traits=(Trait.POSITION, Trait.PER_WORK_ITEM))
GROUP_ID = define("group_id", (), index_type, attributes=("axis",), traits=(Trait.POSITION,))
NDRANGE = define("ndrange", (), index_type, attributes=("axis",), traits=(Trait.POSITION,))
DIM = define("dim", ("array",), index_type, attributes=("axis",))   # an array's extent
TUPLE = define("tuple", ("elements*",), tuple_of_operands, traits=(Trait.LOOKS_THROUGH,))
EXTRACT = define("extract", ("tuple",), element_of_tuple, attributes=("index",),
                 traits=(Trait.LOOKS_THROUGH,))

LOAD = define("load", ("array", "indices*"), element_of_array,
              effects=Effects(reads=("array",)), verify=_array_access(0))
STORE = define("store", ("array", "indices*", "value"), nothing,
               effects=Effects(writes=("array",)),
               verify=_all_of(_array_access(1), _writable_array))
ATOMICS: dict[str, OpDefinition] = {
    name: define(f"atomic.{name}", ("array", "indices*", "value"), element_of_array,
                 effects=Effects(reads=("array",), writes=("array",)),
                 traits=(Trait.ATOMIC, Trait.PER_WORK_ITEM),
                 verify=_all_of(_array_access(1), _writable_array), member=name)
    for name in ("add", "sub", "min", "max", "and", "or", "xor", "exchange")}
ATOMIC_CAS = define("atomic_cas", ("array", "indices*", "expected", "desired"),
                    element_of_array,
                    effects=Effects(reads=("array",), writes=("array",)),
                    traits=(Trait.ATOMIC, Trait.PER_WORK_ITEM),
                    verify=_all_of(_array_access(2), _writable_array))

# One allocation per work-group (local) or per work-item (private): never merged.
LOCALMEM = define("localmem", (), None, effects=Effects(allocates=True),
                  traits=(Trait.ALLOCATION,), verify=_allocation("local"))
PRIVATE = define("private", (), None, effects=Effects(allocates=True),
                 traits=(Trait.ALLOCATION, Trait.PER_WORK_ITEM), verify=_allocation("private"))

BARRIER = define("barrier", (), nothing, effects=Effects(barrier=True), traits=(Trait.BARRIER,))
# A barrier that tells every work-item whether any work-item's operand was true.
BARRIER_ANY = define("barrier_any", ("condition",), boolean, effects=Effects(barrier=True),
                     traits=(Trait.BARRIER, Trait.GROUP_UNIFORM), verify=_condition_is_bool)

def _subgroup_value(op: Op, module: Module | None) -> list[str]:
    value = op.operands[0].type
    if not isinstance(value, T.ScalarType):
        return [f"{op.opcode} of a {value.name}: numbers only"]
    if op.definition.member in REDUCTIONS and value.is_bool:
        return [f"{op.opcode} of a bool"]
    if op.definition.member == "shuffle" and op.operands[1].type != T.int64:
        return [f"{op.opcode} from a lane of type {op.operands[1].type.name}, not int64"]
    return []


def _ballot(types, attrs):
    return T.uint32


# The subgroup operations (`ir/subgroups.py` says what each gives); `group` is the
# work-group's shape, which says which work-items form a subgroup. Exchanging values with
# the other lanes, they keep their place and count (never speculated, merged or removed)
# as a barrier does.
_SUBGROUP_EFFECTS = Effects(barrier=True)
_SUBGROUP_TRAITS = (Trait.SUBGROUP, Trait.PER_WORK_ITEM)
SUBGROUP: dict[str, OpDefinition] = {
    "shuffle": define("subgroup.shuffle", ("value", "source"), same_as_first,
                      effects=_SUBGROUP_EFFECTS, traits=_SUBGROUP_TRAITS,
                      attributes=("group",), verify=_subgroup_value, member="shuffle"),
    **{name: define(f"subgroup.{name}", ("value",), same_as_first, effects=_SUBGROUP_EFFECTS,
                    traits=_SUBGROUP_TRAITS, attributes=("group",), verify=_subgroup_value,
                    member=name)
       for name in REDUCTIONS},
    **{name: define(f"subgroup.{name}", ("condition",), _ballot if name == "ballot" else boolean,
                    effects=_SUBGROUP_EFFECTS, traits=_SUBGROUP_TRAITS, attributes=("group",),
                    verify=_condition_is_bool, member=name)
       for name in VOTES},
}

PRINT = define("print", ("values*",), nothing, effects=Effects(unknown=True),
               attributes=("format",))
CALL = define("call", ("arguments*",), None, effects=Effects(unknown=True),
              traits=(Trait.CALL,), attributes=("callee",), verify=_call)
# A plugin's marker (attrs['name']), rewritten by the plugin.
INTRINSIC = define("intrinsic", ("arguments*",), None, effects=Effects(unknown=True),
                   attributes=("name",))
# A reference to the module's function attrs['function'] (kk.deferred).
DEFERRED = define("deferred", (), None, attributes=("function",))
# A call through a reference (operand 0).
CALL_REF = define("call_ref", ("reference", "arguments*"), None,
                  effects=Effects(unknown=True), traits=(Trait.CALL,))
# A kernel's `assert` (debug builds): operand 0 must hold; the others are the work-item's
# global position, which the error names.
ASSERT = define("assert", ("condition", "position*"), nothing, effects=Effects(unknown=True),
                attributes=("message",), verify=_condition_is_bool)
# Operand 0 holds for every work-item of the group (guard versioning's promise).
ASSUME = define("assume", ("condition",), nothing, effects=Effects(unknown=True),
                verify=_condition_is_bool)

BR = define("br", (), nothing, traits=(Trait.TERMINATOR,))
CBR = define("cbr", ("condition",), nothing, traits=(Trait.TERMINATOR,),
             verify=_condition_is_bool)
RET = define("ret", ("value*",), nothing, traits=(Trait.TERMINATOR,), verify=_return)
