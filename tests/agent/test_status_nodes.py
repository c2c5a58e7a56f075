"""The agent's view of a workload names the nodes its pods were scheduled to (Slurm's
NodeList): each node once, sorted, bounded; pods not yet scheduled name none."""

from __future__ import annotations

from typing import Any

from agent.labels import Labels
from agent.status import MAX_NODES, observe


def pod(name: str, node: str | None, phase: str = "Running") -> dict[str, Any]:
    labels = {Labels.UID: "uid-1", Labels.GENERATION: "1"}
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec, "status": {"phase": phase}}


def test_the_nodes_of_scheduled_pods_are_named_once_and_sorted() -> None:
    pods = [pod("a", "node-b"), pod("b", "node-a"), pod("c", "node-b"), pod("d", None, "Pending")]
    seen = observe(uid="uid-1", generation=1, job_names=["j"], jobs=[], pods=pods)
    assert seen.pods.nodes == ["node-a", "node-b"]
    assert (seen.pods.running, seen.pods.pending) == (3, 1)


def test_a_report_names_at_most_max_nodes() -> None:
    pods = [pod(f"p{i}", f"node-{i:03d}") for i in range(MAX_NODES + 5)]
    seen = observe(uid="uid-1", generation=1, job_names=["j"], jobs=[], pods=pods)
    assert len(seen.pods.nodes) == MAX_NODES
