"""Compiler plugins, defined here as a third party would: a plugin rewrites its marker
in kernels compiled for the CPU and for CUDA (compile-only) without either target knowing
about it; it runs only where its marker is called, at each named stage; its key is part
of the cache key; a marker without a plugin is a clear error; `opt` runs plugins too."""
import numpy as np
import pytest

import kernelkit as kk
from kernelkit.__main__ import main
from kernelkit.compiler import driver
from kernelkit.compiler.cache import cache_key
from kernelkit.compiler.plugins import Plugin, register_plugin, unregister_plugin
from kernelkit.ir.ops import Op
from kernelkit.lang.markers import Marker

twice = Marker("twice", lambda argtypes: argtypes[0])


class Doubler(Plugin):
    """Rewrites `twice(v)` into `v + v`, and records the stages it saw."""

    name = "doubler"
    marker = "twice"

    def __init__(self, version=1):
        self.version = version
        self.stages = []

    def after_frontend(self, module):
        self.stages.append("after_frontend")
        for function in module.functions.values():
            for block in function.blocks:
                for index, op in enumerate(block.ops):
                    if op.opcode == "intrinsic" and op.attrs["name"] == "twice":
                        (value,) = op.operands
                        doubled = Op("add", [value, value], op.type, loc=op.loc)
                        doubled.block = block
                        block.ops[index] = doubled
                        for other in function.ops():
                            other.map_operands({op: doubled})

    def before_lowering(self, module):
        self.stages.append("before_lowering")

    def in_llvm_pipeline(self, llvm_module, target):
        self.stages.append(f"llvm:{target.name}")

    def cache_key(self):
        return f"doubler-{self.version}"


@pytest.fixture
def doubler():
    plugin = register_plugin(Doubler())
    yield plugin
    unregister_plugin("doubler")


@kk.kernel
def doubled(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = twice(x[i]) + 1.0


@kk.kernel
def plain(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1.0


def test_the_plugin_rewrites_its_marker_on_the_cpu(doubler):
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    backend = kk.CPU(threads=1)
    doubled(backend, 4)(y, x, ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert doubler.stages == ["after_frontend", "before_lowering", "llvm:cpu"]


def test_the_same_plugin_rewrites_the_marker_for_cuda(doubler):
    x = np.zeros(10, np.float32)
    ir = kk.code_ir(doubled, kk.CUDABackend.compile_only("sm_90"), x, x, ndrange=10,
                    workgroupsize=8)
    assert "intrinsic" not in ir and "add" in ir
    assert doubler.stages == ["after_frontend", "before_lowering", "llvm:cuda"]


def test_a_plugin_does_not_run_for_kernels_without_its_marker(doubler):
    x = np.zeros(10, np.float32)
    kk.code_ir(plain, kk.CPU(threads=1), x, x, ndrange=10, workgroupsize=5)
    assert doubler.stages == []


def test_kernels_without_markers_do_not_look_for_installed_plugins(monkeypatch):
    from kernelkit.compiler import plugins

    def look():
        raise AssertionError("looked for installed plugins")

    monkeypatch.setattr(plugins, "registered_plugins", look)
    x = np.zeros(6, np.float32)
    assert "add" in kk.code_ir(plain, kk.CPU(threads=1), x, x, ndrange=6, workgroupsize=6)
    with pytest.raises(kk.CompileError, match="looked for installed plugins"):
        kk.code_ir(doubled, kk.CPU(threads=1), x, x, ndrange=6, workgroupsize=6)


def test_the_plugin_key_is_part_of_the_cache_key(doubler):
    backend = kk.CPU(threads=1)
    x = np.zeros(4, np.float32)
    job = backend.compiler_job(doubled.function, doubled.argument_types(backend, (x, x)),
                               workgroupsize=(2,))
    module = driver.typed_module(job)
    text = driver.print_module(module)
    assert cache_key(text, job, ("doubler-1",)) != cache_key(text, job, ("doubler-2",))
    assert [p.cache_key() for p in module.plugins] == ["doubler-1"]


def test_a_marker_without_a_registered_plugin_is_a_compile_error():
    x = np.zeros(4, np.float32)
    with pytest.raises(kk.CompileError, match=r"(?s)twice\(x\[i\]\).*'twice' is a plugin's "
                                              r"marker, but no registered plugin handles it"):
        kk.code_ir(doubled, kk.CPU(threads=1), x, x, ndrange=4, workgroupsize=3)


def test_opt_runs_the_plugins_of_a_dumped_module(doubler, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELKIT_DUMP", str(tmp_path / "dump"))
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path / "cache"))
    x = np.zeros(4, np.float32)
    kk.code_ir(doubled, kk.CPU(threads=1), x, x, ndrange=4, workgroupsize=1)
    (directory,) = (tmp_path / "dump").iterdir()
    stages = sorted(directory.glob("*.kkir"))
    assert stages[1].name == "01-plugin-doubler.kkir"
    assert stages[-1].name.endswith("-plugin-doubler-lowering.kkir")
    assert main(["opt", str(stages[0]), "--target", "cpu"]) == 0
    assert capsys.readouterr().out == stages[-1].read_text()
