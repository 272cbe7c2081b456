"""Frozen dataclasses made inside kernels and device functions (Warp's structs as values):
construction by position, keyword and default, `dataclasses.replace`, nesting with
vectors, results of device functions, values joined after an `if` and carried round a
loop (with a field's type widening), on every backend and against NumPy; and the errors
for what a kernel cannot make."""
import dataclasses
import functools

import numpy as np
import pytest

import kernelkit as kk

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

N = 16


@dataclasses.dataclass(frozen=True)
class Oscillator:
    x: float
    v: float
    mass: float = 1.0


@dataclasses.dataclass(frozen=True)
class Body:
    position: kk.vec3
    velocity: kk.vec3


@dataclasses.dataclass(frozen=True)
class World:
    body: Body
    time: float


@dataclasses.dataclass(frozen=True)
class Settings:
    dt: float
    steps: int


def run(backend, kernel, *args, ndrange=N, workgroupsize=4):
    kernel(backend, workgroupsize)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- made, stepped by a device function, chosen by an if --------------------------------


def spring_step(o, dt):
    return Oscillator(o.x + dt * o.v, o.v - dt * o.x / o.mass, o.mass)


def reflected(o, odd):
    if odd:
        r = dataclasses.replace(o, x=2.0 * o.x)
    else:
        r = Oscillator(v=o.v, x=-o.x)       # keywords, mass from its default
    return r


@kk.kernel
def oscillate(out, x0: kk.Const, steps: int):
    i = kk.index(kk.Global)
    o = Oscillator(x0[i], 0.0)
    for _ in range(steps):
        o = spring_step(o, 0.01)
    o = reflected(o, i % 2 == 1)
    out[i, 0] = o.x
    out[i, 1] = o.v
    out[i, 2] = o.mass


def oscillate_numpy(x0, steps):
    out = np.zeros((len(x0), 3))
    for i, x in enumerate(x0):
        v = 0.0
        for _ in range(steps):
            x, v = x + 0.01 * v, v - 0.01 * x / 1.0
        out[i] = (2.0 * x if i % 2 == 1 else -x), v, 1.0
    return out


def test_a_dataclass_is_made_stepped_in_a_loop_by_a_device_function_and_chosen_by_an_if(
        backend):
    x0 = np.linspace(-1.0, 1.0, N)
    out = kk.zeros(backend, np.float64, (N, 3))
    run(backend, oscillate, out, kk.to_backend(backend, x0), 200)
    np.testing.assert_array_equal(kk.to_numpy(out), oscillate_numpy(x0, 200))


# --- nested, with vectors, left by a break, a field widening from int to float ------------


def advance(w, dt):
    b = w.body
    gravity = kk.vec3(0.0, -9.8, 0.0)
    return World(Body(b.position + dt * b.velocity, b.velocity + dt * gravity), w.time + dt)


@kk.kernel
def fly(out, v0: kk.Const, settings):
    i = kk.index(kk.Global)
    w = World(Body(kk.vec3(0.0, 0.0, 0.0), kk.vec3(v0[i, 0], v0[i, 1], v0[i, 2])), 0)
    k = 0
    while k < settings.steps:
        w = advance(w, settings.dt)
        if w.body.position.y < 0.0:
            break
        k += 1
    out[i, 0] = w.body.position.x
    out[i, 1] = w.body.position.y
    out[i, 2] = w.time


def fly_numpy(v0, dt, steps):
    out = np.zeros((len(v0), 3))
    for i, velocity in enumerate(v0):
        position, velocity, time = np.zeros(3), velocity.copy(), 0.0
        for _ in range(steps):
            position, velocity = position + dt * velocity, velocity + dt * np.array(
                [0.0, -9.8, 0.0])
            time += dt
            if position[1] < 0.0:
                break
        out[i] = position[0], position[1], time
    return out


def test_nested_dataclasses_with_vectors_come_round_a_loop_and_leave_it_by_break(backend):
    v0 = np.random.default_rng(3).random((N, 3))
    out = kk.zeros(backend, np.float64, (N, 3))
    run(backend, fly, out, kk.to_backend(backend, v0), Settings(0.01, 1000))
    np.testing.assert_array_equal(kk.to_numpy(out), fly_numpy(v0, 0.01, 1000))


# --- float32 fields stay float32 ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pair:
    a: np.float32
    b: np.float32


def swapped(p):
    return Pair(p.b, p.a)


@kk.kernel
def swap_scale(out, x: kk.Const):
    i = kk.index(kk.Global)
    p = swapped(Pair(x[i], x[i] * np.float32(3)))
    out[i] = p.a / p.b      # float32 division: a float64 field would round otherwise


def test_fields_keep_the_types_of_the_values_they_were_made_from(backend):
    x = np.linspace(1, 2, N, dtype=np.float32)
    out = kk.zeros(backend, np.float32, N)
    run(backend, swap_scale, out, kk.to_backend(backend, x))
    np.testing.assert_array_equal(kk.to_numpy(out), (x * np.float32(3)) / x)


# --- errors ------------------------------------------------------------------------------


@dataclasses.dataclass
class Mutable:
    x: float


@kk.kernel
def makes_a_mutable_dataclass(out):
    i = kk.index(kk.Global)
    m = Mutable(1.0)
    out[i] = m.x


@dataclasses.dataclass(frozen=True)
class Holder:
    values: object


@kk.kernel
def puts_an_array_in_a_dataclass(out):
    i = kk.index(kk.Global)
    h = Holder(out)
    out[i] = 1.0


@dataclasses.dataclass(frozen=True)
class Checked:
    x: float

    def __post_init__(self):
        assert self.x >= 0


@kk.kernel
def makes_a_dataclass_with_post_init(out):
    i = kk.index(kk.Global)
    c = Checked(1.0)
    out[i] = c.x


@kk.kernel
def changes_a_dataclass_into_a_number_in_a_loop(out):
    i = kk.index(kk.Global)
    o = Oscillator(1.0, 0.0)
    for _ in range(3):
        o = o.x
    out[i] = 1.0


@pytest.mark.parametrize("kernel, line, words", [
    (makes_a_mutable_dataclass, "m = Mutable(1.0)", ("not frozen", "frozen=True")),
    (puts_an_array_in_a_dataclass, "h = Holder(out)", ("Holder.values would hold an array",
                                                       "argument of its own")),
    (makes_a_dataclass_with_post_init, "c = Checked(1.0)", ("__post_init__",
                                                            "do not run")),
    (changes_a_dataclass_into_a_number_in_a_loop, "for _ in range(3):",
     ("'o' holds a dataclass Oscillator before the loop", "different variable name")),
], ids=["mutable", "array-field", "post-init", "loop-changes-kind"])
def test_what_a_kernel_cannot_make_is_an_error_at_its_line(kernel, line, words):
    out = np.zeros(N)
    with pytest.raises(kk.CompileError) as info:
        run(kk.CPU(), kernel, out)
    assert_points_at(info.value, kernel.name, line)
    for word in words:
        assert word in str(info.value)
