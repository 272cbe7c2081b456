"""The fuzzer's subgroup operations: the generator writes them in a share of the seeds,
in kernels and the device functions they call, in work-groups that make partial
subgroups, and its reference (`fuzz/subgroups.py`)
computes what the language defines: checked here on values worked out by hand, and
against every backend on random ones. The seeds of `test_fuzz.py` that draw subgroup
operations run there like the others."""
import ast
import re

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.fuzz.emulation import InvalidKernel
from kernelkit.fuzz.generator import HEADER, Case, generate
from kernelkit.fuzz.reference import forget_module, load_module, run_reference
from kernelkit.fuzz.runner import Runner, compare
from kernelkit.fuzz.subgroups import FUNCTIONS

SUBGROUP_CALL = re.compile(r"\bkk\.(shuffle(?:_down|_up|_xor)?|subgroup_(?:sum|max|min|any|"
                           r"all|ballot))\(")


def subgroup_operations(case) -> set[str]:
    return set(SUBGROUP_CALL.findall(case.kernel_source()))


def seeds_with_subgroup_operations(seeds) -> list[int]:
    return [seed for seed in seeds if subgroup_operations(generate(seed))]


# -- the generator -----------------------------------------------------------------------------

def test_a_share_of_the_seeds_write_every_subgroup_operation():
    cases = [generate(seed) for seed in range(200)]
    drawn = [case for case in cases if subgroup_operations(case)]
    assert 40 <= len(drawn) <= 100, len(drawn)
    written = set().union(*(subgroup_operations(case) for case in drawn))
    assert written == set(FUNCTIONS.values())
    assert sum("kk.subgroup_index()" in case.kernel_source() for case in drawn) >= 20


def test_the_seeds_every_run_checks_include_subgroup_operations():
    from test_fuzz import SEEDS
    assert len(seeds_with_subgroup_operations(SEEDS)) >= 20


def test_kernels_with_subgroup_operations_launch_partial_subgroups():
    """Groups that are not a whole number of subgroups, groups of several subgroups,
    and groups the ndrange cuts short."""
    drawn = [generate(seed) for seed in seeds_with_subgroup_operations(range(200))]
    items = [int(np.prod(case.workgroupsize)) for case in drawn]
    assert sum(n % 32 != 0 for n in items) >= len(drawn) // 3
    assert sum(n > 32 for n in items) >= len(drawn) // 3
    assert sum(any(n % w for n, w in zip(case.ndrange, case.workgroupsize))
               for case in drawn) >= len(drawn) // 2


def test_subgroup_operations_sit_where_every_item_of_a_group_reaches_them():
    """Never under a branch or a loop on a value that differs between items: the
    reference would refuse such a kernel (items meeting at different places)."""
    seeds = seeds_with_subgroup_operations(range(120))
    outcomes = [Runner(backends={}).run(generate(seed)) for seed in seeds]
    assert all(outcome == [] for outcome in outcomes), \
        [o for found in outcomes for o in found][:3]


# -- device functions with subgroup operations -------------------------------------------------

def collective_functions(case) -> set[str]:
    """The device functions that perform a subgroup operation, or call one that does."""
    found = set()
    for definition in case.module.body:
        if definition.decorator_list:
            continue
        source = ast.unparse(definition)
        if SUBGROUP_CALL.search(source) or any(re.search(rf"\b{name}\(", source)
                                               for name in found):
            found.add(definition.name)
    return found


def calls_collective_functions(case) -> bool:
    kernel = ast.unparse(case.module.body[-1])
    return any(re.search(rf"\b{name}\(", kernel) for name in collective_functions(case))


def test_device_functions_have_subgroup_operations_that_their_kernels_call():
    cases = [generate(seed) for seed in range(200)]
    calling = [case for case in cases if calls_collective_functions(case)]
    assert len(calling) >= 12, len(calling)
    in_functions = set()
    for case in calling:
        for definition in case.module.body[:-1]:
            in_functions |= set(SUBGROUP_CALL.findall(ast.unparse(definition)))
    assert len(in_functions) >= 8, in_functions
    assert any("kk.subgroup_index()" in ast.unparse(definition)
               for case in cases for definition in case.module.body[:-1])


def test_the_seeds_every_run_checks_include_device_functions_with_subgroup_operations():
    """`test_fuzz.py` runs these against the reference on every backend."""
    from test_fuzz import SEEDS
    assert sum(calls_collective_functions(generate(seed)) for seed in SEEDS) >= 5


def test_a_collective_device_function_is_called_by_a_statement_of_its_own():
    """Never inside an expression, where a short-circuited operand (`c and f(x)`) or a
    conditional expression would call it on some items of a group only."""
    for seed in range(200):
        case = generate(seed)
        names = collective_functions(case)
        for node in ast.walk(case.module):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in names:
                assert any(isinstance(statement, ast.Assign) and statement.value is node
                           for statement in ast.walk(case.module)), (seed, ast.unparse(node))


# -- the reference, on values worked out by hand ----------------------------------------------

KERNEL = """
@kk.kernel
def every_operation(values, votes, x: kk.Const, amounts: kk.Const, flags: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    values[0, i] = kk.shuffle(v, amounts[i])
    values[1, i] = kk.shuffle_down(v, amounts[i])
    values[2, i] = kk.shuffle_up(v, amounts[i])
    values[3, i] = kk.shuffle_xor(v, amounts[i])
    values[4, i] = kk.subgroup_sum(v)
    values[5, i] = kk.subgroup_max(v)
    values[6, i] = kk.subgroup_min(v)
    held = flags[i] != 0
    votes[0, i] = kk.subgroup_any(held)
    votes[1, i] = kk.subgroup_all(held)
    votes[2, i] = kk.subgroup_ballot(held)
    votes[3, i] = kk.subgroup_index()
"""


def every_operation_case(ndrange: tuple, workgroupsize: tuple) -> Case:
    return Case(0, ast.parse(KERNEL), "every_operation", [], ndrange, workgroupsize)


def reference(x, amounts, flags, ndrange, workgroupsize):
    n = x.size
    values, votes = np.zeros((7, n), x.dtype), np.zeros((4, n), np.int64)
    arrays = [values, votes, x, amounts, flags]
    run_reference(every_operation_case(ndrange, workgroupsize), [(a, a) for a in arrays])
    return values, votes


def test_the_reference_sums_floats_along_the_pairwise_tree():
    # (1e20 + 1) + (-1e20 + 1) is 0, where adding one lane after another gives 1
    x = np.array([1e20, 1.0, -1e20, 1.0])
    values, _ = reference(x, np.zeros(4, np.int64), np.ones(4, np.uint8), (4,), (4,))
    assert (values[4] == 0.0).all()


def test_the_reference_wraps_integer_sums():
    x = np.array([100, 100, -7], np.int8)
    values, _ = reference(x, np.zeros(3, np.int64), np.ones(3, np.uint8), (3,), (3,))
    assert (values[4] == np.int8(-63)).all()


def test_the_reference_propagates_nan_through_max_and_min_and_keeps_the_lower_lane():
    x = np.array([1.0, np.nan, 5.0, -0.0, 0.0, 2.0])
    values, _ = reference(x, np.zeros(6, np.int64), np.ones(6, np.uint8), (6,), (3,))
    assert np.isnan(values[5, :3]).all() and np.isnan(values[6, :3]).all()
    assert (values[5, 3:] == 2.0).all()
    assert (values[6, 3:] == 0.0).all() and np.signbit(values[6, 3:]).all()   # lane 0's -0.0


def test_a_shuffle_from_a_lane_without_a_member_gives_the_callers_own_value():
    """A group of 40 cut to 37 items: its second subgroup has lanes 0..4 (items 32..36)."""
    x = np.arange(37, dtype=np.int32) * 10
    amounts = np.ones(37, np.int64)
    amounts[0], amounts[1] = 2**63 - 1, -1
    values, _ = reference(x, amounts, np.ones(37, np.uint8), (37,), (40,))
    source, down, up, xor = values[:4]
    assert down[35] == 360 and down[36] == 360        # item 36 has no lane 5 after it
    assert down[31] == 310 and up[32] == 320          # no lane 32, no lane -1
    assert source[34] == 330 and xor[34] == 350 and xor[36] == 360
    assert source[0] == 0 and down[0] == 0 and up[0] == 0 and xor[0] == 0
    assert source[1] == 10 and down[1] == 0 and up[1] == 20 and xor[1] == 10   # 1 ^ -1 < 0


def test_the_reference_votes_over_members_only_in_a_two_dimensional_group():
    """Groups of 3 x 11 cut to 3 x 9: subgroup 0 has lanes 0..31 by linear local index,
    of which those of columns 9 and 10 (lanes 9, 10, 20, 21, 31) are not members; lane 0
    of subgroup 1 (row 2, column 10) is not a member either."""
    flags = np.ones(27, np.uint8)
    _, votes = reference(np.zeros(27), np.zeros(27, np.int64), flags, (3, 9), (3, 11))
    lanes = [lane for lane in range(32) if lane % 11 < 9]
    assert (votes[2] == sum(1 << lane for lane in lanes)).all()
    assert (votes[3] == [row * 11 + column for row in range(3) for column in range(9)]).all()
    assert votes[1].all()
    flags[26] = 0
    _, votes = reference(np.zeros(27), np.zeros(27, np.int64), flags, (3, 9), (3, 11))
    assert not votes[1].any() and votes[0].all()
    assert (votes[2] == sum(1 << lane for lane in lanes[:-1])).all()


NESTED = """
def lane_sum(v):
    return kk.subgroup_sum(v)


def with_neighbour(v, delta):
    total = lane_sum(v)
    if delta > 0:
        return total + kk.shuffle_down(v, delta)
    return total


@kk.kernel
def nested(out, x: kk.Const, delta):
    i = kk.index(kk.Global)
    out[0, i] = with_neighbour(x[i], delta)
    out[1, i] = with_neighbour(x[i] * 2, 0)
"""


def test_the_reference_runs_subgroup_operations_in_nested_device_functions():
    """One group of 40 items: subgroups of lanes 0..31 (sum 496) and 32..39 (sum 284)."""
    x = np.arange(40, dtype=np.int64)
    out = np.zeros((2, 40), np.int64)
    case = Case(0, ast.parse(NESTED), "nested", [], (40,), (40,))
    run_reference(case, [(out, out), (x, x), 1])
    sums = np.where(x < 32, 496, 284)
    neighbour = np.where((x == 31) | (x == 39), x, x + 1)
    assert (out[0] == sums + neighbour).all()
    assert (out[1] == 2 * sums).all()


def test_the_reference_gives_what_the_backend_computes_in_device_functions(backend):
    ndrange, workgroupsize = (37,), (40,)
    x = np.random.default_rng(5).integers(-1000, 1000, 37)
    want = np.zeros((2, 37), np.int64)
    run_reference(Case(0, ast.parse(NESTED), "nested", [], ndrange, workgroupsize),
                  [(want, want), (x, x), 3])
    namespace = load_module(HEADER + NESTED, "nested_on_a_backend")
    try:
        out = kk.zeros(backend, np.int64, (2, 37))
        namespace["nested"](backend, workgroupsize)(out, kk.to_backend(backend, x), 3,
                                                    ndrange=ndrange)
        kk.synchronize(backend)
    finally:
        forget_module(namespace)
    assert (kk.to_numpy(out) == want).all()


DIVERGENT = """
def lane_sum(v):
    return kk.subgroup_sum(v)


@kk.kernel
def divergent(out, x: kk.Const):
    i = kk.index(kk.Global)
    if x[i] > 0:
        out[i] = lane_sum(x[i])
    else:
        out[i] = lane_sum(-x[i])
"""


def test_the_reference_refuses_a_device_function_some_items_call_from_elsewhere():
    """Both sides of a branch on the work-item call the function: its subgroup operation
    is reached at one place in its source, but by two calls, so the items do not meet
    (a shrunk kernel can move a call so; the compiler refuses it)."""
    x = np.array([1, -2, 3, -4], np.int64)
    out = np.zeros(4, np.int64)
    case = Case(0, ast.parse(DIVERGENT), "divergent", [], (4,), (4,))
    with pytest.raises(InvalidKernel, match="different barriers"):
        run_reference(case, [(out, out), (x, x)])


# -- the reference against every backend ------------------------------------------------------

GEOMETRIES = {
    "partial-subgroup": ((37,), (40,)),
    "three-subgroups-cut-short": ((150,), (96,)),
    "two-dimensional": ((7, 20), (3, 11)),
}


# A float type (the tree's order, NaN) and an integer type that wraps: the fuzzer's seeds
# draw the others.
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_reference_gives_what_the_backend_computes(backend, geometry, dtype):
    ndrange, workgroupsize = GEOMETRIES[geometry]
    n = int(np.prod(ndrange))
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 8, n)).astype(dtype)
        x[rng.integers(0, n, 2)] = np.nan
    else:
        x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype, endpoint=True)
    amounts = rng.integers(-3, 40, n).astype(np.int64)
    flags = (rng.random(n) < 0.8).astype(np.uint8)
    want_values, want_votes = reference(x, amounts, flags, ndrange, workgroupsize)

    namespace = load_module(HEADER + KERNEL, "every_operation_on_a_backend")
    try:
        values = kk.zeros(backend, x.dtype, (7, n))
        votes = kk.zeros(backend, np.int64, (4, n))
        namespace["every_operation"](backend, workgroupsize)(
            values, votes, *(kk.to_backend(backend, a) for a in (x, amounts, flags)),
            ndrange=ndrange)
        kk.synchronize(backend)
    finally:
        forget_module(namespace)
    assert_same_bits(want_values, kk.to_numpy(values))
    assert_same_bits(want_votes, kk.to_numpy(votes))


def assert_same_bits(want, got):
    """Equal, NaN where NaN, and zeros of the same sign (the tree keeps the identity's
    other operand as it is, and max and min the lower lane's of two equal values)."""
    assert compare(want, got, None) is None, compare(want, got, None)
    if want.dtype.kind == "f":
        numbers = ~np.isnan(want)
        assert (np.signbit(want) == np.signbit(got))[numbers].all()
