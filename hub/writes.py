"""Compare-and-swap writes of a workload's status, the only way the hub's dispatch changes a
workload: a change is a pure function (hub.transitions) applied to the mirrored workload and
written against its mirrored revision, so a writer that lost a race learns so and decides
again from what won.

`update_cached` writes without reading (the mirror's revision is the precondition) and puts
the result in the mirror at once; `update` reads the store first, for when the mirror is
behind. Both return None when the workload is gone or the write lost.

Called by: hub.dispatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from api.v1alpha1.workload import Workload
from hub import transitions
from hub.state import HubState, WorkloadEntry
from hub.store import base as store_base

__all__ = ["WorkloadWriter"]

Change = Callable[[Workload], Workload]


@dataclass
class WorkloadWriter:
    state: HubState

    async def change(self, key: str, change: Change) -> Workload | None:
        """Write `change` of the workload: from the mirror when it can, else from the store."""
        entry = self.state.workloads.get(key)
        written = await self.update_cached(key, entry, change) if entry is not None else None
        if written is None:
            written = await self.update(key, change)
        return written

    async def update_cached(
        self, key: str, entry: WorkloadEntry, change: Change
    ) -> Workload | None:
        """Write `change` of the mirrored workload, CAS on the mirrored revision (no read).

        Changes touch only the status (hub.transitions), so only the status is copied and
        serialized; the stored spec is reused as it is — but for `active`, which a workload
        deactivated past its requeuing limit changes."""
        current = entry.workload
        new = change(transitions.for_change(current))
        deactivated = new.spec.active != current.spec.active
        if new.status == current.status and not deactivated:
            return current  # nothing to write (e.g. a report repeating what is known)
        wire = dict(entry.raw)
        if deactivated:
            wire["spec"] = {**wire["spec"], "active": new.spec.active}
        if new.status is not None:
            wire["status"] = new.status.to_wire()
        else:
            wire.pop("status", None)
        self.state.expect(key, new, wire)
        try:
            stored = await self.state.store.update(
                f"/{Workload.plural()}/{key}", wire, expected=entry.revision
            )
        except (store_base.NotFound, store_base.Conflict):
            self.state.unexpect(key, new)
            return None
        return self.state.remember(key, new, stored.revision, wire)

    async def update(self, key: str, change: Change) -> Workload | None:
        """Apply `change` to the stored workload with CAS (re-read on conflict); None if it
        is gone."""
        result: Workload | None = None

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            nonlocal result
            result = change(Workload.model_validate(value))
            wire = result.to_wire()
            wire.get("metadata", {}).pop("resourceVersion", None)
            return wire

        try:
            await store_base.modify(self.state.store, f"/{Workload.plural()}/{key}", mutate)
        except (store_base.NotFound, store_base.Conflict):
            return None
        return result
