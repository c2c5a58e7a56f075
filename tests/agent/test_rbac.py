"""The agent's ClusterRole (manifests/agent/clusterrole.yaml) is its least privilege: every call
the agent makes in these tests is checked against it (tests/agent/rbac.py wraps every agent's
client), a call outside it fails, and an ordinary workload's life uses its rules."""

from __future__ import annotations

import pytest

from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.messages import Hello, LogData, LogOpen, Withdraw, WorkloadPhase
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    eventually,
    job_source,
    local_queue,
    offer_for,
    status,
)
from tests.agent.rbac import CLUSTER_ROLE, OutsideTheRoleError, RoleCheckedKube, Rule, load_rules


def without(rules: list[Rule], verb: str, resource: str) -> list[Rule]:
    return [
        Rule(
            verbs=r.verbs - {verb} if resource in r.resources else r.verbs,
            api_groups=r.api_groups,
            resources=r.resources,
            non_resource_urls=r.non_resource_urls,
        )
        for r in rules
    ]


async def test_a_call_the_role_does_not_allow_fails_before_it_reaches_the_cluster(
    kube: KubeClient,
) -> None:
    guarded = RoleCheckedKube(kube, without(load_rules(), "create", "jobs"))
    job = job_source("refused")
    with pytest.raises(OutsideTheRoleError, match='create on "jobs" in API group "batch"'):
        await guarded.create(Resource.JOBS, "default", job)
    listed = await kube.list(Resource.JOBS, namespace="default")
    assert [j["metadata"]["name"] for j in listed.items] == []
    # What the role does allow passes through.
    await guarded.list(Resource.JOBS, namespace="default")
    assert ("list", "batch", "jobs") in guarded.used


def test_the_role_names_only_what_the_agents_client_can_reach_and_no_wildcard() -> None:
    rules = load_rules()
    reachable = {str(r) for r in Resource} | {"pods/log"}
    for rule in rules:
        assert "*" not in rule.verbs | rule.resources | rule.api_groups | rule.non_resource_urls
        assert rule.resources <= reachable, rule
        assert rule.non_resource_urls <= {"/version"}, rule
        assert rule.verbs <= {"get", "list", "watch", "create", "patch", "delete"}, rule
        # Nothing that rewrites objects wholesale or reaches other users' secrets.
        assert "secrets" not in rule.resources and "update" not in rule.verbs
    assert CLUSTER_ROLE.is_file()


async def test_a_workload_run_in_a_new_namespace_followed_and_withdrawn_uses_the_roles_rules(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    assert hub.config is not None
    hub.config.local_queues.append(local_queue(namespace="team-rbac"))
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("guarded", namespace="team-rbac", script="echo hi; sleep 30"))
    key = f"team-rbac/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "guarded"))
    await hub.send_log(LogOpen(stream_id="s1", workload=key, follow=True))
    await eventually(
        lambda: any(
            isinstance(p, LogData) and any(line.text == "hi" for line in p.lines)
            for p in hub.log_payloads()
        ),
        within=20,
    )
    await hub.send(Withdraw(workload=key, generation=1, reason="Rebalance"))
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "guarded"))
    guarded = agent.kube
    assert isinstance(guarded, RoleCheckedKube)
    assert guarded.used >= {
        ("list", "", "nodes"),
        ("watch", "", "nodes"),
        ("list", "", "pods"),
        ("watch", "", "pods"),
        ("list", "", "namespaces"),
        ("watch", "", "namespaces"),
        ("get", "", "namespaces"),
        ("create", "", "namespaces"),
        ("list", "batch", "jobs"),
        ("watch", "batch", "jobs"),
        ("create", "batch", "jobs"),
        ("delete", "batch", "jobs"),
        ("get", "", "pods/log"),
        ("get", "url", "/version"),
    }
