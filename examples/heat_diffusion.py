"""Heat diffusion on a plate: an explicit 5-point stencil, time-stepped by ping-ponging two arrays.

The edges are held at fixed temperatures (a hot top edge, cold elsewhere) and a hot square
starts in the middle. Each step reads one array and writes the other; launches on one
backend run in order, so the steps need no synchronization between them. The final field
is compared with numpy running the same steps and written as a PNG.

    python examples/heat_diffusion.py [--backend cpu|cuda] [--out heat.png]
"""
import argparse
import struct
import sys
import zlib

import numpy as np

import kernelkit as kk


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


def colormap(field: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] to RGB bytes: black -> red -> yellow -> white."""
    t = np.clip(field, 0.0, 1.0)[..., None] * 3.0 - np.array([0.0, 1.0, 2.0])
    return (np.clip(t, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def write_png(path: str, rgb: np.ndarray) -> None:
    """Write an (height, width, 3) uint8 array as an 8-bit RGB PNG."""
    height, width, _ = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    # Every scanline starts with its filter type; 0 means the bytes are stored as they are.
    scanlines = np.hstack([np.zeros((height, 1), dtype=np.uint8),
                           rgb.reshape(height, width * 3)])
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit depth, RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", header))
        f.write(chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 9)))
        f.write(chunk(b"IEND", b""))


def report(name: str, max_error: float, tolerance: float) -> int:
    ok = max_error <= tolerance
    print(f"{name}: {'OK' if ok else 'MISMATCH'} (max error {max_error:.3g})")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="heat diffusion with kernelkit")
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", default="heat.png", help="where to write the final field")
    args = parser.parse_args(argv)
    backend = kk.CUDABackend() if args.backend == "cuda" else kk.CPU()

    rows, cols, steps = 96, 128, 200
    alpha = np.float32(0.2)  # explicit scheme is stable for alpha <= 0.25
    u0 = initial_field(rows, cols)

    # On the CPU, to_backend shares memory with its argument: give each buffer its own.
    current = kk.to_backend(backend, u0.copy())
    following = kk.to_backend(backend, u0.copy())
    step = heat_step(backend, (16, 16))
    for _ in range(steps):
        step(following, current, alpha, ndrange=(rows, cols))
        current, following = following, current
    kk.synchronize(backend)
    field = kk.to_numpy(current)

    expected, scratch = u0.copy(), u0.copy()
    for _ in range(steps):
        heat_step_numpy(scratch, expected, alpha)
        expected, scratch = scratch, expected

    write_png(args.out, colormap(field))
    # Differences come only from FMA contraction; diffusion does not amplify them.
    status = report("heat diffusion", float(np.max(np.abs(field - expected))), 1e-4)
    print(f"wrote {args.out} ({cols}x{rows}, {steps} steps)")
    return status


if __name__ == "__main__":
    sys.exit(main())
