"""What the agent remembers across restarts, in `--state-dir`: the last ConfigSync from the
hub (`config.json`), the last lease terms it granted (`lease.json`, written only when they
change), the local queues' admission fair sharing usage (`fair_usage.json`, written when it
changes: agent.fair_usage), and every workload it holds (`held.db`, SQLite).

Each held workload is one row: the offer as received (written once — it carries the pod
templates and the source, the bulk) and what changes (generation, phase, binding, the
workload's status with its admission, the Jobs made), both as JSON text that agent.records
writes and reads. One `save_many` is one transaction, so a crash leaves every row as it was
before or after the batch; WAL with synchronous=NORMAL survives a killed agent (the case that
matters: the cluster keeps running its Jobs) at the cost of one transaction, not a file per
workload. `save_many` is blocking and meant for a worker thread (the admission loop batches
one write per workload per pass and hands them to `asyncio.to_thread`); calls from different
threads are serialised.

Called by: agent.admission (save/forget held workloads, config), agent.app (load at start,
lease terms).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from api.v1alpha1.messages import ConfigSync

__all__ = ["StateStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")


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

    def save_lease_terms(self, text: str) -> None:
        _write_atomic(self.directory / "lease.json", text)

    def load_lease_terms(self) -> str | None:
        path = self.directory / "lease.json"
        try:
            return path.read_text() if path.exists() else None
        except OSError as exc:
            log.error("ignoring unreadable %s: %s", path, exc)
            return None

    def save_fair_usage(self, text: str) -> None:
        _write_atomic(self.directory / "fair_usage.json", text)

    def load_fair_usage(self) -> str | None:
        path = self.directory / "fair_usage.json"
        try:
            return path.read_text() if path.exists() else None
        except OSError as exc:
            log.error("ignoring unreadable %s: %s", path, exc)
            return None

    def save(self, key: str, offer_text: str | None, state_text: str) -> None:
        self.save_many([(key, offer_text, state_text)])

    def save_many(
        self, items: Iterable[tuple[str, str | None, str]], forget: Iterable[str] = ()
    ) -> None:
        """Write (key, offer JSON or None to keep the stored one, state JSON) for each
        workload and delete the rows of `forget`, all in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for key in forget:
                    self._db.execute("DELETE FROM held WHERE key = ?", (key,))
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

    def load_all(self, decode: Callable[[str, str], T]) -> list[T]:
        """Every row, decoded by `decode(offer JSON, state JSON)`; unreadable rows are logged
        and skipped."""
        with self._lock:
            rows = self._db.execute("SELECT key, offer, state FROM held ORDER BY key").fetchall()
        out = []
        for key, offer_text, state_text in rows:
            try:
                out.append(decode(offer_text, state_text))
            except (ValueError, KeyError, ValidationError) as exc:
                log.error("ignoring unreadable held workload %s: %s", key, exc)
        return out
