"""The generic compiler driver: job -> typed IR -> passes -> LLVM -> artifact.

It never asks which target it has; the target's hooks do everything target-specific.
Compiled kernels are cached in memory by job, and on disk by a digest of their typed IR
and job (`cache.py`). Each build is logged to `kernelkit.compile` (`kernelkit/logs.py`)
with its time and, at DEBUG, the time of each stage."""
from __future__ import annotations

import linecache
import logging
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..analysis.work_groups import NOTE as WORK_GROUPS_OBSERVED
from ..analysis.work_groups import observes_work_groups
from ..errors import CompileError
from ..frontend.specialize import resolve_deferred, translate_kernel
from ..ir.definitions import CALL_REF, DEFERRED, INTRINSIC, PRINT
from ..ir.function import Module
from ..ir.ops import Location, Op
from ..ir.printer import print_module
from ..ir.types import IRType, parse_type
from ..ir.verifier import verify_module
from ..logs import get_logger
from ..passes import Pipeline
from .cache import CacheEntry, cache_key, disk_cache
from .dump import Dump
from .job import CompilerJob
from .plugins import plugins_for

GENERIC_PASSES = ("inline", "split-tuples", "simplify", "dce", "cse", "simplify", "dce",
                  "check-barriers")

SLOW_COMPILE_SECONDS = 5.0
"""A build that takes longer is logged as a WARNING, with the stage that took longest."""

log = get_logger("compile")


@dataclass
class CompiledKernel:
    job: CompilerJob
    ir: str                 # typed IR after all passes
    llvm_ir: str            # optimized LLVM IR
    artifact: bytes
    entry: Any              # what the target's `load` gave: a callable, a function handle
    uses_print: bool = False
    info: dict = field(default_factory=dict)
    _llvm_module: Any = None
    # What plugins noted about the module (`Module.notes`): made again by each build,
    # since the typed IR is always made (it is the disk cache's key), never stored.
    notes: dict = field(default_factory=dict)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The compiled kernel's parameter names, in order: the Python function's, or
        those a plugin gave the kernel it made (a derivative kernel has more)."""
        return tuple(name for name, _ in self.info["parameters"])

    @property
    def parameter_types(self) -> tuple[IRType, ...]:
        """The compiled kernel's parameter types (its job's argument types, unless a
        plugin made the kernel)."""
        return tuple(parse_type(type_name) for _, type_name in self.info["parameters"])

    def assembly(self) -> str:
        if self._llvm_module is None:  # loaded from the disk cache
            from llvmlite import binding as llvm
            self._llvm_module = llvm.parse_assembly(self.llvm_ir)
        return self.job.config.target.assembly(self._llvm_module, self.job)


_cache: dict[CompilerJob, CompiledKernel] = {}
_lock = threading.Lock()


def compile_job(job: CompilerJob) -> CompiledKernel:
    """The compiled kernel of `job`: from memory, else from the disk cache, else built."""
    compiled = _cache.get(job)
    if compiled is None:
        with _lock:
            compiled = _cache.get(job)
            if compiled is None:
                compiled = build(job)
                _cache[job] = compiled
    return compiled


def typed_module(job: CompilerJob) -> Module:
    """The kernel's IR, ready for LLVM lowering."""
    source = job.source
    debug = bool(job.config.debug)
    module = translate_kernel(source.function, source.argtypes, job.config.workgroupsize,
                              debug)
    resolve_deferred(module, job.config.workgroupsize, debug)
    add_transform_markers(module, job.config.transforms, job.config.workgroupsize)
    lap("frontend")
    dump = Dump.for_job(job)
    if dump is not None:
        dump.module("frontend", module)
    compile_module(module, job.config.target, after_each=dump.module if dump else None,
                   workgroupsize=job.config.workgroupsize)
    return module


def add_transform_markers(module: Module, transforms, workgroupsize) -> None:
    """The job's transforms (`CompilerConfig.transforms`) as `intrinsic` markers at the
    start of the kernel, in order, with their attributes and the job's work-group size
    (`workgroupsize`), which a transform may build its code for: the same transforms of a
    job for another group shape (a CPU's regrouped version) build for that one."""
    entry = module.kernel.entry
    for position, (name, attributes) in enumerate(transforms):
        attrs = dict(attributes, name=name, workgroupsize=tuple(workgroupsize))
        marker = Op(INTRINSIC, [], attrs=attrs)
        marker.block = entry
        entry.ops.insert(position, marker)


def compile_module(module: Module, target, after_each=None, workgroupsize=None) -> None:
    """The frontend's module -> the typed IR the target lowers. The plugins whose markers
    it calls run at three stages: after the frontend; after the generic passes, on the
    inlined IR that is the same for every target; and after the target's passes, before
    lowering. `after_each(stage, module)` is called after every pass and plugin hook.
    With the job's `workgroupsize`, the notes say whether the kernel observes its
    work-groups (`analysis/work_groups.py`). (`python -m kernelkit opt` runs this too.)"""
    target_neutral(module, after_each)
    if workgroupsize is not None:
        # Before the target's passes, which may test where a group lies. A plugin's
        # transform may have built its code for this group shape: it counts as observing,
        # unless the plugin says that its IR shows all it does with groups.
        module.notes[WORK_GROUPS_OBSERVED] = \
            any(not plugin.work_groups_in_ir for plugin in module.plugins) or \
            observes_work_groups(module, workgroupsize)
    Pipeline(target.passes())(module, after_each=after_each)
    for plugin in module.plugins:
        plugin.before_lowering(module)
        if after_each is not None:
            after_each(f"plugin-{plugin.name}-lowering", module)
    verify_module(module)
    for op in module.kernel.ops():
        if op.definition in (DEFERRED, CALL_REF):
            raise unresolved_reference_error(module.kernel.name, op)


def target_neutral(module: Module, after_each=None) -> None:
    """The frontend's module -> the target-neutral IR: the plugins' first two stages
    around the generic passes."""
    plugins = plugins_for(module)
    module.plugins = tuple(plugins)
    for plugin in plugins:
        plugin.after_frontend(module)
        if after_each is not None:
            after_each(f"plugin-{plugin.name}", module)
    Pipeline(GENERIC_PASSES)(module, after_each=after_each)
    for plugin in plugins:
        plugin.after_generic_passes(module)
        if after_each is not None:
            after_each(f"plugin-{plugin.name}-target-neutral", module)


def target_neutral_module(job: CompilerJob) -> Module:
    """The job's kernel as every target gets it from the generic passes and the plugins'
    target-neutral stage (what a plugin's host code reads its facts from: `Module.notes`)."""
    source = job.source
    debug = bool(job.config.debug)
    module = translate_kernel(source.function, source.argtypes, job.config.workgroupsize,
                              debug)
    resolve_deferred(module, job.config.workgroupsize, debug)
    add_transform_markers(module, job.config.transforms, job.config.workgroupsize)
    target_neutral(module)
    return module


def unresolved_reference_error(kernel: str, op) -> CompileError:
    loc = op.loc
    return CompileError(
        "this kk.deferred function reference is not called where it is made (one chosen at "
        "run time, or passed on) and cannot be compiled yet", kernel=kernel,
        file=loc.file if loc else None, line=loc.line if loc else None,
        source_line=linecache.getline(loc.file, loc.line) if loc else None,
        hint="call the reference directly: f = kk.deferred(fn, x); y = f(x)")


def build(job: CompilerJob) -> CompiledKernel:
    target = job.config.target
    clock = BuildClock(job)
    timing = _build_clock.set(clock)
    try:
        module = typed_module(job)
        clock.lap("IR passes")
        ir_text = print_module(module)
        key = cache_key(ir_text, job, module.plugins)
        entry = disk_cache.load(key)
        clock.lap("disk cache lookup")
        llvm_module = None
        if entry is None:
            entry, llvm_module = generate(job, module, ir_text)
            disk_cache.store(key, entry)
            clock.lap("disk cache store")
        compiled = CompiledKernel(job, entry.ir, entry.llvm_ir, entry.artifact,
                                  target.load(entry.artifact, job), entry.uses_print,
                                  info_from_json(entry.info), _llvm_module=llvm_module,
                                  notes=module.notes)
        clock.lap("load")
    finally:
        _build_clock.reset(timing)
    clock.finish(built=llvm_module is not None, key=key)
    return compiled


class BuildClock:
    """The time each stage of one build takes, for the log: at DEBUG a line per stage as
    it ends, at INFO a line with the whole build's time, and a WARNING for a build longer
    than SLOW_COMPILE_SECONDS. (A few clock readings per build, logged or not: nothing
    next to the build itself.)"""

    def __init__(self, job: CompilerJob):
        source, config = job.source, job.config
        transforms = ", ".join(transform_label(name, attributes)
                               for name, attributes in config.transforms)
        self.kernel = (f"kernel '{source.function.__name__}'"
                       f"{f' ({transforms})' if transforms else ''} for {config.target.name}")
        self.stages: dict[str, float] = {}
        self.start = self.last = time.perf_counter()
        log.debug("%s: building", self.kernel)

    def lap(self, stage: str) -> None:
        """`stage` ended now."""
        now = time.perf_counter()
        self.stages[stage] = now - self.last
        self.last = now
        log.debug("%s: %s took %.3f s", self.kernel, stage, self.stages[stage])

    def finish(self, built: bool, key: str) -> None:
        total = time.perf_counter() - self.start
        how = "compiled" if built else "loaded from the disk cache"
        log.info("%s: %s in %.3f s", self.kernel, how, total)
        if total > SLOW_COMPILE_SECONDS and log.isEnabledFor(logging.WARNING):
            log.warning(self.slow_build_message(total, built, key))

    def slow_build_message(self, total: float, built: bool, key: str) -> str:
        slowest = max(self.stages, key=self.stages.get)
        message = (f"{self.kernel} took {total:.1f} s to "
                   f"{'compile' if built else 'load from the disk cache'} "
                   f"({slowest}: {self.stages[slowest]:.1f} s)")
        if not built:
            return message
        if disk_cache.path(key).is_file():
            return message + "; it is in the disk cache now, so later runs load it instead"
        return (message + "; the disk cache could not keep it, so every run compiles it "
                "again: set KERNELKIT_CACHE_DIR to a writable directory")


def transform_label(name: str, attributes) -> str:
    """A transform's name and its one-word attributes, which tell the kernels it makes of
    one function apart ("enzyme.derivative mode=reverse")."""
    words = [f"{key}={value}" for key, value in attributes
             if isinstance(value, str) and value.isidentifier()]
    return " ".join([name, *words])


_build_clock: ContextVar[BuildClock | None] = ContextVar("kernelkit_build_clock",
                                                          default=None)
"""The clock of the build under way: `typed_module` and `generate`, which tests and tools
also call on their own, lap it without taking it as an argument."""


def lap(stage: str) -> None:
    """`stage` of the build under way ended now (nothing outside a build: `python -m
    kernelkit opt` runs stages too)."""
    clock = _build_clock.get()
    if clock is not None:
        clock.lap(stage)


def generate(job: CompilerJob, module: Module, ir_text: str):
    """Typed IR -> LLVM IR -> optimized -> artifact; the cache entry and the LLVM module."""
    from llvmlite import binding as llvm
    from llvmlite import ir as llvm_ir

    target = job.config.target
    kernel = module.kernel
    llvm_module = llvm_ir.Module(name=kernel.name)
    llvm_module.triple = target.triple()
    llvm_module.data_layout = target.datalayout()
    info = dict(target.emit_kernel(llvm_module, module, job) or {})
    info["parameters"] = [[name, param.type.name]
                          for name, param in zip(kernel.arg_names, kernel.params)]
    dump = Dump.for_job(job)
    if dump is not None:
        dump.text("llvm.ll", str(llvm_module))
    parsed = llvm.parse_assembly(str(llvm_module))
    parsed.verify()
    lap("LLVM lowering")
    for plugin in module.plugins:
        plugin.in_llvm_pipeline(parsed, target)
    target.link_libraries(parsed, job)
    target.optimize(parsed, job)
    lap("LLVM optimization")
    if dump is not None:
        dump.text("llvm-optimized.ll", str(parsed))
    artifact = target.emit(parsed, job)
    lap("code generation")
    uses_print = any(op.definition is PRINT for op in kernel.ops())
    entry = CacheEntry(ir_text, str(parsed), artifact, uses_print, info_to_json(info))
    return entry, parsed


def info_to_json(info: dict) -> dict:
    """The target's facts about a kernel in a form the disk cache can keep: source
    locations (of bounds checks) become [line, column, file]."""
    return {name: [None if loc is None else [loc.line, loc.column, loc.file] for loc in value]
            if name == "locations" else value for name, value in info.items()}


def info_from_json(info: dict) -> dict:
    return {name: [None if loc is None else Location(*loc) for loc in value]
            if name == "locations" else value for name, value in info.items()}
