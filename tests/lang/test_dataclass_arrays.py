"""Frozen dataclasses that hold arrays, where simulations keep their state (Warp's structs
with array members): fields read and written element by element, updated atomically,
nested, passed on to device functions, `kk.Const` for read-only state; one compiled
kernel for every instance whose arrays have the same types, a new one for another dtype;
a new instance every launch; and the errors for arrays a kernel cannot take, a NumPy
structured array among them (its fields, which are arrays of their own, go in a
dataclass)."""
import dataclasses

import numpy as np
import pytest

import kernelkit as kk

N = 64


@dataclasses.dataclass(frozen=True)
class Particles:
    position: object
    velocity: object
    mass: float


@dataclasses.dataclass(frozen=True)
class World:
    particles: Particles
    hits: object        # a one-element counter
    floor: float


def run(backend, kernel, *args, ndrange=N):
    kernel(backend, 16)(*args, ndrange=ndrange)
    kk.synchronize(backend)


def kinetic(p, i):
    return 0.5 * p.mass * p.velocity[i] * p.velocity[i]


@kk.kernel
def fall(world, dt: float, energy):
    i = kk.index(kk.Global)
    p = world.particles
    p.velocity[i] -= 9.8 * dt
    p.position[i] = p.position[i] + dt * p.velocity[i]
    if p.position[i] < world.floor:
        p.position[i] = world.floor
        p.velocity[i] = -p.velocity[i]
        kk.atomic_add(world.hits, 0, 1)
    energy[i] = kinetic(p, i)


def fall_numpy(position, velocity, dt, floor, mass):
    velocity = velocity - 9.8 * dt
    position = position + dt * velocity
    below = position < floor
    position = np.where(below, floor, position)
    velocity = np.where(below, -velocity, velocity)
    return position, velocity, int(below.sum()), 0.5 * mass * velocity ** 2


def test_a_kernel_reads_writes_and_counts_through_nested_dataclasses_of_arrays(backend):
    rng = np.random.default_rng(7)
    position, velocity = rng.random(N), rng.normal(size=N)
    world = World(Particles(kk.to_backend(backend, position.copy()),
                            kk.to_backend(backend, velocity.copy()), 2.0),
                  kk.zeros(backend, np.int64, 1), 0.3)
    energy = kk.zeros(backend, np.float64, N)
    run(backend, fall, world, 0.1, energy)
    expected = fall_numpy(position, velocity, 0.1, 0.3, 2.0)
    np.testing.assert_array_equal(kk.to_numpy(world.particles.position), expected[0])
    np.testing.assert_array_equal(kk.to_numpy(world.particles.velocity), expected[1])
    assert kk.to_numpy(world.hits)[0] == expected[2] > 0
    np.testing.assert_array_equal(kk.to_numpy(energy), expected[3])


@dataclasses.dataclass(frozen=True)
class Grid:
    values: object
    scale: np.float32


@kk.kernel
def scaled_copy(out, grid: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i, j] = grid.scale * grid.values[i, j]


def specializations(kernel, backend) -> int:
    return sum(1 for key in kernel._specializations if key[0] is backend)


def test_instances_share_a_kernel_until_an_array_changes_dtype_and_const_takes_read_only(
        backend):
    values = np.arange(N, dtype=np.float32).reshape(8, 8)
    out = kk.zeros(backend, np.float32, (8, 8))
    for scale in (1, 2, 3):      # a new instance each launch
        run(backend, scaled_copy, out, Grid(kk.to_backend(backend, values),
                                            np.float32(scale)), ndrange=(8, 8))
        np.testing.assert_array_equal(kk.to_numpy(out), scale * values)
    assert specializations(scaled_copy, backend) == 1
    out64 = kk.zeros(backend, np.float64, (8, 8))
    run(backend, scaled_copy, out64, Grid(kk.to_backend(backend, values.astype(np.float64)),
                                          np.float32(2)), ndrange=(8, 8))
    np.testing.assert_array_equal(kk.to_numpy(out64), 2 * values)
    assert specializations(scaled_copy, backend) == 2


def test_a_read_only_array_in_const_state_is_taken_and_in_written_state_refused():
    values = np.arange(N, dtype=np.float32).reshape(8, 8)
    values.flags.writeable = False
    out = np.zeros((8, 8), np.float32)
    run(kk.CPU(), scaled_copy, out, Grid(values, np.float32(1)), ndrange=(8, 8))
    np.testing.assert_array_equal(out, values)
    world = World(Particles(values.ravel(), np.zeros(N), 1.0), np.zeros(1, np.int64), 0.0)
    with pytest.raises(kk.LaunchError, match=r"world.particles.position is read-only .* "
                                             r"parameter 'world' is not annotated kk.Const"):
        run(kk.CPU(), fall, world, 0.1, np.zeros(N))


def test_a_structured_array_is_refused_with_the_dataclass_of_its_fields_as_the_hint():
    particles = np.zeros(N, dtype=np.dtype([("position", np.float64), ("velocity", np.float64)]))
    with pytest.raises(kk.LaunchError) as info:
        run(kk.CPU(), scaled_copy, np.zeros((8, 8), np.float32), particles, ndrange=(8, 8))
    message = str(info.value)
    assert "structured" in message and "a[name] for name in" in message


def test_an_array_field_of_another_library_on_the_cpu_is_refused_naming_the_field():
    class HostArray:            # memory through NumPy's array interface only
        def __init__(self, array):
            self.__array_interface__ = array.__array_interface__
            self.keep = array
    grid = Grid(HostArray(np.zeros((8, 8), np.float32)), np.float32(1))
    with pytest.raises(kk.LaunchError, match=r"grid.values is a HostArray; a dataclass "
                                             r"argument's arrays are NumPy arrays on the CPU"):
        run(kk.CPU(), scaled_copy, np.zeros((8, 8), np.float32), grid, ndrange=(8, 8))


# --- a struct of arrays indexed as one array of dataclasses ----------------------------


@dataclasses.dataclass(frozen=True)
class Bodies:
    x: object
    v: object


@kk.kernel
def drift(bodies, dt: float):
    i = kk.index(kk.Global)
    body = bodies[i]                     # each field's element at i
    bodies[i] = Bodies(body.x + dt * body.v, 0.5 * body.v)
    bodies[i].x += 1.0
    bodies[i].v = bodies[i].v + 2.0


def test_a_dataclass_of_arrays_reads_and_writes_as_one_array_of_dataclasses(backend):
    x, v = np.arange(N, dtype=np.float64), np.linspace(-1, 1, N).astype(np.float32)
    bodies = Bodies(kk.to_backend(backend, x.copy()), kk.to_backend(backend, v.copy()))
    run(backend, drift, bodies, 0.1)
    # dt * v is float32 (NEP 50: a Python float adopts the float32 it multiplies)
    np.testing.assert_array_equal(kk.to_numpy(bodies.x), x + (np.float32(0.1) * v) + 1.0)
    np.testing.assert_array_equal(kk.to_numpy(bodies.v), np.float32(0.5) * v + np.float32(2))


@kk.kernel
def indexes_a_dataclass_of_numbers(out, grid: kk.Const):
    i = kk.index(kk.Global)
    out[i] = grid[i].scale


def test_indexing_a_dataclass_that_is_not_all_arrays_is_an_error_naming_what_is():
    grid = Grid(np.zeros((8, 8), np.float32), np.float32(1))
    with pytest.raises(kk.CompileError, match=r"a Grid cannot be indexed: only a dataclass "
                                              r"whose fields are all arrays of one rank is"):
        run(kk.CPU(), indexes_a_dataclass_of_numbers, np.zeros(N, np.float32), grid)
