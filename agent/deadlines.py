"""Fencing deadlines on the Jobs the agent creates: the stop that needs no agent.

A frozen agent (SIGSTOP, a long pause) cannot stop anything, so every Job it creates carries
`spec.activeDeadlineSeconds`, set so that the Job's deadline falls no later than the agent's
lease deadline plus half the grace (docs/exactly-once.md): Kubernetes' Job controller fails
it (`DeadlineExceeded`) by then unless the agent, still holding its lease, moves the deadline
forward. A user's own `activeDeadlineSeconds` is kept — the smaller of the two wins — and
remembered in the annotation `multiq.dev/user-active-deadline-seconds`, so an extension never
goes past it and a `DeadlineExceeded` can be told apart: the user's (the workload failed) or
ours (the cluster lost it).

Rounding is always down: a deadline one second early costs nothing, one second late breaks
the promise that the Job is stopped before the hub may run the workload elsewhere.

Everything here is pure. Called by: agent.materialize (a new Job's deadline), agent.status
(whose deadline failed a Job), agent.admission (which Jobs to extend, and by how much).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "USER_DEADLINE_ANNOTATION",
    "DeadlineChange",
    "creation_deadline",
    "deadline_change",
    "stopped_by_fencing",
    "with_deadline",
]

USER_DEADLINE_ANNOTATION = "multiq.dev/user-active-deadline-seconds"

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DeadlineChange:
    """Set the Job's `activeDeadlineSeconds` to `seconds` (None: remove it)."""

    seconds: int | None

    def patch(self) -> JsonObject:
        """The JSON merge patch that makes the change (null removes the field)."""
        return {"spec": {"activeDeadlineSeconds": self.seconds}}


def creation_deadline(lease_left: float, grace: float) -> int:
    """`activeDeadlineSeconds` for a Job created now, `lease_left` seconds before the lease
    runs out: the Job cannot start before it is created, so its deadline falls no later than
    the lease deadline plus half the grace."""
    return max(1, math.floor(lease_left + grace / 2))


def user_deadline(job: JsonObject) -> int | None:
    """The user's own `activeDeadlineSeconds`, as the agent remembered it at creation."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(USER_DEADLINE_ANNOTATION)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def with_deadline(job: JsonObject, seconds: int | None) -> JsonObject:
    """The Job to create, with the fencing deadline `seconds` (None: fencing is off) unless
    the user's own is smaller, and the user's remembered. Copy on write: `job` is unchanged."""
    spec = job.get("spec") or {}
    user = spec.get("activeDeadlineSeconds")
    if user is None and seconds is None:
        return job
    job = dict(job)
    if user is not None:
        meta = job["metadata"] = dict(job.get("metadata") or {})
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            USER_DEADLINE_ANNOTATION: str(user),
        }
    if seconds is not None:
        job["spec"] = {
            **spec,
            "activeDeadlineSeconds": seconds if user is None else min(user, seconds),
        }
    return job


def stopped_by_fencing(job: JsonObject) -> bool:
    """Whether the Job's deadline is the agent's, not the user's (so a DeadlineExceeded means
    the cluster lost the workload, not that the workload failed)."""
    current = (job.get("spec") or {}).get("activeDeadlineSeconds")
    if current is None:
        return False
    user = user_deadline(job)
    return user is None or current < user


def deadline_change(
    job: JsonObject, *, stop_by: float | None, half_lease: float, now: float
) -> DeadlineChange | None:
    """How the Job's deadline must change, if at all, for the agent's lease as it is now.

    `stop_by`: the wall time by which the Job must be stopped (the lease deadline plus half
    the grace), None when fencing is off — then the agent's deadline goes (the user's stays).
    A started Job that carries the agent's deadline is extended to `stop_by` only when less
    than `half_lease` of it is left (one write per half lease, not per renewal); one that
    carries none of it (made while fencing was off) gets it. A Job not started yet is left
    as it was created: its controller has not counted anything yet (the lag until it does is
    what half the grace covers)."""
    current = (job.get("spec") or {}).get("activeDeadlineSeconds")
    user = user_deadline(job)
    if stop_by is None:
        return None if current == user else DeadlineChange(user)
    started_text = (job.get("status") or {}).get("startTime")
    if not started_text:
        return None
    started = datetime.fromisoformat(str(started_text)).timestamp()
    wanted = math.floor(stop_by - started)
    if user is not None:
        wanted = min(wanted, user)
    if current is None or not stopped_by_fencing(job):
        # None of the agent's: its deadline is due unless the user's is already as soon.
        return DeadlineChange(wanted) if current is None or wanted < current else None
    if started + current - now >= half_lease:
        return None
    return DeadlineChange(wanted) if wanted > current else None
