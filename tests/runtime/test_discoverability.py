"""What `help(kk)`, `dir(kk)`, editors and type checkers find: every public name in
`kk.__all__` (the backends too, though they are imported only when first named), no
leftovers of the implementation, and in-kernel functions with the signature a kernel
calls them with, an example in their docstring, and a clear error on the host."""
import inspect
import os
import pydoc

import pytest

import kernelkit as kk

IN_KERNEL = ["index", "groupsize", "ngroups", "ndrange", "localmem", "private",
             "synchronize_any", "atomic_add", "atomic_sub", "atomic_min", "atomic_max",
             "atomic_and_", "atomic_or_", "atomic_xor", "atomic_exchange", "atomic_cas",
             "deferred", "print"]


def test_every_name_in_all_exists_and_the_main_ones_are_there():
    assert all(hasattr(kk, name) for name in kk.__all__)
    assert len(set(kk.__all__)) == len(kk.__all__)
    for name in ["kernel", "index", "ngroups", "ndrange", "synchronize", "CPU", "CUDABackend",
                 "zeros", "empty", "full", "zeros_like", "ones_like", "empty_like", "sqrt",
                 "CompileError", "Const", "Global"]:
        assert name in kk.__all__, name


def test_dir_shows_the_backends_and_no_import_leftovers():
    names = dir(kk)
    assert "CPU" in names and "CUDABackend" in names
    assert "annotations" not in names and not hasattr(kk, "annotations")


def test_help_lists_the_functions_and_backends():
    text = pydoc.render_doc(kk, renderer=pydoc.plaintext)
    for shown in ["kernel(function", "index(kind", "ngroups()", "localmem(dtype", "class CPU",
                  "zeros("]:
        assert shown in text, shown


def test_a_type_marker_ships_with_the_package():
    assert os.path.isfile(os.path.join(os.path.dirname(kk.__file__), "py.typed"))


@pytest.mark.parametrize("name", IN_KERNEL)
def test_in_kernel_functions_show_their_real_signature_and_an_example(name):
    function = getattr(kk, name)
    parameters = inspect.signature(function).parameters.values()
    if name != "print" and name != "deferred":
        assert all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
    assert "@kk.kernel" in function.__doc__
    assert "only meaningful" not in function.__doc__


def test_in_kernel_signatures_name_what_a_kernel_passes():
    assert list(inspect.signature(kk.index).parameters) == ["kind", "style"]
    assert list(inspect.signature(kk.localmem).parameters) == ["dtype", "shape"]
    assert list(inspect.signature(kk.atomic_cas).parameters) == ["array", "index", "expected",
                                                                 "new"]
    assert list(inspect.signature(kk.print).parameters) == ["values", "sep", "end"]


@pytest.mark.parametrize("name", IN_KERNEL)
def test_in_kernel_functions_called_on_the_host_say_where_they_belong(name):
    function = getattr(kk, name)
    arguments = [None] * sum(p.default is p.empty and p.kind is not p.VAR_POSITIONAL
                             for p in inspect.signature(function).parameters.values())
    with pytest.raises(kk.KernelkitError) as info:
        function(*arguments)
    assert f"kk.{name}() can only be called inside a @kk.kernel function" in str(info.value)
    assert f"see help(kk.{name})" in str(info.value)
