"""Custom rules in the AD transform: the `enzyme.custom_vjp` and `enzyme.custom_jvp`
markers (`enzyme_ext/custom.py`).

- Not differentiated (a plain kernel, or arguments that carry no derivative): the
  function is called (`plain_calls`).
- Reverse mode: `expand_vjp` makes the marker `out = fwd(args)[0]`, computed on copies
  of the arguments that carry no derivative (`enzyme.no_derivative`), and
  `enzyme.custom_vjp_result(out, residuals..., args...)`, whose reverse rule calls
  `bwd(residuals, adjoint)` and adds its results to the arguments' adjoints. The
  residuals are values the rule asks for, so they are recomputed or taped like any.
- Forward mode: the tangent of `enzyme.custom_jvp` is `jvp(args, tangents)[1]`."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.definitions import CALL_REF, DEFERRED, INTRINSIC
from kernelkit.ir.function import Function, Module
from kernelkit.ir.ops import Op, Value, is_op
from kernelkit.ir.rewriter import Rewriter
from kernelkit.passes.inline import inline_call

from ..custom import JVP_MARKER, VJP_MARKER
from .activity import source_error

NO_DERIVATIVE = "enzyme.no_derivative"
VJP_RESULT = "enzyme.custom_vjp_result"


def is_marker(value: Value, name: str) -> bool:
    return is_op(value, INTRINSIC) and value.attrs["name"] == name


def markers(function: Function, *names: str) -> list[Op]:
    return [op for op in function.ops() if op.definition is INTRINSIC and
            op.attrs["name"] in names]


def plain_calls(module: Module) -> None:
    """Every custom-rule marker in the module, as a call of its function."""
    for function in module.functions.values():
        for marker in markers(function, VJP_MARKER, JVP_MARKER):
            plain_call(function, marker)


def plain_call(function: Function, marker: Op) -> Value:
    rewriter = Rewriter(function)
    rewriter.position_before(marker)
    rewriter.loc = marker.loc
    reference = marker.operands[0]
    count = 3 if marker.attrs["name"] == VJP_MARKER else 2
    call = rewriter.op(CALL_REF, [reference, *marker.operands[count:]], marker.type)
    rewriter.replace_op(marker, call)
    erase_unused_references(rewriter, marker.operands[:count])
    return call


def erase_unused_references(rewriter: Rewriter, references) -> None:
    for reference in references:
        if is_op(reference, DEFERRED) and reference.block is not None and \
                not rewriter.is_used(reference):
            rewriter.erase(reference)


def expand_vjp(module: Module, kernel: Function, active) -> None:
    """Each `enzyme.custom_vjp` marker of the kernel whose arguments are differentiated
    (`active(value)`), in its reverse-mode form; the others as calls (inlined)."""
    for marker in markers(kernel, VJP_MARKER):
        _, forward, backward, *args = marker.operands
        if not any(active(a) for a in args):
            call = direct_call(kernel, plain_call(kernel, marker))
            inline_call(kernel, call, module.functions[call.attrs["callee"]])
            continue
        rewriter = Rewriter(kernel)
        rewriter.position_before(marker)
        rewriter.loc = marker.loc
        copies = [rewriter.op(INTRINSIC, [a], a.type, {"name": NO_DERIVATIVE})
                  if a.type.is_float else a for a in args]
        call = rewriter.op("call", copies, forward.type.result,
                           {"callee": forward.attrs["function"]})
        out, residuals = rewriter.extract(call, 0), rewriter.extract(call, 1)
        packed = isinstance(residuals.type, T.TupleType)
        parts = [rewriter.extract(residuals, i) for i in range(len(residuals.type.elements))] \
            if packed else [residuals]
        result = rewriter.op(INTRINSIC, [out, *parts, *args], marker.type,
                             {"name": VJP_RESULT, "backward": backward.attrs["function"],
                              "residuals": len(parts), "packed": packed})
        rewriter.replace_op(marker, result)
        erase_unused_references(rewriter, marker.operands[:3])
        inline_call(kernel, call, module.functions[call.attrs["callee"]])


def direct_call(function: Function, call: Op) -> Op:
    """A call through a `deferred` reference made there, as a direct call."""
    reference = call.operands[0]
    rewriter = Rewriter(function)
    rewriter.position_before(call)
    direct = rewriter.op("call", call.operands[1:], call.type,
                         {"callee": reference.attrs["function"]})
    rewriter.replace_op(call, direct)
    erase_unused_references(rewriter, [reference])
    return direct


def refuse_jvp_in_reverse(kernel: Function, active) -> None:
    for marker in markers(kernel, JVP_MARKER):
        if any(active(a) for a in marker.operands[2:]):
            raise source_error(kernel, marker, "a custom_jvp rule is a forward-mode rule; "
                               "this function is differentiated in reverse mode",
                               "give it a reverse-mode rule with custom_vjp")


def refuse_vjp_in_forward(function: Function, marker: Op) -> None:
    raise source_error(function, marker, "a custom_vjp rule is a reverse-mode rule; this "
                       "function is differentiated in forward mode",
                       "give it a forward-mode rule with custom_jvp")
