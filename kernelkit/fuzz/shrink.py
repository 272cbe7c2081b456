"""Reducing a failing case to a small kernel that fails the same way.

A failure's signature is its backend, its kind and, for errors, the exception's type
and the first words of its message. Candidates, tried greedily until none is accepted:
deleting runs of statements (halves, quarters, ... single ones), replacing an `if` or a
loop by its body, replacing an expression by a part of the same type (and, for a Python
int, a range inside its own) or by a literal 0 or 1 of its type, dropping parameters
the kernel no longer reads, and a smaller launch. Guards the generator wrote (`_kk_whole`
nodes: divisors made non-zero, guarded float -> int casts, reduced indices and bounds)
are replaced only whole, so a candidate never loses what made it valid; the reference's
checks (races, undefined reads, Python errors, a time limit) reject what still does.

Crashes and hangs are judged in a subprocess per candidate (`--run-case`)."""
from __future__ import annotations

import ast
import copy
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile

from . import scalars as S
from .generator import ArraySpec, Case, typed
from .reference import run_reference
from .runner import Outcome, Runner

REFERENCE_SECONDS = 20


def signature(outcome: Outcome) -> tuple:
    if outcome.kind == "hang":
        return ("hang",)
    if outcome.kind in ("internal-error", "compile-error"):
        first = outcome.detail.split(":", 1)
        words = " ".join(first[1].split()[:4]) if len(first) > 1 else ""
        return (outcome.backend, outcome.kind, first[0], words)
    return (outcome.backend, outcome.kind)


class _Alarm(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Alarm()


class Judge:
    """Runs candidates and says whether they fail as the original did."""

    def __init__(self, backends: list[str], timeout: float):
        self.backends = backends
        self.timeout = timeout
        self.runner = None
        self.tried = 0

    def outcomes(self, case: Case, in_process: bool) -> list[Outcome]:
        """`in_process` is False for crashes: each candidate then runs in a process of its
        own. Hangs are judged in process with an alarm, which stops a compiler that loops
        in Python (a kernel that spins in native code needs `in_process=False`)."""
        self.tried += 1
        if not in_process:
            return run_in_subprocess(case, self.backends, self.timeout)
        if self.runner is None:
            self.runner = Runner(self.backends)
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        try:
            expected = case.arguments()
            signal.alarm(REFERENCE_SECONDS)
            try:
                run_reference(case, expected)
            except _Alarm:
                return [Outcome(case.seed, "reference", "invalid", "too slow")]
            except Exception as error:
                return [Outcome(case.seed, "reference", "invalid", repr(error))]
            signal.alarm(int(self.timeout))
            try:
                return self.runner.run_backends(case, expected)
            except _Alarm:
                return [Outcome(case.seed, ",".join(self.backends), "hang",
                                f"no result after {self.timeout} s")]
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)

    def failure(self, case: Case, in_process: bool = True) -> Outcome | None:
        for outcome in self.outcomes(case, in_process):
            if outcome.failed:
                return outcome
        return None


def run_in_subprocess(case: Case, backends: list[str], timeout: float) -> list[Outcome]:
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as file:
        pickle.dump(case, file)
    command = [sys.executable, "-m", "kernelkit.fuzz", "--run-case", file.name, "--backend",
               ",".join(backends)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [Outcome(case.seed, ",".join(backends), "hang", f"no result after {timeout} s")]
    finally:
        os.unlink(file.name)
    outcomes = [Outcome(**json.loads(line[7:])) for line in result.stdout.splitlines()
                if line.startswith("RESULT ")]
    if result.returncode not in (0, 1) or not outcomes:
        tail = " | ".join(result.stderr.strip().splitlines()[-4:])
        return [Outcome(case.seed, ",".join(backends), "crash",
                        f"exit status {result.returncode}: {tail}")]
    return outcomes


def run_pickled_case(path: str, backends: list[str]) -> int:
    from .runner import use_private_cache
    use_private_cache()
    with open(path, "rb") as file:
        case = pickle.load(file)
    outcomes = Runner(backends).run(case)
    for outcome in outcomes:
        print("RESULT " + json.dumps(outcome.__dict__), flush=True)
    return 1 if any(o.failed for o in outcomes) else 0


def shrink(case: Case, backends: list[str], timeout: float, log=print):
    """The smallest case found that fails as `case` does, with its outcome; None if
    `case` does not fail."""
    judge = Judge(backends, timeout)
    first = judge.failure(case, in_process=False)
    if first is None:
        return None
    in_process = first.kind != "crash"
    if first.backend in ("cpu", "cuda", "cuda-compile-only"):
        judge.backends = ["cuda" if first.backend.startswith("cuda") else first.backend]
    target = signature(first)
    log(f"shrinking seed {case.seed}: {first.backend} {first.kind}")
    best, best_outcome = case, first

    def accept(candidate: Case) -> bool:
        nonlocal best, best_outcome
        if size(candidate) >= size(best):
            return False
        outcome = judge.failure(candidate, in_process)
        if outcome is not None and signature(outcome) == target:
            best, best_outcome = candidate, outcome
            return True
        return False

    progress = True
    while progress:
        progress = False
        for make in (delete_statements, unwrap_statements, simplify_expressions,
                     drop_parameters, smaller_launch):
            for candidate in make(best):
                if accept(candidate):
                    progress = True
                    log(f"  {len(best.kernel_source())} characters "
                        f"({judge.tried} candidates tried)")
                    break
            if progress:
                break
    return best, best_outcome


def size(case: Case) -> tuple:
    """What the shrinker makes smaller: the kernel's text, then its launch."""
    work_items = 1
    for n in case.ndrange:
        work_items *= n
    return (len(case.kernel_source()), work_items, len(case.params))


# -- candidates ----------------------------------------------------------------------------


def _statement_lists(module: ast.Module):
    """Every list of statements in the module, in a fixed order, as (owner, field)."""
    for node in ast.walk(module):
        for field in ("body", "orelse"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0],
                                                                          ast.stmt):
                yield node, field


def _with_module(case: Case, module: ast.Module) -> Case:
    clone = copy.copy(case)
    clone.module = module
    return clone


def delete_statements(case: Case):
    lists = list(_statement_lists(case.module))
    for index in range(len(lists)):
        owner, field = lists[index]
        length = len(getattr(owner, field))
        size = length
        while size >= 1:
            for start in range(0, length, size):
                module = copy.deepcopy(case.module)
                owner_copy, _ = list(_statement_lists(module))[index]
                statements = getattr(owner_copy, field)
                chunk = statements[start:start + size]
                if not chunk or any(getattr(s, "_kk_pinned", False) for s in chunk):
                    continue
                if isinstance(owner_copy, ast.Module) and any(
                        isinstance(s, ast.FunctionDef) and s.decorator_list for s in chunk):
                    continue   # keep the kernel
                rest = statements[:start] + statements[start + size:]
                if not rest and field == "orelse":
                    setattr(owner_copy, field, [])
                else:
                    setattr(owner_copy, field, rest or [ast.Pass()])
                yield _with_module(case, module)
            size //= 2


def unwrap_statements(case: Case):
    lists = list(_statement_lists(case.module))
    for index, (owner, field) in enumerate(lists):
        for position, statement in enumerate(getattr(owner, field)):
            if not isinstance(statement, (ast.If, ast.For, ast.While)):
                continue
            replacements = [statement.body]
            if isinstance(statement, ast.If) and statement.orelse:
                replacements.append(statement.orelse)
            for replacement in replacements:
                module = copy.deepcopy(case.module)
                owner_copy, _ = list(_statement_lists(module))[index]
                statements = getattr(owner_copy, field)
                chosen = statements[position].body if replacement is statement.body \
                    else statements[position].orelse
                statements[position:position + 1] = [s for s in chosen
                                                      if not getattr(s, "_kk_pinned", False)
                                                      or not isinstance(statement, ast.While)]
                if not statements:
                    statements.append(ast.Pass())
                yield _with_module(case, module)


def _typed_nodes(module: ast.Module):
    """Expressions the shrinker may replace: typed ones outside guards, in walk order."""
    found = []

    def visit(node, inside_guard):
        if isinstance(node, ast.expr) and hasattr(node, "_kk_type") and not inside_guard:
            found.append(node)
        guard = inside_guard or getattr(node, "_kk_whole", False)
        for child in ast.iter_child_nodes(node):
            visit(child, guard)

    visit(module, False)
    return found


def _literal_for(node) -> list[ast.expr]:
    t = node._kk_type
    if t == S.WEAK_INT:
        low, high = node._kk_interval
        values = [v for v in (0, 1) if low <= v <= high] or [low]
        return [typed(ast.Constant(v), t, (v, v), uniform=True) for v in values]
    if t == S.WEAK_FLOAT:
        return [typed(ast.Constant(v), t, uniform=True) for v in (0.0, 1.0)]
    if t == S.PY_BOOL:
        return [typed(ast.Constant(v), t, uniform=True) for v in (True, False)]
    return [typed(ast.Call(ast.Attribute(ast.Name("np", ast.Load()), t if t != "bool" else "bool_",
                                         ast.Load()), [ast.Constant(v)], []), t, uniform=True)
            for v in (0, 1)]


def _same_kind_parts(node) -> list[ast.expr]:
    parts = []
    for child in ast.walk(node):
        if child is node or not hasattr(child, "_kk_type"):
            continue
        if child._kk_type != node._kk_type:
            continue
        if node._kk_type == S.WEAK_INT:
            (low, high), (child_low, child_high) = node._kk_interval, child._kk_interval
            if child_low < low or child_high > high:
                continue
        parts.append(child)
    return parts[:4]


def simplify_expressions(case: Case):
    nodes = _typed_nodes(case.module)
    for index, node in enumerate(nodes):
        if isinstance(node, ast.Constant):
            continue
        replacements = _same_kind_parts(node) + _literal_for(node)
        for replacement in replacements:
            module = copy.deepcopy(case.module)
            target = _typed_nodes(module)[index]
            new = copy.deepcopy(replacement)
            _replace(module, target, new)
            yield _with_module(case, module)


def _replace(module: ast.Module, target: ast.expr, new: ast.expr) -> None:
    for parent in ast.walk(module):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target:
                        value[i] = new
                        return
    raise AssertionError("the node to replace is not in the module")


def _kernel_definition(module: ast.Module) -> ast.FunctionDef:
    return next(s for s in module.body if isinstance(s, ast.FunctionDef) and s.decorator_list)


def drop_parameters(case: Case):
    kernel = _kernel_definition(case.module)
    used = {n.id for n in ast.walk(ast.Module(kernel.body, [])) if isinstance(n, ast.Name)}
    for position, param in enumerate(case.params):
        if param.name in used:
            continue
        module = copy.deepcopy(case.module)
        del _kernel_definition(module).args.args[position]
        clone = _with_module(case, module)
        clone.params = case.params[:position] + case.params[position + 1:]
        yield clone


def smaller_launch(case: Case):
    """Fewer work-items: one group's worth, then fewer per group (with the arrays the
    kernel writes resized to the new ndrange)."""
    options = []
    if case.ndrange != case.workgroupsize:
        options.append((tuple(min(n, w) for n, w in zip(case.ndrange, case.workgroupsize)),
                        case.workgroupsize))
    if any(n > 1 for n in case.ndrange):
        options.append((tuple(1 for _ in case.ndrange), case.workgroupsize))
    for ndrange, workgroupsize in options:
        clone = case.copy()
        clone.ndrange, clone.workgroupsize = ndrange, workgroupsize
        clone.params = []
        for param in case.params:
            if isinstance(param, ArraySpec) and param.role == "out":
                param = ArraySpec(param.name, param.dtype, ndrange, "", "out", ndrange)
            clone.params.append(param)
        yield clone
