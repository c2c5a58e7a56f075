"""Node checks: which running workloads a node failure leaves unable to run. A workload whose
topology assignment has a domain that lost its node (gone, or NotReady with its pods unable
to run there; agent.topology_landing `workload_lost_domains`) is evicted with reason
NodeFailures, so the hub queues it again.

Pure: the held records, the mirrored nodes and each workload's pods in, the evictions out
(the records' `on_evict` steps); the shell applies them.

Called by: agent.admission (`AdmissionShell.check_nodes`, after a node changed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from agent import records
from agent.k8s.client import JsonObject
from agent.records import Record, Step
from agent.topology_landing import NODE_FAILURES, workload_lost_domains

__all__ = ["NodeEviction", "lost_node_evictions"]


@dataclasses.dataclass(frozen=True, slots=True)
class NodeEviction:
    key: str
    message: str
    """Which domains lost their node, as the workload's condition and the hub say it."""
    step: Step


def lost_node_evictions(
    held: Mapping[str, Record],
    nodes: Mapping[str, JsonObject],
    pods_of: Callable[[str, str], Sequence[JsonObject]],
    now: float,
) -> list[NodeEviction]:
    """The evictions of every running (observable) held workload a domain of whose topology
    assignment lost its node; `pods_of(namespace, name)`: the workload's pods."""
    evictions = []
    for key, record in held.items():
        status = record.workload.status
        if not records.observable(record) or status is None or status.admission is None:
            continue
        namespace, name = key.split("/", 1)
        lost = workload_lost_domains(
            status.admission, record.generation, nodes, pods_of(namespace, name)
        )
        if lost:
            message = f"{'; '.join(lost)}: its pods there cannot run; placed again"
            step = records.on_evict(record, NODE_FAILURES, message, now)
            evictions.append(NodeEviction(key, message, step))
    return evictions
