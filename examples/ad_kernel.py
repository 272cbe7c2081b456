"""The gradient of a stencil step, by reverse-mode AD of the kernel launch.

One explicit step of heat diffusion, u_next = u + alpha * laplacian(u) inside the plate
and u at its edges, and the energy E = sum(u_next**2) / 2 of the result. `autodiff`
runs the step and its reverse pass: seeded with dE/du_next = u_next, it gives dE/du (a
field, in u's shadow) and dE/dalpha (a number, since alpha is Active). Both are checked
against central finite differences of the same kernel and printed as a short table.

    python examples/ad_kernel.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line
from enzyme_ext import Active, Duplicated, Reverse, autodiff


@kk.kernel
def heat_step(u_next, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        u_next[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        u_next[i, j] = u[i, j] + alpha * laplacian


def energy(backend, u: np.ndarray, alpha: float) -> float:
    """E(u, alpha) by running the kernel: what the finite differences differentiate."""
    u_next = kk.zeros(backend, np.float64, u.shape)
    heat_step(backend, (16, 16))(u_next, kk.to_backend(backend, u), alpha, ndrange=u.shape)
    result = kk.to_numpy(u_next)
    return 0.5 * float(np.sum(result * result))


def gradient(backend, u: np.ndarray, alpha: float):
    """(dE/du, dE/dalpha) by AD: the step, then its reverse pass."""
    u_next = kk.zeros(backend, np.float64, u.shape)
    u_device = kk.to_backend(backend, u)
    heat_step(backend, (16, 16))(u_next, u_device, alpha, ndrange=u.shape)
    seed = kk.to_backend(backend, kk.to_numpy(u_next).copy())   # dE/du_next = u_next
    du = kk.zeros(backend, np.float64, u.shape)
    _, _, dalpha = autodiff(Reverse, heat_step(backend, (16, 16)), Duplicated(u_next, seed),
                            Duplicated(u_device, du), Active(alpha), ndrange=u.shape)
    return kk.to_numpy(du), dalpha


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("kernelkit AD: gradient of a stencil step")
    _, backend = parse_command_line(parser, argv)

    rng = np.random.default_rng(0)
    u = rng.random((64, 64))
    alpha = 0.2
    du, dalpha = gradient(backend, u, alpha)

    h = 1e-5
    rows = [("dE/dalpha", dalpha, (energy(backend, u, alpha + h) -
                                   energy(backend, u, alpha - h)) / (2 * h))]
    for point in ((0, 5), (1, 1), (31, 17), (63, 63)):
        bump = np.zeros_like(u)
        bump[point] = h
        rows.append((f"dE/du{list(point)}", du[point],
                     (energy(backend, u + bump, alpha) - energy(backend, u - bump, alpha))
                     / (2 * h)))
    print(f"{'derivative':<16}{'AD':>16}{'finite diff.':>16}{'rel. error':>12}")
    worst = 0.0
    for name, exact, estimate in rows:
        error = abs(exact - estimate) / max(abs(estimate), 1e-12)
        worst = max(worst, error)
        print(f"{name:<16}{exact:>16.8f}{estimate:>16.8f}{error:>12.1e}")
    ok = worst < 1e-6
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
