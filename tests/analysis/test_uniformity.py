"""Uniformity on small kernels written as IR text: values made from the work-item's
index vary between the work-items of a group, values made from group indices and
arguments do not; the blocks a per-item branch guards are the divergent region; a value
a loop computes differs between work-items after it when they leave it at different
iterations (temporal divergence), however uniform it is within an iteration."""
from kernelkit.analysis.dominance import post_dominators
from kernelkit.analysis.uniformity import branch_region, divergent_region, varying_values
from kernelkit.ir.parser import parse_module


def branch_on_the_item(other_edge_passes: str):
    """`if i < n: x = g * g` with i per item and g per group; the join receives x from the
    branch's body and `other_edge_passes` from the branch itself."""
    return parse_module(f'''kernel @k(a, n) -> void file "k.py" {{
^bb0(%0: array<i64, 1, C>, %1: i64):
  %2 = local_id {{axis = 0}} : i64
  %3 = group_id {{axis = 0}} : i64
  %4 = add %3, %1 : i64
  %5 = add %2, %4 : i64
  %6 = lt %5, %1 : bool
  %7 = mul %4, %4 : i64
  cbr %6, ^bb1(), ^bb2({other_edge_passes})
^bb1():
  store %0, %5, %7
  br ^bb2(%7)
^bb2(%8: i64):
  store %0, %3, %8
  ret
}}
''').kernel


def loop_up_to(bound: str):
    """`p = 0; while p < bound: p += 1`, then `a[i] = p`."""
    return parse_module(f'''kernel @k(a, n) -> void file "k.py" {{
^bb0(%0: array<i64, 1, C>, %1: i64):
  %2 = local_id {{axis = 0}} : i64
  %3 = const 0 : i64
  %4 = const 1 : i64
  br ^bb1(%3)
^bb1(%5: i64):
  %6 = lt %5, {bound} : bool
  cbr %6, ^bb2(), ^bb3()
^bb2():
  %7 = add %5, %4 : i64
  br ^bb1(%7)
^bb3():
  store %0, %2, %5
  ret
}}
''').kernel


def test_values_made_from_the_item_index_vary_and_those_made_from_the_group_do_not():
    function = branch_on_the_item("%4")
    local_id, group_id, group_sum, item_index, condition, square, _ = function.entry.ops
    varying = varying_values(function)
    assert {local_id, item_index, condition} <= varying
    assert not {group_id, group_sum, square, *function.params} & varying


def test_a_value_assumed_varying_makes_what_is_computed_from_it_vary():
    function = branch_on_the_item("%4")
    _, group_id, group_sum, _, _, square, _ = function.entry.ops
    varying = varying_values(function, frozenset({group_id}))
    assert {group_id, group_sum, square} <= varying


def test_a_join_of_different_values_after_a_per_item_branch_varies():
    function = branch_on_the_item("%4")
    (joined,) = function.blocks[2].params
    assert joined in varying_values(function)


def test_a_join_of_the_same_uniform_value_on_every_path_is_uniform():
    function = branch_on_the_item("%7")
    (joined,) = function.blocks[2].params
    assert joined not in varying_values(function)


def test_the_blocks_a_per_item_branch_guards_are_its_region_and_the_divergent_region():
    function = branch_on_the_item("%4")
    entry, guarded, join = function.blocks
    assert branch_region(entry, post_dominators(function)) == {guarded}
    assert divergent_region(function, varying_values(function)) == {guarded}


def test_a_branch_on_a_uniform_condition_makes_no_divergent_region():
    function = branch_on_the_item("%4")
    assert divergent_region(function, set()) == set()


def test_a_counter_read_after_a_loop_that_items_leave_at_different_iterations_varies():
    function = loop_up_to("%2")                          # local_id
    entry, header, body, after = function.blocks
    (counter,) = header.params
    assert counter in varying_values(function)
    assert body in divergent_region(function, varying_values(function))


def test_the_same_counter_is_uniform_when_all_items_leave_the_loop_together():
    function = loop_up_to("%1")                          # an argument
    entry, header, body, after = function.blocks
    (counter,) = header.params
    assert counter not in varying_values(function)
    assert divergent_region(function, varying_values(function)) == set()


def loop_reading(array_type: str):
    """`p = 0; while p < i: v = b[0]; p += 1` (items leave at different iterations),
    then `a[g] = v`: b is `array_type`. What the loop read is used after it."""
    return parse_module(f'''kernel @k(a, b) -> void file "k.py" {{
^bb0(%0: array<i64, 1, C>, %1: {array_type}):
  %2 = local_id {{axis = 0}} : i64
  %3 = group_id {{axis = 0}} : i64
  %4 = const 0 : i64
  %5 = const 1 : i64
  br ^bb1(%4)
^bb1(%6: i64):
  %7 = load %1, %4 : i64
  %8 = lt %6, %2 : bool
  cbr %8, ^bb2(), ^bb3()
^bb2():
  %9 = add %6, %5 : i64
  br ^bb1(%9)
^bb3():
  store %0, %3, %7
  ret
}}
''').kernel


def test_a_const_array_read_in_a_divergent_loop_at_a_fixed_index_is_uniform_after_it():
    """Nothing writes a Const array during the launch: b[0] read in any iteration is the
    same (CSE may give code after the loop the loop's read of it; a barrier there must
    not be refused)."""
    function = loop_reading("array<i64, 1, C, const>")
    read = function.blocks[1].ops[0]
    assert read not in varying_values(function)


def test_a_written_array_read_in_a_divergent_loop_varies_after_it():
    function = loop_reading("array<i64, 1, C>")
    read = function.blocks[1].ops[0]
    assert read in varying_values(function)
