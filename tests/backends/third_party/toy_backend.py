"""A backend written outside kernelkit, as a third party would: `Serial` runs every
work-group on the calling thread, with a target that reuses the host code generator
under its own name. It is registered through a distribution's entry points by the test."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from backends.cpu.target import CPUTarget
from kernelkit.backend import Backend
from kernelkit.compiler.job import CompilerConfig, CompilerJob, function_source
from kernelkit.runtime.arguments import (ArgumentLayout, numpy_argument_key,
                                         numpy_argument_type)

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)


@dataclass(frozen=True, slots=True)
class SerialTarget(CPUTarget):
    name: str = "serial"


class Serial(Backend):
    name = "serial"
    launches = 0

    def __init__(self):
        self.target = SerialTarget.host()

    def allocate(self, dtype, shape):
        return np.empty(shape, dtype)

    def zeros(self, dtype, shape):
        return np.zeros(shape, dtype)

    def ones(self, dtype, shape):
        return np.ones(shape, dtype)

    def to_backend(self, array):
        return np.asarray(array)

    def to_numpy(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass

    def argument_key(self, value):
        return numpy_argument_key(value)

    def argument_type(self, value, const, name, kernel):
        return numpy_argument_type(value, const, name, kernel)

    def default_workgroupsize(self, ndim):
        return (64,) + (1,) * (ndim - 1)

    def compiler_job(self, function, argtypes, *, workgroupsize, **options):
        config = CompilerConfig(self.target, workgroupsize=tuple(workgroupsize))
        return CompilerJob(function_source(function, argtypes), config)

    def prepare(self, compiled, argtypes, ndim):
        return _ENTRY(compiled.entry), ArgumentLayout(argtypes, ndim)

    def launch(self, prepared, args, ndrange, workgroupsize):
        function, layout = prepared
        groups = [-(-n // g) for n, g in zip(ndrange, workgroupsize)]
        fields = [*ndrange, *groups, 0]
        for value in args:
            if isinstance(value, np.ndarray):
                fields += [value.ctypes.data, *value.shape,
                           *(s // value.itemsize for s in value.strides)]
            else:
                fields.append(value)
        total = int(np.prod(groups))
        function(layout.struct.pack(*fields), 0, total)
        Serial.launches += 1
