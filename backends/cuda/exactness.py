"""The LLVM instructions whose NVPTX code is not what kernelkit defines them to compute,
found in a kernel's optimized module before it becomes PTX.

kernelkit gives a kernel the same answer on every backend by lowering each operation to
something exact on every target (`kernelkit.compiler.arithmetic`). Some LLVM instructions
are exact as LLVM defines them but not as the NVPTX back end expands them: `frem`
becomes `x - trunc(x / y) * y` (`div.rn`, `cvt.rzi`, `fma`), wrong wherever the quotient
is not exact, so a large ratio gives a remainder of either sign. Where one reaches the
PTX target, a lowering rule was bypassed: that is a bug in kernelkit, reported at
compile time, on machines without a GPU too (compile-only builds and the fuzzer's
compile-only runs check every kernel)."""
from __future__ import annotations

import re

from kernelkit.errors import InternalCompilerError

# opcode -> why its NVPTX code differs from what kernelkit computes
INEXACT_ON_NVPTX = {
    "frem": "NVPTX expands it to x - trunc(x / y) * y, which is not exact; float % and // "
            "must be lowered through fmod (libdevice's __nv_fmod)",
}

_INSTRUCTION = re.compile(r"=\s*(?:\w+\s+)*?(" + "|".join(INEXACT_ON_NVPTX) + r")\s")


def inexact_instructions(llvm_ir: str) -> list[str]:
    """The lines of `llvm_ir` (a module's text) whose instruction NVPTX lowers inexactly."""
    return [line.strip() for line in llvm_ir.splitlines() if _INSTRUCTION.search(line)]


def check_exact_lowering(llvm_ir: str, kernel_name: str) -> None:
    """Raise InternalCompilerError where `llvm_ir` holds an instruction of
    `INEXACT_ON_NVPTX`."""
    found = inexact_instructions(llvm_ir)
    if not found:
        return
    opcode = _INSTRUCTION.search(found[0]).group(1)
    raise InternalCompilerError(
        f"its CUDA build holds {len(found)} LLVM instruction(s) "
        f"that the GPU would compute inexactly, the first `{found[0]}`: "
        f"{INEXACT_ON_NVPTX[opcode]}",
        kernel=kernel_name, hint="this is a bug in kernelkit; please report it with the kernel")
