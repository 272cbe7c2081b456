"""A kernelkit program as a JAX function with a custom VJP: `vjp(program)`.

    import enzyme_ext.jax

    def program(x, w):                         # kernelkit arrays in, arrays out
        backend = kk.get_backend(x)
        y = kk.empty_like(x)
        sin_times(backend, 256)(y, x, ndrange=len(x))      # y = sin(x) * x
        z = kk.empty_like(x)
        times(backend, 256)(z, y, w, ndrange=len(x))       # z = y * w
        return z

    f = enzyme_ext.jax.vjp(program)            # a jax.custom_vjp function
    loss = lambda x, w: (f(x, w) ** 2).sum()
    dx, dw = jax.grad(loss, argnums=(0, 1))(x, w)          # under jax.jit, jax.vmap too

The convention, as a JAX user expects of a function:

- Every argument is a JAX array (a number becomes one). The program gets each, through
  `jax.pure_callback`, as a read-only NumPy array over JAX's host memory (a launch that
  writes one is refused), or as a copy on the backend named to `vjp` (`vjp(program,
  backend=kk.CUDABackend())`: its outputs are copied back); an array of shape () as a
  number. The program launches where its arrays are (`kk.get_backend(x)`).
- The program returns an array, or a tuple of arrays, that it made; the function
  returns them as JAX arrays. Their shapes and dtypes, which JAX needs before anything
  runs, are found by running the program once on zeros of the arguments' shapes and
  dtypes, once for each such signature.
- JAX's callbacks must be pure (XLA may run one again, or not at all), so nothing is kept
  from the forward pass to the backward pass: the forward pass runs the program, the
  backward pass runs it again, recorded (`enzyme_ext.program`), then its reverse kernels
  with the outputs' cotangents in their shadows. A float argument gets its cotangent;
  an integer one none (zero).
- Differentiable in reverse mode (`jax.grad`, `jax.vjp`); not in forward mode
  (`jax.jvp`), which `custom_vjp` does not give. Under `jax.vmap` the program runs once
  for each element of the batch.

JAX is an optional extra (`pip install 'kernelkit[jax]'`); `import enzyme_ext` does not
import it."""
from __future__ import annotations

try:
    import jax
    import jax.numpy as jnp
except ImportError as error:
    raise ImportError("enzyme_ext.jax needs JAX, an optional extra of kernelkit: "
                      "pip install 'kernelkit[jax]' (or pip install jax)") from error

import numpy as np

import kernelkit as kk

from .frameworks import ProgramCall


def vjp(program, backend=None):
    """`program` (a Python function launching kernelkit kernels, `enzyme_ext.program`)
    as a `jax.custom_vjp` function whose backward pass runs the program's reverse pass,
    on `backend` (None: on the host arrays the callbacks get, read-only, not copied).
    The module docstring states the calling convention."""
    shapes = {}     # the outputs' shapes and dtypes, by the arguments'

    def run_plainly(arrays) -> ProgramCall:
        return ProgramCall(program, _arguments(arrays, backend), [False] * len(arrays))

    def result_shapes(args):
        key = tuple((a.shape, a.dtype) for a in args)
        if key not in shapes:
            call = run_plainly([np.zeros(shape, dtype) for shape, dtype in key])
            found = tuple(jax.ShapeDtypeStruct(output.shape, output.dtype)
                          for output in call.outputs)
            shapes[key] = found[0] if call.single else found
        return shapes[key]

    def run(*arrays):
        call = run_plainly(arrays)
        found = tuple(map(kk.to_numpy, call.outputs))   # on the host: when written
        return found[0] if call.single else found

    def reverse(arrays, cotangents):
        wanted = [_is_float(array) for array in arrays]
        call = ProgramCall(program, _arguments(arrays, backend), wanted)
        derivatives = call.reverse([_on(backend, c) for c in cotangents])
        return tuple(np.asarray(d if isinstance(d, float) else kk.to_numpy(d), a.dtype)
                     for a, d in zip(arrays, derivatives) if _is_float(a))

    @jax.custom_vjp
    def function(*args):
        args = tuple(map(jnp.asarray, args))
        return jax.pure_callback(run, result_shapes(args), *args, vmap_method="sequential")

    def forward(*args):
        args = tuple(map(jnp.asarray, args))
        return function(*args), args

    def backward(args, cotangents):
        floats = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args if _is_float(a))
        cotangents = cotangents if isinstance(cotangents, tuple) else (cotangents,)
        derivatives = iter(jax.pure_callback(reverse, floats, args, cotangents,
                                             vmap_method="sequential"))
        return tuple(next(derivatives) if _is_float(a) else None for a in args)

    function.defvjp(forward, backward)
    return function


def _is_float(array) -> bool:
    return np.issubdtype(np.dtype(array.dtype), np.floating)


def _arguments(arrays, backend) -> list:
    """What the program gets for JAX's arrays: a number for an array of shape (), else
    the array (`_on`)."""
    return [np.asarray(array).item() if np.ndim(array) == 0 else _on(backend, array)
            for array in arrays]


def _on(backend, array):
    """A host array from a callback, read-only (JAX's arrays are immutable): as it is,
    or, where a backend is named, copied there."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view if backend is None else kk.to_backend(backend, view)
