"""IR types: their printed names, `parse_type` as the inverse of `name`, and NumPy NEP 50
promotion of scalar types."""
import itertools

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T

NAMED_TYPES = [
    (T.bool_, "bool"), (T.int8, "i8"), (T.int16, "i16"), (T.int32, "i32"), (T.int64, "i64"),
    (T.uint8, "u8"), (T.uint16, "u16"), (T.uint32, "u32"), (T.uint64, "u64"),
    (T.float16, "f16"), (T.float32, "f32"), (T.float64, "f64"),
    (T.weak_int, "int"), (T.weak_float, "float"), (T.void, "void"),
    (T.ArrayType(T.float32, 1, "C"), "array<f32, 1, C>"),
    (T.ArrayType(T.int8, 3, "A", const=True), "array<i8, 3, A, const>"),
    (T.ArrayType(T.bool_, 2, "A"), "array<bool, 2, A>"),
    (T.ArrayType(T.uint64, 1, "C", const=True), "array<u64, 1, C, const>"),
    (T.ArrayType(T.float64, 2, "C", space="local", shape=(16, 16)), "local<f64, 16x16>"),
    (T.ArrayType(T.float16, 3, "C", space="local", shape=(2, 3, 4)), "local<f16, 2x3x4>"),
    (T.ArrayType(T.int32, 1, "C", space="private", shape=(4,)), "private<i32, 4>"),
    (T.TupleType(()), "tuple<>"),
    (T.TupleType((T.int64, T.float32)), "tuple<i64, f32>"),
    (T.TupleType((T.TupleType((T.int8, T.weak_int)), T.ArrayType(T.float32, 1, "C"))),
     "tuple<tuple<i8, int>, array<f32, 1, C>>"),
]


@pytest.mark.parametrize("type_, name", NAMED_TYPES, ids=[n for _, n in NAMED_TYPES])
def test_type_prints_as_its_name(type_, name):
    assert type_.name == name
    assert str(type_) == name


@pytest.mark.parametrize("type_, name", NAMED_TYPES, ids=[n for _, n in NAMED_TYPES])
def test_parse_type_inverts_the_name(type_, name):
    assert T.parse_type(name) == type_


def test_weak_and_strong_scalars_of_the_same_kind_are_different_types():
    assert T.weak_int != T.int64
    assert T.weak_int.strong == T.int64
    assert T.weak_float.strong == T.float64
    assert T.int32.strong is T.int32


def test_parse_type_rejects_an_unknown_type_name():
    with pytest.raises(ValueError, match="unknown type"):
        T.parse_type("matrix<f32, 2>")


def localmem_kernel(a):
    tile = kk.localmem(np.float32, (8, 4))
    tile[0, 0] = a[0]
    a[1] = tile[0, 0]


def test_localmem_allocation_type_from_the_frontend_round_trips_through_parse_type():
    module = translate_kernel(localmem_kernel, (T.ArrayType(T.float32, 1, "C"),), (32,))
    (allocation,) = [op for op in module.kernel.ops() if op.opcode == "localmem"]
    assert T.parse_type(allocation.type.name) == allocation.type


PROMOTIONS = [
    (T.weak_int, T.int8, T.int8),
    (T.weak_int, T.uint8, T.uint8),
    (T.weak_int, T.float16, T.float16),
    (T.weak_int, T.bool_, T.int64),
    (T.weak_float, T.int32, T.float64),
    (T.weak_float, T.uint8, T.float64),
    (T.weak_float, T.bool_, T.float64),
    (T.float16, T.weak_float, T.float16),
    (T.float32, T.weak_float, T.float32),
    (T.weak_int, T.weak_float, T.weak_float),
    (T.weak_int, T.weak_int, T.weak_int),
    (T.uint64, T.int64, T.float64),
    (T.int8, T.uint8, T.int16),
    (T.uint32, T.int32, T.int64),
    (T.int16, T.float16, T.float32),
    (T.int32, T.float32, T.float64),
    (T.bool_, T.bool_, T.bool_),
    (T.bool_, T.int8, T.int8),
    (T.float16, T.float64, T.float64),
]


@pytest.mark.parametrize("a, b, expected", PROMOTIONS,
                         ids=[f"{a.name}+{b.name}" for a, b, _ in PROMOTIONS])
def test_promote_follows_nep50(a, b, expected):
    assert T.promote(a, b) == expected
    assert T.promote(b, a) == expected


def test_promote_of_strong_types_agrees_with_numpy_for_every_pair():
    for a, b in itertools.product(T.SCALAR_TYPES, repeat=2):
        assert T.promote(a, b).numpy_dtype == np.promote_types(a.numpy_dtype, b.numpy_dtype), (a, b)


def test_unify_widens_tuples_elementwise_and_refuses_arrays_with_scalars():
    assert T.unify(T.TupleType((T.int8, T.float32)), T.TupleType((T.int16, T.float32))) \
        == T.TupleType((T.int16, T.float32))
    assert T.unify(T.TupleType((T.int8,)), T.TupleType((T.int8, T.int8))) is None
    assert T.unify(T.ArrayType(T.float32, 1, "C"), T.float32) is None
