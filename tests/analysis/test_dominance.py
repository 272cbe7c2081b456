"""Dominance on small functions written as IR text: the immediate dominators of a diamond
and of a loop, `dominates` along the tree, the dominator tree's children, and
post-dominators (where the paths from a block join again on their way out)."""
from kernelkit.analysis.dominance import (block_dominators, dominates, dominator_tree,
                                          post_dominators)
from kernelkit.ir.parser import parse_module

DIAMOND = '''func @diamond(c, x) -> i32 file "f.py" {
^bb0(%0: bool, %1: i32):
  cbr %0, ^bb1(), ^bb2()
^bb1():
  %2 = add %1, %1 : i32
  br ^bb3(%2)
^bb2():
  br ^bb3(%1)
^bb3(%3: i32):
  ret %3
}
'''

# bb1 is the loop's header, bb2 its body, bb3 the exit; bb4 is unreachable.
LOOP = '''func @loop(n) -> i32 file "f.py" {
^bb0(%0: i32):
  %1 = const 0 : i32
  %2 = const 1 : i32
  br ^bb1(%1)
^bb1(%3: i32):
  %4 = lt %3, %0 : bool
  cbr %4, ^bb2(), ^bb3()
^bb2():
  %5 = add %3, %2 : i32
  br ^bb1(%5)
^bb3():
  ret %3
^bb4():
  ret %1
}
'''


def blocks_of(text: str):
    return parse_module(text).kernel.blocks


def test_the_join_of_a_diamond_is_dominated_by_the_branch_not_by_either_side():
    entry, left, right, join = blocks_of(DIAMOND)
    idom = block_dominators(entry.function)
    assert idom == {entry: entry, left: entry, right: entry, join: entry}
    assert dominates(idom, entry, join)
    assert not dominates(idom, left, join) and not dominates(idom, right, join)
    assert dominates(idom, join, join)


def test_a_loop_header_dominates_its_body_and_exit_but_not_the_other_way():
    entry, header, body, exit_block, unreachable = blocks_of(LOOP)
    idom = block_dominators(entry.function)
    assert idom == {entry: entry, header: entry, body: header, exit_block: header}
    assert dominates(idom, header, body) and dominates(idom, entry, body)
    assert not dominates(idom, body, header)
    assert not dominates(idom, body, exit_block)


def test_no_block_dominates_an_unreachable_one():
    entry, header, _, _, unreachable = blocks_of(LOOP)
    idom = block_dominators(entry.function)
    assert unreachable not in idom
    assert not dominates(idom, entry, unreachable)


def test_dominator_tree_lists_each_blocks_children():
    entry, header, body, exit_block, unreachable = blocks_of(LOOP)
    children = dominator_tree(entry.function)
    assert {block: set(below) for block, below in children.items()} == {
        entry: {header}, header: {body, exit_block}, body: set(), exit_block: set()}


def test_the_join_of_a_diamond_post_dominates_the_branch_and_both_sides():
    entry, left, right, join = blocks_of(DIAMOND)
    assert post_dominators(entry.function) == {entry: join, left: join, right: join,
                                               join: None}


def test_a_loop_body_is_post_dominated_by_its_header_and_the_header_by_the_exit():
    entry, header, body, exit_block, unreachable = blocks_of(LOOP)
    assert post_dominators(entry.function) == {entry: header, header: exit_block,
                                               body: header, exit_block: None}


def test_blocks_that_leave_the_function_separately_are_post_dominated_by_the_exit_alone():
    function = parse_module('''func @early(c, x) -> i32 file "f.py" {
^bb0(%0: bool, %1: i32):
  cbr %0, ^bb1(), ^bb2()
^bb1():
  ret %1
^bb2():
  %2 = add %1, %1 : i32
  ret %2
}
''').kernel
    entry, returns_early, returns_late = function.blocks
    assert post_dominators(function) == {entry: None, returns_early: None,
                                         returns_late: None}
