"""The examples of docs/autodiff.md run as written (each in a file of its own, as a
user would paste them) and give what the page says."""
import re
import runpy
from pathlib import Path

import numpy as np

import kernelkit as kk

PAGE = Path(__file__).parents[2] / "docs" / "autodiff.md"


@kk.kernel
def scale(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = 2.0 * x[i]


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_saxpy_example_gives_the_derivatives_the_page_states(tmp_path):
    path = tmp_path / "saxpy_ad.py"
    path.write_text(examples()[0])
    scope = runpy.run_path(str(path))
    np.testing.assert_array_equal(scope["dx"], np.full(1000, 2.0))
    assert scope["da"] == 1000.0


def test_the_in_kernel_example_compiles_and_runs(tmp_path):
    path = tmp_path / "in_kernel_ad.py"
    path.write_text("import numpy as np\nimport kernelkit as kk\n"
                    "from enzyme_ext import autodiff, Reverse, Forward, Duplicated, Active, "
                    "Const\n" + examples()[1] +
                    "x = np.linspace(0.5, 1.5, 8)\nout = np.zeros(8)\n"
                    "k(kk.CPU(), 8)(out, x, 0.3, ndrange=8)\n")
    scope = runpy.run_path(str(path))
    x = scope["x"]
    np.testing.assert_allclose(scope["out"], np.cos(0.3 * x) * 0.3 * x + np.sin(0.3 * x))


def test_the_registration_example_registers_a_backend_method(tmp_path):
    from enzyme_ext import compiler_job_from_backend

    class MyBackend(type(kk.CPU())):
        pass

    path = tmp_path / "register.py"
    path.write_text(examples()[2])
    scope = runpy.run_path(str(path), init_globals={"MyBackend": MyBackend})
    assert compiler_job_from_backend.dispatch(MyBackend) is scope["my_job"]
    x = np.ones(4)
    job = compiler_job_from_backend(MyBackend(), scale, (x, x), workgroupsize=(4,))
    assert job.source.qualname == "scale"
