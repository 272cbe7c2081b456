"""Heat diffusion on a plate: an explicit 5-point stencil, time-stepped by ping-ponging two arrays.

The edges are held at fixed temperatures (a hot top edge, cold elsewhere) and a hot square
starts in the middle. Each step reads one array and writes the other; launches on one
backend run in order, so the steps need no synchronization between them. The final field
is compared with numpy running the same steps and drawn to a PNG: with matplotlib
(`pip install kernelkit[examples]`), the field at four steps with a colour bar; without
it, the final field, one pixel per point.

    python examples/heat_diffusion.py [--backend cpu|cuda] [--out heat.png] [--steps 200]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import colormap, example_parser, new_figure, parse_command_line, report, write_png


@kk.kernel
def heat_step(u_next, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        u_next[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        u_next[i, j] = u[i, j] + alpha * laplacian


def heat_step_numpy(u_next: np.ndarray, u: np.ndarray, alpha: np.float32) -> None:
    """The same step as `heat_step`, with the same order of floating-point operations."""
    u_next[...] = u
    laplacian = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                 - 4.0 * u[1:-1, 1:-1])
    u_next[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * laplacian


def initial_field(rows: int, cols: int) -> np.ndarray:
    u = np.zeros((rows, cols), dtype=np.float32)
    u[0, :] = 1.0
    u[rows // 3: rows // 2, cols // 3: cols // 2] = 1.0
    return u


def simulate(backend, u0: np.ndarray, alpha: np.float32,
             keep: list[int]) -> dict[int, np.ndarray]:
    """Step from `u0` up to the last step in `keep`; the field after each step in `keep`."""
    # On the CPU, to_backend shares memory with its argument: give each buffer its own.
    current = kk.to_backend(backend, u0.copy())
    following = kk.to_backend(backend, u0.copy())
    step = heat_step(backend, (16, 16))
    fields, done = {}, 0
    for wanted in keep:
        for _ in range(wanted - done):
            step(following, current, alpha, ndrange=u0.shape)
            current, following = following, current
        done = wanted
        kk.synchronize(backend)
        fields[wanted] = kk.to_numpy(current).copy()
    return fields


def draw(figure, fields: dict[int, np.ndarray]) -> None:
    """One panel per kept step, sharing one colour bar."""
    axes = figure.subplots(1, len(fields), squeeze=False)[0]
    for ax, (step, field) in zip(axes, fields.items()):
        image = ax.imshow(field, cmap="inferno", vmin=0.0, vmax=1.0)
        ax.set_title(f"step {step}")
        ax.set_xticks([])
        ax.set_yticks([])
    figure.colorbar(image, ax=axes, label="temperature", shrink=0.8)


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("heat diffusion with kernelkit")
    parser.add_argument("--out", default="heat.png", help="where to write the PNG")
    parser.add_argument("--steps", type=int, default=200, help="time steps (default: 200)")
    args, backend = parse_command_line(parser, argv)
    if args.steps < 0:
        parser.error("--steps must be 0 or more")

    rows, cols, steps = 96, 128, args.steps
    alpha = np.float32(0.2)  # explicit scheme is stable for alpha <= 0.25
    u0 = initial_field(rows, cols)
    keep = sorted({0, steps // 8, steps // 2, steps})
    fields = simulate(backend, u0, alpha, keep)
    field = fields[steps]

    expected, scratch = u0.copy(), u0.copy()
    for _ in range(steps):
        heat_step_numpy(scratch, expected, alpha)
        expected, scratch = scratch, expected
    # Differences come only from FMA contraction; diffusion does not amplify them.
    status = report("heat diffusion", float(np.max(np.abs(field - expected))), 1e-4)

    figure = new_figure(figsize=(3.2 * len(keep) + 1.5, 3.0), layout="constrained")
    if figure is not None:
        draw(figure, fields)
        figure.savefig(args.out, dpi=100)
        print(f"wrote {args.out} (steps {', '.join(map(str, keep))})")
    else:
        write_png(args.out, colormap(field))
        print(f"wrote {args.out} ({cols}x{rows}, {steps} steps; "
              f"pip install kernelkit[examples] for a figure)")
    return status


if __name__ == "__main__":
    sys.exit(main())
