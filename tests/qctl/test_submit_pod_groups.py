"""`qctl submit` sends a pod group whole: the Pod documents of one group and namespace,
wherever they are in the files, become one v1 List in the place of the group's first pod;
plain Pods and everything else go as they are written."""

from __future__ import annotations

from typing import Any

from qctl.commands.submit import group_pods


def pod(name: str, group: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {}}
    if group is not None:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}


def test_the_pods_of_a_group_go_together_where_its_first_pod_was() -> None:
    docs = [pod("solo"), pod("a0", "a"), JOB, pod("b0", "b"), pod("a1", "a")]
    sent = group_pods(docs)
    assert sent == [
        pod("solo"),
        {"apiVersion": "v1", "kind": "List", "items": [pod("a0", "a"), pod("a1", "a")]},
        JOB,
        {"apiVersion": "v1", "kind": "List", "items": [pod("b0", "b")]},
    ]


def test_groups_of_one_name_in_two_namespaces_are_two_groups() -> None:
    sent = group_pods([pod("x", "g", "ns1"), pod("y", "g", "ns2")])
    assert [[p["metadata"]["name"] for p in doc["items"]] for doc in sent] == [["x"], ["y"]]


def test_our_own_group_label_groups_as_kueues_does() -> None:
    ours = pod("m0")
    ours["metadata"]["labels"]["multiq.dev/pod-group-name"] = "a"
    sent = group_pods([ours, pod("a1", "a")])
    assert len(sent) == 1 and len(sent[0]["items"]) == 2
