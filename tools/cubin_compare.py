"""`python tools/cubin_compare.py`: each benchmark kernel's cubin as kernelkit builds it,
beside nvcc's for the same kernel written in CUDA C++ (`benchmarks/cuda/`), counted from
their SASS: instructions (all of them, and those of the hot loop where there is one),
global loads (LDG) and stores (STG), atomics, and registers.

Where kernelkit's GPU code is slower than nvcc's on the same source, this is where to
look first, and it needs no GPU: kernelkit compiles for the architecture without one
(`CUDABackend.compile_only`), `nvcc -O3 -cubin` too, and nvdisasm disassembles both.
For the reverse-mode cases (`<kernel>.reverse`), kernelkit's side is what
`autodiff(Reverse, ...)` launches for the reverse pass (every kernel of it, added up:
a gather kernel too where kernelkit makes one), beside an adjoint written by hand in
`benchmarks/cuda/adjoints.cu`; kernelkit's augmented forward kernel, which the reverse
pass reads the tape of, is shown on a line of its own.

The hot loop is the innermost loop (a backward branch) with the most global loads, then
the most instructions. `--case NAME` (repeatable) picks cases, `--arch` the architecture
(sm_90), `--sass` prints both disassemblies as well.

Development only: it needs nvcc (a CUDA toolkit) and nvdisasm (a CUDA toolkit, or the
`nvidia-cuda-nvdisasm` wheel: `pip install kernelkit[cuda-dev]`), found on PATH, under
CUDA_HOME or CUDA_PATH, or in NVIDIA's wheels, and says which is missing."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "benchmarks" / "cuda"
for _path in (ROOT, ROOT / "benchmarks"):   # kernelkit's checkout, and the benchmark kernels
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import kernels  # noqa: E402

import kernelkit as kk  # noqa: E402
from backends.cuda.runtime import CompileOnlyCUDA, compile_only_unavailable_reason  # noqa: E402

SIZE = 1 << 16          # elements of the 1-D cases (only the types matter to the code)
EDGE = 64               # edge of the 2-D cases
WHERE_TO_GET = {"nvcc": "a CUDA toolkit on PATH",
                "nvdisasm": "`pip install nvidia-cuda-nvdisasm`, or a CUDA toolkit on PATH"}


# -- the cases ------------------------------------------------------------------------------


def _zeros(*shape):
    return np.zeros(shape, np.float32)


def _sum(backend):
    x, partial = _zeros(SIZE), _zeros(kernels.REDUCTION_GROUPS)
    kernels.group_sums(backend, kernels.REDUCTION_GROUP)(
        partial, x, SIZE, ndrange=kernels.REDUCTION_GROUPS * kernels.REDUCTION_GROUP)


def _sum_tree(backend):
    x, partial = _zeros(SIZE), _zeros(SIZE // kernels.REDUCTION_GROUP)
    kernels.tree_sums(backend, kernels.REDUCTION_GROUP)(partial, x, SIZE, ndrange=SIZE)


def _saxpy(backend):
    kernels.saxpy(backend, kernels.SAXPY_GROUP)(_zeros(SIZE), np.float32(2), _zeros(SIZE),
                                                ndrange=SIZE)


def _copy(backend):
    kernels.copy(backend, kernels.SAXPY_GROUP)(_zeros(SIZE), _zeros(SIZE), ndrange=SIZE)


def _stencil(backend):
    kernels.stencil5(backend, kernels.STENCIL_GROUP)(_zeros(EDGE, EDGE), _zeros(EDGE, EDGE),
                                                     np.float32(0.2),
                                                     ndrange=(EDGE - 2, EDGE - 2))


def _matmul(backend):
    kernels.matmul_tiled(backend, kernels.MATMUL_GROUP)(
        _zeros(EDGE, EDGE), _zeros(EDGE, EDGE), _zeros(EDGE, EDGE), EDGE, ndrange=(EDGE, EDGE))


def _reverse(kernel, group, arguments, ndrange) -> Callable:
    """`autodiff(Reverse, ...)` of one launch, in its two halves: the augmented forward,
    then (after `mark()`) the reverse pass."""
    def differentiate(backend):
        from enzyme_ext import Active, Duplicated, ReverseSplit, autodiff_thunk
        annotated = [Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray) else
                     Active(a) for a in arguments]
        forward, reverse = autodiff_thunk(ReverseSplit, kernel(backend, group),
                                          *(type(a) for a in annotated))
        tape = forward(*annotated, ndrange=ndrange)
        backend.mark()
        reverse(*annotated, tape=tape, ndrange=ndrange)
    return differentiate


@dataclass(frozen=True)
class Case:
    name: str
    launch: Callable          # launches kernelkit's kernel(s) on a `RecordingBackend`
    source: str               # the CUDA C++ file in benchmarks/cuda
    symbol: str               # its kernel
    kernel: kk.Kernel         # kernelkit's kernel (its derivative kernels, for .reverse)


CASES = {case.name: case for case in [
    Case("sum", _sum, "sum.cu", "group_sums", kernels.group_sums),
    Case("sum_tree", _sum_tree, "sum.cu", "tree_sums", kernels.tree_sums),
    Case("saxpy", _saxpy, "elementwise.cu", "saxpy", kernels.saxpy),
    Case("copy", _copy, "elementwise.cu", "copy", kernels.copy),
    Case("stencil5", _stencil, "stencil.cu", "stencil5", kernels.stencil5),
    Case("matmul_tiled", _matmul, "matmul.cu", "matmul_tiled", kernels.matmul_tiled),
    Case("sin_times_x.reverse",
         _reverse(kernels.sin_times_x, kernels.SIN_GROUP, [_zeros(SIZE), _zeros(SIZE)], SIZE),
         "adjoints.cu", "sin_times_x_reverse", kernels.sin_times_x),
    Case("saxpy.reverse",
         _reverse(kernels.saxpy, kernels.SAXPY_GROUP,
                  [_zeros(SIZE), np.float32(2), _zeros(SIZE)], SIZE),
         "adjoints.cu", "saxpy_reverse", kernels.saxpy),
    Case("stencil5.reverse",
         _reverse(kernels.stencil5, kernels.STENCIL_GROUP,
                  [_zeros(EDGE, EDGE), _zeros(EDGE, EDGE), np.float32(0.2)],
                  (EDGE - 2, EDGE - 2)),
         "adjoints.cu", "stencil5_reverse", kernels.stencil5),
]}


class RecordingBackend(CompileOnlyCUDA):
    """A compile-only CUDA backend that keeps each kernel it is asked to launch (in the
    order asked) instead of refusing: what a launch would run, compiled as it would be.
    `mark()` starts a new list, so that a reverse pass's kernels are told from the
    augmented forward's."""

    def __init__(self, arch: str):
        super().__init__((arch,))
        self.launched: list[list] = [[]]

    def launch(self, prepared, args, ndrange, workgroupsize):
        self.launched[-1].append(prepared)

    def mark(self) -> None:
        self.launched.append([])


# -- SASS -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """What one function's SASS holds; of several functions, added up (their registers
    and hot loops: the largest)."""

    names: tuple[str, ...]
    instructions: int
    loads: int               # LDG: global loads
    stores: int              # STG: global stores
    atomics: int             # ATOM*, RED*: atomics and reductions to memory
    registers: int
    loop_instructions: int   # in the hot loop, 0 where there is none
    loop_loads: int

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.names + other.names, self.instructions + other.instructions,
                      self.loads + other.loads, self.stores + other.stores,
                      self.atomics + other.atomics, max(self.registers, other.registers),
                      max(self.loop_instructions, other.loop_instructions),
                      max(self.loop_loads, other.loop_loads))


_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*?);")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_ATOMIC = re.compile(r"^(ATOM|ATOMG|ATOMS|RED|REDG)(\.|$)")
_SECTION = re.compile(r"^\s*\.section\s")
_CALLEE = re.compile(r"`\(([A-Za-z_$][\w$]*)\)")


def function_sass(disassembly: str, symbol: str) -> list[str]:
    """The lines of `symbol`'s code section in nvdisasm's output."""
    lines = disassembly.splitlines()
    header = re.compile(rf"^\s*\.section\s+\.text\.{re.escape(symbol)},")
    for index, line in enumerate(lines):
        if header.match(line):
            end = next((i for i in range(index + 1, len(lines))
                        if _SECTION.match(lines[i])), len(lines))
            return lines[index:end]
    raise LookupError(f"no function '{symbol}' in the cubin")


def registers_of(disassembly: str, symbol: str) -> int:
    """The register count nvdisasm prints in the cubin's info section (EIATTR_REGCOUNT)."""
    match = re.search(rf"EIATTR_REGCOUNT\b[^\n]*\n(?:[^\n]*\n){{0,6}}?[^\n]*index@\("
                      rf"{re.escape(symbol)}\)[^\n]*\n[^\n]*\.word\s+(0x[0-9a-f]+)",
                      disassembly)
    return int(match.group(1), 16) if match else 0


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str
    operands: str


def code_of(disassembly: str, symbol: str) -> tuple[list[Instruction], dict[str, int]]:
    """The instructions of the function `symbol` in nvdisasm's output of a cubin, and the
    addresses of its labels. The padding after the last EXIT (a branch to itself, NOPs)
    is left out."""
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in function_sass(disassembly, symbol):
        label = _LABEL.match(line.strip())
        if label:
            pending.append(label.group(1))
            continue
        match = _INSTRUCTION.match(line)
        if match:
            address = int(match.group(1), 16)
            labels.update((name, address) for name in pending)
            pending = []
            instructions.append(Instruction(address, match.group(3), match.group(4)))
    return [i for i in instructions if i.opcode != "NOP" and _branch_target(i, labels) !=
            i.address], labels


def _branch_target(instruction: Instruction, labels: dict[str, int]) -> int | None:
    target = _TARGET.search(instruction.operands)
    if not instruction.opcode.startswith("BRA") or target is None:
        return None
    return labels.get(target.group(1))


def hot_loop(code: list[Instruction], labels: dict[str, int]) -> list[Instruction]:
    """The innermost loop (a backward branch and what it jumps back over) with the most
    global loads, then the most instructions; [] where there is no loop."""
    loops = []
    for instruction in code:
        target = _branch_target(instruction, labels)
        if target is not None and target <= instruction.address:
            loops.append((target, instruction.address))
    innermost = [loop for loop in loops if not any(
        other != loop and loop[0] <= other[0] and other[1] <= loop[1] for other in loops)]
    bodies = [[i for i in code if first <= i.address <= last] for first, last in innermost]
    return max(bodies, key=lambda body: (_loads(body), len(body)), default=[])


def _loads(code: list[Instruction]) -> int:
    return sum(i.opcode.startswith("LDG") for i in code)


def count_sass(disassembly: str, symbol: str) -> Counts:
    """Counts of the function `symbol` in nvdisasm's output of a cubin, with those of the
    functions it calls (ptxas's subroutines, such as 64-bit division) added."""
    code, labels = code_of(disassembly, symbol)
    called, seen = list(code), {symbol}
    for instruction in called:   # grows as callees are found
        callee = _CALLEE.search(instruction.operands) if instruction.opcode.startswith(
            "CALL") else None
        if callee and callee.group(1) not in seen:
            seen.add(callee.group(1))
            called += code_of(disassembly, callee.group(1))[0]
    loop = hot_loop(code, labels)
    return Counts(
        names=(symbol,), instructions=len(called), loads=_loads(called),
        stores=sum(i.opcode.startswith("STG") for i in called),
        atomics=sum(bool(_ATOMIC.match(i.opcode)) for i in called),
        registers=registers_of(disassembly, symbol),
        loop_instructions=len(loop), loop_loads=_loads(loop))


# -- the tools ------------------------------------------------------------------------------


def find_tool(name: str) -> str | None:
    """`name` (nvcc, nvdisasm) on PATH, under CUDA_HOME or CUDA_PATH, or in NVIDIA's
    wheels (`nvidia/<cuXY>/bin`)."""
    found = shutil.which(name)
    if found:
        return found
    places = [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if v in os.environ]
    try:
        import nvidia
        places += [b for p in nvidia.__path__ for b in sorted(Path(p).glob("*/bin"))]
    except ImportError:
        pass
    for place in places:
        if (place / name).is_file() and os.access(place / name, os.X_OK):
            return str(place / name)
    return None


def missing_tools() -> str | None:
    """Why the comparison cannot run here, or None."""
    missing = [f"{name} ({where})" for name, where in WHERE_TO_GET.items()
               if find_tool(name) is None]
    reasons = [f"missing {', '.join(missing)}"] if missing else []
    kernelkit_side = compile_only_unavailable_reason()
    if kernelkit_side is not None:
        reasons.append(f"kernelkit cannot make cubins here: {kernelkit_side}")
    return "; ".join(reasons) or None


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr.strip()}")
    return result.stdout


def disassemble(cubin: Path) -> str:
    return _run([find_tool("nvdisasm"), str(cubin)])


def nvcc_cubin(source: str, arch: str, directory: Path) -> Path:
    """The cubin of `benchmarks/cuda/<source>`, built once per run."""
    output = directory / (Path(source).stem + ".cubin")
    if not output.exists():
        _run([find_tool("nvcc"), "-O3", f"-arch={arch}", "-cubin", "-o", str(output),
              str(SOURCES / source)])
    return output


# -- one case -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    case: str
    kernelkit: Counts
    nvcc: Counts
    augmented: Counts | None      # kernelkit's augmented forward, for reverse cases
    sass: dict[str, str]          # side -> disassembly


def compare(case: Case, arch: str, directory: Path) -> Comparison:
    backend = RecordingBackend(arch)
    case.launch(backend)
    function = case.kernel.function
    parts = [[c for c in part if c.job.source.function is function]
             for part in backend.launched]
    sass: dict[str, str] = {}

    def counted(label: str, part: list) -> Counts:
        total = None
        for number, compiled in enumerate(part, start=1):
            path = directory / "kernelkit.cubin"
            path.write_bytes(compiled.artifact)
            text, symbol = disassemble(path), compiled.entry.symbol
            sass[f"{label} {number}/{len(part)}"] = "\n".join(function_sass(text, symbol))
            counts = count_sass(text, symbol)
            total = counts if total is None else total + counts
        return total

    augmented = counted("kernelkit, augmented forward", parts[0]) if len(parts) == 2 else None
    ours = counted("kernelkit", parts[-1])
    text = disassemble(nvcc_cubin(case.source, arch, directory))
    sass["nvcc"] = "\n".join(function_sass(text, case.symbol))
    return Comparison(case.name, ours, count_sass(text, case.symbol), augmented, sass)


# -- the table ------------------------------------------------------------------------------

COLUMNS = ("case", "side", "kernels", "SASS", "hot loop", "LDG", "STG", "atomics",
           "registers")


def rows(comparison: Comparison) -> list[tuple[str, ...]]:
    def row(side: str, counts: Counts, names: str) -> tuple[str, ...]:
        loop = f"{counts.loop_instructions} ({counts.loop_loads} LDG)" \
            if counts.loop_instructions else "-"
        return (comparison.case, side, names, str(counts.instructions), loop,
                str(counts.loads), str(counts.stores), str(counts.atomics),
                str(counts.registers))
    ours = comparison.kernelkit
    result = [row("kernelkit", ours, f"{len(ours.names)} x {ours.names[0]}"
                  if len(ours.names) > 1 else ours.names[0]),
              row("nvcc", comparison.nvcc, comparison.nvcc.names[0])]
    if comparison.augmented is not None:
        result.append(row("kernelkit, augmented forward", comparison.augmented,
                          comparison.augmented.names[0]))
    return result


def table(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    text = []
    for number, line in enumerate(lines):
        text.append("  ".join(cell.ljust(w) if i < 3 else cell.rjust(w)
                              for i, (cell, w) in enumerate(zip(line, widths))).rstrip())
        if number == 0:
            text.append("  ".join("-" * w for w in widths))
    return "\n".join(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="kernelkit's cubins beside nvcc's for the benchmark kernels, "
                    "counted from their SASS")
    parser.add_argument("--case", action="append", choices=sorted(CASES), metavar="NAME",
                        help=f"a case to compare (repeatable; all by default): "
                             f"{', '.join(CASES)}")
    parser.add_argument("--arch", default="sm_90", help="GPU architecture (sm_90)")
    parser.add_argument("--sass", action="store_true", help="print both disassemblies too")
    options = parser.parse_args(argv)
    reason = missing_tools()
    if reason is not None:
        print(f"cubin_compare: cannot compare here: {reason}", file=sys.stderr)
        return 2
    lines = [COLUMNS]
    with tempfile.TemporaryDirectory(prefix="cubin-compare-") as directory:
        for name in options.case or CASES:
            comparison = compare(CASES[name], options.arch, Path(directory))
            lines += rows(comparison)
            if options.sass:
                for side, text in comparison.sass.items():
                    print(f"==== {name}: {side}\n{text}\n")
    print(f"SASS for {options.arch}: kernelkit's cubins beside nvcc -O3's "
          f"(benchmarks/cuda/); hot loop: its instructions (and global loads)")
    print(table(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
