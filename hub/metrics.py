"""The hub's Prometheus instruments: the counters and histograms that move where things
happen (an offer answered, a store write, a log batch, an HTTP request), in one registry per
hub — several hubs in one process (the HA tests) count apart.

Only what must be counted as it happens lives here. Whatever can be read off the hub's state
when Prometheus scrapes (connected clusters, lane backlogs, workloads by phase, the global
queues' pending counts) is read then, by hub.http.metrics, and costs nothing in between.
Every hook is one call of a method here; the pure cores (hub.placement, hub.transitions)
count nothing — the shells count what the cores decided.

Names: `multiq_*` (the hub's concepts have no Kueue equivalent; the agents export Kueue's).
Labels are bounded: cluster names, fixed outcome and phase words, route patterns (never a
raw path), HTTP methods and status codes.

Called by: hub.app (builds one `HubMetrics` and installs `http_middleware`), hub.dispatch,
hub.answers, hub.lanes, hub.loghub, hub.sessions, hub.store.fencing (the hooks),
hub.http.metrics (serves `registry`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry, Counter, Histogram

from telemetry.metrics import Children

__all__ = ["UNCOUNTED", "HubMetrics", "OfferOutcome"]

T = TypeVar("T")

# Seconds from submission to a binding: from a few milliseconds (an idle fleet) to hours (a
# deep queue); Kueue's admission-wait buckets, extended below 10 ms.
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1800.0, 3600.0, 10800.0,
)  # fmt: skip
# A store write: a SQLite group commit is a millisecond or two, an etcd round trip a few.
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
HTTP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNMATCHED_ROUTE = "unmatched"
"""The route label of a request no route matched (its path is not a label: unbounded)."""
STREAMING_PATHS = frozenset({"/agent/v1/session", "/agent/v1/logs"})
"""Long-lived requests (WebSocket sessions): counted, but not timed."""


class OfferOutcome:
    """The `outcome` label of `multiq_offers_total`: what became of one offer to a cluster."""

    REQUESTED = "requested"
    """Asked to reserve quota (AllAtOnce, Incremental)."""
    BOUND = "bound"
    """Bound by the hub and offered (BestFit: one round trip)."""
    RESERVED = "reserved"
    """The cluster reserved quota for it (and the hub bound the reservation)."""
    WITHDRAWN = "withdrawn"
    """The hub took it back: another cluster's reservation was bound."""
    REJECTED = "rejected"
    """The cluster refused it (it can never admit it there, or a stale generation)."""
    EXPIRED = "expired"
    """Unanswered for the offer timeout."""


class HubMetrics:
    """Every instrument of one hub, in its own registry (`registry`)."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        self._child = Children()
        self.dispatch_latency = Histogram(
            "multiq_dispatch_latency_seconds",
            "From submission (or the last requeue) until the hub bound the workload to a cluster.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.admission_latency = Histogram(
            "multiq_admission_latency_seconds",
            "From submission (or the last requeue) until a member cluster admitted the workload.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.offers = Counter(
            "multiq_offers",
            "Offers to member clusters, by what became of them.",
            ["cluster", "outcome"],
            registry=registry,
        )
        self.reports = Counter(
            "multiq_agent_reports",
            "Workload status reports from agents, by phase and whether the hub accepted them.",
            ["cluster", "phase", "result"],
            registry=registry,
        )
        self.dispatch_cycles = Counter(
            "multiq_dispatch_cycles", "Dispatch cycles run by the leader.", registry=registry
        )
        self.lane_dropped = Counter(
            "multiq_lane_dropped_frames",
            "Frames a hub-agent lane dropped: `invalid` (undecodable, from the agent) or "
            "`overflow` (the agent did not read; the lane was closed).",
            ["lane", "reason"],
            registry=registry,
        )
        self.store_writes = Histogram(
            "multiq_store_write_duration_seconds",
            "Store writes (through the leader's fenced writer), by operation.",
            ["op"],
            buckets=STORE_BUCKETS,
            registry=registry,
        )
        self.store_write_errors = Counter(
            "multiq_store_write_errors",
            "Store writes that failed (a lost compare-and-swap included), by operation.",
            ["op"],
            registry=registry,
        )
        self.log_bytes = Counter(
            "multiq_log_bytes",
            "Bytes of log lines: `in` from agents, `out` to readers.",
            ["direction"],
            registry=registry,
        )
        self.log_lines_dropped = Counter(
            "multiq_log_lines_dropped",
            "Log lines dropped because a reader fell behind.",
            registry=registry,
        )
        self.http_requests = Counter(
            "multiq_http_requests",
            "HTTP requests answered, by route pattern, method and status code.",
            ["route", "method", "code"],
            registry=registry,
        )
        self.http_duration = Histogram(
            "multiq_http_request_duration_seconds",
            "Time to answer an HTTP request (WebSocket sessions excluded), by route pattern.",
            ["route", "method"],
            buckets=HTTP_BUCKETS,
            registry=registry,
        )

    # --- hooks --------------------------------------------------------------------------

    def offered(self, clusters: Iterable[str], *, bound: bool) -> None:
        outcome = OfferOutcome.BOUND if bound else OfferOutcome.REQUESTED
        for cluster in clusters:
            self._child(self.offers, cluster, outcome).inc()

    def offer_outcome(self, cluster: str, outcome: str) -> None:
        self._child(self.offers, cluster, outcome).inc()

    def report(self, cluster: str, phase: str, *, accepted: bool) -> None:
        self._child(self.reports, cluster, phase, "accepted" if accepted else "refused").inc()
        if accepted and phase == "Reserved":
            self._child(self.offers, cluster, OfferOutcome.RESERVED).inc()

    def log_in(self, texts: Iterable[str]) -> None:
        self.log_bytes.labels("in").inc(sum(len(text.encode()) for text in texts))

    def log_out(self, texts: Iterable[str]) -> None:
        self.log_bytes.labels("out").inc(sum(len(text.encode()) for text in texts))

    async def timed_write(self, op: str, write: Awaitable[T]) -> T:
        """Await a store write, timing it under `op` (failures are counted apart)."""
        started = time.perf_counter()
        try:
            result = await write
        except BaseException:
            self._child(self.store_write_errors, op).inc()
            raise
        self._child(self.store_writes, op).observe(time.perf_counter() - started)
        return result

    def http_middleware(self) -> Middleware:
        """Counts every answer by route pattern, method and code; installed outermost, so
        it sees the status the error middleware turned an exception into."""

        @web.middleware
        async def count_requests(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            started = time.perf_counter()
            code = 500
            try:
                response = await handler(request)
                code = response.status
                return response
            except web.HTTPException as exc:
                code = exc.status
                raise
            finally:
                route = _route(request)
                self._child(self.http_requests, route, request.method, str(code)).inc()
                if request.path not in STREAMING_PATHS:
                    elapsed = time.perf_counter() - started
                    self._child(self.http_duration, route, request.method).observe(elapsed)

        return count_requests


def _route(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else UNMATCHED_ROUTE


UNCOUNTED = HubMetrics()
"""For parts built without a hub's metrics (unit tests): counted, never served."""
