"""Helpers for pass tests on IR that the frontend built from functions in these files."""
import json
import re

import pytest

from kernelkit.ir.printer import print_module


@pytest.fixture
def ir_text():
    """The printed module without source locations and with the source file named
    "FILE": the text stays the same when lines are added to the test file."""

    def text(module) -> str:
        printed = print_module(module)
        for function in module.functions.values():
            printed = printed.replace(f"file {json.dumps(function.source_file)}", 'file "FILE"')
        return re.sub(r' @("[^"]*":)?\d+:\d+', "", printed)

    return text
