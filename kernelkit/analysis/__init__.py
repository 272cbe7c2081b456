"""Analyses of the IR: facts about a function that passes and targets ask for and that
change nothing (dominance, loops and their counters, which values differ between the
work-items of a group, liveness, the regions barriers cut a kernel into, lower bounds of
indices). One file per analysis; nothing here imports a pass."""
from .bounds import NonNegative
from .dominance import (block_dominators, dominates, dominator_tree, immediate_dominators,
                        post_dominators, reverse_post_order)
from .liveness import live_across_barriers, live_out, live_sets
from .loops import (CountedLoop, InductionVariable, counted_loop, induction_variable,
                    natural_loops)
from .regions import (ends_with_barrier, region_dominance, region_order, region_starts,
                      region_successors)
from .uniformity import branch_region, divergent_region, varying_values

__all__ = ["NonNegative", "reverse_post_order", "block_dominators", "dominates",
           "dominator_tree", "immediate_dominators", "post_dominators", "live_across_barriers", "live_out", "live_sets",
           "CountedLoop", "InductionVariable", "counted_loop", "induction_variable",
           "natural_loops", "ends_with_barrier", "region_dominance", "region_order",
           "region_starts", "region_successors", "branch_region", "divergent_region",
           "varying_values"]
