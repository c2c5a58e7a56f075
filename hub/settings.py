"""The hub's settings: where it listens, where it stores, who may call it, its timings.

Parsed from `multiq-hub` flags (and MULTIQ_HUB_* environment variables for containers); one
frozen object passed to hub.app.build_app. Called by: hub.main, tests, `qctl dev up`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HubSettings"]


class HubSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8470, ge=0, le=65535)
    # "sqlite:PATH" (embedded, the default) or "etcd:HOST:PORT[,HOST:PORT…]" (HA).
    store: str = "sqlite:multiq-hub.db"
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
    # Lines of each workload's logs kept after its pods are gone.
    log_tail_lines: int = Field(default=1000, ge=0)
