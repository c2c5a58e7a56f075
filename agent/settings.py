"""Agent settings: command-line flags (and MULTIQ_AGENT_* environment variables) validated
into one frozen pydantic model, with the timings grouped so tests can shorten them.

Called by: agent.main (parses argv), agent.app (reads every field), tests (construct directly).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.errors import Path as FieldPath
from api.v1alpha1.federation import (
    AdmissionFairSharing,
    FairSharing,
    WaitForPodsReady,
    fair_sharing_errors,
)
from runtime.loop import EVENT_LOOPS, EventLoopKind

__all__ = ["AgentSettings", "Timings", "parse_args"]

AGENT_VERSION = "0.1.0"


class Timings(BaseModel):
    """Every delay the agent's loops use, in seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reconnect_initial: float = 0.5
    """First delay before reconnecting to the hub (doubles, with jitter)."""
    reconnect_max: float = 30.0
    """Cap of the reconnect delay."""
    reconnect_quick_for: float = 60.0
    """For this long after the hub is lost, reconnect at least every `reconnect_quick_max`
    seconds, whatever the backoff says: a hub restarting or another taking over as leader is
    back within seconds, and an agent away from it holds up dispatch."""
    reconnect_quick_max: float = 1.0
    heartbeat: float = 20.0
    """WebSocket ping interval on both lanes (a pong later than half of it closes the lane;
    a hub busy for a few seconds must not cost a reconnect)."""
    ack_delay: float = 1.0
    """Send a bare Ack after this long with unacknowledged input and nothing else to send."""
    capacity_debounce: float = 0.25
    """At most one capacity report this often while changes keep coming (a change after a
    quiet spell is reported at once). The hub offers only the room reports show, so this
    paces how soon freed room is filled: 16 one-CPU slots of short Slurm-mode tasks ran 18
    jobs/s at 1 s, 32 at 0.25 s, 35 at 0.1 s (bench.slurm_mode_throughput)."""
    capacity_heartbeat: float = 10.0
    """At least one capacity report this often."""
    watch_timeout: int = 300
    """Server-side timeout of one watch request; the watch is then resumed."""
    watch_retry: float = 1.0
    """Pause before re-listing after a watch failed."""
    log_batch_interval: float = 0.02
    """How long a log batch may wait to fill before it is sent: a fifth of the 0.1 s it was,
    for p99 line latency (bench.logs_fanin's paced phase); a flood fills batches anyway."""
    cycle_min_interval: float = 0.05
    """At most one admission cycle this often (events within it are coalesced)."""
    orphan_grace: float = 30.0
    """After a Hello, how long the hub has to re-offer workloads whose Jobs run here without
    the agent holding them (lost state) before those Jobs are deleted."""
    status_interval: float = 1.0
    """At most one report per workload this often when only its pod counts change, or when
    it starts running (a Job that ends sooner goes from Admitted straight to its end); and
    at most this long after the admission an Admitted report waits for the pods to start, so
    that one report (one write at the hub) says Admitted and Running."""
    finished_ttl: float = 3600.0
    """How long a finished workload stays held (listed in Hello, its last report re-sent on a
    redelivered offer) before the agent forgets it."""
    materialize_retry: float = 10.0
    """How soon Jobs the cluster refused to let the agent create (403: its ClusterRole lacks a
    rule) are tried again; the workload keeps its quota and says why meanwhile."""
    pending_refresh: float = 30.0
    """At most one Pending report per workload this often when only its message changes
    (the amounts in it move with every admission; a new reason is reported at once)."""
    unleased_renewal: float = 1.0
    """How often the lease is renewed after a Hello until the hub first grants it (then every
    third of the granted lease)."""


class AgentSettings(BaseModel):
    """Everything `multiq-agent` needs to run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: str = Field(min_length=1)
    """This member cluster's name, as registered at the hub."""
    hub: str = Field(min_length=1)
    """The hub's base URL (http[s]://host:port); the lanes are /agent/v1/session and /logs.
    Several hubs sharing one store: their URLs separated by commas (`hub_urls`); the agent
    dials them in order and follows the one that leads."""
    token: str = Field(min_length=1, repr=False)
    """Bearer token for the session (from --token or --token-file)."""
    certificate_authority: Path | None = None
    """A PEM file of the CA(s) to trust for an https hub (None: the system's CAs)."""
    kubeconfig: Path | None = None
    """None: in-cluster config, then ~/.kube/config."""
    context: str | None = None
    state_dir: Path
    """Where the last config and the held workloads are persisted."""
    timings: Timings = Field(default_factory=Timings)
    log_buffer_lines: int = Field(default=10_000, ge=1)
    """Bound of each log stream's buffer; past it the stream's readers wait (nothing is
    dropped)."""
    log_ship_limit_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """At most this many bytes of a finished workload's log lines are shipped to the hub
    unasked before its pods may go (0: none); a marker says what was left behind."""
    log_ship_stop_wait_seconds: float = Field(default=5.0, ge=0)
    """A cancelled workload's Jobs wait at most this long for its logs to be shipped (in the
    background: the admission loop never waits); an evicted one's Evicted report too."""
    log_ship_open_wait_seconds: float = Field(default=0.5, ge=0)
    """Before an evicted or preempted workload's Jobs are deleted, the admission loop waits
    at most this long for the ship's reads to hold its logs (0: such logs are not shipped)."""
    log_batch_lines: int = Field(default=500, ge=1)
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    """Log lines for people, or JSON objects carrying the current span's trace ids."""
    event_loop: EventLoopKind = "uvloop"
    """The event loop the process runs on (runtime.loop): uvloop's, or asyncio's own."""
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve Prometheus metrics on this port (0: any free port); None: not served."""
    metrics_address: str = "0.0.0.0"
    """The address the metrics endpoint listens on."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    """This agent's waitForPodsReady when the hub sends none for its cluster (None: off)."""
    admission_fair_sharing: AdmissionFairSharing | None = None
    fair_sharing: FairSharing | None = None
    """This agent's preemption-based fair sharing when the hub sends none (None: off)."""
    """This agent's admission fair sharing when the hub sends none for its cluster (None:
    off)."""

    @property
    def hub_urls(self) -> tuple[str, ...]:
        """Every hub's base URL, in the order given."""
        return tuple(u.strip().rstrip("/") for u in self.hub.split(",") if u.strip())

    @model_validator(mode="after")
    def _hub_is_http(self) -> AgentSettings:
        urls = self.hub_urls
        if not urls or not all(u.startswith(("http://", "https://")) for u in urls):
            raise ValueError("hub must be an http:// or https:// URL, or several, comma-separated")
        return self


def parse_args(argv: Sequence[str] | None = None) -> AgentSettings:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="multiq-agent", description="MultiQ member-cluster agent: dials the hub."
    )
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    parser.add_argument("--context", default=env("MULTIQ_AGENT_CONTEXT"))
    parser.add_argument(
        "--hub",
        default=env("MULTIQ_AGENT_HUB"),
        help="hub base URL, or several hubs' URLs, comma-separated (it follows the leader)",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--token", default=env("MULTIQ_AGENT_TOKEN"))
    token.add_argument("--token-file", default=env("MULTIQ_AGENT_TOKEN_FILE"))
    parser.add_argument("--cluster", default=env("MULTIQ_AGENT_CLUSTER"), help="cluster name")
    parser.add_argument(
        "--certificate-authority",
        default=env("MULTIQ_AGENT_CERTIFICATE_AUTHORITY"),
        metavar="FILE",
        help="PEM CA bundle to trust for an https hub (default: the system's CAs)",
    )
    parser.add_argument(
        "--state-dir", default=env("MULTIQ_AGENT_STATE_DIR", ".multiq-agent"), type=Path
    )
    parser.add_argument("--log-level", default=env("MULTIQ_AGENT_LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env("MULTIQ_AGENT_LOG_FORMAT", "text"),
        help="text for people (default), json for collectors, with the current trace ids",
    )
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=env("MULTIQ_AGENT_EVENT_LOOP", "uvloop"),
        help="uvloop's (default: asyncio's loop in C, less CPU) or asyncio's own",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=env("MULTIQ_AGENT_METRICS_PORT"),
        help="serve Prometheus metrics on http://ADDRESS:PORT/metrics (off by default)",
    )
    parser.add_argument("--metrics-address", default=env("MULTIQ_AGENT_METRICS_ADDRESS", "0.0.0.0"))
    parser.add_argument(
        "--wait-for-pods-ready",
        type=int,
        metavar="SECONDS",
        default=env("MULTIQ_AGENT_WAIT_FOR_PODS_READY"),
        help="evict and requeue admitted work whose pods are not all ready within SECONDS "
        "(off by default; a MemberCluster's spec.waitForPodsReady, sent by the hub, wins)",
    )
    parser.add_argument(
        "--fair-sharing",
        metavar="STRATEGIES",
        default=env("MULTIQ_AGENT_FAIR_SHARING"),
        help="preemption-based fair sharing with these comma-separated preemption strategies "
        "(Kueue's LessThanOrEqualToFinalShare, LessThanInitialShare; 'default' for both in "
        "that order; or MultiQ's MultiQTowardFairShare, alone: docs/fair-sharing.md); "
        "off by default; a MemberCluster's spec.fairSharing, sent by the hub, wins",
    )
    parser.add_argument(
        "--admission-fair-sharing-half-life",
        type=int,
        metavar="SECONDS",
        default=env("MULTIQ_AGENT_ADMISSION_FAIR_SHARING_HALF_LIFE"),
        help="order cluster queues with admissionMode UsageBasedAdmissionFairSharing by their "
        "local queues' usage, halved every SECONDS (off by default; a MemberCluster's "
        "spec.admissionFairSharing, sent by the hub, wins)",
    )
    parser.add_argument(
        "--admission-fair-sharing-sampling",
        type=int,
        metavar="SECONDS",
        default=env("MULTIQ_AGENT_ADMISSION_FAIR_SHARING_SAMPLING", "300"),
        help="with --admission-fair-sharing-half-life: sample usage every SECONDS (default 300)",
    )
    parser.add_argument(
        "--log-ship-limit-bytes",
        type=int,
        default=env("MULTIQ_AGENT_LOG_SHIP_LIMIT_BYTES", str(64 * 1024 * 1024)),
        help="ship at most this many bytes of a finished workload's logs to the hub before "
        "its pods may go (default 64 MiB; 0: none); a marker says what was left behind",
    )
    parser.add_argument(
        "--log-ship-stop-wait-seconds",
        type=float,
        default=env("MULTIQ_AGENT_LOG_SHIP_STOP_WAIT_SECONDS", "5"),
        help="a cancelled workload's Jobs are deleted after its logs are shipped, or after "
        "this many seconds (default 5; the eof says what was left behind); an evicted "
        "workload's Evicted report waits as long for its ship",
    )
    parser.add_argument(
        "--log-ship-open-wait-seconds",
        type=float,
        default=env("MULTIQ_AGENT_LOG_SHIP_OPEN_WAIT_SECONDS", "0.5"),
        help="an evicted or preempted workload's Jobs are deleted once the ship of its logs "
        "holds them, or after this many seconds (default 0.5; 0: not shipped)",
    )
    args = parser.parse_args(argv)
    tok = args.token
    if args.token_file:
        tok = Path(args.token_file).read_text().strip()
    missing = [
        n for n, v in (("--hub", args.hub), ("--cluster", args.cluster), ("--token", tok)) if not v
    ]
    if missing:
        parser.error("missing " + ", ".join(missing))
    return AgentSettings(
        cluster=args.cluster,
        hub=",".join(u.strip().rstrip("/") for u in args.hub.split(",")),
        token=tok,
        certificate_authority=(
            Path(args.certificate_authority) if args.certificate_authority else None
        ),
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
        context=args.context,
        state_dir=args.state_dir,
        log_level=args.log_level.upper(),
        log_format=args.log_format,
        event_loop=args.event_loop,
        metrics_port=int(args.metrics_port) if args.metrics_port is not None else None,
        metrics_address=args.metrics_address,
        wait_for_pods_ready=WaitForPodsReady(timeout_seconds=int(args.wait_for_pods_ready))
        if args.wait_for_pods_ready
        else None,
        admission_fair_sharing=AdmissionFairSharing(
            usage_half_life_seconds=int(args.admission_fair_sharing_half_life),
            usage_sampling_interval_seconds=int(args.admission_fair_sharing_sampling),
        )
        if args.admission_fair_sharing_half_life is not None
        else None,
        fair_sharing=_fair_sharing(args.fair_sharing),
        log_ship_limit_bytes=int(args.log_ship_limit_bytes),
        log_ship_stop_wait_seconds=float(args.log_ship_stop_wait_seconds),
        log_ship_open_wait_seconds=float(args.log_ship_open_wait_seconds),
    )


def _fair_sharing(value: str | None) -> FairSharing | None:
    """`--fair-sharing`: None or empty is off; "default" both strategies in Kueue's order."""
    if not value:
        return None
    if value.strip() == "default":
        return FairSharing()
    parts = [p.strip() for p in value.split(",") if p.strip()]
    fair = FairSharing.model_validate({"preemptionStrategies": parts})
    errors = fair_sharing_errors(FieldPath("fairSharing"), fair)
    if errors:
        raise ValueError("--fair-sharing: " + "; ".join(str(e) for e in errors))
    return fair
