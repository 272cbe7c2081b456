"""The grid-stride loop on CUDA (`for p in range(i, n, stride)`, its step known only at
run time): its trip count is computed once, before the loop, and the loop is unrolled,
so that a thread issues the loads of several trips before it adds them up, as nvcc's
code for the same loop in CUDA C++ does. Checked in the PTX, without a GPU."""
import re

import numpy as np

import kernelkit as kk
from backends.cuda import CUDABackend


@kk.kernel
def grid_stride_sum(partial, x: kk.Const, n):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(i, n, kk.ndrange()[0]):
        acc += x[p]
    partial[i] = acc


def loops(ptx: str) -> list[list[str]]:
    """The lines of each loop in PTX: from a label to a branch back to it."""
    lines = ptx.splitlines()
    labels = {line[:-1]: number for number, line in enumerate(lines)
              if re.fullmatch(r"\$L__BB\d+_\d+:", line)}
    found = []
    for number, line in enumerate(lines):
        branch = re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", line)
        if branch and labels.get(branch.group(1), number) < number:
            found.append(lines[labels[branch.group(1)]:number + 1])
    return found


def test_a_grid_stride_loop_issues_the_loads_of_several_trips_together():
    x = np.zeros(4096, np.float32)
    ptx = kk.code_native(grid_stride_sum, CUDABackend.compile_only("sm_90"), x, x, 4096,
                         ndrange=1024, workgroupsize=256)
    body = loops(ptx)
    assert max(sum("ld.global.nc" in line for line in loop) for loop in body) >= 4, ptx
    # The trip count's division is made once, before the loops.
    assert any(line.strip().startswith("div.") for line in ptx.splitlines())
    assert not any(line.strip().startswith("div.") for loop in body for line in loop)
