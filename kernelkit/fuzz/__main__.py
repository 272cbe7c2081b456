"""`python -m kernelkit.fuzz`: run seeds, show a seed's kernel, shrink a failing one.

    python -m kernelkit.fuzz --seeds 0:1000 [--jobs 2] [--backend cpu] [--timeout 60]
    python -m kernelkit.fuzz --show 123
    python -m kernelkit.fuzz --shrink 123 [--backend cpu]

Seeds run in worker processes (`--worker`), each taking a batch of seeds and keeping
its backends and compiler warm across them; a worker that crashes or runs a seed past
`--timeout` seconds is replaced, that seed is reported as a crash or a hang, and the
batch goes on in the new worker."""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter

from .generator import Options, generate
from .runner import Outcome
from .workers import parse_seeds, run_seeds_in_workers


def backend_names(text: str) -> list[str]:
    """The backends `--backend` names: `all` is every installed one."""
    from kernelkit.backend import backend_names as installed
    return installed() if text == "all" else text.split(",")


def options_from(args) -> Options:
    return Options(float16=args.float16, max_statements=args.max_statements,
                   max_depth=args.max_depth)


# -- the worker ------------------------------------------------------------------------------


def worker(args) -> None:
    """Read seeds from stdin, one a line; for each, print START, its outcomes, END."""
    from .runner import Runner, use_private_cache
    use_private_cache()
    runner = Runner(backend_names(args.backend))
    out = sys.stdout
    for line in sys.stdin:
        seed = int(line)
        print(f"START {seed}", file=out, flush=True)
        try:
            outcomes = runner.run(generate(seed, options_from(args)))
        except Exception as error:  # the generator itself failed
            outcomes = [Outcome(seed, "generator", "invalid", f"{type(error).__name__}: {error}")]
        for outcome in outcomes:
            print("RESULT " + json.dumps(outcome.__dict__), file=out, flush=True)
        print(f"END {seed}", file=out, flush=True)


def worker_command(args) -> list[str]:
    command = [sys.executable, "-m", "kernelkit.fuzz", "--worker", "--backend", args.backend]
    if args.float16:
        command.append("--float16")
    return command + ["--max-statements", str(args.max_statements), "--max-depth",
                      str(args.max_depth)]


def run_seeds(args) -> int:
    seeds = parse_seeds(args.seeds)
    lock = threading.Lock()
    counts: Counter = Counter()
    failures: dict[int, list[Outcome]] = {}
    invalid: list[Outcome] = []
    done_seeds: set[int] = set()
    start = time.monotonic()

    def report(outcome: Outcome):
        with lock:
            counts[(outcome.backend, outcome.kind)] += 1
            new = outcome.seed not in done_seeds
            done_seeds.add(outcome.seed)
            if outcome.failed:
                failures.setdefault(outcome.seed, []).append(outcome)
                first_line = outcome.detail.splitlines()[0] if outcome.detail else ""
                print(f"seed {outcome.seed}: {outcome.backend} {outcome.kind}: {first_line[:300]}",
                      flush=True)
            elif outcome.kind == "invalid":
                invalid.append(outcome)
                if args.verbose:
                    print(f"seed {outcome.seed}: invalid ({outcome.backend}): "
                          f"{outcome.detail[:200]}", flush=True)
            if new and not args.quiet and len(done_seeds) % 100 == 0:
                elapsed = time.monotonic() - start
                print(f"... {len(done_seeds)} seeds, {len(failures)} failing, "
                      f"{len(done_seeds) / elapsed:.2f} kernels/s", flush=True)

    run_seeds_in_workers(seeds, args.batch, args.jobs, worker_command(args), args.backend,
                         args.timeout, report)
    elapsed = time.monotonic() - start
    print(f"\n{len(seeds)} seeds in {elapsed:.1f} s ({len(seeds) / elapsed:.2f} kernels/s, "
          f"{args.jobs} job(s)); backend: {args.backend}")
    for (backend, kind), n in sorted(counts.items()):
        print(f"  {backend:18} {kind:15} {n}")
    if invalid:
        print(f"  {len(invalid)} kernels the reference refused (the fuzzer's fault): "
              f"{sorted(o.seed for o in invalid)[:20]}")
    if failures:
        by_kind: dict = {}
        for seed, outcomes in failures.items():
            for outcome in outcomes:
                by_kind.setdefault(f"{outcome.backend} {outcome.kind}", []).append(seed)
        print("failing seeds:")
        for kind, kind_seeds in sorted(by_kind.items()):
            print(f"  {kind}: {' '.join(map(str, sorted(kind_seeds)))}")
    return 1 if failures else 0


# -- show and shrink --------------------------------------------------------------------------


def show(args) -> None:
    case = generate(args.show, options_from(args))
    print(case.describe())


def shrink_seed(args) -> int:
    from .shrink import shrink
    case = generate(args.shrink, options_from(args))
    result = shrink(case, backend_names(args.backend), args.timeout, log=print)
    if result is None:
        print(f"seed {args.shrink} does not fail on {args.backend}")
        return 0
    case, outcome = result
    print(f"\n# minimal kernel of seed {args.shrink}: {outcome.backend} {outcome.kind}")
    print(f"# {outcome.detail.splitlines()[0] if outcome.detail else ''}")
    print(case.describe())
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelkit.fuzz",
                                     description="Differential fuzzing of kernelkit's backends "
                                                 "against a plain-Python reference.")
    parser.add_argument("--seeds", default="0:100", help="a:b, or a list a,b,c (default 0:100)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--backend", default="all",
                        help="cpu, cuda, several joined by commas, or all (every installed "
                             "backend, the default)")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a seed may take before it counts as a hang")
    parser.add_argument("--batch", type=int, default=200, help="seeds per worker process")
    parser.add_argument("--float16", action="store_true", help="float16 values too")
    parser.add_argument("--max-statements", type=int, default=Options.max_statements,
                        help="statements at the top of a kernel, at most")
    parser.add_argument("--max-depth", type=int, default=Options.max_depth,
                        help="depth of expressions, at most")
    parser.add_argument("--show", type=int, metavar="SEED", help="print a seed's kernel")
    parser.add_argument("--shrink", type=int, metavar="SEED",
                        help="reduce a failing seed's kernel while it fails the same way")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-case", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.run_case:
        from .shrink import run_pickled_case
        return run_pickled_case(args.run_case, backend_names(args.backend))
    if args.show is not None:
        show(args)
        return 0
    if args.shrink is not None:
        return shrink_seed(args)
    return run_seeds(args)


if __name__ == "__main__":
    sys.exit(main())
