"""The AD compiler plugin: it makes the derivative kernels.

A derivative kernel is the primal kernel's compiler job with a transform
(`CompilerConfig.transforms`): the driver puts the marker `enzyme.derivative` at the
start of the kernel, with the mode, one activity per parameter, the shadows' types and
the work-group size as attributes. So everything the transform reads is in the
IR text: a module dumped before AD and replayed offline gives the same kernel. For the
launch rule it leaves, in every mode, the parameters the kernel writes in
`module.notes['enzyme.written']`, and in reverse mode the tape's layout
(`sizing.TapeLayout`) in `module.notes['enzyme']`. The plugin runs on the
target-neutral IR (device functions inlined, the generic passes run), so the tape
layout and the derivative kernels are the same for every target."""
from __future__ import annotations

from dataclasses import replace

from kernelkit.compiler.plugins import Plugin
from kernelkit.passes import Pipeline
from kernelkit.ir import types as T
from kernelkit.ir.definitions import INTRINSIC, LOAD, STORE
from kernelkit.ir.function import Function, Module
from kernelkit.ir.ops import Op, constant_value

from ..signature import (AUGMENTED, COMBINED, FORWARD, GATHER, GATHER_STORED, MODES,
                         REVERSE, REVERSE_UNZEROED, derivative_parameters, shadow_type)
from ..custom import JVP_MARKER, VJP_MARKER
from ..device import MARKER as DEVICE_MARKER
from .activity import source_error, written_arrays
from .combined import combined_kernel
from .custom import markers, plain_calls
from .device import expand_device_autodiff
from .forward import tangent_kernel
from .gather import gather_kernel, gathered_updates, leave_out, owned_whole
from .outputs import whole_outputs
from .reverse import reverse_kernels
from .sizing import tape_layout
from .stacks import narrow_float_tape

MARKER = "enzyme.derivative"
WRITTEN = "enzyme.written"
"""The key of `Module.notes` (and of a derivative kernel's notes) that gives the positions
of the parameters the primal kernel stores into or updates atomically: the launch rule
refuses arguments that share memory with one of them (`rules.py`)."""
EFFECTLESS = "enzyme.effectless"
"""The key of the notes that say the derivative kernel writes nothing (a reverse kernel
whose every update the gather kernel makes, or none makes): a launch skips it."""
REVERSE_READS = "enzyme.reverse_reads"
"""The key of the notes that give the positions of the primal parameters whose contents
the reverse kernels read (`reverse_reads`)."""
CLEAN_UP = ("simplify", "dce", "cse", "simplify", "dce")


def derivative_marker(kernel: Function) -> Op | None:
    for op in kernel.entry.ops:
        if op.definition is INTRINSIC and op.attrs["name"] == MARKER:
            return op
    return None


class ADPlugin(Plugin):
    name = "enzyme"
    marker = MARKER
    # The derivative kernels index their tapes by the work-item's global number and sum
    # over groups in local memory, behind barriers: what they do with groups is in the IR.
    work_groups_in_ir = True
    markers = (MARKER, DEVICE_MARKER, VJP_MARKER, JVP_MARKER)

    def cache_key(self) -> str:
        return "enzyme-3"

    def after_frontend(self, module: Module) -> None:
        expand_device_autodiff(module)
        if derivative_marker(module.kernel) is None:
            plain_calls(module)   # custom rules matter only to derivative kernels

    def after_generic_passes(self, module: Module) -> None:
        kernel = module.kernel
        marker = derivative_marker(kernel)
        if marker is None:
            return
        attrs = marker.attrs
        mode, activities = attrs["mode"], list(attrs["activities"])
        assert mode in MODES, mode
        kernel.entry.ops.remove(marker)
        written = written_arrays(kernel)
        module.notes[WRITTEN] = tuple(index for index, param in enumerate(kernel.params)
                                      if param in written)
        types = [p.type for p in kernel.params]
        if len(activities) != len(types):
            raise source_error(kernel, None, f"{len(activities)} activities for a kernel of "
                               f"{len(types)} parameters", "give one activity per argument")
        # A shadow's type not given (tape_type has no shadows): the primal's, writable.
        shadows = [t if isinstance(t, T.IRType) else shadow_type(primal)
                   for t, primal in zip(attrs["shadows"], types)]
        finite_scalars = bool(attrs.get("finite_scalars", False))
        if mode == FORWARD:
            parameters = derivative_parameters(mode, activities, list(kernel.arg_names),
                                               types, shadows)
            derivative = tangent_kernel(kernel, activities, parameters, module,
                                        finite_scalars)
        else:
            workgroupsize = tuple(attrs["workgroupsize"])
            custom = bool(markers(kernel, VJP_MARKER))   # (expanded by reverse_kernels)
            augmented, reverse, plan = reverse_kernels(
                kernel, activities, shadows, workgroupsize, module,
                subgroups_in_hardware=attrs.get("subgroups_in_hardware", False),
                finite_scalars=finite_scalars)
            names = list(kernel.arg_names)
            # The tape's floats as narrow as what it holds allows (float32 for float32).
            floats = plan.float_type
            for function in (augmented, reverse):
                narrow_float_tape(function, floats)
            reverse_parameters = derivative_parameters(REVERSE, activities, names, types,
                                                       shadows, floats)
            gather, targets = gathered(module, reverse, reverse_parameters, workgroupsize,
                                       stored=mode == GATHER_STORED)
            module.notes[REVERSE_READS] = reverse_reads(
                [function for function in (reverse, gather) if function is not None],
                reverse_parameters)
            outputs = whole_outputs(kernel, workgroupsize)
            if mode == REVERSE_UNZEROED:
                unzeroed(reverse, reverse_parameters, outputs)
            layout = replace(tape_layout(kernel, plan), gather=gather is not None,
                             float_type=floats, gathered=targets, whole_outputs=outputs,
                             primal=not plan.uses_tape and not custom)
            module.notes[self.name] = layout
            if mode == COMBINED:
                if not layout.combined:
                    raise source_error(kernel, None, "this kernel's tape grows with its "
                                       "loops: it has no combined kernel", "launch the "
                                       "combined kernel only where the tape layout says it "
                                       "has one")
                derivative = combined_kernel(
                    kernel, augmented, reverse, layout.constant_slots(), floats,
                    [derivative_parameters(AUGMENTED, activities, names, types, shadows,
                                           floats),
                     reverse_parameters],
                    derivative_parameters(COMBINED, activities, names, types, shadows))
            else:
                derivative = {AUGMENTED: augmented, REVERSE: reverse, GATHER: gather,
                              GATHER_STORED: gather, REVERSE_UNZEROED: reverse}[mode]
            if derivative is None:
                raise source_error(kernel, None, "this kernel's reverse pass has no gather "
                                   "kernel", "launch the gather kernel only where the "
                                   "reverse kernel's tape layout says it has one")
        # Everything the derivative calls is inlined into it. Its launches refuse
        # arguments that share memory where one is written (`rules.py`).
        derivative.disjoint_arrays = True
        module.functions = {derivative.name: derivative}
        # The derivative kernel is built block by block, with values recomputed where
        # they are needed, and keeps adjoints, counters and a combined kernel's tape in
        # private cells: those become values first (`promote-private`: the reverse of a
        # counted loop is then a counted loop to the target), and only here, after the
        # gather kernel was split off the reverse kernel as it was built; the generic
        # clean-up passes merge and share what they can;
        # then each block's loads go first (`hoist-loads`: on a GPU their latencies
        # overlap, where the shadows' were waited for one after another).
        Pipeline(("promote-private",) + CLEAN_UP + ("hoist-loads",))(module)
        module.notes[EFFECTLESS] = not any(
            op.definition.effects.writes or op.definition.effects.unknown
            for op in derivative.ops())


def reverse_reads(functions: list[Function], parameters) -> tuple[int, ...]:
    """The primal parameters (by position) whose contents the reverse kernels (`functions`:
    the reverse kernel and its gather kernel, whose parameters are the same) may read:
    every one they use other than as where a store goes. A program need not keep the
    values of an array no reverse kernel reads when a later launch overwrites it."""
    read = set()
    for function in functions:
        for op in function.ops():
            operands = op.operands[1:] if op.definition is STORE else op.operands
            read.update(operand for operand in operands if operand in function.params)
    return tuple(sorted({p.index for function in functions
                         for param, p in zip(function.params, parameters)
                         if p.role == "primal" and param in read}))


def gathered(module: Module, reverse: Function, parameters, workgroupsize, stored: bool
             ) -> tuple[Function | None, tuple[tuple[int, bool], ...]]:
    """The gather kernel of the reverse kernel's neighbours' shadow updates, which it then
    leaves out (`gather.py`), or None where there are none; and the shadows it updates,
    as (primal position, whether it stores into every element of the shadow where the
    ndrange is its shape, reading none: `owned_whole`, and no update reads the shadow).
    Both kernels read the reverse kernel as the clean-up passes leave it. The `stored`
    gather kernel stores into shadows known to be zero, where the other adds."""
    module.functions = {reverse.name: reverse}
    Pipeline(CLEAN_UP)(module)
    shadows = {param: p.index for param, p in zip(reverse.params, parameters)
               if p.role == "shadow"}
    updates = gathered_updates(reverse, list(shadows), workgroupsize)
    if not updates:
        return None, ()
    gather = gather_kernel(reverse, updates, workgroupsize, stored=stored)
    leave_out(reverse, updates, workgroupsize)
    # The gather kernel's reads of each shadow it updates, but the adding kernel's read
    # of the element it adds into: a shadow read at a neighbour's element too cannot be
    # stored into from zeros in value only.
    reads = {shadow: -1 if not stored else 0 for shadow in updates}
    mine = dict(zip(gather.params, reverse.params))
    for op in gather.ops():
        if op.definition is LOAD and mine.get(op.operands[0]) in reads:
            reads[mine[op.operands[0]]] += 1
    return gather, tuple((shadows[shadow], owned_whole(sites, workgroupsize) and not reads[shadow])
                         for shadow, sites in updates.items())


def unzeroed(reverse: Function, parameters, outputs: tuple[int, ...]) -> None:
    """The reverse kernel without its zeroing of the shadows of the arrays the kernel
    overwrites whole (`outputs.py`): each such store of 0 is the last access of its
    element, the shadow's other accesses being the loads of the adjoints."""
    shadows = {param for param, p in zip(reverse.params, parameters)
               if p.role == "shadow" and p.index in outputs}
    for block in reverse.blocks:
        block.ops = [op for op in block.ops if not (
            op.definition is STORE and op.operands[0] in shadows
            and constant_value(op.operands[-1]) == 0)]
