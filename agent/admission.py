"""The engine shell: holds the offered workloads, builds the engine snapshot, runs
`agent.engine.cycle.schedule`, and applies its decisions — admit (assume quota, materialise,
report Admitted), preempt or evict (delete the Jobs, report Evicted), keep pending (report the
structured reason) or reject (an offer that can never be admitted here).

Everything that changes the held workloads happens in one task (`run`), in order: hub
messages (offers, withdrawals, config) are queued by the hub session and handled here, then
one status pass (which frees the quota of finished workloads) and one admission cycle run,
so no two handlers ever race.
Materialisation runs in its own tasks (it does I/O); they re-check that the workload is
still held, at the same generation, before reporting.

Fencing by generation: an offer, withdraw or cancel naming an older generation than the one
held is ignored (an older offer is rejected as StaleGeneration); a newer offer replaces the
held one after its Jobs are deleted; a redelivered offer (same generation) only re-sends the
latest report.

Quota is released when a workload finishes (its status gets Finished, so the snapshot
leaves it out), is evicted, withdrawn or cancelled. Finished workloads stay held (and listed
in Hello) for `finished_ttl` seconds, then are forgotten; their Jobs stay in the cluster
(for `kubectl logs` and the user's own ttlSecondsAfterFinished).

Besides the hub's messages the loop takes two of the agent's own: `Fence` (self-fencing
after losing the hub: every unfinished workload is stopped and reported Evicted,
ClusterLost) and `ReapOrphans` (after a Hello and a grace period: running Jobs of workloads
the agent does not hold — its state was lost and the hub did not offer them again — are
deleted). Jobs that vanish under a running workload fail it ("deleted outside MultiQ").

Called by: agent.app (constructs it, feeds `submit`, runs `run`); agent.capacity reads
`snapshot()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import heapq
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from agent.engine.cycle import schedule
from agent.engine.result import CycleResult, PendingCode, PendingReason, Unblock
from agent.engine.snapshot import Admission as EngineAdmission
from agent.engine.snapshot import Snapshot
from agent.errors import K8sClientError, K8sNotFoundError, MaterializeError
from agent.inventory import Inventory, Labels
from agent.k8s.client import JsonObject, Resource
from agent.materialize import Materializer, plan_jobs
from agent.retry import K8S_TRANSIENT
from agent.snapshots import SnapshotCache, api_admission
from agent.state import Held, StateStore
from agent.status import Observation, observe, report_changed
from api.meta import Condition
from api.v1alpha1.messages import (
    Cancel,
    ConfigSync,
    DispatchOffer,
    HeldWorkload,
    OfferRejected,
    RejectReason,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import (
    EvictedReason,
    WorkloadStatus,
)

__all__ = ["AdmissionShell", "Fence", "HubMessage", "ReapOrphans", "Reporter"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    """Not from the hub: the agent lost the hub for too long and stops what it runs."""

    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReapOrphans:
    """Not from the hub: the hub has had its chance to re-offer after a Hello; Jobs made for
    workloads this agent does not hold (its state was lost, and the hub did not re-offer
    them, so they were withdrawn, cancelled or moved while it was away) are deleted."""


HubMessage = ConfigSync | DispatchOffer | Withdraw | Cancel | Fence | ReapOrphans

_NEVER_HERE = frozenset(
    {
        PendingCode.LOCAL_QUEUE_NOT_FOUND,
        PendingCode.CLUSTER_QUEUE_NOT_FOUND,
    }
)
_REASON_CHARS = re.compile(r"[^A-Za-z0-9_,:]")
_SETTLE_SECONDS = 5.0
"""At most this long a finished workload's last report waits for its pods to catch up."""


def _job_done(job: JsonObject) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def pending_report_due(
    last: WorkloadStatusReport | None,
    reason: PendingReason,
    last_reported_at: float,
    now: float,
    refresh: float,
) -> bool:
    """Whether a pending workload's reason must be reported now. A new phase or reason code
    is reported at once; a new message for the same code (its amounts move with every
    admission in the queue) at most every `refresh` seconds, or a deep queue would send a
    report per pending workload per cycle and the hub would store them all."""
    if last is None or last.phase is not WorkloadPhase.PENDING:
        return True
    if last.pending_reason != reason.code:  # (a StrEnum: equal to its reported string)
        return True
    return last.pending_message != reason.message and now - last_reported_at >= refresh


def pause_after_pass(started: float, finished: float, min_interval: float) -> float:
    """How long the loop waits after a pass before it may start the next: passes start at
    most every `min_interval` (events meanwhile are coalesced into one pass), counted from
    the start of a pass, so a pass that took longer is followed at once. Counting from its
    end would leave quota released during a long pass idle for one more interval."""
    return max(0.0, started + min_interval - finished)


class Reporter(Protocol):
    def report(self, payload: WorkloadStatusReport | OfferRejected) -> None: ...


def _now_dt(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def _condition_reason(text: str) -> str:
    cleaned = _REASON_CHARS.sub("", text) or "Unknown"
    return cleaned if cleaned[0].isalpha() else "R" + cleaned


def rejection(reason: PendingReason) -> RejectReason | None:
    """The rejection a pending reason amounts to, or None when waiting may help."""
    if reason.code in _NEVER_HERE:
        return RejectReason.NO_SUCH_QUEUE
    if reason.unblock is Unblock.QUOTA_CHANGED:
        return RejectReason.INADMISSIBLE
    return None


class AdmissionShell:
    def __init__(
        self,
        *,
        store: StateStore,
        materializer: Materializer,
        inventory: Inventory,
        reporter: Reporter,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] | None = None,
        cycle_min_interval: float = 0.05,
        status_interval: float = 1.0,
        pending_refresh: float = 30.0,
        finished_ttl: float = 3600.0,
    ) -> None:
        self.store = store
        self.materializer = materializer
        self.inventory = inventory
        self.reporter = reporter
        self.clock = clock
        self.on_change = on_change
        self.cycle_min_interval = cycle_min_interval
        self.status_interval = status_interval
        self.pending_refresh = pending_refresh
        self.finished_ttl = finished_ttl
        self.config: ConfigSync | None = None
        self.held: dict[str, Held] = {}
        self.preempting: set[str] = set()
        self.last_reports: dict[str, WorkloadStatusReport] = {}
        self.finished_at: dict[str, float] = {}
        self._pending_reported_at: dict[str, float] = {}
        # (namespace, name label value) → held keys: which workloads a Job or pod change is for.
        self._keys_by_owner: dict[tuple[str, str], set[str]] = {}
        self.cycles = 0
        self._inbox: asyncio.Queue[HubMessage] = asyncio.Queue()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cycle_due = True
        """Admission may have changed since the last cycle (offers, config, freed quota)."""
        self._cycle_wakeup: float | None = None
        """The engine's next time-based decision (backoffs, timeouts)."""
        self._status_wakeup: float | None = None
        """When a held-back report is due."""
        self._recheck: set[str] = set()
        """Workloads the next status pass must look at even if nothing of theirs changed."""
        self._look_again: list[tuple[float, str]] = []
        """(when, key), a heap: workloads to look at again at a time even if nothing of theirs
        changed — a report held back, pods settling. Not on every pass before: with passes
        every 50 ms and reports held back for a second, that was some 18 looks at a workload
        in the dispatch burst where 6 see every change."""
        self._look_again_at: dict[str, float] = {}
        """The time each key's entry in `_look_again` is for (older entries are stale)."""
        self._settling: dict[str, float] = {}
        """Finished per their Jobs, waiting for their pods to show it too: since when."""
        self._seen_jobs: set[str] = set()
        """Workloads whose Jobs the mirror has shown (so their absence means deletion)."""
        self._dirty: dict[str, bool] = {}
        """Workloads to save at the end of this pass → whether their offer file too."""
        self._snapshots = SnapshotCache()
        self._snapshot_changed: set[str] = set()
        """Held workloads changed since the last snapshot (offered, admitted, finished,
        forgotten, or in or out of `preempting`): all the next snapshot looks at again."""

    # state -----------------------------------------------------------------------------------

    def load(self) -> None:
        """Restore the last config and the held workloads from the state directory."""
        self.config = self.store.load_config()
        for held in self.store.load_all():
            self._hold(held)
            if held.finished:
                self.finished_at[held.key] = self.clock()
        log.info(
            "restored config revision %s and %d held workloads",
            self.config.revision if self.config else None,
            len(self.held),
        )

    def held_summary(self) -> list[HeldWorkload]:
        return [
            HeldWorkload(workload=h.key, generation=h.generation, phase=h.phase)
            for h in sorted(self.held.values(), key=lambda h: h.key)
        ]

    def flavors(self) -> list[str]:
        return (
            [] if self.config is None else [f.metadata.name for f in self.config.resource_flavors]
        )

    def snapshot(self) -> Snapshot:
        """The engine's snapshot of the config and every unfinished held workload."""
        changed, self._snapshot_changed = self._snapshot_changed, set()
        return self._snapshots.build(self.config, self.held, self.preempting, changed)

    # input -----------------------------------------------------------------------------------

    def submit(self, message: HubMessage) -> None:
        """Queue a hub message for the loop (called by the hub session's reader)."""
        self._inbox.put_nowait(message)
        self._wake.set()

    def wake(self) -> None:
        """Something in the cluster changed: run a pass soon."""
        self._wake.set()

    async def prime(self) -> None:
        """After a restart, once the inventory is listed and before the hub hears from us:
        bring every held workload's phase up to date, so the Hello reports what the cluster
        runs now."""
        await self.observe(priming=True)

    async def run(self) -> None:
        """Handle messages, run a status pass and a cycle if one is due, wait for the next
        event or timer — forever."""
        loop = asyncio.get_running_loop()
        while True:
            timers = [t for t in (self._cycle_wakeup, self._status_wakeup) if t is not None]
            timeout = max(0.0, min(timers) - self.clock()) if timers else None
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            started = loop.time()
            await self.step()
            await asyncio.sleep(pause_after_pass(started, loop.time(), self.cycle_min_interval))

    async def step(self) -> None:
        """One pass. A cycle runs only when admission can have changed — a hub message,
        released quota, or the engine's own next wake-up — not on every pod event: with
        thousands of pending workloads a cycle is the expensive part."""
        while not self._inbox.empty():
            await self.handle(self._inbox.get_nowait())
        # The status pass first: quota that finished workloads release is free for this
        # very cycle, not the next one (with short Jobs the difference is a sizeable part
        # of the quota's time).
        self._status_wakeup = None
        await self.observe()
        wakeup = self._cycle_wakeup
        if self._cycle_due or (wakeup is not None and self.clock() >= wakeup):
            self._cycle_due = False
            await self.cycle()
        await self._flush()

    async def handle(self, message: HubMessage) -> None:
        if isinstance(message, ConfigSync):
            self.config = message
            self.store.save_config(message)
        elif isinstance(message, DispatchOffer):
            await self._offer(message)
        elif isinstance(message, Fence):
            await self._fence(message.message)
        elif isinstance(message, ReapOrphans):
            await self._reap_orphans()
        else:
            await self._withdraw(message)
        if not isinstance(message, Fence | ReapOrphans):
            self._cycle_due = True  # (those two free quota through _forget, if at all)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # reporting -------------------------------------------------------------------------------

    def _report(self, held: Held, phase: WorkloadPhase, **fields: object) -> WorkloadStatusReport:
        status = held.offer.workload.status
        report = WorkloadStatusReport.model_validate(
            {
                "workload": held.key,
                "generation": held.generation,
                "phase": phase,
                "observed_at": _now_dt(self.clock()),
                "admission": status.admission if status else None,
                **fields,
            }
        )
        self.last_reports[held.key] = report
        self.reporter.report(report)
        return report

    def _reject(self, key: str, generation: int, reason: RejectReason, message: str) -> None:
        log.info("rejecting %s (generation %d): %s: %s", key, generation, reason, message)
        self.reporter.report(
            OfferRejected(workload=key, generation=generation, reason=reason, message=message)
        )

    # hub messages ----------------------------------------------------------------------------

    async def _offer(self, offer: DispatchOffer) -> None:
        meta = offer.workload.metadata
        key = f"{meta.namespace or 'default'}/{meta.name}"
        current = self.held.get(key)
        if current is not None:
            if current.generation > offer.generation:
                self._reject(
                    key,
                    offer.generation,
                    RejectReason.STALE_GENERATION,
                    f"generation {current.generation} is held",
                )
                return
            if current.generation == offer.generation:
                last = self.last_reports.get(key)
                if last is not None:
                    self.reporter.report(last)
                return
            await self._stop(current)
        now = self.clock()
        # The offer was decoded for this agent alone (nothing else holds it): no deep copy.
        workload = offer.workload.model_copy()
        workload.status = None
        if workload.metadata.creation_timestamp is None:
            workload.metadata.creation_timestamp = _now_dt(now)
        if not workload.metadata.uid:
            # The hub gives every Workload a uid; without one, a stable stand-in (it must be
            # a valid label value, and the same for every generation of the workload).
            workload.metadata.uid = hashlib.sha256(key.encode()).hexdigest()[:36]
        held = Held(
            offer=offer.model_copy(update={"workload": workload}),
            phase=WorkloadPhase.PENDING,
            offered_at=now,
        )
        self._hold(held)
        self._persist(held, with_offer=True)

    async def _withdraw(self, message: Withdraw | Cancel) -> None:
        key = message.workload
        held = self.held.get(key)
        if held is not None and held.generation > message.generation:
            log.info(
                "ignoring %s of %s generation %d: generation %d is held",
                message.type,
                key,
                message.generation,
                held.generation,
            )
            return
        namespace, name = key.split("/", 1)
        await self.materializer.delete_all(namespace, name)
        if held is not None:
            self._forget(held)
        text = message.message or f"{message.type} by the hub"
        report = WorkloadStatusReport(
            workload=key,
            generation=message.generation,
            phase=WorkloadPhase.WITHDRAWN,
            observed_at=_now_dt(self.clock()),
            # The hub reads the why of any phase from pending_reason/pending_message.
            pending_reason=message.reason or message.type,
            pending_message=text,
            conditions=[
                Condition(
                    type="Evicted",
                    status="True",
                    reason=_condition_reason(message.reason or message.type),
                    message=text,
                    last_transition_time=_now_dt(self.clock()),
                )
            ],
        )
        self.reporter.report(report)

    def _persist(self, held: Held, *, with_offer: bool = False) -> None:
        """Save `held` at the end of this loop pass (one write per workload per pass)."""
        self._dirty[held.key] = self._dirty.get(held.key, False) or with_offer
        self._wake.set()

    async def _flush(self) -> None:
        """Encode here, write in a worker thread: the loop never waits for the disk."""
        items = []
        for key, with_offer in self._dirty.items():
            held = self.held.get(key)
            if held is not None:
                items.append((key, held.offer_json() if with_offer else None, held.state_json()))
        self._dirty.clear()
        if items:
            await asyncio.to_thread(self.store.save_many, items)

    async def _fence(self, message: str) -> None:
        """Stop every unfinished workload and give it back (reported Evicted, ClusterLost),
        so the hub may run it elsewhere after its own loss timeout."""
        for held in list(self.held.values()):
            if not held.finished:
                await self._evict(held.key, EvictedReason.CLUSTER_LOST.value, message)

    async def _reap_orphans(self) -> None:
        for job in self.inventory.managed_jobs():
            meta = job.get("metadata") or {}
            key = (meta.get("annotations") or {}).get(Labels.WORKLOAD_ANNOTATION)
            if not key or key in self.held or meta.get("deletionTimestamp") or _job_done(job):
                continue  # (a finished Job runs nothing: its own TTL decides when it goes)
            namespace, name = str(meta.get("namespace")), str(meta.get("name"))
            log.warning(
                "deleting job %s/%s: it runs %s, which this agent does not hold and the hub "
                "did not offer again",
                namespace,
                name,
                key,
            )
            with contextlib.suppress(K8sNotFoundError):
                await self.materializer.kube.delete(
                    Resource.JOBS, namespace, name, uid=meta.get("uid")
                )

    def _hold(self, held: Held) -> None:
        self.held[held.key] = held
        self._snapshot_changed.add(held.key)
        self._keys_by_owner.setdefault(_owner(held.key), set()).add(held.key)

    def _forget(self, held: Held) -> None:
        self._cycle_due = True  # whatever it held is free
        self.held.pop(held.key, None)
        self._snapshot_changed.add(held.key)
        owner = _owner(held.key)
        keys = self._keys_by_owner.get(owner)
        if keys is not None:
            keys.discard(held.key)
            if not keys:
                del self._keys_by_owner[owner]
        self._snapshots.forget(held.key)
        self.preempting.discard(held.key)
        self.last_reports.pop(held.key, None)
        self._pending_reported_at.pop(held.key, None)
        self.finished_at.pop(held.key, None)
        self._seen_jobs.discard(held.key)
        self._settling.pop(held.key, None)
        self._dirty.pop(held.key, None)
        self.store.forget(held.key)

    async def _stop(self, held: Held) -> None:
        namespace, name = held.key.split("/", 1)
        # The Jobs are in the inventory's mirror once they all exist: delete those without
        # a LIST (a selector query over every Job in the cluster, on every eviction). While
        # materialisation may still be creating some, ask the API server.
        jobs = self.inventory.workload_jobs(namespace, name)
        mirrored = {str((j.get("metadata") or {}).get("name")) for j in jobs}
        if held.job_names and set(held.job_names) <= mirrored:
            await self.materializer.delete_jobs(jobs)
        else:
            await self.materializer.delete_all(namespace, name)
        self._forget(held)

    # the cycle -------------------------------------------------------------------------------

    async def cycle(self) -> CycleResult:
        now = self.clock()
        # The engine is pure and the snapshot immutable, so the cycle runs in a worker
        # thread: with thousands pending it takes tens of milliseconds, and in the loop it
        # would hold up every Job create, watch event and hub message for that long. The GIL
        # still hands the loop a turn every few milliseconds meanwhile; nothing the cycle
        # reads changes, because only this task changes the held workloads.
        result = await asyncio.to_thread(schedule, self.snapshot(), now)
        self.cycles += 1
        self._cycle_wakeup = result.next_wakeup
        for victim in result.preempted:
            await self._evict(victim.victim, "Preempted", victim.message)
        for ev in result.evicted:
            await self._evict(ev.workload, ev.reason.value, ev.message)
        for adm in result.admitted:
            self._admit(adm.workload, adm.admission, now)
        if result.admitted:
            # Let the materialisations send their creates before the pending pass: the
            # quota is held from now, so every moment until the Jobs run is quota unused.
            await asyncio.sleep(0)
        preempting = (self.preempting | set(result.new_preemptors)) - {
            a.workload for a in result.admitted
        }
        self._snapshot_changed |= preempting ^ self.preempting
        self.preempting = preempting
        reported_at = self._pending_reported_at
        for wid, reason in result.pending.items():
            held = self.held.get(wid)
            if held is None or held.phase is not WorkloadPhase.PENDING:
                continue
            rejected = rejection(reason)
            if rejected is not None:
                self._reject(held.key, held.generation, rejected, reason.message)
                self._forget(held)
                continue
            if not pending_report_due(
                self.last_reports.get(wid),
                reason,
                reported_at.get(wid, 0.0),
                now,
                self.pending_refresh,
            ):
                continue
            reported_at[wid] = now
            self._report(
                held,
                WorkloadPhase.PENDING,
                pending_reason=reason.code.value,
                pending_message=reason.message,
            )
        if result.admitted or result.preempted or result.evicted:
            self._changed()
        if result.preempted or result.evicted:
            self._wake.set()  # released quota: the next cycle may admit the preemptor
        return result

    def _admit(self, key: str, admission: EngineAdmission, now: float) -> None:
        held = self.held[key]
        workload = held.offer.workload
        # Assume first: the quota is ours from now on, then materialise.
        workload.status = WorkloadStatus(
            admission=api_admission(admission),
            conditions=[
                Condition(
                    type="QuotaReserved",
                    status="True",
                    reason="QuotaReserved",
                    message=f"Quota reserved in ClusterQueue {admission.cluster_queue}",
                    last_transition_time=_now_dt(now),
                )
            ],
        )
        held.phase = WorkloadPhase.ADMITTED
        held.job_names = []
        self._snapshot_changed.add(key)
        # Not persisted until the Jobs exist: after a crash in between, the workload is
        # admitted again and its Jobs (if any were made) are adopted.
        self._start_materialize(held)

    def _start_materialize(self, held: Held) -> None:
        task = asyncio.create_task(self._materialize(held), name=f"materialize {held.key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _still_held(self, held: Held) -> bool:
        current = self.held.get(held.key)
        return current is held

    async def _materialize(self, held: Held) -> None:
        offer = held.offer
        status = offer.workload.status
        assert status is not None and status.admission is not None
        flavors = {
            f.metadata.name: f for f in (self.config.resource_flavors if self.config else [])
        }
        delay = 0.5
        while self._still_held(held):
            try:
                jobs = plan_jobs(
                    offer.workload, offer.generation, offer.source, status.admission, flavors
                )
                await self.materializer.ensure(jobs)
                held.job_names = [str(j["metadata"]["name"]) for j in jobs]
                break
            except K8S_TRANSIENT as exc:  # retries exhausted: keep trying, more slowly
                log.warning("materialising %s: %s; retrying in %.1fs", held.key, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            except (MaterializeError, K8sClientError) as exc:
                if not self._still_held(held):
                    return
                log.error("cannot materialise %s: %s", held.key, exc)
                self._forget(held)
                self._reject(held.key, held.generation, RejectReason.INVALID, str(exc))
                self._wake.set()
                return
        if not self._still_held(held):
            namespace, name = held.key.split("/", 1)
            await self.materializer.delete_all(namespace, name, offer.workload.metadata.uid)
            return
        self._persist(held)
        self._report(held, WorkloadPhase.ADMITTED)
        self._recheck.add(held.key)  # its Jobs may have shown up before their names were known
        self._wake.set()

    async def _evict(self, key: str, reason: str, message: str) -> None:
        held = self.held.get(key)
        if held is None:
            return
        log.info("evicting %s: %s: %s", key, reason, message)
        await self._stop(held)
        now = _now_dt(self.clock())
        self.reporter.report(
            WorkloadStatusReport(
                workload=key,
                generation=held.generation,
                phase=WorkloadPhase.EVICTED,
                observed_at=now,
                pending_reason=reason,
                pending_message=message,
                conditions=[
                    Condition(
                        type="Evicted",
                        status="True",
                        reason=_condition_reason(reason),
                        message=message,
                        last_transition_time=now,
                    )
                ],
            )
        )

    # status pass -----------------------------------------------------------------------------

    async def observe(self, *, priming: bool = False) -> None:
        """The status pass: report what changed in the held workloads' Jobs and pods.
        `priming`: the mirrors were just listed, so a missing Job is really missing."""
        now = self.clock()
        self._forget_expired(now)
        # Only workloads whose Jobs or pods changed (all of them after a relist), and those
        # that asked to be looked at again (just materialised, or a report held back). Looked
        # up by key, so a pass costs what changed, not what is held.
        relisted, owners = self.inventory.take_changes()
        recheck, self._recheck = self._recheck, set()
        recheck.update(self._due_for_another_look(now))
        if priming or relisted:
            candidates = list(self.held.values())
        else:
            keys = set(recheck)
            for namespace, label in owners:
                keys.update(self._keys_by_owner.get((namespace, label), ()))
            candidates = [self.held[k] for k in sorted(keys) if k in self.held]
        for held in candidates:
            if held.finished or held.phase is WorkloadPhase.PENDING or not held.job_names:
                continue
            namespace, name = held.key.split("/", 1)
            obs = observe(
                uid=held.offer.workload.metadata.uid or "",
                generation=held.generation,
                job_names=held.job_names,
                jobs=self.inventory.workload_jobs(namespace, name),
                pods=self.inventory.workload_pods(namespace, name),
            )
            last = self.last_reports.get(held.key)
            if self._jobs_exist(held):
                self._seen_jobs.add(held.key)
            elif held.key in self._seen_jobs or priming:
                # Seen and gone (or gone while the agent was away): deleted behind our back.
                obs = Observation(
                    WorkloadPhase.FAILED,
                    obs.pods,
                    obs.exits,
                    "its Jobs were deleted outside MultiQ",
                )
            if obs.phase is WorkloadPhase.ADMITTED and held.phase is not WorkloadPhase.ADMITTED:
                continue  # the mirror lags behind: never go backwards
            if (
                obs.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED)
                and (obs.pods.pending or obs.pods.running)
                and obs.message == ""
            ):
                # The Jobs say done but the pods' own watch has not caught up: wait for it
                # (briefly), so the final report carries every pod's count and exit code.
                since = self._settling.setdefault(held.key, now)
                if now - since < _SETTLE_SECONDS:
                    self._look_again_later(held.key, since + _SETTLE_SECONDS)
                    continue
            if not report_changed(last, obs):
                continue
            phase_changed = obs.phase is not held.phase
            # Only pod counts changed, or it started running: at most one report per
            # status_interval. (A Job that ends within it goes from Admitted straight to its
            # end: every report is a write at the hub, and a short Job's Running is stale
            # before it arrives. Admitted, finished and evicted are never held back.)
            debounced = not phase_changed or (
                obs.phase is WorkloadPhase.RUNNING and held.phase is WorkloadPhase.ADMITTED
            )
            if debounced and last is not None and last.observed_at is not None:
                due = last.observed_at.timestamp() + self.status_interval
                if now < due:
                    self._look_again_later(held.key, due)
                    continue
            held.phase = obs.phase
            conditions = []
            if obs.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
                self._snapshot_changed.add(held.key)  # it leaves the snapshot
                conditions.append(
                    Condition(
                        type="Finished",
                        status="True",
                        reason=obs.phase.value,
                        message=obs.message or f"the workload {obs.phase.value.lower()}",
                        last_transition_time=_now_dt(now),
                    )
                )
                status = held.offer.workload.status or WorkloadStatus()
                # A new status object: the snapshot cache keys on its identity.
                held.offer.workload.status = status.model_copy(
                    update={"conditions": [*status.conditions, *conditions]}
                )
                self.finished_at[held.key] = now
                self._changed()
                self._cycle_due = True  # its quota is free: admit who waits
                self._wake.set()
            extra = {}
            if obs.phase is WorkloadPhase.FAILED and not obs.exits and obs.message:
                extra["pending_message"] = obs.message  # no exit codes to tell why
            self._report(
                held,
                obs.phase,
                pods=obs.pods,
                exits=list(obs.exits),
                conditions=conditions,
                **extra,
            )
            if phase_changed and obs.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
                self._persist(held)

    def _forget_expired(self, now: float) -> None:
        """Forget workloads finished more than `finished_ttl` ago. `finished_at` is filled
        in the order workloads finish (a key enters once, and leaves only when forgotten),
        so the oldest come first and the walk stops at the first one still kept: a pass
        costs what expires, not every finished workload held."""
        while self.finished_at:
            key, at = next(iter(self.finished_at.items()))
            if now - at <= self.finished_ttl:
                self._wake_at(at + self.finished_ttl)
                return
            expired = self.held.get(key)
            if expired is not None:
                self._forget(expired)  # (drops its finished_at entry)
            self.finished_at.pop(key, None)

    def _look_again_later(self, key: str, when: float) -> None:
        """Look at `key` in the first status pass at or after `when` (or sooner, if its Jobs
        or pods change)."""
        if self._look_again_at.get(key) != when:
            self._look_again_at[key] = when
            heapq.heappush(self._look_again, (when, key))
        self._wake_at(when)

    def _due_for_another_look(self, now: float) -> set[str]:
        """The keys whose time to be looked at again has come; keeps a wake-up for the next."""
        due: set[str] = set()
        heap = self._look_again
        while heap and heap[0][0] <= now:
            when, key = heapq.heappop(heap)
            if self._look_again_at.get(key) == when:
                del self._look_again_at[key]
                due.add(key)
        if heap:
            self._wake_at(heap[0][0])  # (a stale entry at worst wakes a pass early)
        return due

    def _wake_at(self, when: float) -> None:
        """A status pass is due at `when` (a report held back)."""
        if self._status_wakeup is None or when < self._status_wakeup:
            self._status_wakeup = when

    def _jobs_exist(self, held: Held) -> bool:
        namespace, _ = held.key.split("/", 1)
        return any(f"{namespace}/{n}" in self.inventory.jobs.objects for n in held.job_names)

    async def close(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._flush()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


def _owner(key: str) -> tuple[str, str]:
    """The (namespace, name label) that the Jobs and pods of workload `key` carry."""
    namespace, name = key.split("/", 1)
    return namespace, Labels.value(name)
