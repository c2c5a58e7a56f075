"""How qctl's Slurm verbs print jobs, as Slurm's own tools do: squeue's `-o/--format` fields
(`%i %j %u %t %T %M %D %R %P %l %S %V %r %N %k`, `%.18i` right-justified, `%18i` left-justified,
values cut to the width), its default columns and `--start` view, pending array tasks
collapsed into one line (`1234_[1-5]`), and sacct's `--format` fields (`JobID,JobName%20,…`,
right-justified, a value too long for its column ending in `+`).

Pure: rows in (the hub's JSON rows), text out; `now` is not needed (the hub computed elapsed
times). Called by: qctl.commands.slurm, tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SACCT_DEFAULT",
    "SQUEUE_DEFAULT",
    "SQUEUE_START",
    "collapse_pending_arrays",
    "duration",
    "sacct_table",
    "squeue_table",
]

Row = Mapping[str, Any]

SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_START = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"
SACCT_DEFAULT = "JobID,JobName,Partition,State,ExitCode,Elapsed,Cluster"
_TOKEN = re.compile(r"%(\.?)(\d*)([a-zA-Z%])")
_HEADERS = {
    "i": "JOBID",
    "j": "NAME",
    "u": "USER",
    "t": "ST",
    "T": "STATE",
    "M": "TIME",
    "D": "NODES",
    "R": "NODELIST(REASON)",
    "P": "PARTITION",
    "l": "TIME_LIMIT",
    "S": "START_TIME",
    "V": "SUBMIT_TIME",
    "r": "REASON",
    "N": "NODELIST",
    "k": "COMMENT",
}
_CODES = {
    "PENDING": "PD",
    "RUNNING": "R",
    "COMPLETED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
    "TIMEOUT": "TO",
}


def duration(seconds: int | None) -> str:
    """Slurm's [D-]H:MM:SS, or M:SS under an hour."""
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _time(value: str | None) -> str:
    return value[:19] if value else "N/A"


def _squeue_value(letter: str, row: Row) -> str:
    state = str(row["state"])
    pending = state == "PENDING"
    match letter:
        case "i":
            return str(row["jobId"])
        case "j":
            return str(row["name"])
        case "u":
            return str(row["user"])
        case "t":
            return _CODES.get(state, state[:2])
        case "T":
            return str(state)
        case "M":
            return duration(row.get("elapsedSeconds") or 0)
        case "D":
            return str(row["nodes"])
        case "R":
            if state == "RUNNING" or row["reason"] in ("None", ""):
                return str(row.get("nodeList") or "")
            return f"({row['reason']})"
        case "P":
            return str(row["partition"])
        case "l":
            return duration(row.get("timeLimitSeconds"))
        case "S":
            return _time(row.get("startTime") or (row.get("beginTime") if pending else None))
        case "V":
            return _time(row.get("submitTime"))
        case "r":
            return str(row["reason"])
        case "N":
            return str(row.get("nodeList") or "")
        case "k":
            return str(row.get("comment") or "(null)")
        case "%":
            return "%"
    return f"%{letter}"


def _fit(text: str, width: str, right: bool) -> str:
    if not width:
        return text
    size = int(width)
    text = text[:size]
    return text.rjust(size) if right else text.ljust(size)


def squeue_table(rows: Sequence[Row], fmt: str = SQUEUE_DEFAULT, *, header: bool = True) -> str:
    def line(value: Any) -> str:
        def replace(match: re.Match[str]) -> str:
            dot, width, letter = match.groups()
            text = value(letter)
            return _fit(text, width, dot == ".")

        return _TOKEN.sub(replace, fmt).rstrip()

    lines = [line(lambda letter: _HEADERS.get(letter, letter))] if header else []
    lines += [line(lambda letter, r=row: _squeue_value(letter, r)) for row in rows]
    return "".join(f"{text}\n" for text in lines)


def _ranges(indices: Sequence[int]) -> str:
    parts: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        if i is not None:
            start = prev = i
    return ",".join(parts)


def collapse_pending_arrays(rows: Sequence[Row]) -> list[Row]:
    """Pending tasks of one array that wait for the same reason are one row, `A_[1-3,7]`, in
    the place of the first of them; every other row as it is."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    order: list[tuple[Any, ...] | int] = []
    for position, row in enumerate(rows):
        if row["state"] == "PENDING" and row.get("arrayJobId") is not None:
            key = (row["arrayJobId"], row["reason"], row["partition"])
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(row)
        else:
            order.append(position)
    out: list[Row] = []
    for item in order:
        if isinstance(item, int):
            out.append(rows[item])
            continue
        tasks = groups[item]
        if len(tasks) == 1:
            out.append(tasks[0])
            continue
        indices = sorted(int(t["arrayTaskId"]) for t in tasks)
        out.append({**tasks[0], "jobId": f"{item[0]}_[{_ranges(indices)}]"})
    return out


def _elapsed(row: Row) -> str:
    seconds = int(row.get("elapsedSeconds") or 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


_SACCT_FIELDS: dict[str, tuple[int, Any]] = {
    "jobid": (12, lambda r: r["jobId"]),
    "jobidraw": (12, lambda r: r["id"]),
    "jobname": (10, lambda r: r["name"]),
    "partition": (10, lambda r: r["partition"]),
    "user": (9, lambda r: r["user"]),
    "state": (10, lambda r: r["state"]),
    "exitcode": (8, lambda r: r["exitCode"]),
    "elapsed": (10, _elapsed),
    "nodelist": (15, lambda r: r.get("nodeList") or "None assigned"),
    "cluster": (10, lambda r: r.get("cluster") or ""),
    "nnodes": (8, lambda r: r["nodes"]),
    "timelimit": (10, lambda r: duration(r.get("timeLimitSeconds"))),
    "submit": (19, lambda r: _time(r.get("submitTime"))),
    "start": (19, lambda r: _time(r.get("startTime")) if r.get("startTime") else "Unknown"),
    "end": (19, lambda r: _time(r.get("endTime")) if r.get("endTime") else "Unknown"),
    "reason": (10, lambda r: r["reason"]),
    "comment": (15, lambda r: r.get("comment") or ""),
}
SACCT_FIELDS = tuple(_SACCT_FIELDS)


def sacct_columns(fmt: str) -> list[tuple[str, str, int]]:
    """(field, header, width) for `--format` (`Name` or `Name%width`); unknown names raise
    ValueError naming them."""
    columns = []
    for item in (f for f in fmt.split(",") if f):
        name, _, width = item.partition("%")
        field = name.lower()
        if field not in _SACCT_FIELDS:
            raise ValueError(f"invalid field {name!r} (known: {', '.join(SACCT_FIELDS)})")
        columns.append((field, name, int(width) if width.isdigit() else _SACCT_FIELDS[field][0]))
    return columns


def sacct_table(rows: Sequence[Row], fmt: str = SACCT_DEFAULT, *, header: bool = True) -> str:
    columns = sacct_columns(fmt)

    def cell(text: str, width: int) -> str:
        return (text[: width - 1] + "+" if len(text) > width else text).rjust(width)

    lines = []
    if header:
        lines.append(" ".join(cell(title, width) for _, title, width in columns))
        lines.append(" ".join("-" * width for _, _, width in columns))
    for row in rows:
        lines.append(
            " ".join(cell(str(_SACCT_FIELDS[f][1](row)), width) for f, _, width in columns)
        )
    return "".join(f"{line}\n" for line in lines)
