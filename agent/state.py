"""What the agent remembers across restarts, in `--state-dir`: the last ConfigSync from the
hub (`config.json`), and every workload it holds (`held.db`, SQLite).

Each held workload is one row: the offer as received (written once — it carries the pod
templates and the source, the bulk) and what changes (generation, phase, the workload's
status with its admission, the Jobs made). One `save_many` is one transaction, so a crash
leaves every row as it was before or after the batch; WAL with synchronous=NORMAL survives a
killed agent (the case that matters: the cluster keeps running its Jobs) at the cost of one
transaction, not a file per workload. `save_many` is blocking and meant for a worker thread
(the admission loop batches one write per workload per pass and hands them to
`asyncio.to_thread`); calls from different threads are serialised.

Persisted transitions: offered, materialised (admission and Job names), finished, forgotten.
Running is not persisted: it is re-observed from the cluster after a restart.

Called by: agent.admission (save/forget held workloads, config), agent.app (load at start).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from api.v1alpha1.messages import ConfigSync, DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import WorkloadStatus

__all__ = ["Held", "StateStore"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A workload this cluster holds (pending, admitted, running or finished)."""

    offer: DispatchOffer
    phase: WorkloadPhase = WorkloadPhase.PENDING
    offered_at: float = 0.0
    job_names: list[str] = field(default_factory=list)
    """The Jobs materialisation made (empty until they all exist)."""
    key: str = field(init=False)
    """namespace/name: how the hub and the agent name the workload (set once: every pass
    looks it up for every workload it touches)."""

    def __post_init__(self) -> None:
        meta = self.offer.workload.metadata
        self.key = f"{meta.namespace or 'default'}/{meta.name}"

    @property
    def generation(self) -> int:
        return self.offer.generation

    @property
    def finished(self) -> bool:
        return self.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED)

    def offer_json(self) -> str:
        """The offer as received (without the status the agent adds)."""
        bare = self.offer.model_copy(
            update={"workload": self.offer.workload.model_copy(update={"status": None})}
        )
        return bare.model_dump_json(by_alias=True, exclude_none=True)

    def state_json(self) -> str:
        status = self.offer.workload.status
        return json.dumps(
            {
                "generation": self.generation,
                "phase": self.phase.value,
                "offeredAt": self.offered_at,
                "jobNames": self.job_names,
                "status": None
                if status is None
                else status.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    @classmethod
    def from_json(cls, offer_text: str, state_text: str) -> Held:
        offer = DispatchOffer.model_validate_json(offer_text)
        state = json.loads(state_text)
        if state.get("generation") != offer.generation:
            raise ValueError("state and offer disagree on the generation")
        if state.get("status") is not None:
            offer.workload.status = WorkloadStatus.model_validate(state["status"])
        return cls(
            offer=offer,
            phase=WorkloadPhase(state["phase"]),
            offered_at=float(state.get("offeredAt", 0.0)),
            job_names=list(state.get("jobNames") or []),
        )


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS held (
    key TEXT PRIMARY KEY,
    offer TEXT NOT NULL,
    state TEXT NOT NULL
);
"""


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            directory / "held.db", isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def save_config(self, config: ConfigSync) -> None:
        _write_atomic(self.directory / "config.json", config.model_dump_json(by_alias=True))

    def load_config(self) -> ConfigSync | None:
        path = self.directory / "config.json"
        if not path.exists():
            return None
        try:
            return ConfigSync.model_validate_json(path.read_text())
        except (ValidationError, OSError) as exc:
            log.error("ignoring unreadable %s: %s", path, exc)
            return None

    def save(self, held: Held, *, with_offer: bool = True) -> None:
        self.save_many([(held.key, held.offer_json() if with_offer else None, held.state_json())])

    def save_many(self, items: Iterable[tuple[str, str | None, str]]) -> None:
        """Write (key, offer JSON or None to keep the stored one, state JSON) for each
        workload, all in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for key, offer_text, state_text in items:
                    if offer_text is not None:
                        self._db.execute(
                            "INSERT OR REPLACE INTO held (key, offer, state) VALUES (?, ?, ?)",
                            (key, offer_text, state_text),
                        )
                    else:
                        self._db.execute(
                            "UPDATE held SET state = ? WHERE key = ?", (state_text, key)
                        )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def forget(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM held WHERE key = ?", (key,))

    def load_all(self) -> list[Held]:
        with self._lock:
            rows = self._db.execute("SELECT key, offer, state FROM held ORDER BY key").fetchall()
        out = []
        for key, offer_text, state_text in rows:
            try:
                out.append(Held.from_json(offer_text, state_text))
            except (ValueError, KeyError, ValidationError) as exc:
                log.error("ignoring unreadable held workload %s: %s", key, exc)
        return out
