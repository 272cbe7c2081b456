"""The subgroup functions a kernel calls: `kk.subgroup_size`, `kk.shuffle_down`,
`kk.subgroup_sum` ... (what they give is defined in `kernelkit.ir.subgroups`).

A subgroup is 32 consecutive work-items of a work-group by linear local index (C order:
the last axis fastest); on CUDA it is a warp. Its work-items exchange values without
local memory and without a barrier of their own. Like `kk.synchronize()`, a subgroup
function must be reached by every work-item of the group: not under a branch or loop
that depends on the work-item. On the host each raises a `KernelkitError`."""
from __future__ import annotations

from typing import Any

from .intrinsics import _outside_kernel


def subgroup_size() -> int:
    """The number of work-items in a subgroup: 32 on every backend (the last subgroup of
    a group whose size is not a multiple of 32 has fewer members)."""
    raise _outside_kernel("subgroup_size")


def subgroup_index() -> int:
    """This work-item's lane in its subgroup: its linear local index modulo 32."""
    raise _outside_kernel("subgroup_index")


def shuffle(value: Any, lane: int, /) -> Any:
    """`value` as the work-item of lane `lane` of this subgroup has it; where that lane
    has no work-item (outside 0..31, past the end of a partial subgroup, or outside the
    ndrange) this work-item's own `value`.

        @kk.kernel
        def broadcast_first(y, x: kk.Const):
            i = kk.index(kk.Global)
            y[i] = kk.shuffle(x[i], 0)
    """
    raise _outside_kernel("shuffle")


def shuffle_down(value: Any, delta: int, /) -> Any:
    """`value` of lane `subgroup_index() + delta` (own `value` where there is none, as
    `kk.shuffle` says).

        @kk.kernel
        def subgroup_totals(y, x: kk.Const):
            i = kk.index(kk.Global)
            v = x[i]
            for d in (16, 8, 4, 2, 1):
                v += kk.shuffle_down(v, d)   # lane 0 ends with the subgroup's sum
            y[i] = v
    """
    raise _outside_kernel("shuffle_down")


def shuffle_up(value: Any, delta: int, /) -> Any:
    """`value` of lane `subgroup_index() - delta` (own `value` where there is none)."""
    raise _outside_kernel("shuffle_up")


def shuffle_xor(value: Any, mask: int, /) -> Any:
    """`value` of lane `subgroup_index() ^ mask` (own `value` where there is none): with
    masks 16, 8, 4, 2, 1 every lane ends with the subgroup's total."""
    raise _outside_kernel("shuffle_xor")


def subgroup_sum(value: Any, /) -> Any:
    """The sum of `value` over the subgroup's work-items, on each of them. Integers wrap
    as their type does; floats are added in one fixed order (lanes (0, 1), (2, 3) ...,
    then pairs of pairs), the same on every backend, so results agree bit for bit.

        @kk.kernel
        def total(result, x: kk.Const):
            i = kk.index(kk.Global)
            s = kk.subgroup_sum(x[i])
            if kk.subgroup_index() == 0:
                kk.atomic_add(result, 0, s)
    """
    raise _outside_kernel("subgroup_sum")


def subgroup_max(value: Any, /) -> Any:
    """The largest `value` of the subgroup's work-items, on each of them; NaN if any is
    NaN (NumPy's `np.max`)."""
    raise _outside_kernel("subgroup_max")


def subgroup_min(value: Any, /) -> Any:
    """The smallest `value` of the subgroup's work-items, on each of them; NaN if any is
    NaN (NumPy's `np.min`)."""
    raise _outside_kernel("subgroup_min")


def subgroup_any(condition: Any, /) -> bool:
    """Whether `condition` holds on any work-item of the subgroup."""
    raise _outside_kernel("subgroup_any")


def subgroup_all(condition: Any, /) -> bool:
    """Whether `condition` holds on every work-item of the subgroup."""
    raise _outside_kernel("subgroup_all")


def subgroup_ballot(condition: Any, /) -> int:
    """A uint32 whose bit k says whether `condition` held on the work-item of lane k
    (0 where lane k has no work-item).

        @kk.kernel
        def count_positive(counts, x: kk.Const):
            i = kk.index(kk.Global)
            bits = kk.subgroup_ballot(x[i] > 0)
            ...
    """
    raise _outside_kernel("subgroup_ballot")
