"""A cluster that refuses the agent the right to create a workload's Jobs (a 403: a rule its
ClusterRole lacks) is an operator's fix, not the workload's fault: the workload stays admitted,
holding its quota, the agent reports why (naming what was refused), and its Jobs are made as
soon as a later try is allowed."""

from __future__ import annotations

import json
from typing import Any

from agent.errors import k8s_error
from agent.k8s.client import JsonObject, Kube, Resource
from api.v1alpha1.messages import Hello, WorkloadPhase, WorkloadStatusReport
from tests.agent.conftest import AgentRunner, FakeHub, eventually, job_source, offer_for, status

FORBIDDEN = (
    'jobs.batch is forbidden: User "system:serviceaccount:multiq-system:multiq-agent" cannot '
    'create resource "jobs" in API group "batch" in the namespace "team-a"'
)


class RefusingJobs:
    """The agent's client, with Job creation refused as kube-apiserver refuses it while
    `refusing` is set."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self.refusing = True
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    async def create(self, resource: Resource, namespace: str | None, body: JsonObject) -> Any:
        if resource is Resource.JOBS and self.refusing:
            self.refused += 1
            body_403 = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": FORBIDDEN,
                "reason": "Forbidden",
                "details": {"group": "batch", "kind": "jobs"},
                "code": 403,
            }
            raise k8s_error(403, json.dumps(body_403), {})
        return await self._kube.create(resource, namespace, body)


async def test_a_refused_job_keeps_the_workload_admitted_says_why_and_runs_once_allowed(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agents.timings = agents.timings.model_copy(update={"materialize_retry": 0.3})
    refusing = RefusingJobs(agents.kube)
    agents.kube = refusing  # type: ignore[assignment]
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("denied")))

    def said_why(p: object) -> bool:
        return (
            isinstance(p, WorkloadStatusReport)
            and p.phase is WorkloadPhase.ADMITTED
            and p.pending_reason == "JobsForbidden"
        )

    report = await hub.wait_for(said_why)
    assert FORBIDDEN in report.pending_message and "ClusterRole" in report.pending_message
    held = agent.admission.held["team-a/job-denied"]
    assert held.phase is WorkloadPhase.ADMITTED and not held.job_names  # quota still held
    await eventually(lambda: refusing.refused >= 2)  # tried again, still refused
    refusing.refusing = False  # the rule is back
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "denied"), within=30)
