"""`enzyme_ext.torch.function(program)`: a kernelkit program as a `torch.autograd.Function`
whose backward runs the program's reverse pass, on the tensors' memory. Checked with
`torch.autograd.gradcheck` in float64 and against the same function written in PyTorch,
on CPU tensors (launches under the race detector) and CUDA tensors where PyTorch and
kernelkit both have a GPU. Skipped without PyTorch (an optional extra)."""
import subprocess
import sys

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.errors import KernelkitError

torch = pytest.importorskip("torch")
import enzyme_ext.torch  # noqa: E402 - only where PyTorch is installed

from framework_programs import GROUP, chained, double_in_place, on, overwriting, square  # noqa: E402

N = 12


def _cuda_unavailable() -> str | None:
    if not torch.cuda.is_available():
        return "PyTorch sees no GPU"
    return kk.backend_unavailable_reason("cuda")


CUDA_UNAVAILABLE = _cuda_unavailable()


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    CUDA_UNAVAILABLE is not None, reason=str(CUDA_UNAVAILABLE)))])
def device(request):
    return request.param


@pytest.fixture
def backend(device):
    """Where the tensors' arrays run: the CPU under the race detector, or the GPU."""
    return kk.CPU(debug="races") if device == "cpu" else kk.make_backend("cuda")


def tensor(values, device, requires_grad=True):
    return torch.tensor(values, dtype=torch.float64, device=device,
                        requires_grad=requires_grad)


def x0():
    return np.linspace(0.1, 1.2, N)


def test_gradcheck_passes_on_two_launches_chained_through_a_temporary(device, backend):
    f = enzyme_ext.torch.function(on(backend, chained))
    x, w = tensor(x0(), device), tensor(np.linspace(-1.0, 2.0, N), device)
    torch.testing.assert_close(f.apply(x, w), torch.sin(x) * x * w)
    assert torch.autograd.gradcheck(f.apply, (x, w))


def test_gradcheck_passes_where_a_launch_overwrites_what_an_earlier_one_read(device,
                                                                           backend):
    """The scalar `a`, a tensor of shape (), is an `Active` argument of the program."""
    f = enzyme_ext.torch.function(on(backend, overwriting))
    x, a = tensor(x0(), device), tensor(1.5, device)
    torch.testing.assert_close(f.apply(x, a), a * torch.sin(x * x))
    assert torch.autograd.gradcheck(f.apply, (x, a))


def test_gradients_flow_through_a_larger_torch_computation(device):
    """The program launches where its arrays are (`kk.get_backend`), as a user writes it."""
    def program(x, w):
        return chained(kk.get_backend(x), x, w)

    f = enzyme_ext.torch.function(program)
    x, w = tensor(x0(), device), tensor(np.linspace(-1.0, 2.0, N), device)
    ((f.apply(torch.exp(x), w) ** 2).sum() + (x * w).sum()).backward()
    x_ref, w_ref = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    e = torch.exp(x_ref)
    (((torch.sin(e) * e * w_ref) ** 2).sum() + (x_ref * w_ref).sum()).backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-12, atol=1e-12)
    assert x.grad.device == x.device


def test_the_program_works_on_the_tensors_memory_and_returns_its_own(device, backend):
    """No copies: the program's argument is the tensor's memory, its output the result's."""
    seen = {}

    def program(x):
        y = kk.empty_like(x)
        square(backend, GROUP)(y, x, ndrange=len(x))
        seen.update(x=pointer(x), y=pointer(y))
        return y

    x = tensor(x0(), device)
    y = enzyme_ext.torch.function(program).apply(x)
    assert (seen["x"], seen["y"]) == (x.data_ptr(), y.data_ptr())
    assert y.device == x.device


def pointer(array) -> int:
    interface = getattr(array, "__array_interface__", None) or \
        array.__cuda_array_interface__
    return interface["data"][0]


def test_a_second_backward_pass_records_the_program_again(device, backend):
    f = enzyme_ext.torch.function(on(backend, chained))
    x, w = tensor(x0(), device), tensor(np.ones(N), device, requires_grad=False)
    loss = f.apply(x, w).sum()
    loss.backward(retain_graph=True)
    once = x.grad.clone()
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * once, rtol=0, atol=0)
    xd = x.detach()
    torch.testing.assert_close(once, torch.sin(xd) + xd * torch.cos(xd))


def test_the_same_tensor_twice_gets_the_sum_of_both_gradients(device, backend):
    f = enzyme_ext.torch.function(on(backend, chained))
    x = tensor(x0(), device)
    f.apply(x, x).sum().backward()
    xd = x.detach()
    torch.testing.assert_close(x.grad, (torch.sin(xd) + xd * torch.cos(xd)) * xd +
                               torch.sin(xd) * xd)


def test_a_program_that_writes_its_argument_is_refused_and_the_tensor_is_unchanged(
        device, backend):
    def doubles(x):
        double_in_place(backend, GROUP)(x, ndrange=len(x))
        return x

    x = tensor(x0(), device)
    with pytest.raises(KernelkitError, match="argument 'x' is read-only"):
        enzyme_ext.torch.function(doubles).apply(x)
    np.testing.assert_array_equal(x.detach().cpu().numpy(), x0())


def test_tensors_on_a_device_kernelkit_cannot_read_are_refused():
    f = enzyme_ext.torch.function(lambda x: x)
    with pytest.raises(KernelkitError, match="device 'meta'; kernelkit reads CPU and CUDA"):
        f.apply(torch.zeros(N, device="meta"))


def test_importing_enzyme_ext_imports_neither_torch_nor_jax():
    code = ("import sys, enzyme_ext\n"
            "print(sorted({'torch', 'jax'} & set(sys.modules)))\n")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout
    assert found.strip() == "[]"


def test_without_pytorch_the_import_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # as if it were not installed
    monkeypatch.delitem(sys.modules, "enzyme_ext.torch")
    with pytest.raises(ImportError, match=r"pip install 'kernelkit\[torch\]'"):
        import enzyme_ext.torch  # noqa: F401
