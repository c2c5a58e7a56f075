"""Time- and policy-driven evictions: waitForPodsReady, backoff, stop policies, max exec time.

Owns the decisions that remove admitted workloads without a preemptor, and the backoff
arithmetic for requeueing them (kueue.md §2.6):

- an admitted workload whose pods are not all ready `timeout_seconds` after admission, or
  whose PodsReady turned false and stayed false `recovery_timeout_seconds`, is evicted with
  PodsReadyTimeout and requeued after base·2^(n−1) seconds, capped at the maximum; past
  `backoff_limit_count` requeues it is deactivated instead;
- HoldAndDrain on a cluster queue or local queue evicts its admitted workloads (Hold only
  stops new admissions, which `cycle` handles);
- a workload admitted for longer than `max_execution_seconds` in total is evicted and
  deactivated; an admitted workload made inactive is evicted.

`cycle.schedule` calls `evictions` first; it also reports the earliest future deadline so
the shell knows when to run the next cycle even if no event arrives. `evict_at` says when
that is for one workload, from the workload and the configuration alone, so the incremental
cycle's carry can keep the admitted workloads by it and ask `evictions` only about those
due, not about every running workload every cycle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from agent.engine.result import Eviction, EvictionReason
from agent.engine.snapshot import (
    RequeueTimestamp,
    Snapshot,
    StopPolicy,
    WaitForPodsReady,
    Workload,
)

__all__ = ["backoff_seconds", "blocking_workload", "evict_at", "evictions"]


def backoff_seconds(config: WaitForPodsReady, requeue_count: int) -> float:
    """Delay before the `requeue_count`-th requeue: base·2^(n−1), capped at the maximum."""
    if requeue_count <= 0:
        return 0.0
    # Cap the exponent first so huge counts cannot overflow a float.
    exponent = min(requeue_count - 1, 64)
    return float(min(config.backoff_base_seconds * (2**exponent), config.backoff_max_seconds))


def _timeout_eviction(cfg: WaitForPodsReady, wl: Workload, now: float, why: str) -> Eviction:
    count = wl.requeue_count + 1
    if cfg.backoff_limit_count is not None and count > cfg.backoff_limit_count:
        return Eviction(
            wl.id,
            EvictionReason.PODS_READY_TIMEOUT,
            f"{why}; requeuing limit {cfg.backoff_limit_count} exceeded, deactivated",
            requeue_count=count,
            deactivate=True,
        )
    delay = backoff_seconds(cfg, count)
    requeued_at = now if cfg.requeue_timestamp is RequeueTimestamp.EVICTION else None
    return Eviction(
        wl.id,
        EvictionReason.PODS_READY_TIMEOUT,
        f"{why}; requeued (attempt {count}) after {delay:g}s backoff",
        requeue_after=now + delay,
        requeue_count=count,
        requeued_at=requeued_at,
    )


def _at_once(snapshot: Snapshot, wl: Workload) -> Eviction | None:
    """The eviction of admitted `wl` that holds whatever the time: it was deactivated, or
    its cluster queue or local queue drains (HoldAndDrain)."""
    if not wl.active:
        return Eviction(wl.id, EvictionReason.DEACTIVATED, "workload deactivated")
    assert wl.admission is not None
    cq = snapshot.cluster_queues.get(wl.admission.cluster_queue)
    if cq is not None and cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
        return Eviction(
            wl.id,
            EvictionReason.CLUSTER_QUEUE_STOPPED,
            f"cluster queue {cq.name} is stopped (HoldAndDrain)",
        )
    lq = snapshot.local_queues.get(wl.local_queue)
    if lq is not None and lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
        return Eviction(
            wl.id,
            EvictionReason.LOCAL_QUEUE_STOPPED,
            f"local queue {lq.key} is stopped (HoldAndDrain)",
        )
    return None


def _recovery_seconds(cfg: WaitForPodsReady) -> float:
    if cfg.recovery_timeout_seconds is None:
        return cfg.timeout_seconds
    return cfg.recovery_timeout_seconds


def _deadlines(
    cfg: WaitForPodsReady, wl: Workload, admitted_at: float
) -> tuple[float | None, float | None]:
    """When admitted `wl` (admitted at `admitted_at`) exceeds its maximum execution time,
    and when its pods have not become ready (again) in time; None where no such deadline
    applies."""
    limit = None
    if wl.max_execution_seconds is not None:
        limit = admitted_at + wl.max_execution_seconds - wl.accumulated_execution_seconds
    ready = None
    if cfg.enabled and not wl.pods_ready:
        if wl.pods_ready_lost_at is not None:
            ready = wl.pods_ready_lost_at + _recovery_seconds(cfg)
        else:
            ready = admitted_at + cfg.timeout_seconds
    return limit, ready


def evictions(
    snapshot: Snapshot, admitted: Iterable[Workload], now: float
) -> tuple[list[Eviction], float | None]:
    """Evictions due at `now`, and the earliest future time another one falls due."""
    cfg = snapshot.config.wait_for_pods_ready
    out: list[Eviction] = []
    wakeup: float | None = None

    def later(t: float) -> None:
        nonlocal wakeup
        if t > now and (wakeup is None or t < wakeup):
            wakeup = t

    for wl in admitted:
        if wl.admission is None or wl.evicting:
            continue
        if (at_once := _at_once(snapshot, wl)) is not None:
            out.append(at_once)
            continue
        admitted_at = wl.admitted_at if wl.admitted_at is not None else now
        limit, ready = _deadlines(cfg, wl, admitted_at)
        if limit is not None:
            if now >= limit:
                out.append(
                    Eviction(
                        wl.id,
                        EvictionReason.MAXIMUM_EXECUTION_TIME_EXCEEDED,
                        f"exceeded the maximum execution time of {wl.max_execution_seconds}s",
                        deactivate=True,
                    )
                )
                continue
            later(limit)
        if ready is None:
            continue
        if now < ready:
            later(ready)
        elif wl.pods_ready_lost_at is not None:
            recovery = _recovery_seconds(cfg)
            why = f"pods not ready again within the recovery timeout of {recovery:g}s"
            out.append(_timeout_eviction(cfg, wl, now, why))
        else:
            why = f"pods not ready within the timeout of {cfg.timeout_seconds:g}s"
            out.append(_timeout_eviction(cfg, wl, now, why))
    return out, wakeup


def evict_at(snapshot: Snapshot, wl: Workload) -> float | None:
    """From when `evictions` may evict admitted `wl`, as long as neither it nor the
    configuration changes: -inf for every cycle (a reason that holds at once, or deadlines
    that count from the cycle's own time because the admission time is unknown); None for
    never (not admitted, already being evicted, no deadline). Before that time `evictions`
    evicts nothing of it and asks for no wake-up earlier than it. The same rules as
    `evictions` (`_at_once`, `_deadlines`), read without a time."""
    if wl.admission is None or wl.evicting:
        return None
    if _at_once(snapshot, wl) is not None:
        return -math.inf
    cfg = snapshot.config.wait_for_pods_ready
    limit, ready = _deadlines(cfg, wl, wl.admitted_at if wl.admitted_at is not None else 0.0)
    times = [t for t in (limit, ready) if t is not None]
    if not times:
        return None
    return -math.inf if wl.admitted_at is None else min(times)


def blocking_workload(
    snapshot: Snapshot, admitted: Iterable[Workload], evicted: set[str]
) -> Workload | None:
    """With blockAdmission, an admitted workload whose pods are not ready yet blocks others."""
    cfg = snapshot.config.wait_for_pods_ready
    if not (cfg.enabled and cfg.block_admission):
        return None
    for wl in admitted:
        if (
            wl.admission is not None
            and not wl.pods_ready
            and not wl.evicting
            and wl.id not in evicted
        ):
            return wl
    return None
