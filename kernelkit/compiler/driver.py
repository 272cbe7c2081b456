"""The generic compiler driver: job -> typed IR -> passes -> LLVM -> artifact.

It never asks which target it has; the target's hooks do everything target-specific.
Compiled kernels are cached in memory by job, and on disk by a digest of their typed IR
and job (`cache.py`)."""
from __future__ import annotations

import linecache
import threading
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
from ..passes import Pipeline
from .cache import CacheEntry, cache_key, disk_cache
from .dump import Dump
from .job import CompilerJob
from .plugins import plugins_for

GENERIC_PASSES = ("inline", "simplify", "dce", "cse", "simplify", "dce", "check-barriers")


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
    module = translate_kernel(source.function, source.argtypes, job.config.workgroupsize)
    resolve_deferred(module, job.config.workgroupsize)
    add_transform_markers(module, job.config.transforms)
    dump = Dump.for_job(job)
    if dump is not None:
        dump.module("frontend", module)
    compile_module(module, job.config.target, after_each=dump.module if dump else None,
                   workgroupsize=job.config.workgroupsize)
    return module


def add_transform_markers(module: Module, transforms) -> None:
    """The job's transforms (`CompilerConfig.transforms`) as `intrinsic` markers at the
    start of the kernel, in order, with their attributes."""
    entry = module.kernel.entry
    for position, (name, attributes) in enumerate(transforms):
        attrs = dict(attributes, name=name)
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
        # transform may have built its code for this group shape: it counts as observing.
        module.notes[WORK_GROUPS_OBSERVED] = bool(module.plugins) or \
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
    module = translate_kernel(source.function, source.argtypes, job.config.workgroupsize)
    resolve_deferred(module, job.config.workgroupsize)
    add_transform_markers(module, job.config.transforms)
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
    module = typed_module(job)
    ir_text = print_module(module)
    key = cache_key(ir_text, job, module.plugins)
    entry = disk_cache.load(key)
    llvm_module = None
    if entry is None:
        entry, llvm_module = generate(job, module, ir_text)
        disk_cache.store(key, entry)
    return CompiledKernel(job, entry.ir, entry.llvm_ir, entry.artifact,
                          target.load(entry.artifact, job), entry.uses_print,
                          info_from_json(entry.info), _llvm_module=llvm_module,
                          notes=module.notes)


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
    for plugin in module.plugins:
        plugin.in_llvm_pipeline(parsed, target)
    target.link_libraries(parsed, job)
    target.optimize(parsed, job)
    if dump is not None:
        dump.text("llvm-optimized.ll", str(parsed))
    artifact = target.emit(parsed, job)
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
