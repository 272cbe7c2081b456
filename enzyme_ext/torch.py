"""A kernelkit program as a PyTorch autograd function: `function(program)`.

    import enzyme_ext.torch

    def program(x, w):                         # kernelkit arrays in, arrays out
        backend = kk.get_backend(x)
        y = kk.empty_like(x)
        sin_times(backend, 256)(y, x, ndrange=len(x))      # y = sin(x) * x
        z = kk.empty_like(x)
        times(backend, 256)(z, y, w, ndrange=len(x))       # z = y * w
        return z

    f = enzyme_ext.torch.function(program)     # a torch.autograd.Function
    loss = (f.apply(x, w) ** 2).sum()          # x, w: tensors, CPU or CUDA
    loss.backward()                            # x.grad, w.grad

The convention, as a PyTorch user expects of a function:

- Each tensor argument reaches the program as a kernelkit array over the tensor's own
  memory, never a copy: a NumPy array for a CPU tensor, an array of the CUDA backend
  (through the CUDA array interface, ordered after PyTorch's current stream) for a CUDA
  tensor; the program launches on `kk.get_backend(x)`. A tensor of shape () reaches it
  as a Python number, and anything else (numbers, settings) as it is. All tensors are on
  one device.
- The arrays are read-only: autograd keeps the tensors for the backward pass, so a
  launch that writes one is refused. A program that needs to change one copies it
  first (`kk.copyto` into `kk.empty_like`).
- The program returns an array, or a tuple of arrays, that it made; `apply` returns
  them as tensors over the same memory, on the arguments' device.
- The forward pass records the program's launches (`enzyme_ext.program`) where any
  argument requires grad, keeping their tapes in the autograd graph; the backward pass
  copies the outputs' gradients into their shadows and runs the reverse kernels. A
  float tensor that requires grad gets its gradient as a tensor on its device, a tensor
  of shape () through `Active`. A second backward pass over the same graph
  (`retain_graph=True`, as `torch.autograd.gradcheck` does) records the program again
  from the saved tensors: a recording is reversed once.

PyTorch is an optional extra (`pip install 'kernelkit[torch]'`); `import enzyme_ext`
does not import it. This module must not know any backend: the tensors' memory says
which one runs the program."""
from __future__ import annotations

try:
    import torch
except ImportError as error:
    raise ImportError("enzyme_ext.torch needs PyTorch, an optional extra of kernelkit: "
                      "pip install 'kernelkit[torch]' (or pip install torch)") from error

import kernelkit as kk
from kernelkit.errors import KernelkitError
from kernelkit.runtime.arguments import in_host_memory

from .frameworks import ProgramCall
from .program import _name

DEVICE_TYPES = ("cpu", "cuda")
"""The devices whose tensors kernelkit's backends read in place."""


def function(program) -> type[torch.autograd.Function]:
    """`program` (a Python function launching kernelkit kernels, `enzyme_ext.program`)
    as a `torch.autograd.Function`: call it with `.apply(*args)`; its backward runs the
    program's reverse pass. The module docstring states the calling convention."""

    # Named after the program, so that a tensor's grad_fn (<programBackward>) says which.
    return type(_name(program), (torch.autograd.Function,), {
        "__doc__": f"The program {_name(program)!r} with its reverse pass as backward.",
        "forward": staticmethod(lambda ctx, *args: _forward(ctx, program, args)),
        "backward": staticmethod(lambda ctx, *grads: _backward(ctx, program, grads)),
    })


def _forward(ctx, program, args: tuple):
    _check_device(program, args)
    arguments = [_argument(value) for value in args]
    call = ProgramCall(program, arguments, ctx.needs_input_grad)
    outputs = tuple(map(_tensor, call.outputs))
    positions = [i for i, value in enumerate(args) if isinstance(value, torch.Tensor)]
    ctx.save_for_backward(*(args[i] for i in positions))
    ctx.positions, ctx.arguments, ctx.call = positions, arguments, call
    ctx.mark_non_differentiable(*(tensor for tensor, output in zip(outputs, call.outputs)
                                  if not call.carries(output)))
    return outputs[0] if call.single else outputs


def _backward(ctx, program, gradients: tuple) -> tuple:
    # Reading saved_tensors is where PyTorch checks that none was changed in place.
    tensors = dict(zip(ctx.positions, ctx.saved_tensors))
    call, ctx.call = ctx.call, None
    if call is None:    # a second backward pass: record the program again
        call = ProgramCall(program, ctx.arguments, ctx.needs_input_grad)
    derivatives = call.reverse([None if gradient is None else _array(gradient)
                                for gradient in gradients])
    return tuple(_gradient(derivative, tensors.get(position))
                 for position, derivative in enumerate(derivatives))


def _gradient(derivative, tensor: torch.Tensor | None) -> torch.Tensor | None:
    """A derivative of `ProgramCall.reverse` as the gradient of `tensor`: a shadow array
    seen as a tensor (no copy), an `Active` number's as a tensor of shape ()."""
    if derivative is None:
        return None
    if isinstance(derivative, float):
        return torch.tensor(derivative, dtype=tensor.dtype, device=tensor.device)
    return _tensor(derivative)


def _tensor(array) -> torch.Tensor:
    """A program's array as a tensor over its memory, once its launches have written it:
    an array in host memory after `kk.to_numpy` has waited for them (it does not copy
    one), a device array ordered after them by DLPack's exchange of streams."""
    if in_host_memory(array):
        array = kk.to_numpy(array)
    return torch.from_dlpack(array)


def _check_device(program, args: tuple) -> None:
    """The tensors are on one device, one whose memory a backend reads in place."""
    devices = sorted({str(value.device) for value in args
                      if isinstance(value, torch.Tensor)})
    if len(devices) > 1:
        raise KernelkitError(f"program '{_name(program)}': its tensors are on several "
                             f"devices ({', '.join(devices)}); move them to one")
    if devices and torch.device(devices[0]).type not in DEVICE_TYPES:
        raise KernelkitError(f"program '{_name(program)}': its tensors are on device "
                             f"'{devices[0]}'; kernelkit reads CPU and CUDA tensors in "
                             f"place, move them to one of those")


def _argument(value):
    """What the program gets for an argument of `apply`: a tensor's array (a number for
    a tensor of shape ()), anything else as it is."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.dim() == 0:
        return value.item()
    return _array(value)


def _array(tensor: torch.Tensor):
    """A read-only kernelkit array over `tensor`'s memory: a NumPy view of a CPU tensor,
    the CUDA backend's view of a CUDA tensor."""
    tensor = tensor.detach()
    if tensor.device.type == "cpu":
        view = tensor.numpy()
        view.flags.writeable = False
        return view
    gpu_array = _ReadOnlyCUDATensor(tensor)
    return kk.to_backend(kk.get_backend(gpu_array), gpu_array)


class _ReadOnlyCUDATensor:
    """A CUDA tensor through the CUDA array interface (version 3), read-only and naming
    the stream PyTorch queues its work on: the backend that takes it orders its launches
    after that stream's work, and refuses a launch that would write it. PyTorch's own
    interface says neither."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        interface = dict(tensor.__cuda_array_interface__)
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        # The interface spells PyTorch's default stream (handle 0), the legacy one, 1.
        interface.update(data=(interface["data"][0], True), version=3, stream=stream or 1)
        self.__cuda_array_interface__ = interface
