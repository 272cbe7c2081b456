"""The programs the PyTorch and JAX wrappers' tests (`test_ad_torch.py`, `test_ad_jax.py`)
differentiate inside their frameworks: each takes arrays and returns the arrays it made,
launching on the backend it is bound to (`on`)."""
import kernelkit as kk

GROUP = 4


@kk.kernel
def sin_times(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * x[i]


@kk.kernel
def times(z, y: kk.Const, w: kk.Const):
    i = kk.index(kk.Global)
    z[i] = y[i] * w[i]


@kk.kernel
def square(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * x[i]


@kk.kernel
def scaled_sin(x, t: kk.Const, a):
    i = kk.index(kk.Global)
    x[i] = a * kk.sin(t[i])


@kk.kernel
def double_in_place(x):
    i = kk.index(kk.Global)
    x[i] = 2.0 * x[i]


def chained(backend, x, w):
    """y = sin(x) * x into a temporary, then z = y * w."""
    y = kk.empty_like(x)
    sin_times(backend, GROUP)(y, x, ndrange=len(x))
    z = kk.empty_like(x)
    times(backend, GROUP)(z, y, w, ndrange=len(x))
    return z


def overwriting(backend, x, a):
    """a * sin(x^2), where the second launch overwrites u, which the first read: the
    first's reverse needs u as it was."""
    u = kk.empty_like(x)
    kk.copyto(u, x)
    t = kk.empty_like(x)
    square(backend, GROUP)(t, u, ndrange=len(x))
    scaled_sin(backend, GROUP)(u, t, a, ndrange=len(x))
    return u


def on(backend, program):
    """`program(backend, *args)` as a program of `args` that launches on `backend`, under
    its own name (the autograd node's)."""
    def bound(*args):
        return program(backend, *args)
    bound.__name__ = program.__name__
    return bound
