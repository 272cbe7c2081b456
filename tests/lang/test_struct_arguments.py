"""Frozen dataclasses of numbers, and tuples of numbers, as kernel arguments (Warp's
structs, Numba's records): fields read by name, nested dataclasses, tuples indexed and
unpacked, a dataclass passed on to a device function; one compiled kernel for every
instance whose fields have the same types; and the errors for what a kernel cannot take
or do with one."""
import dataclasses
import functools

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.ir import types as T

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

WORKGROUP = 4
N = 8


@dataclasses.dataclass(frozen=True)
class Particle:
    mass: float
    v: np.float32


@dataclasses.dataclass(frozen=True)
class Window:
    offset: int
    bounds: tuple


@dataclasses.dataclass(frozen=True)
class Scene:
    scale: np.float32
    window: Window
    particle: Particle


@dataclasses.dataclass(frozen=True)
class Body:
    """The same fields as Particle, in another class."""
    mass: float
    v: np.float32


def launch(backend, kernel, *args, ndrange=N):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- reading fields ------------------------------------------------------------------------


@kk.kernel
def momentum(out, p):
    i = kk.index(kk.Global)
    out[i] = p.mass * p.v * i


def test_a_kernel_reads_the_fields_of_a_frozen_dataclass(backend):
    out = kk.zeros(backend, np.float32, N)
    launch(backend, momentum, out, Particle(2.0, np.float32(1.5)))
    np.testing.assert_allclose(kk.to_numpy(out), 3.0 * np.arange(N))


@kk.kernel
def windowed(out, scene):
    i = kk.index(kk.Global)
    low, high = scene.window.bounds
    out[i] = scene.scale * min(max(i + scene.window.offset, low), high) + scene.particle.v


def test_a_kernel_reads_the_fields_of_nested_dataclasses_and_tuples_they_hold(backend):
    out = kk.zeros(backend, np.float32, N)
    scene = Scene(np.float32(2), Window(-2, (1, 4)), Particle(1.0, np.float32(0.5)))
    launch(backend, windowed, out, scene)
    expected = 2 * np.clip(np.arange(N) - 2, 1, 4) + 0.5
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


# --- tuples --------------------------------------------------------------------------------


@kk.kernel
def from_a_tuple(out, t):
    i = kk.index(kk.Global)
    first, second, third = t
    out[i] = t[0] * 100 + second * 10 + third + len(t) * i


def test_a_tuple_of_numbers_is_indexed_measured_and_unpacked(backend):
    out = kk.zeros(backend, np.float64, N)
    launch(backend, from_a_tuple, out, (1, np.float32(2), 3.5))
    np.testing.assert_array_equal(kk.to_numpy(out), 123.5 + 3 * np.arange(N))


# --- device functions ----------------------------------------------------------------------


def energy(p):
    return p.mass * p.v * p.v


@kk.kernel
def energies(out, p, scene):
    i = kk.index(kk.Global)
    out[i] = energy(p) + energy(scene.particle) * i


def test_a_device_function_takes_a_dataclass_from_the_kernel(backend):
    out = kk.zeros(backend, np.float32, N)
    scene = Scene(np.float32(1), Window(0, (0, 0)), Particle(3.0, np.float32(1)))
    launch(backend, energies, out, Particle(2.0, np.float32(3)), scene)
    np.testing.assert_array_equal(kk.to_numpy(out), 18 + 3 * np.arange(N))


# --- one compiled kernel per class and field types -----------------------------------------


@kk.kernel
def scaled(out, p):
    i = kk.index(kk.Global)
    out[i] = p.mass * i + p.v


def specializations(kernel, backend) -> int:
    return sum(1 for key in kernel._specializations if key[0] is backend)


def test_instances_with_other_values_share_one_compiled_kernel(backend):
    out = kk.zeros(backend, np.float32, N)
    launch(backend, scaled, out, Particle(1.0, np.float32(0.5)))
    np.testing.assert_array_equal(kk.to_numpy(out), np.arange(N) + 0.5)
    launch(backend, scaled, out, Particle(-2.0, np.float32(4)))
    np.testing.assert_array_equal(kk.to_numpy(out), -2 * np.arange(N) + 4)
    assert specializations(scaled, backend) == 1
    launch(backend, scaled, out, Body(1.0, np.float32(0.5)))
    np.testing.assert_array_equal(kk.to_numpy(out), np.arange(N) + 0.5)
    assert specializations(scaled, backend) == 2


def test_the_class_and_the_types_of_its_fields_make_the_argument_type(backend):
    out = kk.zeros(backend, np.float32, N)

    def argument_type(value):
        return scaled.argument_types(backend, (out, value))[1]

    weak = argument_type(Particle(1.0, np.float32(2)))
    assert weak == argument_type(Particle(-3.0, np.float32(7)))
    assert weak.fields == (("mass", T.weak_float), ("v", T.float32))   # NEP 50, as scalars
    assert argument_type(Particle(np.float64(1), np.float32(2))).fields[0][1] == T.float64
    assert argument_type(Body(1.0, np.float32(2))) != weak
    assert backend.argument_key(Particle(1.0, np.float32(2))) == \
        backend.argument_key(Particle(5.0, np.float32(1)))
    assert backend.argument_key(Particle(1, np.float32(2))) != \
        backend.argument_key(Particle(1.0, np.float32(2)))
    assert argument_type((1, 2.0)) == T.TupleType((T.weak_int, T.weak_float))


# --- errors --------------------------------------------------------------------------------


@dataclasses.dataclass
class Mutable:
    mass: float


@dataclasses.dataclass(frozen=True)
class Holder:
    data: object


def test_a_dataclass_that_is_not_frozen_is_an_error_suggesting_frozen(backend):
    out = kk.zeros(backend, np.float32, N)
    with pytest.raises(kk.LaunchError) as info:
        launch(backend, momentum, out, Mutable(1.0))
    message = str(info.value)
    assert "kernel 'momentum'" in message and "argument 'p'" in message
    assert "Mutable" in message and "not frozen" in message
    assert "@dataclasses.dataclass(frozen=True)" in message


@pytest.mark.parametrize("value, where, shown", [
    (Window(0, (1.0, np.zeros(3))), "p.bounds[1]", "ndarray"),
    (Holder("text"), "p.data", "str"),
    (Holder(Mutable(1.0)), "p.data", "not frozen"),
    (Window(0, (1.0, [2.0])), "p.bounds[1]", "list"),
], ids=["array in a tuple", "string", "mutable dataclass", "list in a tuple"])
def test_a_field_kernels_cannot_take_is_an_error_naming_it_and_what_is_allowed(
        backend, value, where, shown):
    out = kk.zeros(backend, np.float32, N)
    with pytest.raises(kk.LaunchError) as info:
        launch(backend, momentum, out, value)
    message = str(info.value)
    assert "kernel 'momentum'" in message and "argument 'p'" in message
    assert where in message and shown in message
    if shown != "not frozen":
        assert "Python or NumPy scalars" in message and "hint: " in message


@kk.kernel
def reads_a_missing_field(out, p):
    i = kk.index(kk.Global)
    out[i] = p.speed


def test_reading_a_field_the_dataclass_does_not_have_names_the_class_and_its_fields(backend):
    out = kk.zeros(backend, np.float32, N)
    with pytest.raises(kk.CompileError) as info:
        launch(backend, reads_a_missing_field, out, Particle(1.0, np.float32(1)))
    message = str(info.value)
    assert_points_at(info.value, "reads_a_missing_field", "out[i] = p.speed")
    assert "Particle" in message and "'speed'" in message and "mass, v" in message


@kk.kernel
def assigns_a_field(out, p):
    i = kk.index(kk.Global)
    p.mass = 2.0
    out[i] = p.mass


def test_assigning_a_field_is_an_error_saying_the_dataclass_is_read_only(backend):
    out = kk.zeros(backend, np.float32, N)
    with pytest.raises(kk.CompileError) as info:
        launch(backend, assigns_a_field, out, Particle(1.0, np.float32(1)))
    message = str(info.value)
    assert_points_at(info.value, "assigns_a_field", "p.mass = 2.0")
    assert "read" in message and "hint: " in message and "mass = ..." in message
