"""`python -m enzyme_ext.fuzz`: differential fuzzing of enzyme_ext, forward mode against
reverse mode, on kernelkit's generated kernels.

    python -m enzyme_ext.fuzz --seeds 0:300 [--jobs 2] [--timeout 60]
    python -m enzyme_ext.fuzz --show 123

Each seed's kernel is the one `python -m kernelkit.fuzz` writes for it (its generator
keeps integer divisors non-zero, casts guarded, indices in range, ...), launched on the
CPU with the same arguments except that float inputs hold no nan, inf or huge specials.
Its float32/float64 arrays (all, or a random subset) are `Duplicated`, the rest `Const`.
With J the Jacobian of (initial contents of the Duplicated arrays) -> (their final
contents), a random tangent t and a random adjoint seed s, the dot-product identity

    <s, J t>  (autodiff(Forward, ...): the shadows carry t in and J t out)
      ==
    <J^T s, t>  (autodiff(Reverse, ...): the shadows carry s in and J^T s out)

must hold up to rounding: |lhs - rhs| <= rtol * (sum |s_k (J t)_k| + sum |(J^T s)_k t_k|),
with rtol 1e-9 where the kernel computes only in float64 and 1e-4 where float32 appears.
Every run starts from fresh copies of the same inputs, and the primal results of both AD
runs must equal a plain launch's (bit for bit, or to the kernelkit fuzzer's tolerance
where the kernel uses inexact math). Shadow elements outside an array's view must be left
alone.

Outcomes: `pass`; `refused` (enzyme_ext raised a kernelkit error that is not an internal
compiler error: not a failure, counted by message); `invalid` (the kernelkit reference
refused the kernel: the generator's fault) and `no-float` (nothing to differentiate),
neither a failure; and the failures `mismatch` (the identity does not hold), `nonfinite`
(nan/inf in one mode's product only), `primal-mismatch`, `shadow-outside-view`,
`internal-error`, `primal-error` (the plain launch itself failed), `crash`, `hang`.

Seeds run in worker processes as in `kernelkit.fuzz`: a worker that crashes or runs a
seed past `--timeout` seconds is replaced, and that seed is reported as a crash or hang."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import signal
import sys
import threading
import time
import traceback
from collections import Counter

import numpy as np

from kernelkit.fuzz.__main__ import describe_case, parse_seeds
from kernelkit.fuzz.generator import HEADER, ArraySpec, Options, ScalarSpec, apply_view, generate
from kernelkit.fuzz.runner import Outcome, compare
from kernelkit.fuzz.workers import run_seeds_in_workers

FAILURES = ("mismatch", "nonfinite", "primal-mismatch", "shadow-outside-view",
            "internal-error", "primal-error", "crash", "hang")
NOT_CHECKED = ("refused", "invalid", "no-float")
FLOATS = ("float32", "float64")
RTOL = {"float64": 1e-9, "float32": 1e-4}


def options_from(args) -> Options:
    return Options(max_statements=args.max_statements, max_depth=args.max_depth)


def make_case(seed: int, options: Options | None = None):
    """The kernelkit fuzzer's case of `seed`, with float inputs free of specials (nan, inf,
    1e30 make both products nan or inf, and so check nothing)."""
    case = generate(seed, options)
    case.options = dataclasses.replace(case.options, specials=False)
    return case


# -- one seed -------------------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """Which arrays are Duplicated, whether Const ones are wrapped, the tangents and the
    adjoint seeds (over each array's whole base)."""
    duplicated: list[int]
    wrap_const: bool
    tangents: dict
    seeds: dict


def plan_for(case) -> Plan | None:
    rng = np.random.default_rng([case.seed, 0xAD])
    floats = [k for k, p in enumerate(case.params)
              if isinstance(p, ArraySpec) and p.dtype in FLOATS]
    if not floats:
        return None
    if rng.random() < 0.5:
        duplicated = floats
    else:
        duplicated = [k for k in floats if rng.random() < 0.5] or \
            [floats[rng.integers(len(floats))]]
    wrap_const = bool(rng.random() < 0.5)
    tangents, seeds = {}, {}
    for k in duplicated:
        p = case.params[k]
        tangents[k] = rng.standard_normal(p.base_shape).astype(p.dtype)
        seeds[k] = rng.standard_normal(p.base_shape).astype(p.dtype)
    return Plan(duplicated, wrap_const, tangents, seeds)


def rtol_for(case) -> tuple[str, float]:
    """float32 where any float32 value can take part (a parameter, a cast, a local array)."""
    source = case.kernel_source()
    uses32 = "float32" in source or any(
        (isinstance(p, ArraySpec) and p.dtype == "float32") or
        (isinstance(p, ScalarSpec) and p.type == "float32") for p in case.params)
    precision = "float32" if uses32 else "float64"
    return precision, RTOL[precision]


def _arguments(case, backend):
    """Fresh copies of the case's arguments on `backend`: (bases, values)."""
    import kernelkit as kk
    bases, values = [], []
    for param, argument in zip(case.params, case.arguments()):
        if isinstance(param, ArraySpec):
            base = kk.to_backend(backend, np.array(argument[0], copy=True))
            bases.append(base)
            values.append(apply_view(base, param.view))
        else:
            bases.append(None)
            values.append(argument)
    return bases, values


def _view_mask(param) -> np.ndarray:
    """True at the base elements the array's view covers."""
    mask = np.zeros(param.base_shape, dtype=bool)
    apply_view(mask, param.view)[...] = True
    return mask


def _normalize(message: str) -> str:
    """An error message with its kernel names, lines and numbers taken out, to count
    refusals by kind."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


def _error_message(error: BaseException) -> str:
    return getattr(error, "message", None) or str(error)


def classify_error(error: BaseException) -> str:
    """refused (a clean kernelkit error) or internal-error."""
    from kernelkit.errors import KernelkitError
    text = str(error).lower()
    if isinstance(error, KernelkitError) and "bug in kernelkit" not in text \
            and "internal compiler error" not in text:
        return "refused"
    return "internal-error"


def _describe(error: BaseException, traceback_: bool) -> str:
    text = f"{type(error).__name__}: {error}"
    if traceback_:
        frames = traceback.extract_tb(error.__traceback__)[-4:]
        text += "\n" + "".join(traceback.format_list(frames))
    return text


def check_case(case, backend, details: list | None = None) -> Outcome:
    """The outcome of one case on `backend` (details, if a list, receives lines telling
    what was run and found)."""
    import kernelkit as kk
    from enzyme_ext import Const, Duplicated, Forward, Reverse, autodiff
    from kernelkit.fuzz.reference import forget_module, load_module, run_reference

    def note(text):
        if details is not None:
            details.append(text)

    seed = case.seed
    plan = plan_for(case)
    if plan is None:
        return Outcome(seed, "cpu", "no-float", "no float32/float64 array")
    names = [case.params[k].name for k in plan.duplicated]
    note(f"Duplicated: {', '.join(names)}; Const arguments "
         f"{'wrapped in Const' if plan.wrap_const else 'passed plain'}")

    expected = case.arguments()
    try:
        run_reference(case, expected)
    except Exception as error:  # the reference refused the kernel: the generator's fault
        return Outcome(seed, "reference", "invalid", _describe(error, False))

    namespace = load_module(case.kernel_source(), f"enzyme_ext_fuzz_{seed}")
    try:
        kernel = namespace[case.kernel_name]
        launch = kernel(backend, case.workgroupsize)
        ndrange = case.ndrange

        # the plain launch
        plain, values = _arguments(case, backend)
        try:
            launch(*values, ndrange=ndrange)
            kk.synchronize(backend)
        except Exception as error:
            return Outcome(seed, "cpu", "primal-error", _describe(error, True))
        plain = [None if b is None else np.array(kk.to_numpy(b)) for b in plain]

        def run(mode, shadow_bases):
            bases, values = _arguments(case, backend)
            shadows = {k: kk.to_backend(backend, np.array(shadow_bases[k], copy=True))
                       for k in plan.duplicated}
            wrapped = []
            for k, value in enumerate(values):
                if k in shadows:
                    wrapped.append(Duplicated(value, apply_view(shadows[k],
                                                                 case.params[k].view)))
                elif plan.wrap_const:
                    wrapped.append(Const(value))
                else:
                    wrapped.append(value)
            autodiff(mode, launch, *wrapped, ndrange=ndrange)
            kk.synchronize(backend)
            return ([None if b is None else np.array(kk.to_numpy(b)) for b in bases],
                    {k: np.array(kk.to_numpy(s)) for k, s in shadows.items()})

        results = {}
        for label, mode, shadow_bases in (("forward", Forward, plan.tangents),
                                          ("reverse", Reverse, plan.seeds)):
            try:
                results[label] = run(mode, shadow_bases)
            except Exception as error:
                kind = classify_error(error)
                detail = f"{label}: " + _describe(error, kind != "refused")
                if kind == "refused":
                    detail = f"{label}: {_normalize(_error_message(error))}\n" + detail
                return Outcome(seed, "cpu", kind, detail)
    finally:
        forget_module(namespace)

    # the primal results of the AD runs are the plain launch's
    inexact = case.inexact_precision()
    for label, (bases, _) in results.items():
        for param, want, got in zip(case.params, plain, bases):
            if want is None:
                continue
            problem = compare(want, got, inexact)
            if problem:
                return Outcome(seed, "cpu", "primal-mismatch", f"{label}: {param.name}: {problem}")

    # shadows outside the views are left alone; the dot products over the views
    terms = {"forward": [], "reverse": []}
    for k in plan.duplicated:
        param = case.params[k]
        mask = _view_mask(param)
        for label, before in (("forward", plan.tangents[k]), ("reverse", plan.seeds[k])):
            after = results[label][1][k]
            outside = ~mask & ~((after == before) | (np.isnan(after) & np.isnan(before)))
            if outside.any():
                return Outcome(seed, "cpu", "shadow-outside-view",
                               f"{label}: d_{param.name} changed at base elements "
                               f"{np.argwhere(outside)[:4].tolist()} outside its view "
                               f"{param.view!r}")
        def view(a, param=param):
            return np.asarray(apply_view(a, param.view), dtype=np.float64).ravel()
        with np.errstate(all="ignore"):
            forward_terms = view(plan.seeds[k]) * view(results["forward"][1][k])
            reverse_terms = view(results["reverse"][1][k]) * view(plan.tangents[k])
        terms["forward"].append(forward_terms)
        terms["reverse"].append(reverse_terms)
        note(f"  {param.name} ({param.dtype}, view {param.view or 'none'}): "
             f"<s, Jt> part {_sum(forward_terms)!r}, <J^T s, t> part {_sum(reverse_terms)!r}")
    forward_terms = np.concatenate(terms["forward"])
    reverse_terms = np.concatenate(terms["reverse"])
    lhs, rhs = _sum(forward_terms), _sum(reverse_terms)
    precision, rtol = rtol_for(case)
    with np.errstate(all="ignore"):
        scale = float(np.sum(np.abs(forward_terms)) + np.sum(np.abs(reverse_terms)))
    note(f"<s, J t> = {lhs!r} (forward), <J^T s, t> = {rhs!r} (reverse); "
         f"sum of |terms| {scale!r}; rtol {rtol} ({precision})")
    finite = (math.isfinite(lhs), math.isfinite(rhs))
    if finite != (True, True):
        if finite == (False, False):
            return Outcome(seed, "cpu", "pass", f"both products non-finite: {lhs} {rhs}")
        return Outcome(seed, "cpu", "nonfinite",
                       f"<s, J t> = {lhs!r} (forward), <J^T s, t> = {rhs!r} (reverse)")
    error = abs(lhs - rhs)
    if error > rtol * scale + 1e-300:
        return Outcome(seed, "cpu", "mismatch",
                       f"<s, J t> = {lhs!r} (forward) but <J^T s, t> = {rhs!r} (reverse): "
                       f"difference {error:.3g}, {error / scale if scale else math.inf:.3g} "
                       f"of the terms' magnitude {scale:.3g} (rtol {rtol})")
    return Outcome(seed, "cpu", "pass", f"{lhs!r} {rhs!r}")


def _sum(terms: np.ndarray) -> float:
    if not np.all(np.isfinite(terms)):
        with np.errstate(all="ignore"):
            return float(np.sum(terms))
    return math.fsum(terms.tolist())


def check_seed(seed: int, backend=None, options: Options | None = None,
               details: list | None = None) -> Outcome:
    if backend is None:
        import kernelkit as kk
        backend = kk.CPU()
    try:
        case = make_case(seed, options)
    except Exception as error:  # the generator itself failed
        return Outcome(seed, "generator", "invalid", f"{type(error).__name__}: {error}")
    return check_case(case, backend, details)


# -- worker processes ------------------------------------------------------------------------


def worker(args) -> None:
    """Read seeds from stdin, one a line; for each, print START, its outcome, END."""
    import kernelkit as kk
    from kernelkit.fuzz.runner import use_private_cache
    use_private_cache()
    backend = kk.CPU()
    out = sys.stdout
    for line in sys.stdin:
        seed = int(line)
        print(f"START {seed}", file=out, flush=True)
        try:
            outcome = check_seed(seed, backend, options_from(args))
        except Exception as error:  # a failure of the fuzzer's own checks
            outcome = Outcome(seed, "cpu", "internal-error", _describe(error, True))
        print("RESULT " + json.dumps(outcome.__dict__), file=out, flush=True)
        print(f"END {seed}", file=out, flush=True)


def worker_command(args) -> list[str]:
    return [sys.executable, "-m", "enzyme_ext.fuzz", "--worker",
            "--max-statements", str(args.max_statements), "--max-depth", str(args.max_depth)]


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def refusal_key(outcome: Outcome) -> str:
    return outcome.detail.splitlines()[0] if outcome.detail else ""


def run_seeds(args) -> int:
    seeds = parse_seeds(args.seeds)
    lock = threading.Lock()
    outcomes: dict[int, Outcome] = {}
    start = time.monotonic()

    def report(outcome: Outcome):
        with lock:
            outcomes[outcome.seed] = outcome
            if outcome.kind in FAILURES:
                first = outcome.detail.splitlines()[0] if outcome.detail else ""
                print(f"seed {outcome.seed}: {outcome.kind}: {first[:300]}", flush=True)
            elif args.verbose:
                first = outcome.detail.splitlines()[0] if outcome.detail else ""
                print(f"seed {outcome.seed}: {outcome.kind}: {first[:200]}", flush=True)
            if not args.quiet and len(outcomes) % 50 == 0:
                elapsed = time.monotonic() - start
                failing = sum(o.kind in FAILURES for o in outcomes.values())
                print(f"... {len(outcomes)} seeds, {failing} failing, "
                      f"{len(outcomes) / elapsed:.2f} kernels/s", flush=True)

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        run_seeds_in_workers(seeds, args.batch, args.jobs, worker_command(args), "cpu",
                             args.timeout, report)
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: the summary of the seeds done so far
        with lock:
            done = dict(outcomes)
        print(f"\ninterrupted after {len(done)} of {len(seeds)} seeds")
        seeds = sorted(done)
        outcomes = done
    finally:
        signal.signal(signal.SIGTERM, previous)
    elapsed = time.monotonic() - start
    print(summary(outcomes, seeds, elapsed, args.jobs))
    return 1 if any(o.kind in FAILURES for o in outcomes.values()) else 0


def summary(outcomes: dict[int, Outcome], seeds, elapsed: float, jobs: int) -> str:
    counts = Counter(o.kind for o in outcomes.values())
    lines = [f"\n{len(seeds)} seeds in {elapsed:.1f} s ({len(seeds) / elapsed:.2f} kernels/s, "
             f"{jobs} job(s)); backend: cpu"]
    for kind in ("pass", *NOT_CHECKED, *FAILURES):
        if counts.get(kind):
            lines.append(f"  {kind:20} {counts[kind]}")
        if kind == "pass" and counts.get(kind):
            passes = [o for o in outcomes.values() if o.kind == "pass"]
            zero = sum(o.detail == "0.0 0.0" for o in passes)
            nonfinite = sum(o.detail.startswith("both products non-finite") for o in passes)
            lines.append(f"  {'':20} (of which {zero} with both products 0, "
                         f"{nonfinite} with both non-finite)")
    refusals = Counter(refusal_key(o) for o in outcomes.values() if o.kind == "refused")
    if refusals:
        lines.append("refusals by message:")
        for message, n in refusals.most_common():
            lines.append(f"  {n:5}  {message}")
    failing = sorted((o for o in outcomes.values() if o.kind in FAILURES), key=lambda o: o.seed)
    if failing:
        lines.append("failing seeds:")
        for o in failing:
            first = o.detail.splitlines()[0] if o.detail else ""
            lines.append(f"  {o.seed}: {o.kind}: {first[:240]}")
    return "\n".join(lines)


def show(args) -> int:
    try:
        case = make_case(args.show, options_from(args))
    except Exception as error:
        print(f"seed {args.show}: the generator failed: {type(error).__name__}: {error}")
        return 1
    if args.source:
        import ast
        with open(args.source) as file:
            # without the imports kernel_source puts first (the reference gives its own)
            lines = [line for line in file.read().splitlines()
                     if line not in HEADER.splitlines()]
            case.module = ast.parse("\n".join(lines))
    print(describe_case(case))
    details: list[str] = []
    try:
        outcome = check_case(case, __import__("kernelkit").CPU(), details)
    except Exception as error:
        outcome = Outcome(case.seed, "cpu", "internal-error", _describe(error, True))
    print()
    for line in details:
        print(f"# {line}")
    print(f"# outcome: {outcome.kind}")
    for line in outcome.detail.splitlines():
        print(f"#   {line}")
    return 1 if outcome.kind in FAILURES else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m enzyme_ext.fuzz",
                                     description="Differential fuzzing of enzyme_ext: forward "
                                                 "against reverse mode (the dot-product "
                                                 "identity) on generated kernels, on the CPU.")
    parser.add_argument("--seeds", default="0:100", help="a:b, or a list a,b,c (default 0:100)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a seed may take before it counts as a hang")
    parser.add_argument("--batch", type=int, default=50, help="seeds per worker process")
    parser.add_argument("--max-statements", type=int, default=Options.max_statements)
    parser.add_argument("--max-depth", type=int, default=Options.max_depth)
    parser.add_argument("--show", type=int, metavar="SEED",
                        help="print a seed's kernel, run it and print the details")
    parser.add_argument("--source", metavar="FILE",
                        help="with --show: run this kernel source (same kernel name and "
                             "parameters) on the seed's arguments instead, to reduce a "
                             "failing kernel by hand")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.show is not None:
        return show(args)
    return run_seeds(args)


if __name__ == "__main__":
    sys.exit(main())
