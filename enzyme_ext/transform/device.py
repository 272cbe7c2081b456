"""Device-level AD: the `enzyme.autodiff` markers a kernel's `autodiff` calls leave
(`enzyme_ext/device.py`), replaced before the generic passes by calls of a tangent
function of the device function, which the inline pass then inlines.

The tangent function `f.jvp` takes each argument followed, when it is differentiated,
by its tangent, and returns (result, tangent of the result). Forward mode calls it once.
Reverse mode of a function of numbers calls it once per `Active` argument, with that
argument's tangent 1 and the others' 0: each call gives one entry of the gradient, with
no tape, whatever loops the function runs."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.definitions import DEFERRED, INTRINSIC, RET
from kernelkit.ir.function import Function, Module
from kernelkit.ir.ops import Op, is_op
from kernelkit.ir.rewriter import Rewriter
from kernelkit.passes.inline import inline_calls

from ..activities import Const, Duplicated, has_shadow, is_differentiated
from ..device import MARKER, derivative_type
from ..signature import FORWARD, Parameter
from .activity import analyze
from .clone import clone_with_parameters
from .forward import Tangents


def expand_device_autodiff(module: Module) -> None:
    for function in list(module.functions.values()):
        for op in [op for op in function.ops()
                   if op.definition is INTRINSIC and op.attrs["name"] == MARKER]:
            expand(module, function, op)


def expand(module: Module, caller: Function, marker: Op) -> None:
    reference, *operands = marker.operands
    assert is_op(reference, DEFERRED)
    function = module.functions[reference.attrs["function"]]
    activities = list(marker.attrs["activities"])
    differentiated = [is_differentiated(a) for a in activities]
    jvp = tangent_function(module, function, differentiated)
    b = Rewriter(caller)
    b.position_before(marker)
    b.loc = marker.loc
    primals, tangents, position = [], [], 0
    for activity in activities:
        primals.append(operands[position])
        tangents.append(operands[position + 1] if has_shadow(activity) else None)
        position += 2 if has_shadow(activity) else 1

    def call(seeds) -> Op:
        arguments = []
        for primal, differentiates, seed in zip(primals, differentiated, seeds):
            arguments.append(primal)
            if differentiates:
                arguments.append(b.cast(seed, primal.type.strong))
        result = b.op("call", arguments, jvp.return_type, {"callee": jvp.name})
        return b.extract(result, 1)

    if marker.attrs["mode"] == FORWARD:
        result = b.cast(call(tangents), marker.type)
    else:
        entries = []
        for index, primal in enumerate(primals):
            type = derivative_type(primal.type)
            if not differentiated[index]:
                entries.append(b.constant(0.0, type))
                continue
            seeds = [b.constant(float(k == index), p.type.strong) if d else None
                     for k, (p, d) in enumerate(zip(primals, differentiated))]
            entries.append(b.cast(call(seeds), type))
        result = b.make_tuple(entries)
    b.replace_op(marker, result)


def tangent_function(module: Module, function: Function, differentiated: list[bool]
                     ) -> Function:
    """`function.jvp`: (arguments and tangents) -> (result, its tangent), once per module
    for each choice of differentiated arguments."""
    name = f"{function.name}.jvp" + "".join("d" if d else "c" for d in differentiated)
    if name in module.functions:
        return module.functions[name]
    parameters = []
    for index, (param, argument_name, differentiates) in enumerate(
            zip(function.params, function.arg_names, differentiated)):
        parameters.append(Parameter(argument_name, param.type, "primal", index))
        if differentiates:
            parameters.append(Parameter(f"d_{argument_name}", param.type.strong, "shadow",
                                        index))
    clone, values, extra = clone_with_parameters(function, name, parameters)
    clone.is_kernel = False
    inline_calls(clone, module)
    activities = [(Duplicated if d else Const).name for d in differentiated]
    primal_params = [p for p in clone.params if p not in extra.values()]
    activity = analyze(clone, activities, primal_params)
    tangents = Tangents(clone, activity.values, activity.arrays, extra, activities,
                        primal_params, {p: p for p in primal_params}, module)
    tangents.run()
    result = function.return_type
    clone.return_type = T.TupleType((result, result.strong))
    b = tangents.b
    for op in [op for op in clone.ops() if op.definition is RET]:
        b.position_before(op)
        b.loc = op.loc
        (value,) = op.operands
        op.operands = [b.make_tuple([value, tangents.of(value, result.strong)])]
    module.add(clone)
    return clone
