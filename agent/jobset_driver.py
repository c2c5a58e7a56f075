"""The agent's shell around agent.jobsets: for a held JobSet workload, apply the JobSet
controller's decisions to the cluster — create the replicated jobs the start order allows,
recreate restarted Jobs as their next attempt, delete what a finished JobSet still runs, keep
its headless Service — and say what its phase is.

`JobSetDriver.look` is called by agent.status_pass with the workload's mirrored
Jobs and what agent.status observed; it returns the observation to report (the JobSet's own
success and failure rules replace "every Job complete" and "any Job failed"), the record
step of a restart (persisted before anything is deleted), and the cluster work to spawn.

Called by: agent.status_pass (`look`, `busy`), agent.job_making (owns it; `ensure_service`),
agent.stopper (`delete_service`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from agent import records
from agent.errors import (
    K8sAlreadyExistsError,
    K8sClientError,
    K8sConflictError,
    K8sNotFoundError,
)
from agent.jobsets import JobSetPolicy, JobView, decide, headless_service, job_view, policy_of
from agent.k8s.client import JsonObject, Resource
from agent.materialize import Materializer, identity_labels, jobset_name
from agent.records import Record, Step
from agent.status import Observation
from api.v1alpha1.messages import WorkloadPhase

__all__ = ["JobSetDriver", "jobset_policy"]

log = logging.getLogger(__name__)

Planner = Callable[[Record, frozenset[str] | None], list[JsonObject] | None]
"""The Jobs of a record for these replicated jobs (None: all), or None when no Job may be
made now (no lease)."""


def jobset_policy(record: Record) -> JobSetPolicy | None:
    source = record.offer.source
    if source is None:
        return None
    return policy_of(source, jobset_name(record.workload, source))


def current_views(record: Record, jobs: Sequence[JsonObject]) -> list[JobView]:
    """The Jobs of the record's current attempts (an earlier attempt's Job is stale)."""
    attempts = dict(record.jobset_attempts)
    views = [job_view(j) for j in jobs]
    return [v for v in views if v.attempt == attempts.get(v.name, 0)]


def started_roles(record: Record, jobs: Sequence[JsonObject]) -> frozenset[str]:
    policy = jobset_policy(record)
    if policy is None:
        return frozenset()
    return decide(policy, current_views(record, jobs), record.jobset_restarts).roles_started


class JobSetDriver:
    def __init__(self, materializer: Materializer, plan: Planner) -> None:
        self.materializer = materializer
        self.plan = plan
        self._busy: set[str] = set()
        self._finished: set[tuple[str, int]] = set()
        """JobSets whose end was acted on (a finished workload is looked at while it settles)."""

    def busy(self, key: str) -> bool:
        """Its Jobs are being made or remade (a restart deletes before it creates): that some
        are missing now is expected."""
        return key in self._busy

    def look(
        self, record: Record, jobs: Sequence[JsonObject], observation: Observation
    ) -> tuple[Observation, Step | None, Coroutine[Any, Any, None] | None]:
        policy = jobset_policy(record)
        if policy is None or record.phase not in (WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING):
            return observation, None, None
        views = current_views(record, jobs)
        decision = decide(policy, views, record.jobset_restarts)
        if decision.outcome == "Succeeded":
            done = dataclasses.replace(
                observation, phase=WorkloadPhase.SUCCEEDED, message=decision.message
            )
            return done, None, self._finish(record, [j for j in jobs if not _finished(j)])
        if decision.outcome == "Failed":
            failed = dataclasses.replace(
                observation, phase=WorkloadPhase.FAILED, message=decision.message
            )
            return failed, None, self._finish(record, [j for j in jobs if not _finished(j)])
        # Not finished by the JobSet's rules, whatever single Jobs say.
        if observation.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
            observation = dataclasses.replace(
                observation, phase=WorkloadPhase.RUNNING, message=decision.message
            )
        if decision.restart:
            log.warning("%s: %s", record.key, decision.message)
            step = records.on_jobset_restart(record, decision.restart, decision.counted)
            assert step.record is not None
            restarted = step.record
            stale = [j for j in jobs if _stale(restarted, j)]
            return observation, step, self._advance(restarted, decision.roles_started, stale)
        have = {v.name for v in views}
        wanted = {
            name
            for role in policy.roles
            if role.name in decision.roles_started
            for name in policy.job_names(role)
        }
        stale = [j for j in jobs if _stale(record, j)]
        if wanted - have or stale:
            return observation, None, self._advance(record, decision.roles_started, stale)
        return observation, None, None

    def _advance(
        self, record: Record, roles: frozenset[str], stale: Sequence[JsonObject]
    ) -> Coroutine[Any, Any, None] | None:
        if record.key in self._busy:
            return None  # the work under way ends with the next look
        self._busy.add(record.key)
        return self._ensure(record, roles, stale)

    async def _ensure(
        self, record: Record, roles: frozenset[str], stale: Sequence[JsonObject]
    ) -> None:
        """Delete the Jobs of earlier attempts (of replicated jobs not started again too),
        then make the started ones' Jobs of the current attempt."""
        try:
            if stale:
                await self.materializer.delete_jobs(stale)
            jobs = self.plan(record, roles)
            if jobs:
                await self.materializer.ensure(jobs)
        except K8sClientError as exc:
            log.warning("%s: the JobSet's next jobs not made yet: %s", record.key, exc)
        finally:
            self._busy.discard(record.key)

    def _finish(
        self, record: Record, leftovers: Sequence[JsonObject]
    ) -> Coroutine[Any, Any, None] | None:
        ended = (record.key, record.generation)
        if ended in self._finished:
            return None
        if len(self._finished) > 10_000:
            self._finished.clear()
        self._finished.add(ended)
        return self._end(record, leftovers)

    async def _end(self, record: Record, leftovers: Sequence[JsonObject]) -> None:
        """A finished JobSet runs nothing more: its unfinished Jobs and its Service go."""
        if leftovers:
            with contextlib.suppress(K8sClientError):
                await self.materializer.delete_jobs(leftovers)
            log.info(
                "%s: the JobSet finished; %d unfinished jobs deleted", record.key, len(leftovers)
            )
        await self.delete_service(record)

    async def delete_service(self, record: Record) -> None:
        policy = jobset_policy(record)
        if policy is None or policy.subdomain is None:
            return
        namespace = record.workload.metadata.namespace or "default"
        with contextlib.suppress(K8sNotFoundError, K8sConflictError):
            await self.materializer.kube.delete(Resource.SERVICES, namespace, policy.subdomain)

    async def ensure_service(self, record: Record) -> None:
        """The JobSet's headless Service, if its hostnames are on (made once; kept)."""
        policy = jobset_policy(record)
        if policy is None:
            return
        namespace = record.workload.metadata.namespace or "default"
        service = headless_service(
            policy, namespace, identity_labels(record.workload, record.generation)
        )
        if service is None:
            return
        with contextlib.suppress(K8sAlreadyExistsError):
            await self.materializer.kube.create(Resource.SERVICES, namespace, service)


def _stale(record: Record, job: Mapping[str, Any]) -> bool:
    """A Job of an earlier restart attempt, not on its way out already."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return False
    view = job_view(job)
    return view.attempt < dict(record.jobset_attempts).get(view.name, 0)


def _finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )
