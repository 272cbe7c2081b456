"""Compiler plugins, defined here as a third party would: a plugin rewrites its marker
in kernels compiled for the CPU and for CUDA (compile-only) without either target knowing
about it; it runs only where its marker is called, at each named stage; after the generic
passes it sees the same inlined IR for every target; its key is part of the cache key; a
marker without a plugin is a clear error; `opt` runs plugins too, at every stage."""
import numpy as np
import pytest

import kernelkit as kk
from kernelkit.__main__ import main
from kernelkit.compiler import driver
from kernelkit.compiler.cache import cache_key
from kernelkit.compiler.plugins import Plugin, register_plugin, unregister_plugin
from kernelkit.ir.definitions import INTRINSIC
from kernelkit.ir.printer import print_module
from kernelkit.ir.rewriter import Rewriter
from kernelkit.lang.markers import Marker

twice = Marker("twice", lambda argtypes: argtypes[0])
thrice = Marker("thrice", lambda argtypes: argtypes[0])


def markers(function, name: str) -> list:
    """The calls of the plugin marker `name` in `function`."""
    return [op for op in function.ops() if op.definition is INTRINSIC and op.attrs["name"] == name]


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
            rewriter = Rewriter(function)
            for op in markers(function, "twice"):
                rewriter.position_before(op)
                rewriter.loc = op.loc
                (value,) = op.operands
                rewriter.replace_op(op, rewriter.binary("add", value, value))

    def after_generic_passes(self, module):
        self.stages.append("after_generic_passes")

    def before_lowering(self, module):
        self.stages.append("before_lowering")

    def in_llvm_pipeline(self, llvm_module, target):
        self.stages.append(f"llvm:{target.name}")

    def cache_key(self):
        return f"doubler-{self.version}"


class Tripler(Plugin):
    """Rewrites `thrice(v)` into `v + v + v` on the target-neutral IR, and keeps the module
    as it saw it there and before lowering."""

    name = "tripler"
    marker = "thrice"

    def __init__(self):
        self.target_neutral = []
        self.before_lowering_seen = []

    def after_generic_passes(self, module):
        self.target_neutral.append(print_module(module))
        rewriter = Rewriter(module.kernel)
        for op in markers(module.kernel, "thrice"):
            rewriter.position_before(op)
            rewriter.loc = op.loc
            (value,) = op.operands
            doubled = rewriter.binary("add", value, value)
            rewriter.replace_op(op, rewriter.binary("add", doubled, value))

    def before_lowering(self, module):
        self.before_lowering_seen.append(print_module(module))


@pytest.fixture
def doubler():
    plugin = register_plugin(Doubler())
    yield plugin
    unregister_plugin("doubler")


@pytest.fixture
def tripler():
    plugin = register_plugin(Tripler())
    yield plugin
    unregister_plugin("tripler")


@kk.kernel
def doubled(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = twice(x[i]) + 1.0


@kk.kernel
def plain(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1.0


def neighbour(scratch, li):
    return scratch[(li + 1) % 8]


@kk.kernel
def tripled(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, 8)
    scratch[li] = thrice(x[i])
    kk.synchronize()
    y[i] = neighbour(scratch, li) + 1.0


def test_the_plugin_rewrites_its_marker_on_the_cpu(doubler):
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    backend = kk.CPU(threads=1)
    doubled(backend, 4)(y, x, ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert doubler.stages == ["after_frontend", "after_generic_passes", "before_lowering",
                              "llvm:cpu"]


def test_the_same_plugin_rewrites_the_marker_for_cuda(doubler):
    x = np.zeros(10, np.float32)
    ir = kk.code_ir(doubled, kk.CUDABackend.compile_only("sm_90"), x, x, ndrange=10,
                    workgroupsize=8)
    assert "intrinsic" not in ir and "add" in ir
    assert doubler.stages == ["after_frontend", "after_generic_passes", "before_lowering",
                              "llvm:cuda"]


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
    assert cache_key(text, job, (Doubler(1),)) != cache_key(text, job, (Doubler(2),))
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


def test_after_the_generic_passes_a_plugin_sees_the_same_inlined_ir_for_every_target(tripler):
    x = np.zeros(16, np.float32)
    for backend in (kk.CPU(threads=1), kk.CUDABackend.compile_only("sm_90"),
                    kk.CUDABackend.compile_only("sm_80")):
        kk.code_ir(tripled, backend, x, x, ndrange=16, workgroupsize=8)
    cpu, sm_90, sm_80 = tripler.target_neutral
    assert cpu == sm_90 == sm_80
    assert "thrice" in cpu and "localmem" in cpu and "barrier" in cpu
    assert "neighbour" not in cpu and " call " not in cpu   # device functions are inlined
    # The targets' own passes come later: by lowering, the CPU's module is its own.
    cpu_lowered, sm_90_lowered, _ = tripler.before_lowering_seen
    assert cpu_lowered != sm_90_lowered


def test_a_rewrite_after_the_generic_passes_reaches_the_compiled_kernel(tripler):
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    backend = kk.CPU(threads=1)
    tripled(backend, 8)(y, x, ndrange=16)
    kk.synchronize(backend)
    neighbours = np.roll(x.reshape(2, 8), -1, axis=1).reshape(16)
    np.testing.assert_array_equal(y, 3 * neighbours + 1)


@pytest.mark.parametrize("target", ["cpu", "sm_90"])
def test_opt_replays_every_plugin_stage_byte_for_byte(target, tripler, tmp_path, monkeypatch,
                                                      capsys):
    monkeypatch.setenv("KERNELKIT_DUMP", str(tmp_path / "dump"))
    monkeypatch.setenv("KERNELKIT_CACHE_DIR", str(tmp_path / "cache"))
    backend = kk.CPU(threads=1) if target == "cpu" else kk.CUDABackend.compile_only(target)
    x = np.zeros(16, np.float32)
    kk.code_ir(tripled, backend, x, x, ndrange=16, workgroupsize=4)
    (directory,) = (tmp_path / "dump").iterdir()
    stages = sorted(directory.glob("*.kkir"))
    names = [path.name.split("-", 1)[1] for path in stages]
    neutral = len(driver.GENERIC_PASSES) + 2
    assert names[neutral - 1:neutral + 1] == [f"{driver.GENERIC_PASSES[-1]}.kkir",
                                              "plugin-tripler-target-neutral.kkir"]
    assert names[-1] == "plugin-tripler-lowering.kkir"
    (seen,) = tripler.target_neutral
    assert stages[neutral - 1].read_text() == seen      # dumped as the plugin saw it
    assert "thrice" not in stages[neutral].read_text()
    assert main(["opt", str(stages[0]), "--target", target]) == 0
    assert capsys.readouterr().out == stages[-1].read_text()
