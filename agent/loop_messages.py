"""What the admission loop takes in and sends out: the hub's messages and the agent's own two
(`Fence`, `ReapOrphans`), queued in the order they came; the `Reporter` its reports and
rejections go out through; and, pure, which workload a hub message is about (`workload_of`)
and which transition of its record it goes through (`transition`).

Called by: agent.admission (handles them), agent.app (submits `Fence` and `ReapOrphans`,
gives the reporter).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from agent import records
from agent.records import Record, Step
from api.v1alpha1.messages import (
    Bind,
    Cancel,
    ConfigSync,
    DispatchOffer,
    OfferRejected,
    Withdraw,
    WorkloadStatusReport,
)

__all__ = [
    "Fence",
    "HubMessage",
    "ReapOrphans",
    "Reporter",
    "WorkloadMessage",
    "transition",
    "workload_of",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    """Not from the hub: the agent's lease ran out, so it stops what it runs."""

    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReapOrphans:
    """Not from the hub: the hub has had its chance to re-offer after a Hello; Jobs made for
    workloads this agent does not hold (its state was lost, and the hub did not re-offer
    them, so they were withdrawn, cancelled or moved while it was away) are deleted."""


WorkloadMessage = DispatchOffer | Bind | Withdraw | Cancel
"""A hub message about one workload."""
HubMessage = ConfigSync | WorkloadMessage | Fence | ReapOrphans


def workload_of(message: WorkloadMessage) -> str:
    """The key (namespace/name) of the workload a hub message is about."""
    if isinstance(message, DispatchOffer):
        meta = message.workload.metadata
        return f"{meta.namespace or 'default'}/{meta.name}"
    return message.workload


def transition(
    held: Record | None, message: WorkloadMessage, now: float, received: str | None = None
) -> Step:
    """The transition of the workload's record (None: not held) a hub message goes through;
    `received`: the text of the envelope an offer came in."""
    if isinstance(message, DispatchOffer):
        return records.on_offer(held, message, now, received)
    if isinstance(message, Bind):
        return records.on_bind(held, message, now)
    return records.on_withdraw(held, message, now)


class Reporter(Protocol):
    def report(self, payload: WorkloadStatusReport | OfferRejected) -> None: ...
