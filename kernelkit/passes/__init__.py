"""IR -> IR passes. Each pass is a small frozen dataclass in a file of its own, whose
fields are its options, runnable by name (`PASSES`, `simplify{speculated_ops=8}`),
taking a `Module` and changing it in place. The analyses passes ask are in
`kernelkit.analysis`."""
from .check_barriers import CheckBarriers
from .cse import CommonSubexpressions
from .dce import DeadCode
from .guard_versioning import GuardVersioning
from .hoist_loads import HoistLoads
from .inline import Inline
from .loop_barriers import LoopBarriers
from .masked_loops import MaskedLoops
from .promote_private import PromotePrivate
from .pipeline import PASSES, Pipeline, run_passes
from .simplify import Simplify
from .split_barriers import SplitBarriers
from .split_tuples import SplitTuples
from .subgroups_in_local_memory import SubgroupsInLocalMemory
from .trip_counts import TripCounts

__all__ = ["PASSES", "Pipeline", "run_passes", "Inline", "Simplify", "DeadCode",
           "CommonSubexpressions", "CheckBarriers", "GuardVersioning", "HoistLoads",
           "LoopBarriers", "MaskedLoops", "PromotePrivate", "SplitBarriers", "SplitTuples",
           "SubgroupsInLocalMemory", "TripCounts"]
