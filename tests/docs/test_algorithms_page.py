"""The example of docs/algorithms.md runs as written and gives what NumPy gives."""
import re
import runpy
from pathlib import Path

import numpy as np

import kernelkit as kk
import kernelkit.algorithms as ka

PAGE = Path(__file__).parents[2] / "docs" / "algorithms.md"


def test_the_example_gives_numpys_results(tmp_path):
    (example,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    path = tmp_path / "algorithms_example.py"
    path.write_text(example)
    scope = runpy.run_path(str(path))
    x = kk.to_numpy(scope["x"])
    np.testing.assert_allclose(kk.to_numpy(scope["total"]), np.sum(x, dtype=np.float64),
                               rtol=1e-6)
    np.testing.assert_allclose(kk.to_numpy(scope["running"]), np.cumsum(x, dtype=np.float64),
                               rtol=1e-5)
    np.testing.assert_array_equal(kk.to_numpy(scope["order"]), np.argsort(x, kind="stable"))
    counts, edges = np.histogram(x, bins=16)
    np.testing.assert_array_equal(kk.to_numpy(scope["counts"]), counts)
    np.testing.assert_array_equal(kk.to_numpy(scope["edges"]), edges)
    np.testing.assert_allclose(kk.to_numpy(scope["norm2"]), np.sum(x.astype(np.float64) ** 2),
                               rtol=1e-6)


def test_every_function_of_the_library_is_on_the_page():
    text = PAGE.read_text()
    missing = [name for name in ka.__all__ if f"`{name}" not in text and f" `{name}`" not in text
               and f"{name}`" not in text]
    assert not missing, missing
