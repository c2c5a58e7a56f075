"""What the agent remembers across restarts, in `--state-dir`: the last ConfigSync from the
hub (`config.json`), the last lease terms it granted (`lease.json`, written only when they
change), the local queues' admission fair sharing usage (`fair_usage.json`, written when it
changes: agent.fair_usage), and every workload it holds (`held.db`, SQLite).

Each held workload is one row: the offer as received (written once, as the text of the
envelope it came in — it carries the pod templates and the source, the bulk) and what
changes (generation, phase, binding, the workload's status with its admission, the Jobs
made), both as JSON text that agent.records writes and reads. One `save_many` is one
transaction, so a crash leaves every row as it was before or after the batch; WAL with
synchronous=NORMAL survives a killed agent (the case that matters: the cluster keeps running
its Jobs) at the cost of one transaction, not a file per workload. A commit is then an
append to the log without an fsync; the fsyncs come with checkpoints, which SQLite would run
inside whichever commit filled the log, so automatic checkpoints are off and `write` runs
them in a worker thread (`checkpoint_due`). `write`, which the admission loop calls once per
pass, writes a small batch in the loop — an append, cheaper than the hand-over to a thread
(`writes_in_loop`) — and hands a big one to `asyncio.to_thread`; calls from different
threads are serialised.

Called by: agent.admission (save/forget held workloads, config), agent.app (load at start,
lease terms).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from api.v1alpha1.messages import ConfigSync

__all__ = ["StateStore", "writes_in_loop"]

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


SMALL_WRITE_ROWS = 64
SMALL_WRITE_BYTES = 256 * 1024


def writes_in_loop(rows: int, text_bytes: int) -> bool:
    """Whether a batch of `rows` saved or deleted, with `text_bytes` of JSON, is written in
    the event loop. Handed to a worker thread, a batch costs the agent about 170 µs of CPU
    more than in place, whatever its size (`python -m bench.agent_state_writes`), and under a
    steady trickle of work every pass writes a few rows. In place, a batch at these limits
    holds the loop for about half a millisecond (no fsync: an append to the log), less than
    a light admission cycle (agent.pacing); a bigger one (a burst, a restart) goes to a
    thread, so as not to hold up every Job create, watch event and hub message meanwhile."""
    return rows <= SMALL_WRITE_ROWS and text_bytes <= SMALL_WRITE_BYTES


CHECKPOINT_PAGES = 1000
"""Pages written to the log between checkpoints: SQLite's own default."""
_PAGE_BYTES = 4096  # SQLite's default page size


class StateStore:
    def __init__(self, directory: Path, *, checkpoint_pages: int = CHECKPOINT_PAGES) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            directory / "held.db", isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # `checkpoint`, from a thread
        self._db.executescript(_SCHEMA)
        self._checkpoint_pages = checkpoint_pages
        self._pages = 0
        """Pages written to the log since the last checkpoint, as estimated by `save_many`: a
        row's pages, and one more for the index (SQLite tells the exact count only to a C
        callback that Python's module does not expose)."""

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
            pages = 0
            try:
                for key in forget:
                    pages += 1
                    self._db.execute("DELETE FROM held WHERE key = ?", (key,))
                for key, offer_text, state_text in items:
                    pages += 2 + (len(state_text) + len(offer_text or "")) // _PAGE_BYTES
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
            self._pages += pages

    async def write(
        self, saves: Sequence[tuple[str, str | None, str]], forget: Sequence[str]
    ) -> None:
        """`save_many` without the loop waiting for the disk: in place when small, else in a
        worker thread; then the log's checkpoint in a worker thread when one is due."""
        text = sum(len(state) + len(offer or "") for _, offer, state in saves)
        if writes_in_loop(len(saves) + len(forget), text):
            self.save_many(saves, forget)
        else:
            await asyncio.to_thread(self.save_many, saves, forget)
        if self.checkpoint_due():
            await asyncio.to_thread(self.checkpoint)

    def checkpoint_due(self) -> bool:
        """Whether the log has grown enough since the last checkpoint to write it back."""
        return self._pages >= self._checkpoint_pages

    def checkpoint(self) -> None:
        """Write the log back into the database file (blocking, with fsyncs: call it from a
        worker thread); the log then starts over."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._pages = 0

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
