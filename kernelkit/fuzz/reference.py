"""The reference result of a case: its kernel's Python source, run work-item by
work-item with NumPy scalars.

The reference's copy of the module (`Case.reference_source`) turns barriers into
`yield`, so a work-group's items are generators: each runs to its next barrier, and
when all have arrived (`kk.synchronize_any` hands its condition over and gets the
group's answer back) they go on together. A subgroup operation is such a meeting too
(`kk.subgroup_call` hands over its operands, and each item gets its own result, see
`subgroups`), but not a barrier: what one item wrote to local memory before it is no
more visible to another after it. A device function with a subgroup operation is a
generator as well, run by its caller (`kk.device_call`), and items meet in it only when
they came by the same call. Items that reach different barriers or subgroup
operations, or one while others have finished, are an invalid kernel. Work-groups run one after
another, each with its own local memory."""
from __future__ import annotations

import inspect
import itertools
import linecache
import warnings

import numpy as np

from .emulation import AnyOf, InvalidKernel, KernelLanguage, PythonMath, linear_index
from .scalars import numpy_semantics_check
from .subgroups import SubgroupCall, answers as subgroup_answers

numpy_semantics_check()

_counter = itertools.count()


def load_module(source: str, name: str, globals_: dict | None = None) -> dict:
    """Execute generated source as a module whose functions `inspect` can read."""
    filename = f"<kernelkit-fuzz {name} #{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": name, "__file__": filename, **(globals_ or {})}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def forget_module(namespace: dict) -> None:
    linecache.cache.pop(namespace.get("__file__"), None)


def run_reference(case, arguments: list) -> None:
    """Run `case` on `arguments` (as `Case.arguments` gives them), updating its arrays in
    place. Raises InvalidKernel, or whatever the kernel's Python raises."""
    language = KernelLanguage()
    namespace = load_module(case.reference_source(), f"fuzz_reference_{case.seed}",
                            {"kk": language, "math": PythonMath()})
    try:
        kernel = namespace[case.kernel_name]
        values = [a[1] if isinstance(a, tuple) else a for a in arguments]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _run(kernel, values, language, case.ndrange, case.workgroupsize)
    finally:
        forget_module(namespace)


def _run(kernel, values, language: KernelLanguage, ndrange, workgroupsize) -> None:
    counts = tuple(-(-n // w) for n, w in zip(ndrange, workgroupsize))
    language.ndrange_sizes, language.group_sizes = ndrange, workgroupsize
    language.group_counts = counts
    is_generator = inspect.isgeneratorfunction(kernel)
    for group in itertools.product(*(range(c) for c in counts)):
        language.group_index = group
        language.group_memory = {}
        items = []
        for local in itertools.product(*(range(w) for w in workgroupsize)):
            item = tuple(g * w + l for g, w, l in zip(group, workgroupsize, local))
            if all(i < n for i, n in zip(item, ndrange)):
                items.append((item, local))
        if not is_generator:
            for item, local in items:
                language.item, language.local_index = item, local
                kernel(*values)
            continue
        _run_group(kernel, values, language, items)


def _run_group(kernel, values, language, items) -> None:
    running = []
    for item, local in items:
        language.item, language.local_index = item, local
        running.append((item, local, kernel(*values)))
    answers = [None] * len(running)
    while running:
        arrived, finished = [], []
        for (item, local, generator), answer in zip(running, answers):
            language.item, language.local_index = item, local
            try:
                arrived.append((item, local, generator, generator.send(answer)))
            except StopIteration:
                finished.append(item)
        if arrived and finished:
            raise InvalidKernel(f"work-items {finished[:3]} finished while "
                                f"{[a[0] for a in arrived[:3]]} wait at a barrier")
        if len({a[3] for a in arrived}) > 1:
            raise InvalidKernel("the work-items of a group reached different barriers")
        meeting = arrived[0][3] if arrived else None
        if isinstance(meeting, SubgroupCall):
            answers = subgroup_answers([a[3] for a in arrived],
                                       [int(linear_index(a[1], language.group_sizes))
                                        for a in arrived])
        elif isinstance(meeting, AnyOf):
            language.phase += 1
            result = np.bool_(any(a[3].condition for a in arrived))
            answers = [result] * len(arrived)
        else:
            language.phase += 1
            answers = [None] * len(arrived)
        running = [(item, local, generator) for item, local, generator, _ in arrived]
