"""Dominator trees (Cooper, Harvey and Kennedy's iterative algorithm), for any graph: run
on the reversed control-flow graph it gives post-dominators; and the natural loops of a
function, found from its dominator tree."""
from __future__ import annotations


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
    """Whether `a` dominates `b` in the tree `idom` (from immediate_dominators)."""
    while b is not a:
        if idom[b] is b:
            return False
        b = idom[b]
    return True


def natural_loops(function) -> dict:
    """Each loop header with the blocks of its loop (header included)."""
    order = function.reachable_blocks()
    predecessors = function.predecessors()
    idom = immediate_dominators(order, predecessors)

    loops: dict = {}
    for block in order:
        for successor in block.successors:
            if dominates(idom, successor, block):
                body = loops.setdefault(successor, {successor})
                stack = [block]
                while stack:
                    current = stack.pop()
                    if current not in body:
                        body.add(current)
                        stack.extend(p for p in predecessors[current] if p in idom)
    return loops
