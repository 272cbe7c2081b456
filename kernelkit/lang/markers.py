"""Markers: functions kernels call that a compiler plugin gives meaning to.

A plugin (`kernelkit.compiler.plugins`) makes a `Marker`; a kernel calls it like any
function; the frontend turns the call into an `intrinsic` operation named after the
marker, and the plugin, which runs only for modules that contain its marker, rewrites
it. The marker says what type a call returns for given argument types."""
from __future__ import annotations

from typing import Callable

from ..errors import KernelkitError


class Marker:
    def __init__(self, name: str, result_type: Callable[[tuple], object]):
        self.name = name
        self.result_type = result_type

    def __repr__(self) -> str:
        return f"Marker({self.name!r})"

    def __call__(self, *args):
        raise KernelkitError(f"'{self.name}' can only be called inside a kernel")
