"""PURE reconciliation of an agent's Hello: what the cluster holds against what the hub wants
there, as a list of things to tell it (docs/exactly-once.md, "Reconnect").

- held, and the hub no longer knows the workload: Cancel;
- held at the current generation where it is bound or nominated: keep; a Reserved one that is
  bound is sent `Bind` again (the first was lost with the session); a phase the hub has not
  heard yet (admitted, finished, reserved as a nominee, given back) is applied as a report;
- held otherwise (another generation, bound elsewhere, never offered here) and still live:
  Withdraw — the agent deletes its objects, it never resumes them;
- bound or nominated here and not held at its current generation: the offer is sent again.

Called by: hub.dispatch (on every Hello).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from api.v1alpha1.messages import HeldWorkload, WorkloadPhase
from api.v1alpha1.workload import Workload

__all__ = ["HelloPlan", "reconcile"]

_SETTLED = frozenset(
    {WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED, WorkloadPhase.WITHDRAWN, WorkloadPhase.EVICTED}
)


@dataclass
class HelloPlan:
    cancel: list[HeldWorkload] = field(default_factory=list)
    withdraw: list[HeldWorkload] = field(default_factory=list)
    bind: list[HeldWorkload] = field(default_factory=list)
    catch_up: list[HeldWorkload] = field(default_factory=list)
    """Held phases the hub has not heard of: apply them as reports."""
    resend: list[tuple[str, bool]] = field(default_factory=list)
    """(key, bound): offers to send again."""


def _finished(wl: Workload) -> bool:
    return wl.is_condition_true("Finished")


def reconcile(
    cluster: str,
    held: Iterable[HeldWorkload],
    workloads: Mapping[str, Workload],
    ours: Iterable[str],
) -> HelloPlan:
    """`workloads`: the hub's view of every workload the cluster holds or is given (`ours`:
    the keys of the unfinished ones bound or offered to it)."""
    plan = HelloPlan()
    held_current = set()
    for item in held:
        wl = workloads.get(item.workload)
        if wl is None:
            plan.cancel.append(item)
            continue
        st = wl.status
        same = st is not None and st.dispatch_generation == item.generation
        if same:
            held_current.add(item.workload)
        bound_here = st is not None and st.cluster_name == cluster
        nominated_here = st is not None and cluster in st.nominated_cluster_names
        if same and (bound_here or nominated_here):
            if item.phase is WorkloadPhase.RESERVED and bound_here:
                plan.bind.append(item)
            elif _news(wl, item, bound_here):
                plan.catch_up.append(item)
            continue
        if item.phase not in _SETTLED:
            plan.withdraw.append(item)
    for key in sorted(ours):
        wl = workloads.get(key)
        # Held at an older generation (given back, or withdrawn just above) is not held: the
        # current one must be offered again, or it waits here for ever.
        if key in held_current or wl is None or wl.status is None or _finished(wl):
            continue
        st = wl.status
        if st.cluster_name == cluster:
            plan.resend.append((key, True))
        elif st.cluster_name is None and cluster in st.nominated_cluster_names:
            plan.resend.append((key, False))
    return plan


def _news(wl: Workload, item: HeldWorkload, bound_here: bool) -> bool:
    """The held phase tells the hub something it does not know (a report may have been lost
    with the old session)."""
    phase = item.phase
    if phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
        return not _finished(wl)
    if phase in (WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING):
        return bound_here and not wl.is_condition_true("Admitted")
    if phase in (WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN):
        # Given back (fenced, preempted, released): its report may have been lost with the
        # session, and the hub still counts on the cluster. Re-sending the offer instead
        # would only hear this again: an agent never runs a generation it gave back.
        return True
    return phase is WorkloadPhase.RESERVED  # a nominee's reservation: binds it
