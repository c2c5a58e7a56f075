"""PURE reconciliation of an agent's Hello: what the cluster holds against what the hub wants
there, as a list of things to tell it (docs/exactly-once.md, "Reconnect").

- held, and the hub no longer knows the workload: Cancel;
- held at the current generation where it is bound or nominated: keep; a Reserved one that is
  bound is sent `Bind` again (the first was lost with the session); a phase the hub has not
  heard yet (admitted, finished, reserved as a nominee, given back) is applied as a report;
- held otherwise (another generation, bound elsewhere, never offered here) and still live:
  Withdraw — the agent deletes its objects, it never resumes them;
- bound or nominated here and not held at its current generation: the offer is sent again;
- inactive (a user stopped it: `spec.active: false`) and held, bound or offered here: Withdraw,
  never an offer again — the agent deletes its Jobs and answers Withdrawn, which unbinds it;
  made active again it is a pending workload, dispatched as a new generation.

`deactivation_withdrawals` says the same of one change of a workload, as the hub hears it.

Called by: hub.dispatch and hub.answers (on every Hello, on every workload change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from api.v1alpha1.messages import HeldWorkload, WorkloadPhase
from api.v1alpha1.workload import Workload

__all__ = ["DEACTIVATED", "HelloPlan", "deactivation_withdrawals", "reconcile"]

_SETTLED = frozenset(
    {WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED, WorkloadPhase.WITHDRAWN, WorkloadPhase.EVICTED}
)


@dataclass
class HelloPlan:
    cancel: list[HeldWorkload] = field(default_factory=list)
    withdraw: list[HeldWorkload] = field(default_factory=list)
    deactivated: list[HeldWorkload] = field(default_factory=list)
    """Held where the hub put it, but a user stopped it: Withdraw (reason DEACTIVATED)."""
    bind: list[HeldWorkload] = field(default_factory=list)
    catch_up: list[HeldWorkload] = field(default_factory=list)
    """Held phases the hub has not heard of: apply them as reports."""
    resend: list[tuple[str, bool]] = field(default_factory=list)
    """(key, bound): offers to send again."""


DEACTIVATED = "Deactivated"
"""The reason of a Withdraw sent because the workload was made inactive."""


def _finished(wl: Workload) -> bool:
    return wl.is_condition_true("Finished")


def _stopped(wl: Workload) -> bool:
    """Made inactive by a user and not finished: no cluster may keep or be offered it."""
    return not wl.spec.active and not _finished(wl)


def _held_by(wl: Workload | None) -> tuple[int, frozenset[str]]:
    """(generation, the clusters it is bound or offered to)."""
    st = wl.status if wl is not None else None
    if st is None:
        return 0, frozenset()
    clusters = {st.cluster_name, *st.nominated_cluster_names}
    return st.dispatch_generation or 1, frozenset(c for c in clusters if c)


def deactivation_withdrawals(old: Workload | None, new: Workload) -> list[tuple[str, int]]:
    """(cluster, generation) to send Withdraw (reason DEACTIVATED) after a change of a
    workload: every cluster holding or offered an inactive one, told once — when the change
    made it inactive, or when a later change (a reservation bound) gave it a cluster that was
    not told yet."""
    if not _stopped(new):
        return []
    generation, clusters = _held_by(new)
    if old is not None and _stopped(old):
        told_generation, told = _held_by(old)
        if told_generation == generation:
            clusters -= told
    return [(cluster, generation) for cluster in sorted(clusters)]


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
            if _stopped(wl) and item.phase not in _SETTLED:
                plan.deactivated.append(item)
            elif item.phase is WorkloadPhase.RESERVED and bound_here:
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
        if _stopped(wl):
            continue  # (withdrawn above if held; an offer it never got stays unsent)
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
