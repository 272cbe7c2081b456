"""Dominance: which blocks every path from the entry passes on its way to a block. It
belongs to the IR because SSA form is defined by it (each use of a value is dominated by
its definition, which the verifier checks). The algorithm is Cooper, Harvey and Kennedy's
iterative one, which works on any graph: `kernelkit.analysis.dominance` runs it on the
reversed control-flow graph for post-dominators, and a caller may pass a graph of its own
(the blocks of one barrier region)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .function import Block, Function


def reverse_post_order(root, successors) -> list:
    """The nodes reachable from `root` (through `successors(node)`), in reverse post-order:
    each node before those it dominates."""
    seen, order = {root}, []
    stack = [(root, iter(successors(root)))]
    while stack:
        node, following = stack[-1]
        for successor in following:
            if successor not in seen:
                seen.add(successor)
                stack.append((successor, iter(successors(successor))))
                break
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    return order


def immediate_dominators(order: list, predecessors: dict) -> dict:
    """`order`: the nodes in reverse post-order from the root (order[0]); returns each
    reachable node's immediate dominator (the root's is itself)."""
    position = {node: index for index, node in enumerate(order)}
    idom = {order[0]: order[0]}
    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            candidates = [p for p in predecessors.get(node, ()) if p in idom]
            if not candidates:
                continue
            new = candidates[0]
            for other in candidates[1:]:
                a, b = new, other
                while a is not b:
                    while position[a] > position[b]:
                        a = idom[a]
                    while position[b] > position[a]:
                        b = idom[b]
                new = a
            if idom.get(node) is not new:
                idom[node] = new
                changed = True
    return idom


def dominates(idom: dict, a, b) -> bool:
    """Whether `a` dominates `b` in the tree `idom` (from immediate_dominators); False
    when `b` is not in the tree (unreachable)."""
    while b is not a:
        if b not in idom or idom[b] is b:
            return False
        b = idom[b]
    return True


def block_dominators(function: Function) -> dict[Block, Block]:
    """The immediate dominator of each block reachable from the entry (the entry's is
    itself)."""
    return immediate_dominators(function.reachable_blocks(), function.predecessors())
