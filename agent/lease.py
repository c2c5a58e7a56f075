"""The agent's lease from the hub: the right to keep running bound work, and when it ends.

After each Hello the agent sends `LeaseRenew(id)` (ids increase) every `leaseSeconds / 3`
(every `unleased_interval` until the first grant of the session), remembering when it sent
each (`t0`, monotonic). `LeaseGrant(id, …)` extends the lease to `t0(id) + leaseSeconds`
(never shortens it): the hub counts from when it received the renewal, which is no earlier,
so the agent's deadline is never later than the hub's (docs/exactly-once.md).

The agent may create Jobs and reserve quota only while it holds the lease (`held`). When
the lease runs out (`expired`) it fences itself: stops every held workload. An agent that
has not had a grant in this run (just started) fences after one lease length of the last
known terms — its Jobs' own deadlines cover that time. With `enabled: false` in the grant,
fencing is off: the lease is always held and never expires, and Jobs get no deadline.

Pure bookkeeping: times are the caller's monotonic clock. Called by: agent.app (sends the
renewals, applies the grants, fences), agent.admission (`held`), agent.job_making (`held`,
the Jobs' deadlines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent.deadlines import creation_deadline
from api.v1alpha1.messages import LeaseGrant, LeaseRenew

__all__ = ["Lease", "LeaseTerms"]


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """The hub's fencing terms for this cluster (MemberCluster.spec.fencing)."""

    lease_seconds: float = 60.0
    grace_seconds: float = 30.0
    enabled: bool = True

    def to_json(self) -> str:
        return json.dumps(
            {
                "leaseSeconds": self.lease_seconds,
                "graceSeconds": self.grace_seconds,
                "enabled": self.enabled,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> LeaseTerms:
        data = json.loads(text)
        return cls(
            lease_seconds=float(data["leaseSeconds"]),
            grace_seconds=float(data["graceSeconds"]),
            enabled=bool(data["enabled"]),
        )


class Lease:
    """See the module docstring."""

    def __init__(
        self, terms: LeaseTerms, *, started: float, unleased_interval: float = 1.0
    ) -> None:
        self.terms = terms
        self.started = started
        self.unleased_interval = unleased_interval
        self.deadline: float | None = None
        """When the lease runs out (monotonic); None before the first grant of this run."""
        self.fenced = False
        """The agent fenced itself since its lease last ran out (and no grant came since)."""
        self.granted = False
        """A grant came in this run (fencing off: the lease is held from then on)."""
        self.granted_in_session = False
        self._next_id = 1
        self._sent: dict[int, float] = {}

    def session_started(self) -> None:
        """A new session (after Hello): renew often until the hub answers."""
        self.granted_in_session = False

    def renewal(self, now: float) -> LeaseRenew:
        """The next renewal, sent at `now`. Renewals older than a lease are forgotten: a
        grant for one of them could not extend anything."""
        renew = LeaseRenew(id=self._next_id)
        self._next_id += 1
        self._sent[renew.id] = now
        horizon = now - self.terms.lease_seconds
        for old in [i for i, t0 in self._sent.items() if t0 < horizon]:
            del self._sent[old]
        return renew

    def renew_interval(self) -> float:
        if not self.granted_in_session:
            return self.unleased_interval
        return self.terms.lease_seconds / 3

    def grant(self, grant: LeaseGrant, now: float) -> bool:
        """Apply a grant received at `now`; True when the terms changed (worth remembering
        across restarts). A grant after the agent fenced itself ends the fence."""
        terms = LeaseTerms(float(grant.lease_seconds), float(grant.grace_seconds), grant.enabled)
        changed = terms != self.terms
        self.terms = terms
        self.granted = True
        self.granted_in_session = True
        t0 = self._sent.pop(grant.id, None)
        for older in [i for i in self._sent if i < grant.id]:
            del self._sent[older]  # (answered out of order or not at all: this one covers them)
        if t0 is not None:
            until = t0 + terms.lease_seconds
            self.deadline = until if self.deadline is None else max(self.deadline, until)
        if self.held(now):
            self.fenced = False
        return changed

    def held(self, now: float) -> bool:
        """May the agent create Jobs and reserve quota now?"""
        if not self.granted:
            return False  # no grant in this run yet
        if not self.terms.enabled:
            return True
        return self.deadline is not None and now < self.deadline

    def fence_at(self) -> float | None:
        """When the lease runs out unrenewed (None: fencing is off)."""
        if not self.terms.enabled:
            return None
        if self.deadline is None:
            return self.started + self.terms.lease_seconds
        return self.deadline

    def expired(self, now: float) -> bool:
        at = self.fence_at()
        return at is not None and now >= at

    def job_deadline(self, now: float) -> int | None:
        """`activeDeadlineSeconds` for a Job created at `now` (None: fencing is off)."""
        if not self.terms.enabled or self.deadline is None:
            return None
        return creation_deadline(self.deadline - now, self.terms.grace_seconds)

    def stop_by(self, now: float, wall_now: float) -> float | None:
        """The wall time by which the Jobs must be stopped if the lease is not renewed again
        (its deadline plus half the grace); None when fencing is off."""
        if not self.terms.enabled or self.deadline is None:
            return None
        return wall_now + (self.deadline - now) + self.terms.grace_seconds / 2
