"""The chaos driver: run a federation, submit a steady stream of mixed workloads, break things
on a schedule, wait for the end, and count what MultiQ promised and did not keep.

    report = await run_chaos(ChaosConfig.bounded(), state_dir)
    report.ok, report.to_json(), report.failure_message()

One run:
1. start a `ChaosFederation` (kubesim clusters in the simulated runtime; with `ha` ≥ 2 that
   many hubs on a local etcd, else one hub on SQLite; one agent per cluster behind its links
   to every hub, short fencing timings, a queue per dispatch mode);
2. submit `workloads` (e2e.chaos.workloads) at `rate` per second — a submission the hub
   cannot take (it is down) is retried; one that was stored but not answered comes back 409
   on the retry and counts as accepted;
3. meanwhile inject the planned faults (e2e.chaos.faults) step by step, each healed in a
   `finally` so no fault outlives the run. A hub's SIGKILL strikes a hub picked at random
   (the leader or not) when there are several; the etcd and leader faults need hubs on etcd
   and are skipped, with the reason, with one hub on SQLite. Before partitions (SIGSTOP, cut,
   black hole; two at a time on different clusters) it starts one *witness* per cluster, a
   workload that outlives the partition, and strikes clusters where one runs: then a
   partition always cuts off work the hub may start elsewhere;
4. meanwhile poll the hub's workloads (any hub: the client is given every hub's URL),
   recording each change of a workload's terminal state;
5. once every submission and fault is done, wait (at most `settle_seconds`) until every
   accepted workload finished, then read the final view (from the leader, with several hubs)
   and every cluster's pod history, and judge them (e2e.chaos.invariants), with each fault's
   time to recover.

Processes of the federation that exit on their own are restarted and reported as crashes.
Called by: e2e/test_chaos.py (bounded), bench/chaos.py (the long run).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from api.v1alpha1.conversions import workload_name
from api.v1alpha1.workload import Workload
from e2e.chaos.faults import (
    HA_FAULTS,
    PARTITIONS,
    FaultKind,
    FaultRecord,
    PlannedFault,
    aim_at_witnesses,
    plan_faults,
    recovery_seconds,
)
from e2e.chaos.federation import (
    MODES,
    SINGLE_HUB,
    ChaosFederation,
    ChaosTimings,
    HaFaultError,
)
from e2e.chaos.invariants import ClusterHistory, HubWorkload, Observation, Verdict, check
from e2e.chaos.proxy import Mode
from e2e.chaos.workloads import PlannedWorkload, plan_workloads, witness
from qctl.client import HubClient, HubRequestError
from qctl.errors import QctlError

__all__ = ["ChaosConfig", "ChaosReport", "run_chaos"]

_log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
SUBMIT_GIVE_UP_SECONDS = 120.0
"""A submission still refused after this long is reported as not accepted."""
SUBMIT_RETRY_SECONDS = 0.5
SUBMIT_CONCURRENCY = 16
HUB_READY_SECONDS = 60.0
KUBESIM_ERROR_CODES = (429, 500, 504)
WITNESS_EXTRA_SECONDS = 10.0
"""A witness outlives its partition by this much: the hub lets go of it during the partition
and starts it elsewhere while the cut-off copy, unfenced, would still run."""
WITNESS_WAIT_SECONDS = 20.0
SETTLE_SLACK_SECONDS = 20.0
"""Beyond the longest workload's duration, how long settling may take at most."""
HEARTBEAT_DETECTION_SECONDS = 45.0
"""How late the hub may notice a frozen or black-holed agent whose connection stays open: by
its WebSocket heartbeat (hub.sessions: a ping 20 s after the last message received, the
connection closed 10 s without a pong), seen to take up to 43 s while the hub kept sending."""


@dataclass(frozen=True)
class ChaosConfig:
    workloads: int = 300
    rate: float = 2.5
    """Submissions per second."""
    durations: tuple[float, float] = (2.0, 8.0)
    long_share: float = 0.1
    long_durations: tuple[float, float] = (12.0, 20.0)
    faults: Mapping[FaultKind, int] = field(default_factory=dict)
    holds: Mapping[FaultKind, float] = field(default_factory=dict)
    fault_start: float = 8.0
    """Seconds after the first submission before the first fault."""
    fault_gap: float = 3.0
    """Seconds between the end of a fault and the start of the next."""
    settle_seconds: float = 90.0
    """At most this long, after the last submission and fault, for every workload to finish."""
    poll_seconds: float = 2.0
    clusters: int = 3
    nodes: int = 3
    ha: int = 2
    """Hubs on a local etcd (one leads, the others stand by); 0: one hub on SQLite."""
    timings: ChaosTimings = field(default_factory=ChaosTimings)
    kubesim_error_count: int = 20
    seed: int = 15

    @classmethod
    def bounded(cls) -> ChaosConfig:
        """The run inside `./dev test`: two hubs on etcd, 300 short workloads and one or two
        faults of each kind (HA ones included), about four minutes on a 2-core machine."""
        return cls(
            workloads=300,
            rate=2.3,
            fault_start=5.0,
            fault_gap=2.5,
            settle_seconds=45.0,
            faults={
                FaultKind.HUB_KILL: 2,
                FaultKind.AGENT_KILL: 2,
                FaultKind.AGENT_STOP: 1,
                FaultKind.LINK_CUT: 1,
                FaultKind.LINK_BLACKHOLE: 1,
                FaultKind.KUBESIM_ERRORS: 1,
                FaultKind.KUBESIM_PAUSE: 1,
                FaultKind.KUBESIM_DROP_WATCHES: 1,
                FaultKind.ETCD_KILL: 1,
                FaultKind.LEADER_KILL: 1,
            },
            holds=_holds(ChaosTimings()),
        )

    @classmethod
    def long(cls) -> ChaosConfig:
        """The bench: every fault, ten hub and ten agent kills, workloads up to ~20 s; two
        hubs on etcd (`dataclasses.replace(…, ha=0)` for one hub on SQLite)."""
        return cls(
            workloads=600,
            rate=1.5,
            durations=(3.0, 12.0),
            long_share=0.25,
            long_durations=(14.0, 20.0),
            faults={
                FaultKind.HUB_KILL: 10,
                FaultKind.AGENT_KILL: 10,
                FaultKind.AGENT_STOP: 2,
                FaultKind.LINK_CUT: 2,
                FaultKind.LINK_BLACKHOLE: 2,
                FaultKind.KUBESIM_ERRORS: 3,
                FaultKind.KUBESIM_PAUSE: 2,
                FaultKind.KUBESIM_DROP_WATCHES: 2,
                FaultKind.ETCD_KILL: 2,
                FaultKind.LEADER_KILL: 2,
            },
            holds=_holds(ChaosTimings()),
            fault_gap=5.0,
            settle_seconds=180.0,
        )

    @property
    def submission_seconds(self) -> float:
        return self.workloads / self.rate

    @property
    def hub_side(self) -> str:
        return f"{self.ha} hubs on etcd" if self.ha else "one hub on SQLite"


def _holds(timings: ChaosTimings) -> dict[FaultKind, float]:
    """How long each fault lasts. A cut is seen at once, so it needs to outlast the loss
    timeout only; a frozen or black-holed agent keeps its connection open and is noticed by
    heartbeat, so those last that much longer — the hub does let go during the fault."""
    loss = timings.loss_timeout_seconds
    return {
        FaultKind.HUB_KILL: 1.0,
        FaultKind.AGENT_KILL: 1.0,
        FaultKind.AGENT_STOP: HEARTBEAT_DETECTION_SECONDS + loss + 3.0,
        FaultKind.LINK_CUT: loss + 3.0,
        FaultKind.LINK_BLACKHOLE: HEARTBEAT_DETECTION_SECONDS + loss + 3.0,
        FaultKind.KUBESIM_PAUSE: 2.0,
        FaultKind.ETCD_KILL: 2.0,
        FaultKind.LEADER_KILL: 1.0,
    }


@dataclass
class ChaosReport:
    config: ChaosConfig
    verdict: Verdict
    faults: list[FaultRecord]
    skipped: dict[str, str]
    modes: dict[str, str]
    """Workload key -> dispatch mode."""
    not_accepted: dict[str, str]
    """Submitted name -> why the hub never took it."""
    not_injected: list[str]
    """Planned faults that could not be injected, and why (an HA fault finding no leader, no
    standby, or etcd not coming back): the run did not test what it was to test."""
    crashes: list[str]
    origin: float
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.not_accepted and not self.not_injected

    def worst_recovery(self) -> FaultRecord | None:
        timed = [f for f in self.faults if f.recovered_after is not None]
        return max(timed, key=lambda f: f.recovered_after or 0.0, default=None)

    def to_json(self) -> dict[str, Any]:
        verdict = self.verdict
        counts = {"submitted": self.config.workloads, **verdict.counts()}
        counts["not_accepted"] = len(self.not_accepted)
        by_mode: dict[str, dict[str, int]] = {}
        for mode in MODES:
            keys = {k for k, m in self.modes.items() if m == mode}
            by_mode[mode] = {
                "accepted": len(keys),
                "overlapping": sum(1 for o in verdict.overlapping if o.workload in keys),
                "overlapping_same_generation": sum(
                    1 for o in verdict.overlapping_generations if o.workload in keys
                ),
                "stuck": sum(1 for s in verdict.stuck if s.workload in keys),
                "lost": sum(1 for key in verdict.lost if key in keys),
            }
        faults_by_kind: dict[str, int] = {}
        worst_by_kind: dict[str, float | None] = {}
        for fault in self.faults:
            kind = str(fault.kind)
            faults_by_kind[kind] = faults_by_kind.get(kind, 0) + 1
            if fault.recovered_after is not None:
                worst_by_kind[kind] = max(worst_by_kind.get(kind) or 0.0, fault.recovered_after)
            else:
                worst_by_kind.setdefault(kind, None)
        worst = self.worst_recovery()
        return {
            "ok": self.ok,
            "hubs": self.config.hub_side,
            "workloads": counts,
            "by_mode": by_mode,
            "faults": faults_by_kind,
            "skipped_faults": self.skipped,
            "not_injected": self.not_injected,
            "recovery": {
                "worst_seconds": None if worst is None else round(worst.recovered_after or 0.0, 2),
                "worst_fault": None if worst is None else worst.to_json(self.origin),
                "unrecovered": sum(1 for f in self.faults if f.recovered_after is None),
                "worst_seconds_by_kind": {
                    k: None if v is None else round(v, 2) for k, v in sorted(worst_by_kind.items())
                },
            },
            "crashes": self.crashes,
            "wall_seconds": round(self.wall_seconds, 1),
            "violations": verdict.explain().splitlines() if not verdict.ok else [],
            "not_accepted": dict(list(self.not_accepted.items())[:10]),
            "fault_timeline": [f.to_json(self.origin) for f in self.faults],
        }

    def failure_message(self) -> str:
        """What broke, and the faults around it, for a failing test."""
        summary = self.to_json()
        counts = ", ".join(f"{k} {v}" for k, v in summary["workloads"].items())
        modes = "; ".join(
            f"{mode}: " + ", ".join(f"{k} {v}" for k, v in by.items())
            for mode, by in summary["by_mode"].items()
        )
        lines = [
            f"hubs: {summary['hubs']}",
            f"workloads: {counts}",
            f"by dispatch mode: {modes}",
            "(an overlap within one generation is a double dispatch, e.g. AllAtOnce copies "
            "started before the hub chose; across generations, the hub started the workload "
            "again while a cut-off cluster still ran the old copy)",
            self.verdict.explain(),
        ]
        if self.not_accepted:
            lines.append(f"{len(self.not_accepted)} submission(s) never accepted, e.g.:")
            lines += [f"  - {n}: {why}" for n, why in list(self.not_accepted.items())[:5]]
        if self.not_injected:
            lines.append("faults not injected: " + "; ".join(self.not_injected))
        if self.crashes:
            lines.append("processes that exited on their own: " + ", ".join(self.crashes))
        lines.append("faults (seconds after the first submission):")
        for fault in self.faults:
            lines.append(
                f"  - {fault.kind} {fault.target or 'hub'} at "
                f"{fault.started_at - self.origin:.1f}s for "
                f"{fault.ended_at - fault.started_at:.1f}s"
                + (f" ({fault.detail})" if fault.detail else "")
            )
        return "\n".join(lines)


async def run_chaos(config: ChaosConfig, state_dir: Path) -> ChaosReport:
    """One chaos run in `state_dir` (process logs in `state_dir/logs`)."""
    started = time.monotonic()
    fed = ChaosFederation(
        state_dir,
        clusters=config.clusters,
        nodes=config.nodes,
        runtime="simulated",
        port=0,
        timings=config.timings,
        ha=config.ha,
    )
    try:
        await fed.start_async()
        run = _Run(fed, config)
        report = await run.execute()
    finally:
        await fed.stop_async()
    report.wall_seconds = time.monotonic() - started
    return report


@dataclass
class _Run:
    fed: ChaosFederation
    config: ChaosConfig
    rng: random.Random = field(init=False)
    origin: float = 0.0
    accepted: dict[str, float] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)
    not_accepted: dict[str, str] = field(default_factory=dict)
    observed: dict[str, list[Observation]] = field(default_factory=dict)
    view: dict[str, HubWorkload] = field(default_factory=dict)
    records: list[FaultRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    not_injected: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    witnesses: int = 0
    longest: float = 0.0
    """The longest duration of a workload submitted so far (seconds)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.config.seed)

    async def execute(self) -> ChaosReport:
        config = self.config
        workloads = plan_workloads(
            config.workloads,
            self.rng,
            durations=config.durations,
            long_share=config.long_share,
            long_durations=config.long_durations,
        )
        steps = plan_faults(config.faults, self.fed.names, config.holds, self.rng)
        self.origin = time.time()
        async with (
            HubClient(self.fed.context, timeout=10) as client,
            aiohttp.ClientSession() as http,
        ):
            poller = asyncio.create_task(self._poll(client))
            try:
                await asyncio.gather(
                    self._submit_all(client, workloads), self._inject_all(client, http, steps)
                )
                await self._settle()
            finally:
                poller.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poller
            self._restart_crashed()
            view = await self._final_view(client)
            histories = [
                ClusterHistory.from_wire(
                    await self.fed.kubesim_admin(http, name, "history/pods", None)
                )
                for name in self.fed.names
            ]
        ended = time.time()
        self._keep_evidence(histories, view)
        verdict = check(
            histories,
            view,
            list(self.accepted),
            ended_at=ended,
            observed=self.observed,
            origin=self.origin,
        )
        return ChaosReport(
            config=config,
            verdict=verdict,
            faults=recovery_seconds(sorted(self.records, key=lambda f: f.started_at), histories),
            skipped=self.skipped,
            modes=self.modes,
            not_accepted=self.not_accepted,
            not_injected=self.not_injected,
            crashes=self.crashes,
            origin=self.origin,
            wall_seconds=0.0,
        )

    def _keep_evidence(self, histories: list[ClusterHistory], view: dict[str, HubWorkload]) -> None:
        """What the verdict is drawn from, beside the process logs, for a post-mortem."""
        evidence = {
            "origin": self.origin,
            "accepted": self.accepted,
            "hub": {key: dataclasses.asdict(wl) for key, wl in view.items()},
            "observed": {
                key: [dataclasses.asdict(seen) for seen in seen_list]
                for key, seen_list in self.observed.items()
            },
            "histories": [dataclasses.asdict(h) for h in histories],
            "faults": [dataclasses.asdict(f) for f in self.records],
        }
        (self.fed.state_dir / "evidence.json").write_text(json.dumps(evidence))

    # --- submissions ------------------------------------------------------------------------

    async def _submit_all(self, client: HubClient, planned: list[PlannedWorkload]) -> None:
        slots = asyncio.Semaphore(SUBMIT_CONCURRENCY)
        tasks = []
        for wl in planned:
            await _sleep_until(self.origin + wl.index / self.config.rate)
            await slots.acquire()
            task = asyncio.create_task(self._submit_one(client, wl))
            task.add_done_callback(lambda _: slots.release())
            tasks.append(task)
        await asyncio.gather(*tasks)

    async def _submit_one(self, client: HubClient, wl: PlannedWorkload) -> None:
        key = f"default/{workload_name(wl.body['kind'], wl.name)}"
        self.longest = max(self.longest, wl.duration)
        give_up = time.monotonic() + SUBMIT_GIVE_UP_SECONDS
        attempts = 0
        while True:
            attempts += 1
            try:
                created = await client.submit(wl.body, namespace="default")
            except HubRequestError as error:
                if error.status == 409 and attempts > 1:
                    # An earlier attempt was stored and its answer lost with the hub.
                    self._accept(key, wl.mode)
                    return
                if error.status not in RETRYABLE_STATUSES:
                    self.not_accepted[wl.name] = f"{error.status}: {error}"
                    return
                why = f"{error.status}: {error}"
            except QctlError as error:
                why = str(error)
            else:
                name = created["metadata"]["name"]
                self._accept(f"default/{name}", wl.mode)
                return
            if time.monotonic() > give_up:
                self.not_accepted[wl.name] = f"gave up after {attempts} attempts: {why}"
                return
            await asyncio.sleep(SUBMIT_RETRY_SECONDS)

    def _accept(self, key: str, mode: str) -> None:
        self.accepted[key] = time.time()
        self.modes[key] = mode

    # --- watching the hub -------------------------------------------------------------------

    async def _poll(self, client: HubClient) -> None:
        while True:
            with contextlib.suppress(QctlError):
                self._record(await client.list(Workload, "default"))
            await asyncio.sleep(self.config.poll_seconds)

    def _record(self, items: list[dict[str, Any]]) -> None:
        now = time.time()
        view = {}
        for item in items:
            wl = HubWorkload.from_wire(item)
            view[wl.key] = wl
            reason = "+".join(wl.finished_reasons) or None
            seen = self.observed.setdefault(wl.key, [])
            if not seen or seen[-1].reason != reason:
                seen.append(Observation(now, reason))
        self.view = view

    async def _settle(self) -> None:
        # A workload the faults stopped runs again from its start: give the longest one
        # submitted its whole duration again, however short the configured settle is.
        wait = max(self.config.settle_seconds, self.longest + SETTLE_SLACK_SECONDS)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            self._restart_crashed()
            if all(key in self.view and self.view[key].finished for key in self.accepted):
                return
            await asyncio.sleep(self.config.poll_seconds)

    async def _final_view(self, client: HubClient) -> dict[str, HubWorkload]:
        """The workloads as the leader shows them (any hub, when none leads or there is one)."""
        ha = self.fed.ha_control
        if ha is not None:
            try:
                leader = await ha.leader()
            except HaFaultError as error:
                _log.warning("final view from any hub: %s", error)
            else:
                async with HubClient(ha.context_of(leader), timeout=10) as at_leader:
                    return await self._read_view(at_leader)
        return await self._read_view(client)

    async def _read_view(self, client: HubClient) -> dict[str, HubWorkload]:
        deadline = time.monotonic() + HUB_READY_SECONDS
        while True:
            try:
                items = await client.list(Workload, "default")
            except QctlError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            self._record(items)
            return self.view

    # --- faults -----------------------------------------------------------------------------

    async def _inject_all(
        self,
        client: HubClient,
        http: aiohttp.ClientSession,
        steps: list[tuple[PlannedFault, ...]],
    ) -> None:
        await _sleep_until(self.origin + self.config.fault_start)
        for planned in steps:
            step = []
            for fault in planned:
                if fault.kind in HA_FAULTS and self.fed.ha_control is None:
                    self.skipped[str(fault.kind)] = SINGLE_HUB
                else:
                    step.append(fault)
            if not step:
                continue
            self._restart_crashed()
            notes = [""] * len(step)
            if any(fault.kind in PARTITIONS for fault in step):
                step, notes = await self._witnessed(client, http, step)
            await asyncio.gather(
                *(
                    self._inject_recorded(client, http, f, n)
                    for f, n in zip(step, notes, strict=True)
                )
            )
            await asyncio.sleep(self.config.fault_gap)

    async def _inject_recorded(
        self, client: HubClient, http: aiohttp.ClientSession, fault: PlannedFault, note: str
    ) -> None:
        started = time.time()
        try:
            detail = await self._inject(client, http, fault)
        except HaFaultError as error:
            self.not_injected.append(f"{fault.kind} at {started - self.origin:.1f}s: {error}")
            _log.warning("fault %s not injected: %s", fault.kind, error)
            return
        detail = "; ".join(d for d in (note, detail) if d)
        self.records.append(FaultRecord(fault.kind, fault.target, started, time.time(), detail))
        _log.info("fault %s %s done: %s", fault.kind, fault.target, detail)

    async def _inject(
        self, client: HubClient, http: aiohttp.ClientSession, fault: PlannedFault
    ) -> str:
        """Break, hold, heal; returns a note on what was done."""
        fed, kind, target = self.fed, fault.kind, fault.target
        if kind is FaultKind.HUB_KILL:
            if fed.ha_control is None:
                fed.kill("hub", signal.SIGKILL)
                await asyncio.sleep(fault.hold)
                fed.restart("hub")
                return ""
            hub = self.rng.choice(fed.ha_control.hubs)
            role = await fed.ha_control.kill_hub(hub)
            try:
                await asyncio.sleep(fault.hold)
            finally:
                await fed.ha_control.restart_hub(hub)
            return f"{hub} ({role})"
        if kind is FaultKind.ETCD_KILL:
            assert fed.ha_control is not None
            await fed.ha_control.kill_etcd()
            try:
                await asyncio.sleep(fault.hold)
            finally:
                await fed.ha_control.restart_etcd()
            return ""
        if kind is FaultKind.LEADER_KILL:
            assert fed.ha_control is not None
            leader = await fed.ha_control.kill_leader()
            try:
                await asyncio.sleep(fault.hold)
            finally:
                await fed.ha_control.restart_hub(leader)
            return leader
        assert target is not None
        agent = f"agent-{target}"
        if kind is FaultKind.AGENT_KILL:
            fed.kill(agent, signal.SIGKILL)
            await asyncio.sleep(fault.hold)
            fed.restart(agent)
            return ""
        if kind is FaultKind.AGENT_STOP:
            fed.signal(agent, signal.SIGSTOP)
            try:
                await asyncio.sleep(fault.hold)
            finally:
                fed.signal(agent, signal.SIGCONT)
            return ""
        if kind in (FaultKind.LINK_CUT, FaultKind.LINK_BLACKHOLE):
            link = fed.links[target]
            await link.set_mode(Mode.CUT if kind is FaultKind.LINK_CUT else Mode.BLACKHOLE)
            try:
                await asyncio.sleep(fault.hold)
            finally:
                await link.set_mode(Mode.PASS)
            return ""
        if kind is FaultKind.KUBESIM_ERRORS:
            code = self.rng.choice(KUBESIM_ERROR_CODES)
            count = self.config.kubesim_error_count
            await fed.kubesim_admin(http, target, "faults/errors", {"count": count, "code": code})
            return f"next {count} API requests answered {code}"
        if kind is FaultKind.KUBESIM_PAUSE:
            await fed.kubesim_admin(http, target, "faults/pause", {})
            try:
                await asyncio.sleep(fault.hold)
            finally:
                await fed.kubesim_admin(http, target, "faults/resume", {})
            return ""
        if kind is FaultKind.KUBESIM_DROP_WATCHES:
            dropped = await fed.kubesim_admin(http, target, "faults/drop-watches", {})
            await fed.kubesim_admin(http, target, "faults/compact", {})
            return f"{dropped.get('dropped')} watches dropped, history compacted"
        raise ValueError(f"unknown fault {kind}")

    async def _witnessed(
        self, client: HubClient, http: aiohttp.ClientSession, step: list[PlannedFault]
    ) -> tuple[list[PlannedFault], list[str]]:
        """Start a witness per cluster and aim the step's faults at distinct clusters where
        one runs, as soon as enough do (the planned cluster of a fault if it can)."""
        self.witnesses += 1
        duration = max(f.hold for f in step) + WITNESS_EXTRA_SECONDS
        planned = [
            witness(f"w{self.witnesses:02d}-{i}", duration) for i in range(len(self.fed.names))
        ]
        await asyncio.gather(*(self._submit_one(client, wl) for wl in planned))
        names = {f"job-{wl.name}" for wl in planned}
        deadline = time.monotonic() + WITNESS_WAIT_SECONDS
        running: dict[str, str] = {}
        while len(running) < len(step) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            for cluster in self.fed.names:
                history = await self.fed.kubesim_admin(http, cluster, "history/pods", None)
                for pod in history["pods"]:
                    workload = pod["labels"].get("multiq.dev/workload-name")
                    if workload in names and pod["startedAt"] and not pod["stoppedAt"]:
                        running.setdefault(cluster, workload)
        return aim_at_witnesses(step, running, self.fed.names)

    def _restart_crashed(self) -> None:
        """A product process that exited by itself is a finding: note it, start it again."""
        for name, proc in list(self.fed.processes):
            code = proc.poll()
            if code is None or name == "kubesim":
                continue
            self.crashes.append(f"{name} (exit {code}) at {time.time() - self.origin:.1f}s")
            self.fed.processes.remove((name, proc))
            self.fed.restart(name)


async def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
