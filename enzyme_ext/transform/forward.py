"""Forward mode: the tangent kernel, which computes the primal and, beside each active
value, its tangent.

Arithmetic follows the partials of `derivatives.PARTIALS`; a load from an active array
also loads its shadow at the same indices, a store also stores the tangent, an
`atomic_add` also adds the tangent into the shadow (its result may not be used: its
derivative would depend on the order the work-items ran in). A subgroup operation's
tangent is an exchange of the tangents (`derivatives.SUBGROUP_TANGENTS`). Loop-carried
values carry their tangents as block parameters beside them. A call with a custom rule
is its jvp."""
from __future__ import annotations

from kernelkit.ir import types as T
from kernelkit.ir.builder import Builder
from kernelkit.ir.definitions import (ATOMICS, BARRIER, INTRINSIC, LOAD, LOCALMEM, PRIVATE, STORE,
                                      Trait)
from kernelkit.ir.function import Function, Module
from kernelkit.ir.ops import Op, Value
from kernelkit.ir.rewriter import Rewriter
from kernelkit.passes.inline import inline_call

from ..signature import FORWARD, Parameter
from .activity import analyze, array_root, source_error
from ..custom import JVP_MARKER, VJP_MARKER
from .clone import clone_with_parameters
from .custom import (direct_call, erase_unused_references, plain_call,
                     refuse_vjp_in_forward)
from .derivatives import PARTIALS, SUBGROUP_TANGENTS, times


def tangent_kernel(kernel: Function, activities: list[str], parameters: list[Parameter],
                   module: Module, finite_scalars: bool = False) -> Function:
    """The forward-mode kernel; with `finite_scalars`, that of launches whose float scalar
    arguments are all finite (`derivatives.scaled`)."""
    activity = analyze(kernel, activities)
    clone, values, extra = clone_with_parameters(kernel, f"{kernel.name}.{FORWARD}",
                                                 parameters)
    active = {values[v] for v in activity.values}
    arrays = {values[a] for a in activity.arrays}
    tangents = Tangents(clone, active, arrays, extra, activities, kernel.params, values, module)
    tangents.finite = frozenset(values[param] for param in kernel.params if finite_scalars
                                and isinstance(param.type, T.ScalarType) and param.type.is_float)
    tangents.run()
    return clone


class Tangents:
    def __init__(self, function: Function, active: set, arrays: set, extra: dict,
                 activities: list[str], primal_params, values: dict, module: Module):
        self.function = function
        self.module = module
        self.calls: list[Op] = []          # of custom rules, inlined at the end
        self.active = active
        self.b = Builder(function)
        self.tangent: dict[Value, Value] = {}
        self.shadow: dict[Value, Value] = {}      # active array root -> its shadow
        for index, param in enumerate(primal_params):
            copy = values[param]
            shadow = extra.get(("shadow", index))
            if shadow is None:
                continue
            if copy in arrays:
                self.shadow[copy] = shadow
            elif copy in active:
                self.tangent[copy] = shadow
        self.arrays = arrays
        self.finite = frozenset()   # partials known finite (`derivatives.scaled`)

    def run(self) -> None:
        blocks = self.function.reachable_blocks()
        self.used = {operand for block in blocks for op in block.ops
                     for operand in op.all_operands()}
        for block in blocks[1:]:   # the entry's are the kernel's: their tangents are given
            for param in list(block.params):
                if param in self.active:
                    self.tangent[param] = block.add_param(param.type.strong, param.hint)
        for block in blocks:
            for op in list(block.ops):
                self.b.position_after(op) if not op.is_terminator else \
                    self.b.position_before(op)
                self.b.loc = op.loc
                self.differentiate(op)
        for block in blocks:
            terminator = block.terminator
            self.b.position_before(terminator)
            for successor in terminator.successors:
                extra_args = [self.of(arg, param.type.strong)
                              for param, arg in zip(successor.block.params, successor.args)
                              if param in self.tangent]
                successor.args.extend(extra_args)
        for call in self.calls:
            inline_call(self.function, call, self.module.functions[call.attrs["callee"]])

    def of(self, value: Value, type) -> Value:
        """The tangent of `value` (zero for an inactive one), as `type`."""
        tangent = self.tangent.get(value)
        if tangent is None:
            return self.b.constant(0.0, type)
        return tangent if tangent.type == type else self.b.cast(tangent, type)

    def differentiate(self, op: Op) -> None:
        definition, b = op.definition, self.b
        if op.is_terminator or definition is BARRIER:
            return
        if definition in (LOCALMEM, PRIVATE):
            if op in self.arrays:
                self.shadow[op] = b.op(definition, [], op.type, dict(op.attrs))
            return
        if definition is LOAD:
            root = array_root(self.function, op, op.operands[0])
            if op in self.active:
                self.tangent[op] = b.op(LOAD, [self.shadow[root], *op.operands[1:]], op.type)
            return
        if definition is STORE:
            root = array_root(self.function, op, op.operands[0])
            if root in self.shadow:
                value = op.operands[-1]
                b.op(STORE, [self.shadow[root], *op.operands[1:-1],
                             self.of(value, value.type.strong)])
            return
        if op.has(Trait.ATOMIC):
            root = array_root(self.function, op, op.operands[0])
            if root not in self.shadow:
                return
            if definition not in (ATOMICS["add"], ATOMICS["sub"]):
                raise source_error(self.function, op, f"{op.opcode} of a differentiated float "
                                   f"array has no derivative", "use atomic_add (or atomic_sub) "
                                   "on differentiated arrays, or pass the array as Const")
            if op in self.used:
                raise source_error(self.function, op, f"the result of {op.opcode} on a "
                                   f"differentiated array is used: its derivative depends on "
                                   f"the order the work-items ran in", "use the array's "
                                   "value after a barrier or in a later kernel instead")
            value = op.operands[-1]
            b.op(definition, [self.shadow[root], *op.operands[1:-1],
                              self.of(value, value.type.strong)], op.type)
            return
        if definition is INTRINSIC and op.attrs["name"] in (VJP_MARKER, JVP_MARKER):
            self.custom_rule(op)
            return
        if op not in self.active:
            return
        if op.has(Trait.SUBGROUP):
            self.subgroup_tangent(op)
            return
        rule = PARTIALS.get(definition)
        if rule is None:
            raise source_error(self.function, op, f"there is no derivative rule for "
                               f"'{op.opcode}' on values that carry derivatives",
                               "compute this value from Const arguments only, or give the "
                               "device function a custom rule (custom_jvp)")
        partials = rule(b, op.operands, lambda: op)
        total = None
        for operand, partial in zip(op.operands, partials):
            if operand not in self.tangent:
                continue
            tangent = self.tangent[operand]
            if tangent.type != op.type.strong:
                tangent = b.cast(tangent, op.type.strong)
            term = times(b, tangent, partial, self.finite)
            if term is not None:
                total = term if total is None else b.binary("add", total, term)
        self.tangent[op] = total if total is not None else b.constant(0.0, op.type.strong)

    def subgroup_tangent(self, op: Op) -> None:
        """The tangent of a subgroup operation, an exchange of the tangents
        (`SUBGROUP_TANGENTS`)."""
        rule = SUBGROUP_TANGENTS.get(op.definition)
        if rule is None:
            raise source_error(self.function, op, f"there is no derivative rule for "
                               f"'{op.opcode}' on values that carry derivatives",
                               "compute this value from Const arguments only")
        tangent = self.of(op.operands[0], op.type.strong)
        self.tangent[op] = rule(self.b, op, tangent, op.operands, lambda: op)

    def custom_rule(self, op: Op) -> None:
        """A call with a custom rule: a plain call when nothing it gets carries a
        derivative; else its jvp, (result, tangent) = jvp(arguments, tangents)."""
        b = self.b
        if op not in self.active:
            call = plain_call(self.function, op)
            self.calls.append(direct_call(self.function, call))
            return
        if op.attrs["name"] == VJP_MARKER:
            refuse_vjp_in_forward(self.function, op)
        _, jvp, *args = op.operands
        tangents = [self.of(a, a.type.strong if a.type.is_float else T.float64) for a in args]
        call = b.op("call", [b.make_tuple(list(args)), b.make_tuple(tangents)],
                    jvp.type.result, {"callee": jvp.attrs["function"]})
        self.calls.append(call)
        self.tangent[op] = b.cast(b.extract(call, 1), op.type.strong)
        result = b.extract(call, 0)
        rewriter = Rewriter(self.function)
        rewriter.replace_op(op, result)
        erase_unused_references(rewriter, op.operands[:2])
        if op in self.used:
            self.used.add(result)
        self.tangent[result] = self.tangent[op]

