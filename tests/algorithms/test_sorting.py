"""ka.sort and ka.argsort against np.sort and np.argsort(kind="stable"), exactly, on every
backend: every dtype, NaN, signed zeros and infinities, stability among many equal keys,
empty and one-element arrays, sizes that are not multiples of a group or a tile, 2-D
arrays along each axis, descending order, and the errors for bad arguments.

Each backend sorts with its own plan (`_sort_radix.plan_for`); the `layout` fixture also
runs the radix passes on arrays short enough for the one-work-item sort, and the GPU's
layout (`GROUP_PLAN`: 256 work-items per tile, staged in local memory) on every backend,
so that the CPU checks the GPU's code too."""
import dataclasses

import numpy as np
import pytest

import kernelkit as kk
import kernelkit.algorithms as ka
from kernelkit.algorithms import _sort_radix, sorting
from kernelkit.algorithms._sort_keys import key_codec

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]
FLOATS = [np.float16, np.float32, np.float64]


@pytest.fixture(params=["own", "radix", "wide", "group"])
def layout(request, monkeypatch):
    """How the sorts are laid out: the backend's own plan; its radix passes even for short
    arrays, with the digits it uses for short and for long arrays; the GPU's plan (radix
    passes only) on every backend."""
    own = sorting.plan_for
    if request.param in ("radix", "wide"):
        def plan_for(backend):
            plan = dataclasses.replace(own(backend), one_work_item_limit=0)
            if request.param == "wide":
                widest = max(bits for _, bits in plan.digit_bits_by_size)
                plan = dataclasses.replace(plan, digit_bits_by_size=((0, widest),))
            return plan
        monkeypatch.setattr(sorting, "plan_for", plan_for)
    elif request.param == "group":
        monkeypatch.setattr(sorting, "plan_for", lambda backend: dataclasses.replace(
            _sort_radix.GROUP_PLAN, one_work_item_limit=0))
    return request.param


def random_values(dtype, n, seed=0, distinct=None):
    """n values of dtype over its whole range (or `distinct` of them, repeated)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        values = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind == "f":
        values = (rng.standard_normal(n) * 100).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if distinct is not None:
        values = rng.choice(values[:distinct], n)
    return values


def float_specials(dtype, n, seed=0):
    """n floats where NaNs, infinities, -0.0 and 0.0 are frequent, and values repeat."""
    rng = np.random.default_rng(seed)
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 2.5,
                     np.finfo(dtype).max, -np.finfo(dtype).max, np.finfo(dtype).tiny], dtype)
    values = np.where(rng.random(n) < 0.5, rng.choice(pool, n),
                      rng.standard_normal(n).astype(dtype))
    return values.astype(dtype)


def check_sorts(backend, values, axis=-1, descending=False):
    """ka.sort and ka.argsort of `values` on `backend` equal NumPy's."""
    x = kk.to_backend(backend, values)
    order = kk.to_numpy(ka.argsort(x, axis=axis, descending=descending, backend=backend))
    ordered = kk.to_numpy(ka.sort(x, axis=axis, descending=descending, backend=backend))
    expected_order = stable_order(values, axis, descending)
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order, expected_order)
    assert ordered.dtype == values.dtype
    flat = values.reshape(-1) if axis is None else values
    expected = np.take_along_axis(flat, expected_order, axis=-1 if axis is None else axis)
    np.testing.assert_array_equal(ordered, expected)   # NaN equals NaN here
    if values.dtype.kind == "f":
        # -0.0 keeps its sign (placed before 0.0): as many negative zeros as in the input.
        zeros = expected == 0
        assert np.count_nonzero(np.signbit(ordered[zeros])) == \
            np.count_nonzero(np.signbit(expected[zeros]))


def stable_order(values, axis, descending):
    """np.argsort(kind="stable"), and for `descending` the stable order of the reversed
    comparison (largest first, NaN before everything, equal values in input order)."""
    if axis is None:
        values, axis = values.reshape(-1), 0
    if not descending:
        return np.argsort(values, axis=axis, kind="stable")
    moved = np.moveaxis(values, axis, -1)
    ranks = np.empty(moved.shape, np.int64)
    for row in np.ndindex(moved.shape[:-1]):
        ascending = np.argsort(moved[row], kind="stable")
        ordered = moved[row][ascending]
        new = np.ones(len(ordered), bool)
        same = ordered[1:] == ordered[:-1]
        if values.dtype.kind == "f":
            same |= np.isnan(ordered[1:]) & np.isnan(ordered[:-1])
        new[1:] = ~same
        ranks[row + (ascending,)] = np.cumsum(new)
    return np.moveaxis(np.argsort(-ranks, axis=-1, kind="stable"), -1, axis)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_sorts_as_numpy(backend, dtype):
    check_sorts(backend, random_values(dtype, 3000))     # longer than one work-item's rows
    check_sorts(backend, random_values(dtype, 500, seed=1))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nan_sorts_last_and_signed_zeros_and_infinities_as_numpy(backend, layout, dtype):
    check_sorts(backend, float_specials(dtype, 2500))


def test_nans_of_any_sign_and_payload_sort_last_in_input_order(backend, layout):
    bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x3F800000, 0xBF800000],
                    np.uint32)
    check_sorts(backend, np.tile(bits.view(np.float32), 400))


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.uint8],
                         ids=lambda d: np.dtype(d).name)
def test_many_equal_keys_keep_their_input_order(backend, layout, dtype):
    check_sorts(backend, random_values(dtype, 20_000, distinct=3))
    check_sorts(backend, random_values(dtype, 5000, seed=2, distinct=1))   # all equal


@pytest.mark.parametrize("n", [0, 1, 2, 255, 257, 1791, 1793, 2049, 5001])
def test_sizes_that_are_not_multiples_of_a_group_or_tile(backend, layout, n):
    check_sorts(backend, random_values(np.float32, n, seed=n))


def test_keys_sharing_digits_sort_where_passes_are_skipped(backend, layout):
    """A pass whose digit every key shares is skipped: the low, middle and high digits
    here, and every one for equal keys."""
    rng = np.random.default_rng(4)
    check_sorts(backend, rng.integers(0, 256, 3000).astype(np.uint32) << 8)
    check_sorts(backend, rng.integers(0, 256, 3000).astype(np.uint64) << 40)
    check_sorts(backend, rng.integers(0, 256, 3000).astype(np.int64))
    check_sorts(backend, np.full(3000, -7, np.int16))


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=lambda d: np.dtype(d).name)
def test_descending_puts_the_largest_first_and_keeps_equal_keys_in_input_order(
        backend, layout, dtype):
    values = float_specials(dtype, 3000) if np.dtype(dtype).kind == "f" else \
        random_values(dtype, 3000, distinct=50)
    check_sorts(backend, values, descending=True)


@pytest.mark.parametrize("shape", [(6, 700), (3, 2500), (4, 1)], ids=str)
def test_2d_arrays_sort_along_the_last_axis(backend, layout, shape):
    check_sorts(backend, random_values(np.float32, int(np.prod(shape)), distinct=40)
                .reshape(shape))


def test_2d_arrays_sort_along_the_first_axis_and_flattened(backend):
    values = random_values(np.int16, 40 * 30, distinct=25).reshape(40, 30)
    check_sorts(backend, values, axis=0)
    check_sorts(backend, values, axis=None)
    check_sorts(backend, values.reshape(2, 5, 4, 30), axis=2)


def test_a_strided_view_sorts_as_it_is(backend):
    values = random_values(np.float64, 60 * 80, distinct=500).reshape(60, 80)
    view = kk.to_backend(backend, values)[::2, 1::3]
    for axis in (-1, 0, None):
        expected = stable_order(values[::2, 1::3], axis, False)
        np.testing.assert_array_equal(
            kk.to_numpy(ka.argsort(view, axis=axis, backend=backend)), expected)


def test_a_0d_array_sorts_flattened_and_refuses_an_axis(backend):
    x = kk.to_backend(backend, np.array(2.5, np.float32))
    np.testing.assert_array_equal(kk.to_numpy(ka.sort(x, axis=None, backend=backend)), [2.5])
    with pytest.raises(np.exceptions.AxisError):
        ka.sort(x, backend=backend)


def test_results_are_arrays_of_the_input_backend(backend):
    x = kk.to_backend(backend, random_values(np.float32, 100))
    result = ka.argsort(x, backend=backend)
    assert type(result) is type(x)
    assert kk.to_numpy(result).shape == (100,)


def test_the_gpu_layout_has_no_races_between_work_items():
    """Its work-items share tiles in local memory: the CPU's race detector checks that
    every access another work-item makes is ordered by a barrier (or atomic)."""
    racing = kk.CPU(debug="races")
    keys = random_values(np.uint32, 4000, distinct=300)
    sorted_keys, positions = _sort_radix.radix_sort(racing, _sort_radix.GROUP_PLAN,
                                                    keys.copy(), 32, True)
    kk.synchronize(racing)
    np.testing.assert_array_equal(positions, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(sorted_keys, np.sort(keys))


def launched(launcher, *args, **geometry):
    """Launch; on a compile-only backend, the kernel is compiled and that is all."""
    try:
        launcher(*args, **geometry)
    except Exception as error:
        if type(error).__name__ != "CompileOnlyError":
            raise


def test_every_sort_kernel_compiles_on_every_backend(backend):
    """Each kernel of the backend's plan and of the GPU's (which runs everywhere), launched
    once: a sort on a compile-only backend stops at its first launch, so the tests above
    compile only that one there."""
    n = 5000
    # (key, position, offset) dtypes: those of a short array's argsort and sort, and of
    # 64-bit keys beyond 2**31 positions.
    kinds = [(np.uint32, np.int32, np.int32), (np.uint32, None, np.int32),
             (np.uint64, np.int64, np.int64)]
    for plan in {_sort_radix.GROUP_PLAN, sorting.plan_for(backend)}:
        tile = plan.tile_size(n, 1)
        tiles = -(-n // tile)
        for _, bits in plan.digit_bits_by_size:
            radix = 1 << bits
            for key_type, position_type, offset_type in kinds:
                count, scan, scatter = _sort_radix.pass_kernels(
                    plan, bits, position_type and np.dtype(position_type))
                keys = kk.zeros(backend, key_type, n)
                positions = kk.zeros(backend, position_type or np.int32, n)
                counts = kk.zeros(backend, np.int32, radix * tiles)
                offsets = kk.zeros(backend, offset_type, radix * tiles)
                starts = kk.zeros(backend, np.int64, radix)
                shift = key_type(0)
                launched(count(backend, plan.count_group), counts, keys, n, tile, shift,
                         ndrange=tiles * plan.count_group)
                launched(scan(backend, plan.scan_group), offsets, starts, counts, tiles,
                         ndrange=plan.scan_group)
                launched(scatter(backend, plan.scatter_group), keys, positions, keys,
                         positions, offsets, n, tile, shift,
                         ndrange=tiles * plan.scatter_group)
    for with_positions in (False, True):
        keys = kk.zeros(backend, np.uint32, (3, 100))
        positions = kk.zeros(backend, np.int32, (3, 100))
        launched(_sort_radix.row_kernel(with_positions)(backend, 64), keys,
                 kk.zeros(backend, np.uint32, (3, 100)), positions,
                 kk.zeros(backend, np.int32, (3, 100)), 32, ndrange=3)
    out = kk.zeros(backend, np.float32, (3, 100))
    launched(key_codec(np.float32).values_from_keys(backend), out, keys, np.uint32(0), 1,
             ndrange=(3, 100))
    launched(sorting.positions_into(backend), kk.zeros(backend, np.int64, (3, 100)),
             positions, 1, ndrange=(3, 100))


# -- errors -------------------------------------------------------------------------------

def test_a_list_is_refused_with_what_to_pass(backend):
    with pytest.raises(TypeError, match=r"np\.asarray\(x\)"):
        ka.sort([3, 1, 2], backend=backend)


@pytest.mark.parametrize("values", [np.array([1 + 2j]), np.array(["a"]),
                                    np.array([object()])], ids=["complex", "str", "object"])
def test_a_dtype_without_keys_is_refused(backend, values):
    with pytest.raises(TypeError, match="bool, int8..int64"):
        ka.argsort(values, backend=backend)


def test_an_axis_out_of_range_or_not_an_int_is_refused(backend):
    x = kk.zeros(backend, np.float32, (2, 3))
    with pytest.raises(np.exceptions.AxisError):
        ka.sort(x, axis=2, backend=backend)
    with pytest.raises(TypeError, match="axis must be an int or None"):
        ka.sort(x, axis=1.0, backend=backend)


def test_more_than_four_dimensions_are_refused_with_a_reshape_hint(backend):
    with pytest.raises(ValueError, match="reshape x"):
        ka.sort(kk.zeros(backend, np.float32, (2, 2, 2, 2, 2)), backend=backend)
