"""examples/ad_kernel.py runs and its AD gradients agree with finite differences."""
import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ad_kernel.py"


def test_the_ad_example_matches_finite_differences(capsys):
    spec = importlib.util.spec_from_file_location("ad_kernel_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--backend", "cpu"]) == 0
    output = capsys.readouterr().out
    assert "dE/dalpha" in output and output.strip().endswith("OK")
