"""Barrier regions on a small kernel written as IR text, in the shape split-barriers
leaves: a barrier in a loop cuts it into the region before the barrier and the one after
it, which runs around the loop back to the barrier; within a region, a definition
reaches a use only where it dominates it in the region's own graph."""
from kernelkit.analysis.regions import (ends_with_barrier, region_dominance, region_order,
                                        region_starts, region_successors)
from kernelkit.ir.parser import parse_module

# for i in range(n): v = i + 1; barrier; a[v] = v
BARRIER_IN_A_LOOP = '''kernel @k(a, n) -> void file "k.py" {
^bb0(%0: array<i64, 1, C>, %1: i64):
  %2 = const 0 : i64
  %3 = const 1 : i64
  br ^bb1(%2)
^bb1(%4: i64):
  %5 = lt %4, %1 : bool
  cbr %5, ^bb2(), ^bb4()
^bb2():
  %6 = add %4, %3 : i64
  barrier
  br ^bb3()
^bb3():
  store %0, %6, %6
  br ^bb1(%6)
^bb4():
  ret
}
'''


def blocks():
    return parse_module(BARRIER_IN_A_LOOP).kernel.blocks


def test_the_entry_and_the_block_after_each_barrier_start_regions():
    entry, header, before_barrier, after_barrier, exit_block = blocks()
    assert region_starts(entry.function) == [entry, after_barrier]
    assert ends_with_barrier(before_barrier)
    assert not any(ends_with_barrier(b) for b in (entry, header, after_barrier, exit_block))
    assert region_successors(before_barrier) == []
    assert region_successors(header) == [before_barrier, exit_block]


def test_a_region_runs_from_its_start_up_to_the_next_barriers_in_reverse_post_order():
    entry, header, before_barrier, after_barrier, exit_block = blocks()
    first = region_order(entry)
    assert first[:2] == [entry, header] and set(first) == {entry, header, before_barrier,
                                                           exit_block}
    second = region_order(after_barrier)
    assert second[:2] == [after_barrier, header] and set(second) == {
        after_barrier, header, before_barrier, exit_block}


def test_a_value_read_around_the_regions_cycle_is_not_dominated_by_its_definition():
    entry, header, before_barrier, after_barrier, exit_block = blocks()
    dominated = region_dominance(region_order(after_barrier))
    condition = header.ops[0]
    following = before_barrier.ops[0]
    # `v` comes into the region from before the barrier, not from its own definition.
    assert not dominated(following, after_barrier)
    assert dominated(following, before_barrier)
    assert dominated(condition, before_barrier) and not dominated(condition, None)
    # Defined outside the region: the same value wherever the region reads it.
    assert dominated(entry.params[1], after_barrier) and dominated(entry.params[1], None)
