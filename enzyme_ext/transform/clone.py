"""A copy of the kernel with the parameters of a derivative kernel (`signature.py`)."""
from __future__ import annotations

from kernelkit.ir.function import Function
from kernelkit.ir.ops import Value
from kernelkit.ir.rewriter import clone_function

from ..signature import Parameter


def clone_with_parameters(kernel: Function, name: str, parameters: list[Parameter]
                          ) -> tuple[Function, dict[Value, Value], dict[tuple, Value]]:
    """(the copy, the copy of each value of `kernel`, the copy's parameters that are not
    the primal's, by (role, primal index or tape field)). The copy's parameters are in
    the order of `parameters`."""
    values: dict[Value, Value] = {}
    added = [p for p in parameters if p.role != "primal"]
    clone = clone_function(kernel, name, values,
                           added_params=[(p.name, p.type) for p in added])
    primal = {index: values[param] for index, param in enumerate(kernel.params)}
    extra = {(p.role, p.field or p.index): param
             for p, param in zip(added, clone.entry.params[len(kernel.params):])}
    ordered = [primal[p.index] if p.role == "primal" else extra[(p.role, p.field or p.index)]
               for p in parameters]
    clone.entry.params[:] = ordered
    clone.arg_names[:] = [p.name for p in parameters]
    return clone, values, extra
