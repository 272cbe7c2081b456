"""`python tools/gpu_check.py`: check kernelkit on a machine with an NVIDIA GPU in one
command, within a time budget (8 minutes by default), and write one report.

Most machines that develop kernelkit have no GPU: their test runs compile every CUDA
kernel to PTX and cubins but run none. This is the run that does, in four steps, each
with its share of the budget:

1. the CUDA tests (`pytest -k "cuda and not host_memory_driver"`, in parallel where
   pytest-xdist is installed);
2. `python -m kernelkit.fuzz --backend cuda` on a fixed range of seeds (the CPU and the
   GPU against the plain-Python reference);
3. `python -m enzyme_ext.fuzz --backend cuda` on a fixed range of seeds;
4. `python benchmarks/run.py --backend cuda`.

A step that runs out of its time is stopped and reported as such, with what it printed
last (a fuzzer's progress line says how many seeds it ran). The report (Markdown, with
the machine, the commit and each step's summary and exit status) goes to
`gpu-report.md`, or `--report PATH`. The exit status is 0 only where every step passed."""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAIL_LINES = 40


@dataclass
class Step:
    name: str
    command: list[str]
    share: float                  # of the whole budget
    summary_from: str = ""        # the line a summary starts at, in the step's output
    status: str = "not run"
    seconds: float = 0.0
    output: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """The step's closing lines: from `summary_from` where it printed one, else the
        last few."""
        if self.summary_from:
            for index in range(len(self.output) - 1, -1, -1):
                if self.summary_from in self.output[index]:
                    return self.output[index:][:TAIL_LINES]
        return self.output[-12:]


def steps(jobs: int, fuzz_seeds: str, ad_seeds: str, quick: bool) -> list[Step]:
    python = sys.executable
    tests = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
             "cuda and not host_memory_driver", "tests"]
    if _has_xdist():
        tests += ["-n", str(jobs)]
    benchmark = [python, "benchmarks/run.py", "--backend", "cuda"] + (["--quick"] if quick else [])
    return [
        Step("CUDA tests", tests, 0.40, summary_from="short test summary info"),
        Step("kernelkit.fuzz on CUDA", [python, "-m", "kernelkit.fuzz", "--backend", "cuda",
                                        "--seeds", fuzz_seeds, "--jobs", str(jobs)], 0.20,
             summary_from=" seeds in "),
        Step("enzyme_ext.fuzz on CUDA", [python, "-m", "enzyme_ext.fuzz", "--backend", "cuda",
                                         "--seeds", ad_seeds, "--jobs", str(jobs)], 0.20,
             summary_from=" seeds in "),
        Step("benchmarks on CUDA", benchmark, 0.20),
    ]


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True


def run_step(step: Step, seconds: float, environment: dict) -> None:
    """Run `step` for at most `seconds`, keeping its output."""
    start = time.monotonic()
    process = subprocess.Popen(step.command, cwd=ROOT, env=environment, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=seconds)
        step.status = "passed" if process.returncode == 0 else f"failed (exit {process.returncode})"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        output, _ = process.communicate()
        step.status = f"stopped after its {seconds:.0f} s"
    step.seconds = time.monotonic() - start
    step.output = (output or "").splitlines()


def machine() -> list[str]:
    lines = [f"- host: {platform.node()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}"]
    if shutil.which("nvidia-smi"):
        query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True)
        lines += [f"- GPU: {line.strip()}" for line in query.stdout.splitlines() if line.strip()]
    try:
        import llvmlite
        import numpy
        lines.append(f"- llvmlite {llvmlite.__version__}, NumPy {numpy.__version__}")
    except ImportError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True)
    lines.append(f"- commit: {commit.stdout.strip() or 'unknown (no git checkout)'}")
    return lines


def report(all_steps: list[Step], budget: float, elapsed: float) -> str:
    lines = ["# kernelkit on a GPU", "", *machine(),
             f"- time: {elapsed:.0f} s of a {budget:.0f} s budget", "", "| step | status | time |",
             "|---|---|---|"]
    lines += [f"| {step.name} | {step.status} | {step.seconds:.0f} s |" for step in all_steps]
    for step in all_steps:
        lines += ["", f"## {step.name}: {step.status}", "", "    " + " ".join(step.command), "",
                  "```", *step.summary(), "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/gpu_check.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--budget", type=float, default=480, help="seconds in all (default 480)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                        help="parallel test and fuzz workers (default: cores - 2)")
    parser.add_argument("--fuzz-seeds", default="910000:913000",
                        help="kernelkit.fuzz seeds (default 910000:913000)")
    parser.add_argument("--ad-seeds", default="930000:931000",
                        help="enzyme_ext.fuzz seeds (default 930000:931000)")
    parser.add_argument("--quick", action="store_true", help="the benchmarks' small sizes")
    parser.add_argument("--report", default="gpu-report.md", help="where to write the report")
    parser.add_argument("--only", action="append", choices=("tests", "fuzz", "ad-fuzz", "bench"),
                        help="run only these steps (repeatable)")
    args = parser.parse_args(argv)
    all_steps = steps(args.jobs, args.fuzz_seeds, args.ad_seeds, args.quick)
    chosen = dict(zip(("tests", "fuzz", "ad-fuzz", "bench"), all_steps))
    if args.only:
        all_steps = [chosen[name] for name in args.only]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    start = time.monotonic()
    shares = sum(step.share for step in all_steps)
    for step in all_steps:
        left = args.budget - (time.monotonic() - start)
        if left < 5:
            step.status = "not run (no time left)"
            continue
        # its share of what is left: a step that ends early leaves its time to the next
        run_step(step, left * step.share / shares, environment)
        shares -= step.share
        print(f"{step.name}: {step.status} in {step.seconds:.0f} s", flush=True)
    text = report(all_steps, args.budget, time.monotonic() - start)
    Path(args.report).write_text(text)
    print(f"report: {args.report}")
    return 0 if all(step.status == "passed" for step in all_steps) else 1


if __name__ == "__main__":
    sys.exit(main())
