"""The hub's settings: where it listens (with TLS or not), where it stores, who may call it,
its timings.

Parsed from `multiq-hub` flags (and MULTIQ_HUB_* environment variables for containers); one
frozen object passed to hub.app.build_app. Called by: hub.main, tests, `qctl dev up`.
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.loop import EventLoopKind

__all__ = ["HubSettings"]


class HubSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8470, ge=0, le=65535)
    # "sqlite:PATH" (embedded, the default) or "etcd://HOST:PORT[,HOST:PORT…]" (HA: several
    # hubs share the etcd cluster, every endpoint is used; "etcd:HOST:PORT[,…]" also works).
    store: str = "sqlite:multiq-hub.db"
    # Where the other hubs and the agents reach this hub (its leader URL when it leads);
    # None: http(s)://HOST:PORT.
    advertise_url: str | None = None
    # The lease of the leader's election key (etcd only): when the leader dies, another hub
    # leads at most this long after. Short, so failover is quick; the leader refreshes it
    # every third of it.
    election_ttl_seconds: int = Field(default=5, ge=2, le=60)
    # How long a hub that does not lead holds a write while no leader is known (an election
    # under way) before it answers 503.
    forward_wait_seconds: float = Field(default=15.0, gt=0)
    users_file: Path | None = None
    # Agent tokens named by MemberCluster.spec.tokenRef.secretName are read from
    # SECRETS_DIR/<secretName>/<key>, the layout of a Kubernetes secret volume.
    secrets_dir: Path | None = None
    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    # An agent that sends nothing for this long is considered lost.
    heartbeat_timeout_seconds: float = Field(default=15.0, gt=0)
    # An offer not answered in this long is treated as rejected and the next cluster tried.
    offer_timeout_seconds: float = Field(default=30.0, gt=0)
    # How often the dispatch loop runs when nothing wakes it earlier.
    dispatch_interval_seconds: float = Field(default=1.0, gt=0)
    # How often GlobalQueue and ClusterSet status is brought up to date (only what changed).
    queue_status_interval_seconds: float = Field(default=2.0, gt=0)
    # Fleet fair share (hub.placement.fairshare): usage halves every half-life (Slurm's
    # PriorityDecayHalfLife, 7 days by default; 0: never decays), is brought up to date and
    # the factors recomputed every calc period (Slurm's PriorityCalcPeriod), and bills each
    # resource by its weight per unit per second (CPU cores only by default, as Slurm bills).
    fair_share_half_life_seconds: float = Field(default=7 * 24 * 3600.0, ge=0)
    fair_share_calc_period_seconds: float = Field(default=60.0, gt=0)
    fair_share_resource_weights: dict[str, float] = Field(default_factory=lambda: {"cpu": 1.0})
    # Where workloads' logs are kept (hub.logstore). None: next to a SQLite store
    # (`PATH.logs`), or `multiq-hub-logs` in the working directory with etcd (each hub keeps
    # what arrives over the agent sessions it leads).
    log_dir: Path | None = None
    # Retention of the log store: generations not written for this long go, then the oldest
    # while the store is larger than log_retention_bytes.
    log_retention_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    log_retention_bytes: int = Field(default=10 * 1024**3, ge=0)
    # How far (in bytes of lines) a log follower may fall behind its workload's output before
    # its oldest lines are dropped (and it is told how many).
    log_follower_buffer_bytes: int = Field(default=16 * 1024 * 1024, ge=1024 * 1024)
    # TLS for HTTP and the agents' WebSockets on the one port (PEM files; the certificate
    # file may hold the chain). Both or neither.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # The event loop the process runs on (runtime.loop): uvloop's, or asyncio's own.
    event_loop: EventLoopKind = "uvloop"
    # The CA this hub trusts when it forwards a write to the leading hub over https (None:
    # the system's CAs).
    certificate_authority: Path | None = None

    @model_validator(mode="after")
    def _tls_pair(self) -> HubSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        return self

    @property
    def log_store_dir(self) -> Path:
        """`log_dir`, or its default (see the field)."""
        if self.log_dir is not None:
            return self.log_dir
        scheme, _, path = self.store.partition(":")
        if scheme == "sqlite" and path and path != ":memory:":
            return Path(f"{path}.logs")
        return Path("multiq-hub-logs")

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert is not None else "http"

    @field_validator("advertise_url")
    @classmethod
    def _advertise_url_is_http(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if not url.startswith(("http://", "https://")):
            raise ValueError("advertise_url must be an http:// or https:// URL")
        return url.rstrip("/")

    @property
    def url(self) -> str:
        """This hub's advertised URL: `advertise_url`, else http(s)://HOST:PORT (https with
        TLS; a wildcard host is replaced by this machine's name)."""
        if self.advertise_url:
            return self.advertise_url
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        elif ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}"
