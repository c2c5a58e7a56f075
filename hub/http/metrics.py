"""`GET /metrics`: the hub's Prometheus exposition — the instruments of hub.metrics, and the
gauges read off the hub's state when Prometheus scrapes.

Read at scrape time (nothing counts them in between): whether this hub leads, the member
clusters' connections and lane backlogs, the unfinished work bound or offered to each
cluster, the workloads waiting at the hub, each global queue's pending, dispatched and
running counts (the leader's tallies, kept current by the dispatcher), and the log batches
refused. Workloads by phase are the one count kept as it changes: a listener of the state
mirror moves one workload between two phases per event, so a scrape costs what the fleet
has (clusters, queues, phases), never what the store holds — 10,000 workloads or 100,000.

The same listener observes the two latencies of hub.metrics, on the leader only (every hub
mirrors the same events; counting on each would count each workload once per replica):
submission (or last requeue) to the hub's binding, by the hub's clock when the mirror sees
the binding; and to a cluster's admission, by the Admitted condition's transition time.

Called by: hub.app (`MetricsRoutes(...).add_to(app)`).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.v1alpha1.workload import Workload
from hub.dispatch import Dispatcher
from hub.fleet import Fleet
from hub.loghub import LogHub
from hub.metrics import HubMetrics
from hub.role import Role
from hub.state import HubState

__all__ = ["PHASES", "MetricsRoutes", "workload_phase"]

PHASES = ("Pending", "Offered", "Bound", "Admitted", "Running", "Succeeded", "Failed", "Inactive")
"""Every value of the `phase` label of `multiq_workloads` (each exported, zeros included)."""


def workload_phase(wl: Workload) -> str:
    """Where a workload is, as one word of PHASES (what `qctl get workloads` shows)."""
    finished = wl.condition("Finished")
    if finished is not None and finished.status == "True":
        return "Failed" if finished.reason == "Failed" else "Succeeded"
    if not wl.spec.active:
        return "Inactive"
    st = wl.status
    if st is not None and st.cluster_name:
        if wl.is_condition_true("Admitted"):
            return "Running" if wl.is_condition_true("PodsReady") else "Admitted"
        return "Bound"
    if st is not None and st.nominated_cluster_names:
        return "Offered"
    return "Pending"


def _waiting_since(wl: Workload) -> datetime | None:
    """When the workload began waiting: its last requeue, else its submission."""
    st = wl.status
    requeued = next((c for c in st.conditions if c.type == "Requeued"), None) if st else None
    if requeued is not None and requeued.status == "True" and requeued.last_transition_time:
        return requeued.last_transition_time
    return wl.metadata.creation_timestamp


def _now() -> datetime:
    return datetime.now(UTC)


class _WorkloadWatcher:
    """Keeps the count of workloads per phase, and observes the latencies (leader only)."""

    def __init__(self, metrics: HubMetrics, role: Role, clock: Callable[[], datetime]) -> None:
        self.metrics = metrics
        self.role = role
        self.clock = clock
        self.phases: Tally[str] = Tally()
        self._phase_of: dict[str, str] = {}
        """Each workload's phase as counted in `phases`: a change works out the new phase
        only, and the counts stay true even for a change this listener did not hear of."""

    def __call__(self, key: str, old: Workload | None, new: Workload | None) -> None:
        if old is new:
            return  # the mirror repeating what it holds (the hub's own write, back)
        before = self._phase_of.get(key)
        after = workload_phase(new) if new is not None else None
        if before == after:
            return
        if before is not None:
            self.phases[before] -= 1
        if after is not None:
            self.phases[after] += 1
            self._phase_of[key] = after
        else:
            del self._phase_of[key]
        if old is not None and new is not None and self.role.leading:
            self._observe(old, new)

    def _observe(self, old: Workload, new: Workload) -> None:
        since = _waiting_since(new)
        if since is None:
            return
        was_bound = old.status is not None and bool(old.status.cluster_name)
        if not was_bound and new.status is not None and new.status.cluster_name:
            seconds = (self.clock() - since).total_seconds()
            self.metrics.dispatch_latency.observe(max(0.0, seconds))
        admitted = new.condition("Admitted")
        if (
            admitted is not None
            and admitted.status == "True"
            and admitted.last_transition_time is not None
            and not old.is_condition_true("Admitted")
        ):
            seconds = (admitted.last_transition_time - since).total_seconds()
            self.metrics.admission_latency.observe(max(0.0, seconds))


class _StateCollector(Collector):
    """The gauges read off the hub's state at scrape time."""

    def __init__(
        self,
        *,
        state: HubState,
        fleet: Fleet,
        logs: LogHub,
        role: Role,
        dispatcher: Callable[[], Dispatcher],
        phases: Tally[str],
    ) -> None:
        self.state = state
        self.fleet = fleet
        self.logs = logs
        self.role = role
        self.dispatcher = dispatcher
        self.phases = phases

    def collect(self) -> Iterator[Metric]:
        leading = GaugeMetricFamily("multiq_leader", "1 while this hub leads, else 0.")
        leading.add_metric([], 1.0 if self.role.leading else 0.0)
        yield leading
        yield from self._clusters()
        workloads = GaugeMetricFamily(
            "multiq_workloads", "Workloads in the hub's store, by phase.", labels=["phase"]
        )
        for phase in PHASES:
            workloads.add_metric([phase], float(self.phases[phase]))
        yield workloads
        pending = GaugeMetricFamily(
            "multiq_pending_workloads",
            "Workloads waiting at the hub for a cluster (active, unbound, unfinished).",
        )
        pending.add_metric([], float(len(self.state.pending)))
        yield pending
        if self.role.leading:
            yield from self._global_queues()
        refused = CounterMetricFamily(
            "multiq_log_batches_refused",
            "Log batches refused: not for a stream this hub opened on that cluster.",
        )
        refused.add_metric([], float(self.logs.refused))
        yield refused

    def _clusters(self) -> Iterator[Metric]:
        connected = GaugeMetricFamily(
            "multiq_connected_clusters", "Member clusters whose agent holds a session."
        )
        per_cluster = GaugeMetricFamily(
            "multiq_cluster_connected",
            "1 while the member cluster's agent holds a session, else 0.",
            labels=["cluster"],
        )
        last_seen = GaugeMetricFamily(
            "multiq_cluster_last_seen_timestamp_seconds",
            "When the hub last heard from the cluster's agent (Unix time).",
            labels=["cluster"],
        )
        held = GaugeMetricFamily(
            "multiq_cluster_workloads",
            "Unfinished workloads bound or offered to the cluster.",
            labels=["cluster"],
        )
        backlog = GaugeMetricFamily(
            "multiq_lane_backlog",
            "Messages queued on a lane to the cluster's agent, not yet written.",
            labels=["cluster", "lane"],
        )
        clusters = self.fleet.clusters
        connected.add_metric([], float(sum(1 for c in clusters.values() if c.connected)))
        for name in sorted(clusters):
            cluster = clusters[name]
            per_cluster.add_metric([name], 1.0 if cluster.connected else 0.0)
            if cluster.last_seen is not None:
                last_seen.add_metric([name], cluster.last_seen.timestamp())
            held.add_metric([name], float(len(self.state.by_cluster.get(name, ()))))
            for lane in (cluster.control, cluster.logs):
                if lane is not None and not lane.closed:
                    backlog.add_metric([name, lane.kind], float(lane.backlog))
        yield from (connected, per_cluster, last_seen, held, backlog)

    def _global_queues(self) -> Iterator[Metric]:
        queues = GaugeMetricFamily(
            "multiq_global_queue_workloads",
            "Workloads of each global queue: `pending` at the hub, `dispatched` (offered or "
            "bound, not admitted yet), `running` (admitted on a cluster). Leader only.",
            labels=["global_queue", "state"],
        )
        for name, tally in sorted(self.dispatcher().queue_tallies().items()):
            queues.add_metric([name, "pending"], float(tally.pending))
            queues.add_metric([name, "dispatched"], float(tally.dispatched))
            queues.add_metric([name, "running"], float(tally.running))
        yield queues


class MetricsRoutes:
    def __init__(
        self,
        metrics: HubMetrics,
        *,
        state: HubState,
        fleet: Fleet,
        logs: LogHub,
        role: Role,
        dispatcher: Callable[[], Dispatcher],
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.metrics = metrics
        watcher = _WorkloadWatcher(metrics, role, clock)
        state.on_workload.append(watcher)
        metrics.registry.register(
            _StateCollector(
                state=state,
                fleet=fleet,
                logs=logs,
                role=role,
                dispatcher=dispatcher,
                phases=watcher.phases,
            )
        )

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/metrics", make_aiohttp_handler(self.metrics.registry))
