"""Running one case on the backends and judging the outcome.

`Runner` makes each backend once, through kernelkit's backend registry, and reuses it
for every case: a backend that can run here as it is (the CPU; CUDA where there is a
GPU), one that cannot as its compile-only stand-in where it has one
(`Backend.compile_only_stand_in()`: CUDA without a GPU compiles to cubins for sm_80 and
sm_90, and the launch then stops with `CompileOnlyError`). For each
case the reference runs first; a kernel the reference refuses (a race, an undefined
read, a Python error) is the fuzzer's own fault and is reported as `invalid`. Then the
kernel runs on each backend and gives one `Outcome`:

- `ok`: results equal to the reference's (or compiled, on a compile-only backend);
- `mismatch`: an output differs (integers and bools exactly; floats bit for bit where
  the kernel uses no inexact math function, within a relative tolerance where it does;
  nan equals nan, and -0.0 equals 0.0);
- `internal-error`: an exception that is not a `CompileError`, or a CompileError that
  says it is a bug in kernelkit;
- `compile-error`: a clean CompileError for a kernel that is valid Python of the
  language (the generator writes only such kernels, so this is a failure too).

Crashes and hangs are seen from outside the process (`__main__`)."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass

import numpy as np

from .generator import ArraySpec, Case, apply_view
from .reference import forget_module, load_module, run_reference

FAILURES = ("mismatch", "internal-error", "compile-error", "crash", "hang")

# Relative tolerances for floats that came through an inexact math function.
TOLERANCE = {"float16": 4e-3, "float32": 2e-5, "float64": 1e-12}


@dataclass
class Outcome:
    seed: int
    backend: str
    kind: str          # ok, invalid, or one of FAILURES
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES


def use_private_cache() -> None:
    """Fuzz kernels are never launched again: keep them out of the user's disk cache."""
    if "KERNELKIT_FUZZ_KEEP_CACHE" not in os.environ:
        directory = tempfile.mkdtemp(prefix="kernelkit-fuzz-cache-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        os.environ["KERNELKIT_CACHE_DIR"] = directory


def make_backends(names: list[str] | None = None) -> dict:
    """label -> backend, for those of the installed backends `names` (None: all of them)
    that can at least compile here: `name` for one that runs here, `name-compile-only`
    for the stand-in of one that cannot."""
    from kernelkit.backend import (backend_class, backend_names, backend_unavailable_reason,
                                   make_backend)
    backends = {}
    for name in backend_names() if names is None else names:
        if name not in backend_names():
            raise ValueError(f"unknown backend {name!r} (installed: "
                             f"{', '.join(backend_names())})")
        if backend_unavailable_reason(name) is None:
            backends[name] = make_backend(name)
            continue
        stand_in = backend_class(name).compile_only_stand_in()
        if stand_in is not None:
            backends[f"{name}-compile-only"] = stand_in
    return backends


class Runner:
    """`Runner(["cpu", "cuda"])` makes those backends (`Runner()`: every installed one);
    `Runner(backends={"cpu": backend})` uses those given."""

    def __init__(self, backend_names=None, backends: dict | None = None):
        self.backends = backends if backends is not None else make_backends(
            None if backend_names is None else list(backend_names))

    def run(self, case: Case) -> list[Outcome]:
        expected = case.arguments()
        try:
            run_reference(case, expected)
        except Exception as error:  # the reference refused the kernel: not kernelkit's fault
            return [Outcome(case.seed, "reference", "invalid", _describe(error))]
        return self.run_backends(case, expected)

    def run_backends(self, case: Case, expected: list) -> list[Outcome]:
        """The outcome on each backend, given the reference's results."""
        namespace = load_module(case.kernel_source(), f"kernelkit_fuzz_{case.seed}")
        try:
            kernel = namespace[case.kernel_name]
            return [self.run_on(name, backend, kernel, case, expected)
                    for name, backend in self.backends.items()]
        finally:
            forget_module(namespace)

    def run_on(self, name, backend, kernel, case, expected) -> Outcome:
        import kernelkit as kk
        from kernelkit.errors import CompileError, CompileOnlyError
        arguments = case.arguments()
        values, bases = [], []
        for param, argument in zip(case.params, arguments):
            if isinstance(param, ArraySpec):
                base = kk.to_backend(backend, argument[0])
                bases.append((param, base))
                values.append(apply_view(base, param.view))
            else:
                values.append(argument)
        try:
            kernel(backend, case.workgroupsize)(*values, ndrange=case.ndrange)
            kk.synchronize(backend)
        except CompileError as error:
            if "bug in kernelkit" in str(error).lower():
                return Outcome(case.seed, name, "internal-error", _describe(error))
            return Outcome(case.seed, name, "compile-error", _describe(error))
        except CompileOnlyError:
            return Outcome(case.seed, name, "ok", "compiled")
        except Exception as error:
            return Outcome(case.seed, name, "internal-error", _describe(error, traceback_=True))
        precision = case.inexact_precision()
        for (param, base), want in zip(bases, [a for a in expected if isinstance(a, tuple)]):
            if param.role == "in":
                continue
            problem = compare(want[0], kk.to_numpy(base), precision)
            if problem:
                return Outcome(case.seed, name, "mismatch", f"{param.name}: {problem}")
        return Outcome(case.seed, name, "ok")


def compare(expected: np.ndarray, got: np.ndarray, inexact: str | None) -> str | None:
    """None where `got` matches `expected` (to the precision of the float type `inexact`
    math computed in, if any, or of the array's own type), else a description of the
    first differences."""
    if expected.dtype.kind == "f":
        both_nan = np.isnan(expected) & np.isnan(got)
        if inexact is not None:
            tolerance = max(TOLERANCE[expected.dtype.name], TOLERANCE[inexact])
            with np.errstate(all="ignore"):
                close = np.isclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=tolerance, atol=tolerance)
            same = close | both_nan
        else:
            same = (got == expected) | both_nan
    else:
        same = got == expected
    if np.all(same):
        return None
    where = np.argwhere(~same)
    shown = ", ".join(f"[{', '.join(map(str, index))}] expected {expected[tuple(index)]!r} got "
                      f"{got[tuple(index)]!r}" for index in where[:4])
    return f"{len(where)} of {expected.size} elements differ: {shown}"


def _describe(error: BaseException, traceback_: bool = False) -> str:
    text = f"{type(error).__name__}: {error}"
    if traceback_:
        frames = traceback.extract_tb(error.__traceback__)[-3:]
        text += "\n" + "".join(traceback.format_list(frames))
    return text
