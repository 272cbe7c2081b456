"""CPUTarget: kernels as native functions over a range of work-groups (host LLVM JIT).

The group function itself is built by `group.py`; this module owns the target's hooks:
its passes, the host triple and machine, how LLVM's pipeline is tuned, object code, and
loading object code into the process."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import sys
import threading
import time
from dataclasses import dataclass

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.target import Target
from kernelkit.errors import BackendError

from .fp_environment import GROUPS_SUFFIX, in_default_environment
from .group import GroupFunctionBuilder
from .object_symbols import undefined_symbols
from .races import ACCESS_FUNCTION as RACE_ACCESS
from .races import detects_races
from .races import provide_access_function as provide_race_access
from .runtime_library import PROVIDED as RUNTIME_LIBRARY
from .runtime_library import runtime_library
from .vector_math import load_libmvec, vector_library

@functools.lru_cache(maxsize=1)
def _initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.lru_cache(maxsize=None)
def _target_machine(triple: str, cpu: str, features: str, opt_level: int):
    _initialize_llvm()
    if triple != llvm.get_process_triple():
        llvm.initialize_all_targets()       # (cross-compiling: `CPUTarget.cross`)
        llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=min(opt_level, 3),
                                        reloc="pic", codemodel="jitdefault")


@dataclass(frozen=True, slots=True)
class CPUTarget(Target):
    cpu: str
    features: str
    name: str = "cpu"
    vector_library: str = ""    # vector math (vector_math.py): "" for the C library's own
    # Kernels record their accesses for the race detector (`races.py`), and only the
    # kernel's own barriers cut them into regions.
    races: bool = False
    # The machine the code is for: "" for this process's; another only to compile for it
    # (`cross`), never to load.
    target_triple: str = ""

    @classmethod
    def host(cls) -> CPUTarget:
        _initialize_llvm()
        features = llvm.get_host_cpu_features().flatten()
        return cls(llvm.get_host_cpu_name(), features,
                   vector_library=vector_library(features))

    @classmethod
    def cross(cls, triple: str, cpu: str = "generic", features: str = "") -> CPUTarget:
        """A target for another machine (`triple`), whose object code is only compiled:
        what kernelkit's generated code needs of a CPU can be checked without one."""
        return cls(cpu, features, target_triple=triple)

    def machine(self, opt_level: int = 3) -> llvm.TargetMachine:
        return _target_machine(self.triple(), self.cpu, self.features, opt_level)

    def passes(self) -> tuple[str, ...]:
        """First, subgroup operations become local memory and barriers: a CPU has no
        lanes that exchange values, and the passes after it cut the kernel at barriers."""
        if self.races:
            # Without the passes that add barriers the kernel does not have: the race
            # detector takes every barrier for one that orders the work-items.
            return ("subgroups-in-local-memory", "guard-versioning", "split-barriers")
        return ("subgroups-in-local-memory", "guard-versioning", "masked-loops",
                "loop-barriers", "split-barriers")

    def triple(self) -> str:
        return self.target_triple or llvm.get_process_triple()

    def emit_kernel(self, module: ir.Module, ir_module, job) -> dict:
        symbol = entry_symbol(job)
        builder = GroupFunctionBuilder(module, ir_module, job, symbol + GROUPS_SUFFIX)
        in_default_environment(module, builder.build(), symbol, self.triple())
        facts = {"locations": builder.locations}
        if builder.races is not None:
            facts["race_sites"] = builder.races.sites
        return facts

    def optimize(self, llvm_module, job) -> None:
        level = build_level(self, job)
        builder = llvm.create_pass_builder(self.machine(level), self.pipeline_options(level))
        builder.getModulePassManager().run(llvm_module, builder)

    def assembly(self, llvm_module, job) -> str:
        return self.machine(build_level(self, job)).emit_assembly(llvm_module)

    def pipeline_options(self, opt_level: int) -> llvm.PipelineTuningOptions:
        """A group's work-items are a loop: vectorize it, and straight-line code too."""
        options = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        options.loop_vectorization = True
        options.slp_vectorization = True
        options.loop_unrolling = True
        return options

    def emit(self, llvm_module, job) -> bytes:
        return self.machine(build_level(self, job)).emit_object(llvm_module)

    def load(self, artifact: bytes, job) -> int:
        return _loader.load(artifact, entry_symbol(job), job.source.qualname)


def build_level(target, job) -> int:
    """The optimization level `job` builds at on `target` (a CPUTarget, or a target of
    its own that borrows the CPU's hooks): the job's own, but 0 where kernels record
    their accesses for the race detector (`detects_races`). A recorded access calls the
    detector (a few microseconds), which optimized code cannot shorten, while LLVM's
    pipeline spent most of a build on the instrumented function (each access a call and
    a bounds check that leaves the function): a fuzzed kernel with 400 of them built in
    7.1 s at level 3, 0.8 s at level 0, and ran a launch in the same time at both."""
    return 0 if detects_races(target) else job.config.opt_level


def entry_symbol(job) -> str:
    source = job.source
    digest = hashlib.sha256(repr((source.qualname, source.module, source.source_hash,
                                  source.argtypes, source.constants,
                                  job.config)).encode()).hexdigest()[:16]
    return f"kk_{source.function.__name__}_{digest}"


class _Loader:
    """Loads object files into JIT engines (one per object file: an engine that has been
    finalized does not reliably take more objects).

    The engine binds each function the object code calls to the address the process has
    for its name, or to 0 without a word where it has none, so every name is checked
    first: the libcalls LLVM emits on this host are provided (`runtime_library.py`), and
    any other missing name is a BackendError instead of a jump to address 0."""

    def __init__(self):
        self.engines: list = []
        self.object_files: list = []
        self.symbols: dict[str, int] = {}
        self.lock = threading.Lock()

    def load(self, artifact: bytes, symbol: str, kernel: str) -> int:
        """The address of `symbol` in `artifact`, the object code of `kernel` (a name for
        errors)."""
        with self.lock:
            if symbol in self.symbols:
                return self.symbols[symbol]
            _initialize_llvm()
            needed = undefined_symbols(artifact)
            if needed & RUNTIME_LIBRARY:
                runtime_library()
            if any(name.startswith("_ZGV") for name in needed):
                load_libmvec()      # vector math, for object code from the disk cache
            if RACE_ACCESS in needed:
                provide_race_access()
            # Creating an engine also makes the process's own symbols searchable. It is
            # kept even where the object code is refused: each engine owns the one cached
            # target machine, and freeing an engine would free that.
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                CPUTarget.host().machine())
            self.engines.append(engine)
            _check_resolvable(needed, kernel)
            object_file = llvm.ObjectFileRef.from_data(artifact)
            engine.add_object_file(object_file)
            self.object_files.append(object_file)
            engine.finalize_object()
            address = engine.get_function_address(symbol)
            assert address, f"symbol {symbol} not found after loading its object file"
            self.symbols[symbol] = address
            return address


def _check_resolvable(needed, kernel: str) -> None:
    missing = sorted(name for name in needed if not llvm.address_of_symbol(name))
    if missing:
        raise BackendError(
            f"the native code of kernel '{kernel}' calls {', '.join(missing)}, which nothing "
            f"in this process provides (a runtime-library function LLVM emits for some "
            f"operation on this CPU, {llvm.get_host_cpu_name()}). This is a kernelkit bug: "
            f"please report it with the kernel's LLVM IR (kk.code_llvm). Until it is fixed, "
            f"avoid the operation in the kernel that needs it (for instance a conversion "
            f"between float16 and another type).")


_loader = _Loader()

_RELAX = """
{pause_declaration}
{yield_declaration}
define private i1 @relax(i64 %spins) alwaysinline nounwind {{
entry:
  {pause_call}
  %low = and i64 %spins, 255
  %turn = icmp eq i64 %low, 255
  br i1 %turn, label %give, label %done
give:
  {yield_call}
  br label %done
done:
  ret i1 %turn
}}
"""
"""`relax(spins)`, called on each turn of a spin-wait loop: the CPU's spin-wait hint
(where it has one), and every 256 turns (about 10 us) the core to another thread that
is ready to run (`sched_yield`, where the system has it): on a core shared with the
thread it waits for (a busy machine), a spinning thread would otherwise keep that one
waiting until the scheduler takes the core from it, milliseconds later. Returns
whether it gave the core away this turn."""


_CLOCK_POSIX = """
declare i32 @clock_gettime(i32, ptr) nounwind

define private i64 @now_ns() nounwind {{
entry:
  %spec = alloca [2 x i64], align 8
  %ignored = call i32 @clock_gettime(i32 {clock}, ptr %spec)
  %seconds = load i64, ptr %spec, align 8
  %part.word = getelementptr i64, ptr %spec, i64 1
  %part = load i64, ptr %part.word, align 8
  %whole = mul i64 %seconds, 1000000000
  %time = add i64 %whole, %part
  ret i64 %time
}}
"""
_CLOCK_WINDOWS = """
declare i32 @QueryPerformanceCounter(ptr) nounwind

define private i64 @now_ns() nounwind {{
entry:
  %count.slot = alloca i64, align 8
  %ignored = call i32 @QueryPerformanceCounter(ptr %count.slot)
  %count = load i64, ptr %count.slot, align 8
  %seconds = udiv i64 %count, {frequency}
  %rest = urem i64 %count, {frequency}
  %whole = mul i64 %seconds, 1000000000
  %rest.scaled = mul i64 %rest, 1000000000
  %part = udiv i64 %rest.scaled, {frequency}
  %time = add i64 %whole, %part
  ret i64 %time
}}
"""
"""`now_ns()`: a monotonic clock in nanoseconds, for every wait and budget of the
runtime's native code (a CPU's cycle counter ticks at another rate on each machine, and
on some AArch64 systems user code may not read it): `clock_gettime(CLOCK_MONOTONIC)`
(through the vDSO on Linux: some tens of nanoseconds), or Windows' performance
counter."""


def _clock_definition() -> str:
    if os.name == "nt":
        frequency = ctypes.c_int64()
        ctypes.windll.kernel32.QueryPerformanceFrequency(ctypes.byref(frequency))
        return _CLOCK_WINDOWS.format(frequency=frequency.value)
    return _CLOCK_POSIX.format(clock=time.CLOCK_MONOTONIC)


_CORE = """
{getcpu_declaration}
define private i64 @core() nounwind {{
entry:
  {getcpu_call}
}}
"""
"""`core()`: the core the calling thread runs on (`sched_getcpu`, on Linux), or -1."""


def with_relax(template: str, triple: str | None = None, **fields) -> str:
    """LLVM IR text from `template`, a `str.format` template (braces doubled) that may
    use {relax_definition}, which defines `i1 @relax(i64 %spins)` (`_RELAX`),
    {core_definition}, which defines `i64 @core()` (`_CORE`), and {clock_definition},
    which defines `i64 @now_ns()` (`_CLOCK_POSIX`), and any of `fields`; for `triple`'s
    machine (this process's by default)."""
    x86 = (triple or llvm.get_process_triple()).startswith(("x86_64", "i686", "i386"))
    posix = os.name == "posix"
    linux = sys.platform.startswith("linux")
    relax = _RELAX.format(
        pause_declaration="declare void @llvm.x86.sse2.pause()" if x86 else "",
        pause_call="call void @llvm.x86.sse2.pause()" if x86 else "",
        yield_declaration="declare i32 @sched_yield() nounwind" if posix else "",
        yield_call="%ignored = call i32 @sched_yield()" if posix else "")
    core = _CORE.format(
        getcpu_declaration="declare i32 @sched_getcpu() nounwind" if linux else "",
        getcpu_call=("%cpu = call i32 @sched_getcpu()\n  %wide = sext i32 %cpu to i64\n"
                     "  ret i64 %wide") if linux else "ret i64 -1")
    return template.format(relax_definition=relax, core_definition=core,
                           clock_definition=_clock_definition(), **fields)


__all__ = ["CPUTarget"]
