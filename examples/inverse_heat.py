"""Inverse heat diffusion: recover the initial temperature of a plate from a noisy
measurement of its temperature 500 steps later, with gradients through the whole
simulation.

The simulation is heat_diffusion.py's explicit stencil, its edges held at their initial
values. The loss is half the squared difference between the simulated final field and
the measured one; `enzyme_ext.gradient` differentiates the program that runs all the
steps and the loss, giving d(loss)/d(initial field) in one forward and one reverse run.
Every launch's reverse pass is recorded: the recording keeps one copy of each field a
later step overwrites, 500 fields of 32 KiB on the default 64x64 plate. (For a larger
plate or more steps, `enzyme_ext.checkpoint` bounds that memory: see projectile.py.)

Running heat backward is ill-posed: diffusion damps fine detail below the noise. The
descent starts from the measured field and recovers the smooth part first; stopping
after a few iterations is the regularization. The steps are conjugate gradients, each as
long as the quadratic loss allows along its direction. Printed: the loss per iteration,
falling to the noise floor, and the recovered field's error against the truth. Drawn:
with matplotlib (`pip install kernelkit[examples]`), the true, measured (the initial
guess) and recovered fields and the loss curve; without it, the three fields side by
side, one pixel per point.

    python examples/inverse_heat.py [--backend cpu|cuda] [--out inverse_heat.png]
                                    [--size 64] [--steps 500] [--iterations 20]
"""
import sys
import time

import numpy as np

import kernelkit as kk
from _common import colormap, example_parser, new_figure, parse_command_line, report, write_png
from enzyme_ext import gradient

DIFFUSIVITY = 0.02  # per step, in grid units: the explicit scheme is stable up to 0.25
NOISE = 1e-3        # the measurement's standard deviation; the hottest point starts at 1


@kk.kernel
def heat_step(u_next, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        u_next[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        u_next[i, j] = u[i, j] + alpha * laplacian


@kk.kernel
def add_squared_misfit(loss, u: kk.Const, measured: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    difference = u[i, j] - measured[i, j]
    kk.atomic_add(loss, 0, 0.5 * difference * difference)


def final_field(u0, steps: int):
    """The field `steps` steps after `u0` (which is left as it is)."""
    current, following = kk.zeros_like(u0), kk.zeros_like(u0)
    kk.copyto(current, u0)
    step = heat_step(kk.get_backend(u0), (16, 16))
    for _ in range(steps):
        step(following, current, DIFFUSIVITY, ndrange=u0.shape)
        current, following = following, current
    return current


def misfit(u0, measured, steps: int):
    """The loss: half the squared distance from the simulated final field to `measured`,
    as a one-element array (what `gradient` differentiates)."""
    loss = kk.zeros(kk.get_backend(u0), np.float64, 1)
    add_squared_misfit(kk.get_backend(u0), (16, 16))(loss, final_field(u0, steps), measured,
                                                     ndrange=u0.shape)
    return loss


def true_field(size: int) -> np.ndarray:
    """Three smooth hot spots on a cold plate."""
    y, x = np.meshgrid(np.linspace(-1.0, 1.0, size), np.linspace(-1.0, 1.0, size),
                       indexing="ij")
    return (np.exp(-((x - 0.35) ** 2 + (y + 0.3) ** 2) / 0.08)
            + 0.7 * np.exp(-((x + 0.4) ** 2 + (y - 0.4) ** 2) / 0.05)
            + 0.5 * np.exp(-(x + 0.35) ** 2 / 0.03 - (y + 0.3) ** 2 / 0.3))


def recover(backend, measured: np.ndarray, steps: int,
            iterations: int) -> tuple[np.ndarray, list[float]]:
    """The initial field whose simulation fits `measured`, by conjugate gradients from
    `measured` itself; the loss before the first iteration and after each."""
    loss_gradient = gradient(misfit, argnums=0)
    device_measured = kk.to_backend(backend, measured)
    no_measurement = kk.zeros_like(device_measured)

    def loss(field: np.ndarray, against) -> float:
        return float(kk.to_numpy(misfit(kk.to_backend(backend, field), against, steps))[0])

    def gradient_at(field: np.ndarray) -> np.ndarray:
        return kk.to_numpy(loss_gradient(kk.to_backend(backend, field), device_measured,
                                         steps)).copy()

    field = measured.copy()
    slope = gradient_at(field)
    direction = -slope
    losses = [loss(field, device_measured)]
    print(f"iteration  0: loss {losses[0]:.3e}")
    for iteration in range(1, iterations + 1):
        # The simulation is linear, so the loss is quadratic along `direction`, with
        # curvature |simulated direction|^2: twice the direction's loss against zero.
        curvature = 2.0 * loss(direction, no_measurement)
        field = field - np.vdot(slope, direction) / curvature * direction
        new_slope = gradient_at(field)
        # Fletcher-Reeves: on a quadratic, each direction is conjugate to the earlier ones.
        conjugate = np.vdot(new_slope, new_slope) / np.vdot(slope, slope)
        direction = -new_slope + conjugate * direction
        slope = new_slope
        losses.append(loss(field, device_measured))
        print(f"iteration {iteration:2d}: loss {losses[-1]:.3e}")
    return field, losses


def rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values * values)))


def draw(figure, panels: dict[str, np.ndarray], losses: list[float],
         noise_floor: float) -> None:
    """The fields side by side, sharing one colour bar, and the loss per iteration."""
    axes = figure.subplots(1, len(panels) + 1)
    for ax, (title, field) in zip(axes, panels.items()):
        image = ax.imshow(field, cmap="inferno", vmin=0.0, vmax=1.0)
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
    figure.colorbar(image, ax=axes[:-1], label="temperature", shrink=0.8)
    axes[-1].semilogy(losses, marker="o", markersize=3)
    axes[-1].axhline(noise_floor, color="gray", linestyle="--", label="noise floor")
    axes[-1].legend()
    axes[-1].set_xlabel("iteration")
    axes[-1].set_title("loss")


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("kernelkit AD: recover an initial temperature field")
    parser.add_argument("--out", default="inverse_heat.png", help="where to write the PNG")
    parser.add_argument("--size", type=int, default=64, help="plate size (default: 64)")
    parser.add_argument("--steps", type=int, default=500, help="time steps (default: 500)")
    parser.add_argument("--iterations", type=int, default=20,
                        help="descent iterations (default: 20)")
    args, backend = parse_command_line(parser, argv)
    if args.size < 3 or args.steps < 1 or args.iterations < 1:
        parser.error("--size must be 3 or more, --steps and --iterations 1 or more")

    truth = true_field(args.size)
    final = kk.to_numpy(final_field(kk.to_backend(backend, truth), args.steps))
    measured = final + NOISE * np.random.default_rng(0).standard_normal(final.shape)

    start = time.perf_counter()
    recovered, losses = recover(backend, measured, args.steps, args.iterations)
    seconds = time.perf_counter() - start
    # The truth's own loss is about half the noise's squared norm: below it is fitting noise.
    noise_floor = 0.5 * NOISE ** 2 * truth.size
    print(f"loss {losses[0]:.3g} -> {losses[-1]:.3g} in {args.iterations} iterations "
          f"({seconds:.1f} s; noise floor {noise_floor:.3g})")
    print(f"rms error against the true field: measured {rms(measured - truth):.3g}, "
          f"recovered {rms(recovered - truth):.3g}")
    status = report("inverse heat", float(np.max(np.abs(recovered - truth))), 0.1)

    panels = {"true initial field": truth, f"measured after {args.steps} steps": measured,
              f"recovered ({args.iterations} iterations)": recovered}
    figure = new_figure(figsize=(13.0, 3.0), layout="constrained")
    if figure is not None:
        draw(figure, panels, losses, noise_floor)
        figure.savefig(args.out, dpi=100)
        print(f"wrote {args.out}")
    else:
        write_png(args.out, np.hstack([colormap(field) for field in panels.values()]))
        print(f"wrote {args.out} (true, measured, recovered; "
              f"pip install kernelkit[examples] for a figure)")
    return status


if __name__ == "__main__":
    sys.exit(main())
