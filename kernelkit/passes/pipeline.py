"""The registry of passes by name, and running a list of them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import KernelkitError
from ..ir.function import Module
from ..ir.verifier import verify_module

PASSES: dict[str, type] = {}


def register(cls):
    PASSES[cls.name] = cls
    return cls


def pass_named(name: str):
    """An instance of the pass registered as `name`."""
    if name not in PASSES:
        raise KernelkitError(f"unknown pass '{name}'; the passes are: "
                             f"{', '.join(sorted(PASSES))}")
    return PASSES[name]()


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Passes run in order; `after_each(name, module)` is called between them (dumps,
    timing); `verify` checks the IR after every pass."""

    names: tuple[str, ...]
    verify: bool = False

    def __call__(self, module: Module, after_each: Callable | None = None) -> Module:
        for name in self.names:
            pass_named(name)(module)
            if self.verify:
                verify_module(module)
            if after_each is not None:
                after_each(name, module)
        return module


def run_passes(module: Module, names, verify: bool = False) -> Module:
    return Pipeline(tuple(names), verify)(module)
