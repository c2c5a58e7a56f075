"""Benchmark: the checks the hub and the agent make of each workload, with warm and with cold
caches.

Why it exists (issue #15): in `bench.federation_dispatch`'s paced phase (200 workloads/s) the
hub and the agents spend much more CPU per workload than in the burst, and meters around
single functions find them slower live than in a loop: the agent's check of an offer took
330-400 µs live in session 34, 70 µs here hot. Between two workloads each process runs
everything else it does (the watches, the other workloads' reports), with kubesim and the
other processes on the same two cores, so a workload's code and data may have left the CPU's
caches. This bench measures how much of the difference that alone explains, on the two
checks every workload gets:

- hub: a submitted Job decoded with the api models and its rules (`api.codec.decode`), then
  converted to its Workload (`bench.control_plane_floor.submitted_workload`, the calls
  hub.http.submit makes), which checks the Workload's rules;
- agent: the hub's DispatchOffer for it, as it comes off the WebSocket
  (`Envelope.decode_from_peer`), split into its two parts: the pydantic validation
  (`Envelope.model_validate_json`) and the rules of the offered Workload
  (`Envelope.semantic_errors`).

Each is timed `--calls` times back to back ("hot"); then with `--evict-mb` MB of memory
written before each call ("cold": the CPU's data caches then hold that memory, not the
check's); then with other code run before each call ("after_other"), as a process runs its
other work between two workloads: a JSON round trip of 30 pod-like objects, an SQLite insert,
a regular expression over text (the instruction caches and the branch predictor then hold
that code's state too). The workload is the federation bench's `small_job`.

    .venv/bin/python -m bench.checks_hot_cold [--calls 500] [--evict-mb 8]

Prints one JSON object: CPU microseconds per call of each check hot, cold and after other
code, and each over hot.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from api.meta import build_schemas
from api.v1alpha1.messages import DispatchOffer, Envelope
from bench.control_plane_floor import submitted_workload
from bench.federation_dispatch import small_job


def offer_text(job: dict[str, Any]) -> str:
    """The JSON of the offer the hub sends for `job` (bound, generation 1)."""
    workload = submitted_workload(job)
    offer = DispatchOffer(workload=workload, generation=1, source=job, bound=True)
    return Envelope.wrap(offer, seq=1).to_json()


def submitted_job() -> dict[str, Any]:
    """`small_job` as the hub holds it when it checks it: namespaced, with a uid."""
    job = small_job("checks-hot-cold")
    job["metadata"].update(
        namespace="default", uid="0b7f3e4c-0000-4000-8000-000000000001",
        creationTimestamp="2026-12-06T10:00:00Z",
    )  # fmt: skip
    return job


def per_call_us(check: Callable[[], object], calls: int, before: Callable[[], None]) -> float:
    """Mean CPU microseconds of `check` (this thread's CPU time, which #15 counts: what other
    processes run meanwhile is not in it), with `before` run (untimed) before each call."""
    total = 0
    for _ in range(calls):
        before()
        start = time.thread_time_ns()
        check()
        total += time.thread_time_ns() - start
    return total / calls / 1000


def measure(calls: int, evict_mb: int) -> dict[str, Any]:
    build_schemas()  # as the hub and the agent do at start-up
    job = submitted_job()
    text = offer_text(job)
    envelope = Envelope.model_validate_json(text)
    checks: dict[str, Callable[[], object]] = {
        "hub_submission": lambda: submitted_workload(job),
        "agent_offer": lambda: Envelope.decode_from_peer(text),
        "agent_offer_validation": lambda: Envelope.model_validate_json(text),
        "agent_offer_rules": envelope.semantic_errors,
    }
    junk = bytearray(evict_mb * 1024 * 1024)
    filler = bytes(len(junk))

    def evict() -> None:
        junk[:] = filler  # every cache line of it written: the caches hold it now

    def nothing() -> None:
        pass

    pods = {
        "items": [
            {
                "metadata": {"name": f"pod-{i}", "labels": {"app": "a"}},
                "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
            }
            for i in range(30)
        ]
    }
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE objects (key TEXT PRIMARY KEY, value TEXT)")
    word = re.compile(r"[a-z]+")
    inserted = itertools.count()

    def other_code() -> None:
        text = json.dumps(pods)
        json.loads(text)
        db.execute("INSERT INTO objects VALUES (?, ?)", (str(next(inserted)), text[:500]))
        word.sub("x", text[:2000])

    out: dict[str, Any] = {}
    for name, check in checks.items():
        per_call_us(check, calls, nothing)  # warm-up: first-use costs are not measured
        hot = per_call_us(check, calls, nothing)
        cold = per_call_us(check, calls, evict)
        after_other = per_call_us(check, calls, other_code)
        out[name] = {
            "hot_us": round(hot, 1),
            "cold_us": round(cold, 1),
            "cold_over_hot": round(cold / hot, 2),
            "after_other_us": round(after_other, 1),
            "after_other_over_hot": round(after_other / hot, 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--evict-mb", type=int, default=8)
    args = parser.parse_args(argv)
    result = {
        "benchmark": "checks_hot_cold",
        "calls": args.calls,
        "evict_mb": args.evict_mb,
        "offer_bytes": len(offer_text(submitted_job())),
        **measure(args.calls, args.evict_mb),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
