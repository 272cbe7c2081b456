"""What the examples share, so that each of them shows its kernels and little else: the
command line (`--backend cpu|cuda`) and the backend it names, the one-line check of a
result, and figures: a matplotlib `Figure` where matplotlib is installed
(`pip install kernelkit[examples]`), a plain PNG writer where it is not.
"""
from __future__ import annotations

import argparse
import struct
import zlib

import numpy as np

import kernelkit as kk


def example_parser(description: str) -> argparse.ArgumentParser:
    """A command line with the `--backend` option every example takes; add your own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                        help="where the kernels run (default: cpu)")
    return parser


def parse_command_line(parser: argparse.ArgumentParser,
                       argv: list[str] | None) -> tuple[argparse.Namespace, kk.Backend]:
    """The parsed arguments and the backend `--backend` names. Where that backend cannot
    run here (no GPU, no driver), say why in one line and exit with status 2, as argparse
    does for any other unusable argument."""
    args = parser.parse_args(argv)
    reason = kk.backend_unavailable_reason(args.backend)
    if reason is not None:
        parser.exit(2, f"{parser.prog}: the {args.backend} backend cannot run here: {reason}\n")
    return args, kk.make_backend(args.backend)


def report(name: str, max_error: float, tolerance: float) -> int:
    """Print whether a result is within `tolerance` of the reference; the exit status."""
    ok = max_error <= tolerance
    print(f"{name}: {'OK' if ok else 'MISMATCH'} (max error {max_error:.3g})")
    return 0 if ok else 1


def new_figure(**options):
    """A matplotlib `Figure` (no pyplot, no window: `figure.savefig(path)` writes it), or
    None where matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure(**options)


def colormap(field: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] to RGB bytes: black -> red -> yellow -> white."""
    t = np.clip(field, 0.0, 1.0)[..., None] * 3.0 - np.array([0.0, 1.0, 2.0])
    return (np.clip(t, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def write_png(path: str, rgb: np.ndarray) -> None:
    """Write an (height, width, 3) uint8 array as an 8-bit RGB PNG, one pixel per value."""
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
