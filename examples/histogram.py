"""Histogram of samples in [0, 1) with atomic increments into shared bins.

Many work-items hit the same bin at once; `kk.atomic_add` makes each increment a single
indivisible read-modify-write, so no count is lost. The counts must match numpy exactly.

    python examples/histogram.py [--backend cpu|cuda]
"""
import sys

import numpy as np

import kernelkit as kk
from _common import example_parser, parse_command_line

BINS = 64


@kk.kernel
def histogram(counts, samples: kk.Const):
    i = kk.index(kk.Global)
    b = int(samples[i] * BINS)  # exact: BINS is a power of two
    if b > BINS - 1:
        b = BINS - 1
    kk.atomic_add(counts, b, 1)


def main(argv: list[str] | None = None) -> int:
    parser = example_parser("histogram with kernelkit atomics")
    _, backend = parse_command_line(parser, argv)

    n = 200_000
    # A skewed distribution, so some bins are far more contended than others. Rounding to
    # float32 can turn a value just below 1 into 1.0, which the kernel puts in the last bin.
    samples_host = np.random.default_rng(0).beta(2.0, 5.0, n).astype(np.float32)

    counts = kk.zeros(backend, np.int32, BINS)
    histogram(backend, 256)(counts, kk.to_backend(backend, samples_host), ndrange=n)
    kk.synchronize(backend)
    counts_host = kk.to_numpy(counts)

    bin_of_sample = np.minimum((samples_host * BINS).astype(np.int64), BINS - 1)
    expected = np.bincount(bin_of_sample, minlength=BINS)
    wrong_bins = int(np.count_nonzero(counts_host != expected))
    ok = wrong_bins == 0 and int(counts_host.sum()) == n
    print(f"histogram: {'OK' if ok else 'MISMATCH'} "
          f"({n} samples in {BINS} bins, {wrong_bins} bins differ, fullest bin {expected.max()})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
