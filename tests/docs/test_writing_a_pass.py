"""The pass in docs/writing-a-pass.md works as the page says: loaded into `opt` from
the file that defines it, run by name on a dumped module, with its option."""
import re
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.__main__ import main
from kernelkit.passes.pipeline import PASSES

PAGE = Path(__file__).parents[2] / "docs" / "writing-a-pass.md"


@pytest.fixture
def pass_file(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    path = tmp_path / "my_passes.py"
    path.write_text(code)
    yield path
    PASSES.pop("mul-to-shift", None)


@kk.kernel
def scale(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * 4


@pytest.fixture(scope="module")
def dumped_module(tmp_path_factory):
    """The module of `scale` after the generic passes, as KERNELKIT_DUMP writes it (the
    kernel compiles once per process, so once for this file's tests)."""
    dumps = tmp_path_factory.mktemp("dumps")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELKIT_DUMP", str(dumps))
        kk.code_ir(scale, kk.CPU(), np.zeros(8, np.int32), np.arange(8, dtype=np.int32),
                   ndrange=8)
    (directory,) = dumps.iterdir()
    return next(p for p in sorted(directory.glob("*.kkir")) if "check-barriers" in p.name)


def run_opt(capsys, *args) -> str:
    assert main(["opt", *map(str, args)]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_the_pages_pass_turns_a_multiplication_by_four_into_a_shift(pass_file, dumped_module,
                                                                    capsys):
    before = dumped_module.read_text()
    assert re.search(r"= mul %\d+, %\d+ : i32", before)
    after = run_opt(capsys, dumped_module, "--load", pass_file, "-p", "mul-to-shift,dce")
    assert not re.search(r"= mul ", after)
    assert re.search(r"= const 2 : i32", after) and re.search(r"= shl %\d+, %\d+ : i32", after)


def test_the_pages_pass_takes_its_option(pass_file, dumped_module, capsys):
    after = run_opt(capsys, dumped_module, "--load", pass_file,
                    "-p", "mul-to-shift{smallest=8},dce")
    assert re.search(r"= mul %\d+, %\d+ : i32", after)
    assert not re.search(r"= shl %\d+, %\d+ : i32", after)


def test_loading_a_file_that_does_not_exist_is_an_error_naming_it(dumped_module, capsys,
                                                                  tmp_path):
    missing = tmp_path / "nowhere.py"
    assert main(["opt", str(dumped_module), "--load", str(missing), "-p", "dce"]) == 1
    assert f"--load {missing}: no such file" in capsys.readouterr().err
