"""Blocks, functions and modules: the containers of the IR."""
from __future__ import annotations

from dataclasses import dataclass, field

from .dominance import reverse_post_order
from .ops import BlockParam, Op
from .types import IRType, void


class Block:
    __slots__ = ("params", "ops", "function")

    def __init__(self, param_types: tuple[IRType, ...] = ()):
        self.params: list[BlockParam] = [BlockParam(t, self) for t in param_types]
        self.ops: list[Op] = []
        self.function: Function | None = None

    def add_param(self, type: IRType, hint: str = "") -> BlockParam:
        param = BlockParam(type, self, hint)
        self.params.append(param)
        return param

    def append(self, op: Op) -> Op:
        op.block = self
        self.ops.append(op)
        return op

    def insert_before_terminator(self, op: Op) -> Op:
        op.block = self
        self.ops.insert(len(self.ops) - 1 if self.is_terminated else len(self.ops), op)
        return op

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops and self.ops[-1].is_terminator else None

    @property
    def is_terminated(self) -> bool:
        return self.terminator is not None

    @property
    def successors(self) -> list[Block]:
        terminator = self.terminator
        return [s.block for s in terminator.successors] if terminator else []


@dataclass(eq=False)
class Function:
    """A kernel or a device function. The entry block's parameters are the arguments."""

    name: str
    arg_names: list[str]
    return_type: IRType = void
    is_kernel: bool = False
    blocks: list[Block] = field(default_factory=list)
    source_file: str = ""
    # A kernel whose launches pass array arguments that share no memory where one of them
    # is written (its launch refuses others, as enzyme_ext's do): accesses to different
    # array parameters are independent (the lowering says so to LLVM).
    disjoint_arrays: bool = False

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    @property
    def params(self):
        return self.entry.params

    def add_block(self, block: Block) -> Block:
        block.function = self
        self.blocks.append(block)
        return block

    def ops(self):
        for block in self.blocks:
            yield from block.ops

    def predecessors(self) -> dict[Block, list[Block]]:
        preds: dict[Block, list[Block]] = {b: [] for b in self.blocks}
        for block in self.blocks:
            for successor in block.successors:
                preds[successor].append(block)
        return preds

    def reachable_blocks(self) -> list[Block]:
        """Blocks reachable from the entry, in reverse post-order."""
        return reverse_post_order(self.entry, lambda block: block.successors)


@dataclass(eq=False)
class Module:
    """A kernel and every function it calls. `functions` is ordered: the kernel first."""

    functions: dict[str, Function] = field(default_factory=dict)
    # The compiler plugins whose markers the module called (not part of its text).
    plugins: tuple = ()
    # kk.deferred requests: function name -> (Python function, argument types), for the
    # driver's worklist to translate into the module (not part of its text).
    deferred: dict = field(default_factory=dict)
    # What plugins found out about the module for their host code, by plugin (not part
    # of its text: a plugin derives it from the text again when it runs).
    notes: dict = field(default_factory=dict)

    @property
    def kernel(self) -> Function:
        return next(iter(self.functions.values()))

    def add(self, function: Function) -> Function:
        self.functions[function.name] = function
        return function
