"""Shared fixtures: every kernel test runs once per installed backend.

A backend that cannot run here still takes part where it can compile: without a GPU,
the CUDA backend is `CUDABackend.compile_only("sm_80", "sm_90")`, so every kernel a test
launches is compiled to PTX and to a cubin for both architectures, and the test is then
skipped at its first launch (nothing ran, so nothing can be checked). With a GPU, the
tests run on it, and once more compile-only for whichever of the two it is not."""
import atexit
import os
import shutil
import tempfile

import pytest

import kernelkit as kk

# The suite's compiled kernels go to a disk cache of its own, removed at exit.
os.environ["KERNELKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelkit-test-cache-")
atexit.register(shutil.rmtree, os.environ["KERNELKIT_CACHE_DIR"], ignore_errors=True)

COMPILE_ONLY_ARCHS = ("sm_80", "sm_90")


def _compile_only_stand_in(name):
    """A compile-only backend standing in for `name` where it cannot run, or None."""
    if name != "cuda":
        return None
    from backends.cuda.runtime import compile_only_unavailable_reason
    if compile_only_unavailable_reason() is not None:
        return None
    from kernelkit.backend import backend_class
    return backend_class("cuda").compile_only(*COMPILE_ONLY_ARCHS)


def _other_compile_only_archs():
    """Where a GPU runs the CUDA tests, the architectures of COMPILE_ONLY_ARCHS it is not:
    the kernels are compiled for those too, as they are on a machine without a GPU."""
    from kernelkit.backend import make_backend
    import backends.cuda.runtime as runtime
    if getattr(runtime, "HOST_DRIVER", False):
        return ()   # a stand-in, not a GPU: the run without it compiles for both
    try:
        arch = make_backend("cuda").arch
    except Exception:  # the backend's own tests report why it cannot be made
        return ()
    return tuple(a for a in COMPILE_ONLY_ARCHS if a != arch)


def _available_backends():
    params = []
    for name in kk.backend_names():
        reason = kk.backend_unavailable_reason(name)
        marks = []
        if reason and _compile_only_stand_in(name) is None:
            marks = [pytest.mark.skip(reason=reason)]
        params.append(pytest.param(name, id=name, marks=marks))
        if name == "cuda" and not reason and _other_compile_only_archs():
            params.append(pytest.param("cuda-compile-only", id="cuda-compile-only"))
    return params


@pytest.fixture(params=_available_backends())
def backend(request):
    """A backend instance; the test runs once for each installed backend."""
    name = request.param
    if name == "cuda-compile-only":
        from kernelkit.backend import backend_class
        return backend_class("cuda").compile_only(*_other_compile_only_archs())
    if kk.backend_unavailable_reason(name):
        return _compile_only_stand_in(name)
    return kk.make_backend(name)


@pytest.fixture
def debug_backend(backend):
    """A backend of the same kind with bounds checks: an out-of-bounds access raises."""
    return type(backend)(debug=True)


@pytest.fixture(autouse=True, scope="session")
def every_compiled_module_round_trips_through_its_text():
    """Each kernel any test compiles is printed, parsed and printed again: the two texts
    must be the same (so a dumped module replays exactly)."""
    from kernelkit.compiler import driver
    from kernelkit.ir.parser import parse_module
    from kernelkit.ir.printer import print_module

    original = driver.typed_module

    def typed_module(job):
        module = original(job)
        text = print_module(module)
        again = print_module(parse_module(text))
        assert again == text, f"the IR text of {module.kernel.name} does not round-trip"
        return module

    driver.typed_module = typed_module
    yield
    driver.typed_module = original


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    outcome = yield
    error = outcome.excinfo[1] if outcome.excinfo else None
    if error is not None and type(error).__name__ == "CompileOnlyError":
        outcome.force_exception(pytest.skip.Exception(
            f"compiled only (no device to run on): {error}", _use_item_location=True))
