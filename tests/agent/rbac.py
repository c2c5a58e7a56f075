"""The agent's ClusterRole (manifests/agent/clusterrole.yaml) as a guard on its Kubernetes calls.

`RoleCheckedKube` wraps the `Kube` every agent under test runs on (tests/agent/conftest.py) and
raises `OutsideTheRoleError` for a call the role does not allow, naming the rule it would need. So a
change that makes the agent call something its ClusterRole lacks fails the agent's own test
suite at once, long before a cluster refuses it with a 403. The calls' verbs follow
kube-apiserver's request-info rules: a GET of a collection is `list`, with `watch=true` it is
`watch`, a pod's log is `get` on `pods/log`, `/version` is a non-resource URL.

Calls the tests themselves make (setting up namespaces, for example) go through the plain
client and are not checked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.k8s.client import JsonObject, Kube, ObjectList, Resource, WatchEvent

CLUSTER_ROLE = Path(__file__).resolve().parents[2] / "manifests" / "agent" / "clusterrole.yaml"

GROUPS = {
    Resource.NODES: "",
    Resource.PODS: "",
    Resource.NAMESPACES: "",
    Resource.JOBS: "batch",
    Resource.SERVICES: "",
}


class OutsideTheRoleError(AssertionError):
    """The agent made a call its ClusterRole does not allow."""


@dataclass(frozen=True, slots=True)
class Rule:
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    non_resource_urls: frozenset[str]


def load_rules(path: Path = CLUSTER_ROLE) -> list[Rule]:
    role = yaml.safe_load(path.read_text())
    assert role["kind"] == "ClusterRole", path
    return [
        Rule(
            verbs=frozenset(r.get("verbs", ())),
            api_groups=frozenset(r.get("apiGroups", ())),
            resources=frozenset(r.get("resources", ())),
            non_resource_urls=frozenset(r.get("nonResourceURLs", ())),
        )
        for r in role["rules"]
    ]


def allows(rules: list[Rule], verb: str, group: str, resource: str) -> bool:
    return any(verb in r.verbs and group in r.api_groups and resource in r.resources for r in rules)


def allows_url(rules: list[Rule], verb: str, url: str) -> bool:
    return any(verb in r.verbs and url in r.non_resource_urls for r in rules)


class RoleCheckedKube:
    """A `Kube` that refuses what the agent's ClusterRole would refuse, and remembers what was
    used (`used`: (verb, group, resource) and ("get", "url", "/version"))."""

    def __init__(self, kube: Kube, rules: list[Rule] | None = None) -> None:
        self._kube = kube
        self._rules = load_rules() if rules is None else rules
        self.used: set[tuple[str, str, str]] = set()

    def _check(self, verb: str, resource: Resource | str) -> None:
        name = str(resource)
        group = GROUPS[Resource(name)] if name in Resource.__members__.values() else ""
        if not allows(self._rules, verb, group, name):
            raise OutsideTheRoleError(
                f'the agent called {verb} on "{name}" in API group "{group}", which '
                f"{CLUSTER_ROLE.name} does not allow: add the rule if the call is meant"
            )
        self.used.add((verb, group, name))

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        self._check("list", resource)
        return await self._kube.list(resource, namespace=namespace, label_selector=label_selector)

    def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        self._check("watch", resource)
        return self._kube.watch(
            resource,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
        )

    async def get(self, resource: Resource, namespace: str | None, name: str) -> JsonObject:
        self._check("get", resource)
        return await self._kube.get(resource, namespace, name)

    async def create(
        self, resource: Resource, namespace: str | None, body: JsonObject
    ) -> JsonObject:
        self._check("create", resource)
        return await self._kube.create(resource, namespace, body)

    async def patch(
        self, resource: Resource, namespace: str, name: str, body: JsonObject
    ) -> JsonObject:
        self._check("patch", resource)
        return await self._kube.patch(resource, namespace, name, body)

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        self._check("delete", resource)
        await self._kube.delete(resource, namespace, name, uid=uid)

    def pod_log(self, namespace: str, name: str, **options: Any) -> AsyncIterator[str]:
        self._check("get", "pods/log")
        return self._kube.pod_log(namespace, name, **options)

    async def server_version(self) -> str:
        if not allows_url(self._rules, "get", "/version"):
            raise OutsideTheRoleError(
                "the agent read /version, which its ClusterRole does not allow"
            )
        self.used.add(("get", "url", "/version"))
        return await self._kube.server_version()
