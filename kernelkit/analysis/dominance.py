"""Dominance as passes and analyses ask for it: the dominator tree, and post-dominators
(which blocks every path from a block passes on its way out of the function, the
dominators of the reversed control-flow graph). The dominator algorithm itself is the
IR's (`kernelkit.ir.dominance`, which the verifier needs); its functions are named here
too, so that passes take all of dominance from one module."""
from __future__ import annotations

from ..ir.dominance import block_dominators, dominates, immediate_dominators, reverse_post_order
from ..ir.function import Block, Function

__all__ = ["reverse_post_order", "immediate_dominators", "dominates", "block_dominators",
           "dominator_tree", "post_dominators"]


def dominator_tree(function: Function) -> dict[Block, list[Block]]:
    """The children of each reachable block in the dominator tree, in reverse post-order."""
    order = function.reachable_blocks()
    idom = immediate_dominators(order, function.predecessors())
    children: dict[Block, list[Block]] = {block: [] for block in order}
    for block in order[1:]:
        children[idom[block]].append(block)
    return children


def post_dominators(function: Function) -> dict[Block, Block | None]:
    """The immediate post-dominator of each reachable block (None: the virtual exit that
    every block without successors leads to)."""
    blocks = function.reachable_blocks()
    exit_node = object()
    successors = {b: b.successors or [exit_node] for b in blocks}
    predecessors: dict = {exit_node: []}
    for block in blocks:
        predecessors.setdefault(block, [])
    for block in blocks:
        for successor in successors[block]:
            predecessors.setdefault(successor, []).append(block)
    order = reverse_post_order(exit_node, predecessors.__getitem__)   # of the reversed graph
    ipdom = immediate_dominators(order, successors)
    return {b: (None if ipdom.get(b) is exit_node else ipdom.get(b)) for b in blocks}
