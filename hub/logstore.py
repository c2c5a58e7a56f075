"""The hub's durable log store: every line the hub received of a workload's containers, from
each log's start, kept in files under the hub's data directory, so `qctl logs` works after
the pods are gone and after the hub restarts.

Layout: `ROOT/<namespace>/<workload>/g<generation>/<cluster>_<pod>_<container>.log` (DNS names
hold no `_`), one line per log line, `N<TAB>TIME<TAB>TEXT` (N counts the stored lines), in
order; a marker (what was not shipped) is a line `!<TAB>TIME<TAB>MESSAGE`. A file named
`COMPLETE` in a generation's directory says its agent shipped everything it was going to (the
marker lines say what it left out). The same lines arrive from several followers and from a
ship; they are written once: a stream's consecutive frames are appended as they are, and where
another stream takes over, what it repeats is recognised by timestamp (see `append`). Numbering
by the agent's reader cannot do this: a cluster keeps a bounded log (kubelet rotation,
kubesim's 10 MiB), so two readers that start at "the start" at different times number the
same line differently.

Why files and not a table in the SQLite store: log volume (tens of MB/s at peak) would
contend for the one SQLite write lock with the workload transitions the dispatch loop
commits; appending to a file is cheap, a generation's logs are removed by deleting one
directory, and the etcd store (1.5 MiB values, everything in RAM on every member) is no place
for logs at all. In etcd mode each hub writes to its own directory (`--log-dir`): logs arrive
only over the leading hub's agent sessions, so the leader's directory has them; after a
failover the new leader's directory has what arrived while it led (see the README).

Retention: generations older than `max_age_seconds` (by their last write) go, then the oldest
until the whole store is under `max_bytes`; `sweep` runs from the LogHub's housekeeping.

Called by: hub.loghub (append, mark, complete, read, counts, sweep).
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["LogStore", "StoredLine", "StreamName"]

log = logging.getLogger(__name__)

COMPLETE = "COMPLETE"
_TAIL_PROBE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class StreamName:
    """One container's log of one workload generation."""

    workload: str  # namespace/name
    generation: int
    cluster: str
    pod: str
    container: str

    def directory(self, root: Path) -> Path:
        namespace, name = self.workload.split("/", 1)
        return root / namespace / name / f"g{self.generation}"

    def path(self, root: Path) -> Path:
        return self.directory(root) / f"{self.cluster}_{self.pod}_{self.container}.log"


class StoredLine(NamedTuple):
    """A line to store. (A named tuple: the hub makes one per line it receives, and a frozen
    dataclass sets each field through object.__setattr__, several times slower.)"""

    text: str
    time: str | None = None  # canonical RFC 3339 (api.logstamps), as received


def _clean(text: str) -> str:
    # A log line holds no newline (the agent splits on them); a stray CR or NUL is kept.
    return text.replace("\n", " ")


class LogStore:
    def __init__(
        self,
        root: Path,
        *,
        max_age_seconds: float = 7 * 24 * 3600.0,
        max_bytes: int = 10 * 1024**3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.max_age_seconds = max_age_seconds
        self.max_bytes = max_bytes
        self.clock = clock
        self._tips: dict[StreamName, _Tip] = {}

    # writing ---------------------------------------------------------------------------------

    def _tip(self, name: StreamName) -> _Tip:
        tip = self._tips.get(name)
        if tip is None:
            tip = _read_tip(name.path(self.root))
            self._tips[name] = tip
        return tip

    def append(self, name: StreamName, source: str, seq: int, lines: Sequence[StoredLine]) -> int:
        """Store what `lines` (numbered from `seq` in the stream `source`) add to the log;
        returns how many were written.

        The frame that follows the last one stored from the same stream adds all its lines.
        A frame from another stream (a second follower, a ship) overlaps what is stored: its
        lines older than the newest stored are skipped, and of those with the newest stored
        timestamp as many as are stored with it (a timestamp can be shared by lines)."""
        tip = self._tip(name)
        fresh: Sequence[StoredLine] = lines
        if not (tip.source == source and tip.source_next == seq):
            skip, ties = 0, tip.ties
            for line in lines:
                stamp = line.time or ""
                if stamp < tip.time or (stamp == tip.time and ties > 0):
                    if stamp == tip.time:
                        ties -= 1
                    skip += 1
                    continue
                break
            fresh = lines[skip:]
        if not fresh:
            return 0  # (a stream still behind the tip: its next frame is compared again)
        tip.source, tip.source_next = source, seq + len(lines)
        out = []
        for n, (text, when) in enumerate(fresh, start=tip.count + 1):
            stamp = when or ""
            out.append(f"{n}\t{stamp or '-'}\t{_clean(text)}\n")
            if stamp == tip.time:
                tip.ties += 1
            elif stamp:
                tip.time, tip.ties = stamp, 1
        tip.count += len(fresh)
        self._write(name, "".join(out))
        return len(fresh)

    def mark(self, name: StreamName, message: str, time: str | None = None) -> None:
        """A marker line after what is stored (read back as an event with `message`)."""
        self._write(name, f"!\t{time or '-'}\t{_clean(message)}\n")

    def complete(self, workload: str, generation: int) -> None:
        """The generation's agent shipped all it will: readers may rely on the store alone."""
        probe = StreamName(workload, generation, "", "", "")
        directory = probe.directory(self.root)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / COMPLETE).touch()

    def _write(self, name: StreamName, text: str) -> None:
        path = name.path(self.root)
        try:
            with path.open("a", encoding="utf-8") as f:
                f.write(text)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(text)

    # reading ---------------------------------------------------------------------------------

    def latest_generation(self, workload: str) -> int | None:
        namespace, name = workload.split("/", 1)
        try:
            entries = os.listdir(self.root / namespace / name)
        except FileNotFoundError:
            return None
        generations = [int(e[1:]) for e in entries if e.startswith("g") and e[1:].isdigit()]
        return max(generations) if generations else None

    def is_complete(self, workload: str, generation: int) -> bool:
        probe = StreamName(workload, generation, "", "", "")
        return (probe.directory(self.root) / COMPLETE).exists()

    def has(self, workload: str) -> bool:
        return self.latest_generation(workload) is not None

    def read(
        self,
        workload: str,
        *,
        generation: int | None = None,
        tail_lines: int | None = None,
        pod: str | None = None,
        container: str | None = None,
        since: str | None = None,
        upto: Mapping[tuple[str, str, str], int] | None = None,
    ) -> list[dict[str, Any]]:
        """The stored records of a generation (default: the latest), every container's lines
        interleaved by time (each container's in order), as the log route sends them:
        `{"cluster", "pod", "container", "time", "line", "seq"}`, markers as
        `{"cluster", "pod", "container", "event": "note", "message"}`; `since` (ISO 8601, as
        stored): only what was written then or later; `upto`: only these (cluster, pod,
        container) logs, each up to that line (what `counts` said: lines appended since are
        left out, so a thread may read while the event loop appends)."""
        generation = generation or self.latest_generation(workload)
        if generation is None:
            return []
        directory = StreamName(workload, generation, "", "", "").directory(self.root)
        files = []
        for path in sorted(directory.glob("*.log")):
            cluster, pod_name, container_name = path.stem.split("_", 2)
            if (pod is not None and pod_name != pod) or (
                container is not None and container_name != container
            ):
                continue
            last = None if upto is None else upto.get((cluster, pod_name, container_name), 0)
            if last == 0:
                continue
            files.append(_records(path, cluster, pod_name, container_name, last))
        merged = list(heapq.merge(*files, key=lambda pair: pair[0]))
        records = [record for when, record in merged if since is None or when >= since]
        if tail_lines is not None:
            records = records[-tail_lines:] if tail_lines else []
        return records

    def counts(self, workload: str, generation: int) -> dict[tuple[str, str, str], int]:
        """Per (cluster, pod, container) log stored of the generation: how many lines."""
        directory = StreamName(workload, generation, "", "", "").directory(self.root)
        counts = {}
        for path in directory.glob("*.log"):
            cluster, pod, container = path.stem.split("_", 2)
            name = StreamName(workload, generation, cluster, pod, container)
            counts[(cluster, pod, container)] = self._tip(name).count
        return counts

    # retention -------------------------------------------------------------------------------

    def sweep(self) -> int:
        """Delete generations past the age limit, then the oldest while over the size limit;
        returns how many generations went."""
        now = self.clock()
        generations: list[tuple[float, int, Path]] = []
        for namespace in _dirs(self.root):
            for workload in _dirs(namespace):
                for generation in _dirs(workload):
                    size, newest = 0, 0.0
                    for f in generation.iterdir():
                        st = f.stat()
                        size += st.st_size
                        newest = max(newest, st.st_mtime)
                    generations.append((newest or generation.stat().st_mtime, size, generation))
        generations.sort()
        total = sum(size for _, size, _ in generations)
        removed = 0
        for newest, size, path in generations:
            if now - newest <= self.max_age_seconds and total <= self.max_bytes:
                break
            shutil.rmtree(path, ignore_errors=True)
            total -= size
            removed += 1
            self._tips = {k: v for k, v in self._tips.items() if not _under(k, path, self)}
        if removed:
            log.info("log store: %d generation(s) past retention removed", removed)
        return removed


def _under(name: StreamName, directory: Path, store: LogStore) -> bool:
    return name.directory(store.root) == directory


def _dirs(path: Path) -> Iterable[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []


def _records(
    path: Path, cluster: str, pod: str, container: str, last: int | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(time, record) pairs of one file in order, up to line `last` (None: every whole
    line); a marker takes the time of the line before it so the merge keeps it in place."""
    last_time = ""
    with path.open(encoding="utf-8", errors="replace") as f:
        for raw in f:
            if not raw.endswith("\n"):
                # A line being appended right now (the hub writes whole lines only): what
                # the read may give is what was stored before it, never half a line.
                return
            seq, _, rest = raw[:-1].partition("\t")
            stamp, _, text = rest.partition("\t")
            when = "" if stamp == "-" else stamp
            if seq == "!":
                record: dict[str, Any] = {
                    "cluster": cluster,
                    "pod": pod,
                    "container": container,
                    "event": "note",
                    "message": text,
                }
                yield (when or last_time), record
                continue
            number = int(seq)
            if last is not None and number > last:
                return
            record = {"cluster": cluster, "pod": pod, "container": container, "line": text}
            if when:
                record["time"] = when
                last_time = when
            record["seq"] = number
            yield last_time, record
            if last is not None and number >= last:
                # Not a byte further: what follows may be a line being appended right now.
                return


@dataclass(slots=True)
class _Tip:
    """The end of a stored log: its line count, its newest timestamp and how many stored
    lines have it, and the stream (and next number in it) the last lines came from."""

    count: int = 0
    time: str = ""
    ties: int = 0
    source: str | None = None
    source_next: int = 0


def _read_tip(path: Path) -> _Tip:
    """The tip of a log file (empty: no file, or no line in it) from its last lines."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL_PROBE_BYTES))
            chunk = f.read()
    except FileNotFoundError:
        return _Tip()
    tip = _Tip()
    for raw in reversed(chunk.split(b"\n")):
        head, _, rest = raw.partition(b"\t")
        if not head.isdigit():
            continue
        stamp = rest.partition(b"\t")[0].decode()
        stamp = "" if stamp == "-" else stamp
        if not tip.count:
            tip.count, tip.time, tip.ties = int(head), stamp, 1
        elif stamp == tip.time:
            tip.ties += 1
        else:
            break
    return tip
