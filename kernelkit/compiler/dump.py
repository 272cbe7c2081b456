"""`KERNELKIT_DUMP=dir`: each compiled kernel's module written at every stage, for
reading, diffing, and replaying offline (`python -m kernelkit opt`).

A kernel's files go to `dir/<kernel>-<digest of its job>/`: `00-frontend.kkir` (typed IR
as the frontend made it), then `NN-<pass>.kkir` after each pass in order (and, for a
kernel that calls a plugin's marker, `NN-plugin-<name>.kkir`,
`NN-plugin-<name>-target-neutral.kkir` and `NN-plugin-<name>-lowering.kkir` after the
plugin's hooks at each stage), then `llvm.ll` (as lowered) and `llvm-optimized.ll`."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..ir.printer import print_module


class Dump:
    def __init__(self, directory: Path):
        self.directory = directory
        self.stage = 0

    @classmethod
    def for_job(cls, job) -> Dump | None:
        root = os.environ.get("KERNELKIT_DUMP")
        if not root:
            return None
        source = job.source
        digest = hashlib.sha256(repr((source.qualname, source.module, source.source_hash,
                                      source.argtypes, source.constants,
                                      job.config)).encode()).hexdigest()[:12]
        directory = Path(root) / f"{source.function.__name__}-{digest}"
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory)

    def module(self, name: str, module) -> None:
        """Write the module after stage `name` (the frontend, or a pass)."""
        self.text(f"{self.stage:02d}-{name}.kkir", print_module(module))
        self.stage += 1

    def text(self, filename: str, text: str) -> None:
        (self.directory / filename).write_text(text)
