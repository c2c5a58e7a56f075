"""PURE: what the JobSet controller would do, for a JobSet the agent runs as plain Jobs.

Member clusters need no JobSet controller: the agent materialises a JobSet's replicated jobs as
batch/v1 Jobs (agent.materialize) and plays the controller's part from what the Jobs say:
- **start order**: `startupPolicy: InOrder` creates each replicated job's Jobs only once every
  Job of the previous one is ready (its ready and succeeded pods reach its parallelism);
  `dependsOn` (MultiQ's JobSet allows several) waits for the named replicated jobs to be
  Ready (as above) or Complete;
- **success policy**: `All` (the default) over the target replicated jobs (default: all of
  them) succeeds once every Job of theirs is Complete; `Any` once one of them is. The
  JobSet's other Jobs are then deleted, as the controller does with a finished JobSet's
  active Jobs;
- **failure policy**: without one, a failed Job fails the JobSet. With one, its rules are
  tried in order (target replicated jobs, failure reasons, message patterns) and the first
  that matches acts; none matching means RestartJobSet. `FailJobSet` fails it;
  `RestartJobSet` recreates every Job (counted against `maxRestarts`: past it, the JobSet
  fails); `RestartJob` recreates only the failed Job (counted too); the `…AndIgnoreMaxRestarts`
  actions are not counted. A restart is a new attempt: the Jobs carry the label
  `jobset.sigs.k8s.io/restart-attempt`, and Jobs of an earlier attempt are stale;
- **network**: with DNS hostnames on (the default), a headless Service named after the
  subdomain selects the JobSet's pods, so `<jobset>-<rjob>-<jobIdx>-<podIdx>.<subdomain>`
  resolves (`headless_service`).

Called by: agent.admission (on every look at a JobSet workload's Jobs), agent.materialize
(the start order and the Service), tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "RESTART_ATTEMPT",
    "Decision",
    "JobSetPolicy",
    "JobView",
    "decide",
    "headless_service",
    "job_view",
    "policy_of",
]

JsonObject = dict[str, Any]

JOBSET_KINDS = {("jobset.x-k8s.io/v1alpha2", "JobSet"), ("multiq.dev/v1alpha1", "JobSet")}
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"

Outcome = Literal["Succeeded", "Failed"]


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    replicas: int
    depends_on: tuple[tuple[str, str], ...] = ()
    """(replicated job, "Ready" | "Complete")"""


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    action: str
    reasons: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobSetPolicy:
    name: str
    roles: tuple[Role, ...]
    in_order: bool = False
    success_any: bool = False
    success_targets: tuple[str, ...] = ()
    """Empty: every replicated job."""
    failure_policy: bool = False
    max_restarts: int = 0
    rules: tuple[Rule, ...] = ()
    subdomain: str | None = None
    """None: DNS hostnames are off (no Service)."""
    publish_not_ready: bool = True

    def job_names(self, role: Role) -> list[str]:
        return [f"{self.name}-{role.name}-{i}" for i in range(role.replicas)]


def policy_of(source: Mapping[str, Any] | None, name: str) -> JobSetPolicy | None:
    """The policies of a JobSet source (either JobSet kind) named `name` as materialised;
    None for any other source."""
    if source is None:
        return None
    if (str(source.get("apiVersion", "")), str(source.get("kind", ""))) not in JOBSET_KINDS:
        return None
    spec = source.get("spec") or {}
    roles = tuple(
        Role(
            str(rj["name"]),
            int(rj.get("replicas", 1)),
            tuple(
                (str(d["name"]), str(d.get("status", "Ready"))) for d in rj.get("dependsOn") or []
            ),
        )
        for rj in spec.get("replicatedJobs") or []
    )
    startup = spec.get("startupPolicy") or {}
    success = spec.get("successPolicy") or {}
    failure = spec.get("failurePolicy")
    network = spec.get("network") or {}
    hostnames = network.get("enableDNSHostnames", True) is not False
    return JobSetPolicy(
        name=name,
        roles=roles,
        in_order=startup.get("startupPolicyOrder") == "InOrder",
        success_any=success.get("operator") == "Any",
        success_targets=tuple(success.get("targetReplicatedJobs") or ()),
        failure_policy=failure is not None,
        max_restarts=int((failure or {}).get("maxRestarts", 0)),
        rules=tuple(
            Rule(
                str(rule.get("name", "")),
                str(rule["action"]),
                tuple(rule.get("onJobFailureReasons") or ()),
                tuple(rule.get("onJobFailureMessagePatterns") or ()),
                tuple(rule.get("targetReplicatedJobs") or ()),
            )
            for rule in (failure or {}).get("rules") or []
        ),
        subdomain=(network.get("subdomain") or name) if hostnames else None,
        publish_not_ready=network.get("publishNotReadyAddresses", True) is not False,
    )


@dataclass(frozen=True, slots=True)
class JobView:
    """One child Job as the decisions need it."""

    name: str
    role: str
    attempt: int
    parallelism: int
    ready: int = 0
    succeeded: int = 0
    complete: bool = False
    failed: tuple[str, str] | None = None
    """(reason, message) of its Failed condition."""

    @property
    def is_ready(self) -> bool:
        return self.complete or self.ready + self.succeeded >= max(self.parallelism, 1)


def _true_condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def job_view(job: Mapping[str, Any]) -> JobView:
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    failed = _true_condition(job, "Failed")
    return JobView(
        name=str(meta.get("name")),
        role=str(labels.get(REPLICATED_JOB_NAME, "")),
        attempt=int(labels.get(RESTART_ATTEMPT) or 0),
        parallelism=int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1),
        ready=int(status.get("ready") or 0),
        succeeded=int(status.get("succeeded") or 0),
        complete=_true_condition(job, "Complete") is not None,
        failed=(str(failed.get("reason") or ""), str(failed.get("message") or ""))
        if failed is not None
        else None,
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do now: which replicated jobs' Jobs may exist, and the JobSet's fate."""

    roles_started: frozenset[str]
    outcome: Outcome | None = None
    message: str = ""
    restart: tuple[str, ...] = ()
    """Jobs to recreate as the next attempt (all of them for RestartJobSet)."""
    counted: bool = False
    """The restart counts against maxRestarts."""


def _startable(policy: JobSetPolicy, by_role: Mapping[str, list[JobView]]) -> frozenset[str]:
    def all_jobs(role: Role, ok: str) -> bool:
        views = by_role.get(role.name, [])
        if len(views) < role.replicas:
            return False
        return all(v.complete if ok == "Complete" else v.is_ready for v in views)

    started: list[str] = []
    roles = {r.name: r for r in policy.roles}
    for i, role in enumerate(policy.roles):
        if policy.in_order:
            if i > 0 and not all_jobs(policy.roles[i - 1], "Ready"):
                break
            started.append(role.name)
        elif all(all_jobs(roles[dep], status) for dep, status in role.depends_on if dep in roles):
            started.append(role.name)
    return frozenset(started)


def _matches(rule: Rule, job: JobView) -> bool:
    reason, message = job.failed or ("", "")
    if rule.targets and job.role not in rule.targets:
        return False
    if rule.reasons and reason not in rule.reasons:
        return False
    return not rule.patterns or any(re.search(p, message) for p in rule.patterns)


def decide(policy: JobSetPolicy, jobs: Sequence[JobView], counted_restarts: int) -> Decision:
    """The controller's step over the current attempt's Jobs (`jobs`; others are stale) with
    `counted_restarts` restarts so far counted against maxRestarts."""
    by_role: dict[str, list[JobView]] = {}
    for job in jobs:
        by_role.setdefault(job.role, []).append(job)
    started = _startable(policy, by_role)
    targets = set(policy.success_targets or (r.name for r in policy.roles))
    targeted = [j for j in jobs if j.role in targets]
    expected = sum(r.replicas for r in policy.roles if r.name in targets)
    if policy.success_any and any(j.complete for j in targeted):
        done = next(j for j in targeted if j.complete)
        return Decision(started, "Succeeded", f"job {done.name} completed (successPolicy Any)")
    if not policy.success_any and len(targeted) >= expected and all(j.complete for j in targeted):
        return Decision(started, "Succeeded", "every targeted job completed (successPolicy All)")
    failed = [j for j in jobs if j.failed is not None]
    if not failed:
        return Decision(started)
    first = failed[0]
    reason, message = first.failed or ("", "")
    what = f"job {first.name} failed: {reason} {message}".strip()
    if not policy.failure_policy:
        return Decision(started, "Failed", what)
    action, rule_name = "RestartJobSet", ""
    for rule in policy.rules:
        if _matches(rule, first):
            action, rule_name = rule.action, rule.name
            break
    ruled = f" (rule {rule_name})" if rule_name else ""
    if action == "FailJobSet":
        return Decision(started, "Failed", f"{what}; FailJobSet{ruled}")
    counted = not action.endswith("AndIgnoreMaxRestarts")
    if counted and counted_restarts >= policy.max_restarts:
        return Decision(
            started,
            "Failed",
            f"{what}; reached the maximum of {policy.max_restarts} restarts{ruled}",
        )
    restart = (
        (first.name,)
        if action.startswith("RestartJob") and not action.startswith("RestartJobSet")
        else tuple(j.name for j in jobs)
    )
    return Decision(started, None, f"{what}; {action}{ruled}", restart, counted)


def headless_service(
    policy: JobSetPolicy, namespace: str, labels: Mapping[str, str]
) -> JsonObject | None:
    """The JobSet's headless Service for its pods' DNS names (None: hostnames are off)."""
    if policy.subdomain is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": policy.subdomain, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "clusterIP": "None",
            "selector": {JOBSET_NAME: policy.name},
            "publishNotReadyAddresses": policy.publish_not_ready,
        },
    }
