"""Dominance: which blocks every path from the entry passes on its way to a block
(dominators), and which every path from a block passes on its way out of the function
(post-dominators). One algorithm serves both, Cooper, Harvey and Kennedy's iterative one,
which works on any graph: post-dominators are dominators of the reversed control-flow
graph, and a caller may pass a graph of its own (the blocks of one barrier region)."""
from __future__ import annotations

from ..ir.function import Block, Function


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
    # Reverse post-order of the reversed graph, from the exit.
    order, seen = [], {exit_node}
    stack = [(exit_node, iter(predecessors[exit_node]))]
    while stack:
        node, following = stack[-1]
        for next_node in following:
            if next_node not in seen:
                seen.add(next_node)
                stack.append((next_node, iter(predecessors[next_node])))
                break
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    ipdom = immediate_dominators(order, successors)
    return {b: (None if ipdom.get(b) is exit_node else ipdom.get(b)) for b in blocks}
