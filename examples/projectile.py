"""Aiming projectiles with drag: the launch velocities that hit given targets after a
fixed flight time, by gradient descent through the whole flight, checkpointed.

Each projectile is one work-item: a step of explicit (semi-implicit Euler) integration
under gravity and quadratic air drag updates its position and velocity in place. The
loss is half the sum of the squared misses at the end of the flight.
`enzyme_ext.checkpoint(step, steps, budget)` runs the flight; differentiated by
`enzyme_ext.gradient`, it keeps at most `budget` copies of the state instead of every
step's record and recomputes the steps in between (Griewank's binomial schedule), which
is what lets a long simulation be differentiated in bounded memory.

The descent starts with every projectile launched the same way; its step halves
whenever it would not lower the loss and grows after each step that does. Printed: the
largest miss per iteration and what the checkpointing cost. Drawn: with matplotlib
(`pip install kernelkit[examples]`), the first and the last trajectories and the largest
miss per iteration; without it, the same trajectories as pixels.

    python examples/projectile.py [--backend cpu|cuda] [--out projectile.png]
                                  [--steps 200] [--budget 8] [--iterations 30]
"""
import sys
import time

import numpy as np

import kernelkit as kk
from _common import example_parser, new_figure, parse_command_line, report, write_png
from enzyme_ext import checkpoint, gradient
from enzyme_ext.checkpointing import repetitions

FLIGHT_TIME = 2.0   # seconds, split into --steps steps
GRAVITY = 9.81      # m/s^2
DRAG = 0.05         # 1/m: the drag deceleration is DRAG * speed^2
GROUP = 64


@kk.kernel
def launch(state, velocity: kk.Const):
    i = kk.index(kk.Global)
    state[i, 0] = 0.0
    state[i, 1] = 0.0
    state[i, 2] = velocity[i, 0]
    state[i, 3] = velocity[i, 1]


@kk.kernel
def fly(state, dt, drag, gravity):
    """One step of each projectile: state[i] is (x, y, vx, vy)."""
    i = kk.index(kk.Global)
    vx = state[i, 2]
    vy = state[i, 3]
    slowing = drag * kk.sqrt(vx * vx + vy * vy)
    vx = vx - dt * slowing * vx
    vy = vy - dt * (gravity + slowing * vy)
    state[i, 0] = state[i, 0] + dt * vx
    state[i, 1] = state[i, 1] + dt * vy
    state[i, 2] = vx
    state[i, 3] = vy


@kk.kernel
def add_squared_miss(loss, state: kk.Const, targets: kk.Const):
    i = kk.index(kk.Global)
    dx = state[i, 0] - targets[i, 0]
    dy = state[i, 1] - targets[i, 1]
    kk.atomic_add(loss, 0, 0.5 * (dx * dx + dy * dy))


def checkpointed_flight(backend, steps: int, budget: int):
    """The flight as a program of the state, keeping at most `budget` copies of it when
    differentiated."""
    def step(state):
        fly(backend, GROUP)(state, FLIGHT_TIME / steps, DRAG, GRAVITY, ndrange=len(state))
    return checkpoint(step, steps, budget)


def launched(velocity):
    """The state of projectiles at the origin with these velocities."""
    state = kk.zeros(kk.get_backend(velocity), np.float64, (len(velocity), 4))
    launch(kk.get_backend(velocity), GROUP)(state, velocity, ndrange=len(velocity))
    return state


def squared_miss(velocity, targets, flight):
    """The loss: half the sum of the squared distances from where the projectiles are at
    the end of `flight` to their targets, as a one-element array."""
    state = launched(velocity)
    flight(state)
    loss = kk.zeros(kk.get_backend(velocity), np.float64, 1)
    add_squared_miss(kk.get_backend(velocity), GROUP)(loss, state, targets,
                                                      ndrange=len(velocity))
    return loss


def trajectories(backend, velocity: np.ndarray, flight) -> np.ndarray:
    """The positions of the projectiles before each step and after the last:
    (steps + 1, projectiles, 2)."""
    state = launched(kk.to_backend(backend, velocity))
    positions = [kk.to_numpy(state)[:, :2].copy()]
    for _ in range(flight.n_steps):
        flight.step(state)
        positions.append(kk.to_numpy(state)[:, :2].copy())
    return np.array(positions)


def aim(backend, targets: np.ndarray, flight,
        iterations: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """The first and the last launch velocities, and the largest miss before each
    iteration and after the last."""
    loss_gradient = gradient(squared_miss, argnums=0)
    device_targets = kk.to_backend(backend, targets)

    def loss(velocity: np.ndarray) -> float:
        return float(kk.to_numpy(squared_miss(kk.to_backend(backend, velocity),
                                              device_targets, flight))[0])

    def largest_miss(velocity: np.ndarray) -> float:
        state = launched(kk.to_backend(backend, velocity))
        flight(state)
        ends = kk.to_numpy(state)[:, :2]
        return float(np.max(np.linalg.norm(ends - targets, axis=1)))

    first = velocity = np.tile([8.0, 8.0], (len(targets), 1))
    rate = 1.0 / FLIGHT_TIME ** 2   # a miss is about the flight time times the error in v
    misses = []
    for iteration in range(iterations + 1):
        misses.append(largest_miss(velocity))
        print(f"iteration {iteration:2d}: largest miss {misses[-1]:.3e} m")
        if iteration == iterations:
            break
        slope = kk.to_numpy(loss_gradient(kk.to_backend(backend, velocity), device_targets,
                                          flight)).copy()
        current = loss(velocity)
        # Halve the step until it lowers the loss (none does at an exact minimum).
        while loss(velocity - rate * slope) >= current and rate > 1e-12:
            rate /= 2.0
        velocity = velocity - rate * slope
        rate *= 1.5
    return first, velocity, misses


def draw(figure, before: np.ndarray, after: np.ndarray, targets: np.ndarray,
         misses: list[float]) -> None:
    """The trajectories before and after aiming, the targets, and the miss curve."""
    paths, curve = figure.subplots(1, 2, width_ratios=(3, 1))
    for k in range(targets.shape[0]):
        paths.plot(before[:, k, 0], before[:, k, 1], color="gray", linewidth=1,
                   label="first guess" if k == 0 else None)
        paths.plot(after[:, k, 0], after[:, k, 1], color="tab:red", linewidth=1,
                   label="aimed" if k == 0 else None)
    paths.scatter(targets[:, 0], targets[:, 1], marker="x", color="black", zorder=3,
                  label="targets")
    paths.set_xlabel("x (m)")
    paths.set_ylabel("y (m)")
    paths.set_aspect("equal", adjustable="datalim")
    paths.legend()
    curve.semilogy(misses, marker="o", markersize=3)
    curve.set_xlabel("iteration")
    curve.set_title("largest miss (m)")


def raster(before: np.ndarray, after: np.ndarray, targets: np.ndarray,
           width: int = 240) -> np.ndarray:
    """The same drawing as RGB pixels: gray first guesses, red aimed paths, black targets."""
    points = np.concatenate([before.reshape(-1, 2), after.reshape(-1, 2), targets])
    low, high = points.min(axis=0) - 0.5, points.max(axis=0) + 0.5
    scale = (width - 1) / (high[0] - low[0])
    height = int((high[1] - low[1]) * scale) + 1
    image = np.full((height, width, 3), 255, dtype=np.uint8)

    def plot(xy: np.ndarray, colour, radius: int = 0) -> None:
        columns = np.round((xy[:, 0] - low[0]) * scale).astype(int)
        rows = height - 1 - np.round((xy[:, 1] - low[1]) * scale).astype(int)
        for dr in range(-radius, radius + 1):
            for dc in range(-radius, radius + 1):
                image[np.clip(rows + dr, 0, height - 1),
                      np.clip(columns + dc, 0, width - 1)] = colour

    plot(before.reshape(-1, 2), (160, 160, 160))
    plot(after.reshape(-1, 2), (220, 30, 30))
    plot(targets, (0, 0, 0), radius=1)
    return image


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("kernelkit AD: aim projectiles through a checkpointed flight")
    parser.add_argument("--out", default="projectile.png", help="where to write the PNG")
    parser.add_argument("--steps", type=int, default=200,
                        help=f"time steps of the {FLIGHT_TIME:g} s flight (default: 200)")
    parser.add_argument("--budget", type=int, default=8,
                        help="copies of the state checkpointing keeps (default: 8)")
    parser.add_argument("--iterations", type=int, default=30,
                        help="descent iterations (default: 30)")
    args, backend = parse_command_line(parser, argv)
    if args.steps < 1 or args.budget < 1 or args.iterations < 1:
        parser.error("--steps, --budget and --iterations must be 1 or more")

    distances = np.linspace(4.0, 18.0, 8)
    targets = np.stack([distances, 1.5 + 1.5 * np.sin(1.7 * np.arange(8))], axis=1)
    flight = checkpointed_flight(backend, args.steps, args.budget)

    start = time.perf_counter()
    first, aimed, misses = aim(backend, targets, flight, args.iterations)
    seconds = time.perf_counter() - start
    schedule = flight.last_schedule
    print(f"largest miss {misses[0]:.3g} m -> {misses[-1]:.3g} m in {args.iterations} "
          f"iterations ({seconds:.1f} s)")
    print(f"checkpointing: {args.steps} steps with at most {schedule.most_copies} copies of "
          f"the state; each gradient recomputed {schedule.advances} steps (each at most "
          f"{repetitions(args.steps, args.budget - 1)} times)")
    status = report("projectile", misses[-1], 1e-3)

    before = trajectories(backend, first, flight)
    after = trajectories(backend, aimed, flight)
    figure = new_figure(figsize=(11.0, 4.0), layout="constrained")
    if figure is not None:
        draw(figure, before, after, targets, misses)
        figure.savefig(args.out, dpi=100)
        print(f"wrote {args.out}")
    else:
        write_png(args.out, raster(before, after, targets))
        print(f"wrote {args.out} (trajectories; pip install kernelkit[examples] for a figure)")
    return status


if __name__ == "__main__":
    sys.exit(main())
