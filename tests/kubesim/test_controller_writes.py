"""Controller writes (`ObjectRegistry.mutate`) copy only what they change: the stored object
and every watch event that carries it stay as they were, and the fields a write does not
touch are shared with the previous version instead of copied."""

from __future__ import annotations

import copy
from typing import Any

from kubesim.cluster import Cluster


def _stored_configmap(cluster: Cluster) -> tuple[Any, dict[str, Any]]:
    configmaps = cluster.types.core("configmaps")
    cluster.registry.create(
        configmaps,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "1"}},
            "data": {"k": "v"},
            "binaryData": {},
        },
        namespace="default",
    )
    return configmaps, cluster.registry.get(configmaps, "default", "cm")


def test_a_write_that_names_what_it_touches_leaves_the_stored_version_unchanged(
    cluster: Cluster,
) -> None:
    configmaps, before = _stored_configmap(cluster)
    snapshot = copy.deepcopy(before)

    def relabel(new: dict[str, Any]) -> None:
        new["metadata"]["labels"]["a"] = "2"
        new["data"]["k"] = "w"

    after = cluster.registry.mutate(configmaps, "default", "cm", relabel, touches=("data",))

    assert before == snapshot
    assert after is not None
    assert after["metadata"]["labels"] == {"a": "2"} and after["data"] == {"k": "w"}
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])


def test_fields_a_write_does_not_touch_are_shared_with_the_previous_version(
    cluster: Cluster,
) -> None:
    configmaps, before = _stored_configmap(cluster)

    def relabel(new: dict[str, Any]) -> None:
        new["metadata"]["labels"] = {"a": "2"}

    after = cluster.registry.mutate(configmaps, "default", "cm", relabel, touches=())

    assert after is not None
    assert after["data"] is before["data"]
    assert after["metadata"] is not before["metadata"]


def test_a_write_that_names_nothing_copies_the_whole_object(cluster: Cluster) -> None:
    configmaps, before = _stored_configmap(cluster)
    snapshot = copy.deepcopy(before)

    def rewrite(new: dict[str, Any]) -> None:
        new["data"]["k"] = "w"

    after = cluster.registry.mutate(configmaps, "default", "cm", rewrite)

    assert before == snapshot
    assert after is not None and after["data"] == {"k": "w"}
