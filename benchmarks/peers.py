"""The libraries kernelkit is compared with: what a user would pick instead, per backend kind.

A peer takes host numpy inputs through `from_numpy`, runs each benchmark operation the way
a user of that library would write it, and says how to import it and how to compile a
first function in a fresh process. On the GPU the peers are CuPy and PyTorch, each as
its users write array code (element-wise expressions, its own matmul and sum).

The annotations here are evaluated when defined (no `from __future__ import annotations`):
Taichi reads its kernels' argument types from them.
"""
import concurrent.futures
import contextlib
import importlib.util
import multiprocessing
import sys

import numpy as np

FOUR = np.float32(4.0)  # float32 constants: a bare 4.0 would make numba compute in float64
ONE = np.float32(1.0)


class NumpyPeer:
    """Array expressions; matmul goes to the BLAS numpy is linked against."""

    name = "numpy"
    import_statement = "import numpy"
    cold_compile_script = None  # nothing to compile

    def unavailable_reason(self) -> str | None:
        return None

    def set_threads(self, threads: int) -> None:
        """numpy's element-wise code is single-threaded; BLAS threads follow its own settings."""

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array.copy()

    def synchronize(self) -> None:
        pass

    def saxpy(self, y, a, x) -> None:
        y += a * x

    def copy(self, y, x) -> None:
        np.copyto(y, x)

    def stencil5(self, out, u, alpha) -> None:
        laplacian = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                     - FOUR * u[1:-1, 1:-1])
        out[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * laplacian

    def matmul(self, c, a, b) -> None:
        np.matmul(a, b, out=c)

    def total(self, x) -> float:
        return float(x.sum())

    def cumsum(self, y, x) -> None:
        np.cumsum(x, out=y)

    def sort(self, x):
        return np.sort(x)

    def increment(self, a) -> None:
        a += ONE

    def sin_times_x(self, y, x) -> None:
        np.multiply(np.sin(x, out=y), x, out=y)


class NumbaPeer:
    """`@njit(parallel=True)` loops with `prange` over the outermost dimension."""

    name = "numba"
    import_statement = "import numba"
    cold_compile_script = """
import time
import numpy as np
import numba

@numba.njit(parallel=True)
def saxpy(y, a, x):
    for i in numba.prange(y.size):
        y[i] = a * x[i] + y[i]

x = np.ones(1024, dtype=np.float32)
y = np.zeros(1024, dtype=np.float32)
start = time.perf_counter()
saxpy(y, np.float32(2.0), x)
print(time.perf_counter() - start)
"""

    def __init__(self) -> None:
        self._functions = None

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("numba") else "numba is not installed"

    def set_threads(self, threads: int) -> None:
        import numba
        numba.set_num_threads(threads)

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array.copy()

    def synchronize(self) -> None:
        pass

    def saxpy(self, y, a, x) -> None:
        self._compiled()["saxpy"](y, a, x)

    def copy(self, y, x) -> None:
        self._compiled()["copy"](y, x)

    def stencil5(self, out, u, alpha) -> None:
        self._compiled()["stencil5"](out, u, alpha)

    def matmul(self, c, a, b) -> None:
        self._compiled()["matmul"](c, a, b)

    def total(self, x) -> float:
        return float(self._compiled()["total"](x))

    def increment(self, a) -> None:
        self._compiled()["increment"](a)

    def sin_times_x(self, y, x) -> None:
        self._compiled()["sin_times_x"](y, x)

    def _compiled(self) -> dict:
        """Define the jitted functions on first use, so that numba is imported only when
        it is benchmarked; each compiles on its first call (the warm-up)."""
        if self._functions is None:
            self._functions = _define_numba_functions()
        return self._functions


def _define_numba_functions() -> dict:
    from numba import njit, prange

    @njit(parallel=True)
    def saxpy(y, a, x):
        for i in prange(y.size):
            y[i] = a * x[i] + y[i]

    @njit(parallel=True)
    def copy(y, x):
        for i in prange(y.size):
            y[i] = x[i]

    @njit(parallel=True)
    def stencil5(out, u, alpha):
        rows, cols = u.shape
        for i in prange(1, rows - 1):
            for j in range(1, cols - 1):
                laplacian = (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                             - FOUR * u[i, j])
                out[i, j] = u[i, j] + alpha * laplacian

    # The i-k-j loop order: the innermost loop runs along rows of B and C, so it is
    # contiguous and vectorizes. This is how a numba user writes a matmul that performs.
    @njit(parallel=True)
    def matmul(c, a, b):
        m, k = a.shape
        n = b.shape[1]
        for i in prange(m):
            for j in range(n):
                c[i, j] = 0
            for p in range(k):
                a_ip = a[i, p]
                for j in range(n):
                    c[i, j] += a_ip * b[p, j]

    @njit(parallel=True)
    def total(x):
        acc = np.float32(0.0)
        for i in prange(x.size):
            acc += x[i]
        return acc

    @njit(parallel=True)
    def increment(a):
        for i in prange(a.size):
            a[i] += ONE

    @njit(parallel=True)
    def sin_times_x(y, x):
        for i in prange(y.size):
            y[i] = np.sin(x[i]) * x[i]

    return {"saxpy": saxpy, "copy": copy, "stencil5": stencil5, "matmul": matmul, "total": total,
            "increment": increment, "sin_times_x": sin_times_x}


class CupyPeer:
    """CuPy array expressions (each a fused element-wise kernel), cuBLAS matmul."""

    name = "cupy"
    import_statement = "import cupy"
    cold_compile_script = """
import time
import cupy
import numpy as np

x = cupy.ones(1024, dtype=cupy.float32)
y = cupy.zeros(1024, dtype=cupy.float32)
saxpy = cupy.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y",
                               "saxpy_fresh")
cupy.cuda.Device().synchronize()
start = time.perf_counter()
saxpy(np.float32(2.0), x, y)
cupy.cuda.Device().synchronize()
print(time.perf_counter() - start)
"""

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("cupy") is None:
            return "cupy is not installed"
        try:
            import cupy
            cupy.cuda.runtime.getDeviceCount()
        except Exception as error:  # noqa: BLE001 - no GPU for CuPy
            return f"cupy cannot use a GPU: {error}"
        return None

    def set_threads(self, threads: int) -> None:
        pass

    def from_numpy(self, array: np.ndarray):
        import cupy
        return cupy.asarray(array)

    def synchronize(self) -> None:
        import cupy
        cupy.cuda.get_current_stream().synchronize()

    def saxpy(self, y, a, x) -> None:
        y += a * x

    def copy(self, y, x) -> None:
        y[...] = x

    def stencil5(self, out, u, alpha) -> None:
        laplacian = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                     - FOUR * u[1:-1, 1:-1])
        out[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * laplacian

    def matmul(self, c, a, b) -> None:
        import cupy
        cupy.matmul(a, b, out=c)

    def total(self, x) -> float:
        return float(x.sum())

    def cumsum(self, y, x) -> None:
        import cupy
        cupy.cumsum(x, out=y)

    def sort(self, x):
        import cupy
        return cupy.sort(x)

    def increment(self, a) -> None:
        a += ONE

    def sin_times_x(self, y, x) -> None:
        import cupy
        cupy.multiply(cupy.sin(x), x, out=y)


class TorchPeer:
    """PyTorch CUDA tensors: in-place tensor operations, cuBLAS matmul."""

    name = "torch"
    import_statement = "import torch"
    cold_compile_script = None  # eager PyTorch compiles nothing for saxpy

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed"
        import torch
        return None if torch.cuda.is_available() else "torch has no CUDA device here"

    def set_threads(self, threads: int) -> None:
        pass

    def from_numpy(self, array: np.ndarray):
        import torch
        return torch.from_numpy(array).to("cuda")

    def synchronize(self) -> None:
        import torch
        torch.cuda.synchronize()

    def saxpy(self, y, a, x) -> None:
        y.add_(x, alpha=float(a))

    def copy(self, y, x) -> None:
        y.copy_(x)

    def stencil5(self, out, u, alpha) -> None:
        laplacian = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                     - 4.0 * u[1:-1, 1:-1])
        out[1:-1, 1:-1] = u[1:-1, 1:-1] + float(alpha) * laplacian

    def matmul(self, c, a, b) -> None:
        import torch
        torch.matmul(a, b, out=c)

    def total(self, x) -> float:
        return float(x.sum())

    def increment(self, a) -> None:
        a.add_(1.0)

    def sin_times_x(self, y, x) -> None:
        import torch
        torch.mul(torch.sin(x), x, out=y)


# ---------------------------------------------------------------------------------------
# Gradient peers: the gradient of loss(x) = sum(sin(x) * x), as each library's users write
# it. `prepare(x)` takes the host input once (outside the clock); `gradient(state)`
# computes the gradient on the library's device and `to_numpy` reads it back, for the
# check. `gpu` picks the library's GPU device instead of its CPU one.


class JaxGradPeer:
    """`jax.jit(jax.grad(loss))` of the array expression `jnp.sum(jnp.sin(x) * x)`."""

    name = "jax"

    def __init__(self, gpu: bool = False) -> None:
        self.gpu = gpu
        self._function = None

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("jax") is None:
            return "jax is not installed"
        try:
            self._device()
        except Exception as error:  # noqa: BLE001 - no such device for JAX
            return f"jax has no {'GPU' if self.gpu else 'CPU'} device: {error}"
        return None

    def _device(self):
        import jax
        return jax.devices("gpu" if self.gpu else "cpu")[0]

    def prepare(self, x: np.ndarray):
        import jax
        import jax.numpy as jnp
        if self._function is None:
            self._function = jax.jit(jax.grad(lambda v: jnp.sum(jnp.sin(v) * v)))
        return jax.device_put(x, self._device())

    def gradient(self, x):
        return self._function(x).block_until_ready()

    def to_numpy(self, gradient) -> np.ndarray:
        return np.asarray(gradient)


class WarpTapePeer:
    """A Warp kernel that atomically adds sin(x[i]) * x[i] into a one-element loss,
    recorded on a `wp.Tape`; `tape.backward(loss=loss)` fills `x.grad`. Each gradient
    first resets the tape (its recorded launches and the gradients) and zeroes the loss,
    as a training step does."""

    name = "warp"

    def __init__(self, gpu: bool = False) -> None:
        self.gpu = gpu
        self._kernel = None

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("warp") is None:
            return "warp-lang is not installed"
        if self.gpu:
            try:
                import warp as wp
                if not wp.is_cuda_available():
                    return "warp has no CUDA device here"
            except Exception as error:  # noqa: BLE001
                return f"warp cannot start: {error}"
        return None

    def prepare(self, x: np.ndarray):
        # Warp prints its banner and its kernel's compilation on stdout: to stderr, away
        # from the table.
        with contextlib.redirect_stdout(sys.stderr):
            return self._prepare(x)

    def _prepare(self, x: np.ndarray):
        import warp as wp
        if self._kernel is None:
            @wp.kernel
            def sin_times_x_loss(x: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
                i = wp.tid()
                wp.atomic_add(loss, 0, wp.sin(x[i]) * x[i])
            self._kernel = sin_times_x_loss
        device = "cuda:0" if self.gpu else "cpu"
        values = wp.array(x, dtype=wp.float32, device=device, requires_grad=True)
        loss = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        state = values, loss, wp.Tape(), device
        self.gradient(state)  # compiles the kernel
        return state

    def gradient(self, state):
        import warp as wp
        values, loss, tape, device = state
        tape.reset()
        loss.zero_()
        with tape:
            wp.launch(self._kernel, dim=values.shape[0], inputs=[values, loss], device=device)
        tape.backward(loss=loss)
        wp.synchronize_device(device)
        return values.grad

    def to_numpy(self, gradient) -> np.ndarray:
        return gradient.numpy()


class TaichiTapePeer:
    """A Taichi kernel whose parallel loop adds sin(x[i]) * x[i] into a scalar loss
    field, run under `ti.ad.Tape(loss=loss)`, which zeroes the gradients, seeds the loss
    and runs the kernel's adjoint: `x.grad` holds the gradient."""

    name = "taichi"

    def __init__(self, gpu: bool = False) -> None:
        self.gpu = gpu
        self._fields = {}

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("taichi") is None:
            return "taichi is not installed"
        return None

    def prepare(self, x: np.ndarray):
        ti = start_taichi(self.gpu)
        n = x.shape[0]
        if n not in self._fields:
            values = ti.field(dtype=ti.f32, shape=n, needs_grad=True)
            loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

            @ti.kernel
            def sin_times_x_loss():
                for i in values:
                    loss[None] += ti.sin(values[i]) * values[i]
            self._fields[n] = (values, loss, sin_times_x_loss)
        values, loss, kernel = self._fields[n]
        values.from_numpy(x)
        return values, loss, kernel

    def gradient(self, state):
        import taichi as ti
        values, loss, kernel = state
        with ti.ad.Tape(loss=loss):
            kernel()
        ti.sync()
        return values.grad

    def to_numpy(self, gradient) -> np.ndarray:
        return gradient.to_numpy()


# ---------------------------------------------------------------------------------------
# A peer in a process of its own. Starting a library can change its whole process:
# Taichi's `ti.init` sets FTZ/DAZ in the calling thread's floating-point control word and
# raises glibc's mmap threshold (a 100-step heat gradient then took 4 page faults where it
# took 1,978, and about 10% longer); Warp and JAX start runtimes and thread pools of their
# own. Measured beside kernelkit in one process, a peer would change what kernelkit's side
# (and every case after it) measures, so the AD peers run each in a Python process of its
# own, started on first use and kept for the run.


class OwnProcess:
    """The peer `peer_class(**arguments)`, made and run in a Python process of its own:
    `prepare(...)` keeps the prepared state there and returns a token for it;
    `gradient(token)` returns the gradient as a NumPy array (for the check: it costs a
    copy between the processes); `timed(token, measure, sizes)` times `gradient` there,
    with the benchmark's own `measure`, so no copy is timed. `close()` ends the
    process."""

    def __init__(self, peer_class, **arguments) -> None:
        self.name = peer_class.name
        self._peer = peer_class, arguments
        self._process = None

    def _call(self, *request):
        if self._process is None:
            self._process = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"))
            self._process.submit(_serve, "make", *self._peer).result()
        return self._process.submit(_serve, *request).result()

    def unavailable_reason(self) -> str | None:
        return self._call("unavailable_reason")

    def prepare(self, *inputs) -> int:
        return self._call("prepare", *inputs)

    def gradient(self, token: int) -> np.ndarray:
        return self._call("gradient", token)

    def to_numpy(self, gradient: np.ndarray) -> np.ndarray:
        return gradient

    def timed(self, token: int, measure, sizes):
        return self._call("timed", token, measure, sizes)

    def close(self) -> None:
        if self._process is not None:
            self._process.shutdown()
            self._process = None


_served_peer: list = []
"""In an `OwnProcess` peer's process: the peer."""

_served_states: list = []
"""In an `OwnProcess` peer's process: its prepared states; a token is an index."""


def _serve(request: str, *arguments):
    """Answer one request of `OwnProcess`, in its peer's process."""
    if request == "make":
        peer_class, peer_arguments = arguments
        _served_peer.append(peer_class(**peer_arguments))
        return None
    peer = _served_peer[0]
    if request == "unavailable_reason":
        return peer.unavailable_reason()
    if request == "prepare":
        _served_states.append(peer.prepare(*arguments))
        return len(_served_states) - 1
    state = _served_states[arguments[0]]
    if request == "gradient":
        return np.asarray(peer.to_numpy(peer.gradient(state)))
    measure, sizes = arguments[1:]
    return measure(lambda: peer.gradient(state), sizes)


def own_process(peer_class):
    """`peer_class` made in a process of its own when called (see `OwnProcess`)."""
    def make(**arguments) -> OwnProcess:
        return OwnProcess(peer_class, **arguments)
    make.name = peer_class.name
    return make


GRADIENT_PEERS = tuple(own_process(peer) for peer in (JaxGradPeer, WarpTapePeer,
                                                       TaichiTapePeer))
"""The peers of the gradient case, in column order; each optional, each in a process of
its own."""


def start_taichi(gpu: bool):
    """Import Taichi and start its runtime once per process, on its CUDA or its CPU
    backend (a second `ti.init` would destroy the fields another peer made before);
    return the module. Taichi prints its banner on stdout: to stderr, away from the
    table."""
    with contextlib.redirect_stdout(sys.stderr):
        import taichi as ti
        if not _taichi_started:
            ti.init(arch=ti.cuda if gpu else ti.cpu, log_level=ti.ERROR)
            _taichi_started.append(gpu)
    if _taichi_started[0] != gpu:
        raise RuntimeError(f"taichi was started on its {'CPU' if gpu else 'GPU'} in this "
                           "process")
    if gpu and ti.lang.impl.current_cfg().arch != ti.cuda:
        raise RuntimeError("taichi has no CUDA device here (it fell back to the CPU)")
    return ti


_taichi_started: list[bool] = []
"""Whether `start_taichi` started Taichi for the GPU; empty before it did."""


# ---------------------------------------------------------------------------------------
# Heat-loop gradient peers: the gradient of the sum of the field after `steps` explicit
# heat steps (`kernels.heat_step`: the boundary keeps its values, each interior point
# moves by alpha times its five-point Laplacian) with respect to the initial field, as
# each library's users write it. Both libraries differentiate a launch by its recorded
# arguments and silently give wrong gradients when a later launch overwrites an array an
# earlier one read, so their users keep every step: one array (or one slice of a field)
# per time step. `prepare(u0, alpha, steps)` allocates and defines the kernels;
# `gradient(state)` records the forward loop on the tape and runs it backward;
# `to_numpy` reads the initial field's gradient back, for the check. CPU only.


class WarpHeatTapePeer:
    """A Warp kernel launched once per step from `fields[t]` into `fields[t + 1]` (101
    arrays with `requires_grad`), then a kernel atomically adding the last one into a
    one-element loss, all recorded on a `wp.Tape`; `tape.backward(loss=loss)` fills
    `fields[0].grad`. Each gradient first resets the tape and zeroes the loss, as a
    training step does. Warp's CPU kernels run on one thread."""

    name = "warp"

    def __init__(self) -> None:
        self._kernels = None

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("warp") else "warp-lang is not installed"

    def prepare(self, u0: np.ndarray, alpha: np.float32, steps: int):
        # Warp prints its banner and its kernels' compilation on stdout: to stderr, away
        # from the table.
        with contextlib.redirect_stdout(sys.stderr):
            return self._prepare(u0, alpha, steps)

    def _prepare(self, u0: np.ndarray, alpha: np.float32, steps: int):
        import warp as wp
        if self._kernels is None:
            self._kernels = _define_warp_heat_kernels()
        device = "cpu"
        fields = [wp.array(u0, dtype=wp.float32, device=device, requires_grad=True)]
        fields += [wp.zeros(u0.shape, dtype=wp.float32, device=device, requires_grad=True)
                   for _ in range(steps)]
        loss = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        state = fields, float(alpha), loss, wp.Tape(), device
        self.gradient(state)  # compiles the kernels
        return state

    def gradient(self, state):
        import warp as wp
        heat_step, field_sum = self._kernels
        fields, alpha, loss, tape, device = state
        tape.reset()
        loss.zero_()
        with tape:
            for current, following in zip(fields, fields[1:]):
                wp.launch(heat_step, dim=current.shape, inputs=[current, alpha],
                          outputs=[following], device=device)
            wp.launch(field_sum, dim=fields[-1].shape, inputs=[fields[-1]], outputs=[loss],
                      device=device)
        tape.backward(loss=loss)
        wp.synchronize_device(device)
        return fields[0].grad

    def to_numpy(self, gradient) -> np.ndarray:
        return gradient.numpy()


def _define_warp_heat_kernels() -> tuple:
    import warp as wp

    @wp.kernel
    def heat_step(u: wp.array2d(dtype=wp.float32), alpha: wp.float32,
                  u_next: wp.array2d(dtype=wp.float32)):
        i, j = wp.tid()
        if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
            u_next[i, j] = u[i, j]
        else:
            laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            u_next[i, j] = u[i, j] + alpha * laplacian

    @wp.kernel
    def field_sum(u: wp.array2d(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
        i, j = wp.tid()
        wp.atomic_add(loss, 0, u[i, j])

    return heat_step, field_sum


class TaichiHeatTapePeer:
    """A Taichi field with a time dimension, (steps + 1, n, n), a kernel computing slice
    t + 1 from slice t, and a kernel adding the last slice into a scalar loss field, run
    under `ti.ad.Tape(loss=loss)`, which zeroes every gradient, seeds the loss and runs
    the kernels' adjoints in reverse order: the gradient is slice 0 of the field's grad.
    Taichi's CPU kernels use every core."""

    name = "taichi"

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("taichi") else "taichi is not installed"

    def prepare(self, u0: np.ndarray, alpha: np.float32, steps: int):
        ti = start_taichi(gpu=False)
        rows, cols = u0.shape
        field = ti.field(dtype=ti.f32, shape=(steps + 1, rows, cols), needs_grad=True)
        loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def set_initial(u0: ti.types.ndarray(dtype=ti.f32, ndim=2)):
            for i, j in ti.ndrange(rows, cols):
                field[0, i, j] = u0[i, j]

        @ti.kernel
        def heat_step(t: ti.i32, alpha: ti.f32):
            for i, j in ti.ndrange(rows, cols):
                if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
                    field[t + 1, i, j] = field[t, i, j]
                else:
                    laplacian = (field[t, i - 1, j] + field[t, i + 1, j] + field[t, i, j - 1]
                                 + field[t, i, j + 1] - 4.0 * field[t, i, j])
                    field[t + 1, i, j] = field[t, i, j] + alpha * laplacian

        @ti.kernel
        def field_sum():
            for i, j in ti.ndrange(rows, cols):
                loss[None] += field[steps, i, j]

        @ti.kernel
        def initial_gradient(out: ti.types.ndarray(dtype=ti.f32, ndim=2)):
            for i, j in ti.ndrange(rows, cols):
                out[i, j] = field.grad[0, i, j]

        set_initial(u0)
        return field, loss, float(alpha), steps, heat_step, field_sum, initial_gradient

    def gradient(self, state):
        import taichi as ti
        field, loss, alpha, steps, heat_step, field_sum, _ = state
        with ti.ad.Tape(loss=loss):
            for t in range(steps):
                heat_step(t, alpha)
            field_sum()
        ti.sync()
        return state

    def to_numpy(self, gradient) -> np.ndarray:
        field, initial_gradient = gradient[0], gradient[-1]
        out = np.empty(field.shape[1:], dtype=np.float32)
        initial_gradient(out)
        return out


HEAT_GRADIENT_PEERS = (own_process(WarpHeatTapePeer), own_process(TaichiHeatTapePeer))
"""The peers of the heat-loop gradient case, in column order; each optional, each in a
process of its own."""


PEERS = {"cpu": (NumpyPeer, NumbaPeer), "cuda": (CupyPeer, TorchPeer)}
"""Per backend kind, the peers shown as columns, in column order."""

PRIMARY_PEER = {"cpu": "numba", "cuda": "cupy"}
"""Per backend kind, the peer the ratio targets are measured against."""
