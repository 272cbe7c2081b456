"""`enzyme_ext.jax.vjp(program)`: a kernelkit program as a `jax.custom_vjp` function whose
forward and backward passes run the program (the backward recorded, then reversed)
through `jax.pure_callback`. Checked with `jax.test_util.check_grads` in reverse mode in
float64 and against the same function written in jax.numpy, under `jax.jit` too.
Skipped without JAX (an optional extra)."""
import sys

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.errors import KernelkitError

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402 - only where JAX is installed
from jax.test_util import check_grads  # noqa: E402

import enzyme_ext.jax  # noqa: E402

from framework_programs import GROUP, chained, double_in_place, on, overwriting  # noqa: E402

N = 12


@kk.kernel
def power(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    y[i] = x[i] ** n


@pytest.fixture(autouse=True)
def float64():
    """float64, for check_grads' finite differences; JAX's setting as it was after."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def x0():
    return jnp.linspace(0.1, 1.2, N)


def test_check_grads_passes_on_two_launches_chained_through_a_temporary(backend):
    """On each backend, as every test here (the arrays copied to it, and back; none on
    the CPU); CUDA compile-only without a GPU, skipped at its first launch."""
    f = enzyme_ext.jax.vjp(on(backend, chained), backend=backend)
    x, w = x0(), jnp.linspace(-1.0, 2.0, N)
    np.testing.assert_allclose(f(x, w), jnp.sin(x) * x * w, rtol=1e-14)
    check_grads(f, (x, w), order=1, modes=("rev",))


def test_check_grads_passes_where_a_launch_overwrites_what_an_earlier_one_read(backend):
    """The scalar `a`, an array of shape (), is an `Active` argument of the program."""
    f = enzyme_ext.jax.vjp(on(backend, overwriting), backend=backend)
    x = x0()
    np.testing.assert_allclose(f(x, 1.5), 1.5 * jnp.sin(x * x), rtol=1e-14)
    check_grads(f, (x, 1.5), order=1, modes=("rev",))


def test_gradients_flow_through_a_larger_jitted_computation(backend):
    f = enzyme_ext.jax.vjp(on(backend, chained), backend=backend)

    def loss(x, w):
        return (f(jnp.exp(x), w) ** 2).sum() + (x * w).sum()

    def loss_in_jax(x, w):
        e = jnp.exp(x)
        return ((jnp.sin(e) * e * w) ** 2).sum() + (x * w).sum()

    x, w = x0(), jnp.linspace(-1.0, 2.0, N)
    found = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
    expected = jax.grad(loss_in_jax, argnums=(0, 1))(x, w)
    for got, want in zip(found, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_an_integer_argument_reaches_the_program_as_a_number_and_gets_no_gradient(backend):
    def powers(x, n):
        assert isinstance(n, int)
        y = kk.empty_like(x)
        power(backend, GROUP)(y, x, n, ndrange=len(x))
        return y

    f = enzyme_ext.jax.vjp(powers, backend=backend)
    x = x0()
    dx = jax.grad(lambda x: f(x, 3).sum())(x)
    np.testing.assert_allclose(dx, 3 * x ** 2, rtol=1e-14)


def test_on_the_host_a_program_that_writes_its_argument_is_refused():
    """JAX's arrays are immutable: the host arrays the program gets are read-only (on a
    backend named to `vjp` it gets copies)."""
    backend = kk.CPU(debug="races")

    def doubles(x):
        double_in_place(backend, GROUP)(x, ndrange=len(x))
        return x

    with pytest.raises(KernelkitError, match="argument 'x' is read-only"):
        enzyme_ext.jax.vjp(doubles)(x0())


def test_without_jax_the_import_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)   # as if it were not installed
    monkeypatch.delitem(sys.modules, "enzyme_ext.jax")
    with pytest.raises(ImportError, match=r"pip install 'kernelkit\[jax\]'"):
        import enzyme_ext.jax  # noqa: F401
