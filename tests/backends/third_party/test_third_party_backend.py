"""A backend defined outside the package and registered like a third party's, through
a distribution's `kernelkit.backends` entry point: kernelkit finds it by name and runs
kernels through it with its own target, and the test suite's backend fixture would
include it like any installed backend."""
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from kernelkit import backend as registry

HERE = Path(__file__).parent


@pytest.fixture
def installed_toy(tmp_path, monkeypatch):
    """Install a distribution whose entry point names `toy_backend:Serial`."""
    info = tmp_path / "toy_kernelkit_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-kernelkit-backend\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[kernelkit.backends]\nserial = toy_backend:Serial\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(HERE))
    importlib.invalidate_caches()
    for cached in (registry.backend_classes, registry.backend_class, registry.make_backend):
        cached.cache_clear()
    yield
    for cached in (registry.backend_classes, registry.backend_class, registry.make_backend):
        cached.cache_clear()
    sys.modules.pop("toy_backend", None)


@kk.kernel
def axpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def test_an_installed_third_party_backend_is_found_and_runs_kernels(installed_toy):
    assert "serial" in kk.backend_names()
    assert kk.backend_unavailable_reason("serial") is None
    backend = kk.make_backend("serial")
    assert type(backend).__module__ == "toy_backend"
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    axpy(backend, 32)(y, np.float32(3), x, ndrange=100)
    kk.synchronize(backend)
    np.testing.assert_array_equal(y, 3 * x + 1)
    assert type(backend).launches == 1
    compiled = axpy.specialize(backend, axpy.argument_types(backend, (y, 3.0, x)), (32,))
    assert compiled.job.config.target.name == "serial"


def test_a_backend_that_only_has_the_methods_runs_kernels(monkeypatch):
    """Duck typing: a backend need not derive from `Backend`; its optional hooks
    (`fast_launcher`) may be missing."""
    monkeypatch.syspath_prepend(str(HERE))
    from toy_backend import Serial
    methods = {name: value for name, value in vars(Serial).items()
               if not name.startswith("__") or name == "__init__"}
    duck = type("Duck", (), methods)()
    assert not hasattr(duck, "fast_launcher")
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    for _ in range(3):
        axpy(duck, 32)(y, np.float32(2), x, ndrange=100)
    kk.synchronize(duck)
    np.testing.assert_array_equal(y, 6 * x + 1)
