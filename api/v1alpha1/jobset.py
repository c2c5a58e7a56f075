"""MultiQ's own JobSet (`multiq.dev/v1alpha1`, kind JobSet): roles of replicated batch/v1 Jobs
for multi-node training, with a start order (dependsOn: Ready or Complete), a failure policy
(maxRestarts and ordered rules), a success policy (All or Any of target roles), stable DNS
hostnames and a coordinator.

It has the shape of upstream JobSet (api.k8s.jobset), whose sub-models it reuses, with rules
that are stricter where upstream is loose and looser where upstream's controller is limited:
every role has at least one replica, a role may depend on several earlier roles (never on a
later one, so there are no cycles), and only the restart actions MultiQ's agent implements are
accepted. Agents materialise it as an upstream JobSet or as plain Jobs.

Called by: api.codec (registry), api.v1alpha1.conversions, the agent, qctl.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.jobset import (
    Coordinator,
    DependsOn,
    JobSetStatus,
    Network,
    ReplicatedJob,
    StartupPolicy,
    SuccessPolicy,
    coordinator_errors,
    failure_rule_match_errors,
    replicated_job_errors,
    rule_name_errors,
    success_policy_errors,
)
from api.k8s.pod import CompactModel
from api.meta import Object, dns1123_label_errors, dns1123_subdomain_errors

__all__ = [
    "DependsOn",
    "FailureAction",
    "JobSet",
    "JobSetFailurePolicy",
    "JobSetFailureRule",
    "JobSetSpec",
    "ReplicatedJob",
]

FailureAction = Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
MAX_REPLICATED_JOBS = 18  # one Workload pod set per role
MAX_FAILURE_RULES = 32


class JobSetFailureRule(CompactModel):
    name: str = ""
    action: FailureAction
    on_job_failure_reasons: list[str] = Field(default_factory=list)
    on_job_failure_message_patterns: list[str] = Field(default_factory=list)
    target_replicated_jobs: list[str] = Field(default_factory=list)


class JobSetFailurePolicy(CompactModel):
    """No policy: any failed Job fails the set. Rules: first match wins; none ⇒ RestartJobSet."""

    max_restarts: int = 0
    rules: list[JobSetFailureRule] = Field(default_factory=list)


class JobSetSpec(CompactModel):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: JobSetFailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    coordinator: Coordinator | None = None
    suspend: bool | None = None
    ttl_seconds_after_finished: int | None = None


class JobSet(Object):
    """multiq.dev/v1alpha1 JobSet: roles of replicated Jobs with order and policies."""

    KIND: ClassVar[str] = "JobSet"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mjs", "jobsets")
    kind: Literal["JobSet"] = "JobSet"
    spec: JobSetSpec
    status: JobSetStatus | None = None

    def start_order(self) -> list[list[str]]:
        """Roles grouped in waves: each wave starts once the roles it depends on are done."""
        wave: dict[str, int] = {}
        for rj in self.spec.replicated_jobs:
            deps = [wave[d.name] for d in rj.depends_on if d.name in wave]
            wave[rj.name] = max(deps, default=-1) + 1
        if self.spec.startup_policy and self.spec.startup_policy.startup_policy_order == "InOrder":
            wave = {rj.name: i for i, rj in enumerate(self.spec.replicated_jobs)}
        out: list[list[str]] = [[] for _ in range(max(wave.values(), default=-1) + 1)]
        for name, index in wave.items():
            out[index].append(name)
        return out

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        errors += _spec_errors(Path("spec"), self.spec, self.metadata.name)
        return errors


def _spec_errors(path: Path, spec: JobSetSpec, name: str) -> Iterator[FieldError]:
    rpath = path.child("replicatedJobs")
    jobs = spec.replicated_jobs
    if not jobs:
        yield FieldError.required(rpath, "must have at least 1 item")
    if len(jobs) > MAX_REPLICATED_JOBS:
        yield FieldError.too_many(rpath, len(jobs), MAX_REPLICATED_JOBS)
    names = [rj.name for rj in jobs]
    in_order = (
        spec.startup_policy is not None and spec.startup_policy.startup_policy_order == "InOrder"
    )
    if in_order and any(rj.depends_on for rj in jobs):
        yield FieldError.forbidden(
            path.child("startupPolicy"),
            "startupPolicyOrder InOrder and dependsOn are mutually exclusive",
        )
    seen: set[str] = set()
    for i, rj in enumerate(jobs):
        jpath = rpath.index(i)
        yield from dns1123_label_errors(jpath.child("name"), rj.name)
        if rj.name in seen:
            yield FieldError.duplicate(jpath.child("name"), rj.name)
        if rj.replicas < 1:
            yield FieldError.invalid(
                jpath.child("replicas"), rj.replicas, "must be greater than or equal to 1"
            )
        yield from replicated_job_errors(jpath, rj, name)
        yield from _depends_on_errors(jpath.child("dependsOn"), rj, names, i)
        seen.add(rj.name)
    if spec.network is not None and spec.network.subdomain:
        yield from dns1123_subdomain_errors(
            path.child("network", "subdomain"), spec.network.subdomain
        )
    if spec.success_policy is not None:
        yield from success_policy_errors(path.child("successPolicy"), spec.success_policy, names)
    if spec.failure_policy is not None:
        yield from _failure_policy_errors(path.child("failurePolicy"), spec.failure_policy, names)
    if spec.coordinator is not None:
        yield from coordinator_errors(path.child("coordinator"), spec.coordinator, jobs)
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        yield FieldError.invalid(
            path.child("ttlSecondsAfterFinished"),
            spec.ttl_seconds_after_finished,
            "must be greater than or equal to 0",
        )


def _depends_on_errors(
    path: Path, rj: ReplicatedJob, names: Sequence[str], index: int
) -> Iterator[FieldError]:
    earlier = names[:index]
    seen: set[str] = set()
    for di, dep in enumerate(rj.depends_on):
        dpath = path.index(di).child("name")
        if dep.name in seen:
            yield FieldError.duplicate(dpath, dep.name)
        seen.add(dep.name)
        if dep.name == rj.name:
            yield FieldError.invalid(dpath, dep.name, "a replicated job cannot depend on itself")
        elif dep.name in earlier:
            continue
        elif dep.name in names:
            # Only backward edges are allowed, which is what makes cycles impossible.
            yield FieldError.invalid(
                dpath, dep.name, "must name a replicated job listed before this one"
            )
        else:
            yield FieldError.not_found(dpath, dep.name, "does not appear in spec.replicatedJobs")


def _failure_policy_errors(
    path: Path, policy: JobSetFailurePolicy, names: Sequence[str]
) -> Iterator[FieldError]:
    if policy.max_restarts < 0:
        yield FieldError.invalid(
            path.child("maxRestarts"), policy.max_restarts, "must be greater than or equal to 0"
        )
    rules_path = path.child("rules")
    if len(policy.rules) > MAX_FAILURE_RULES:
        yield FieldError.too_many(rules_path, len(policy.rules), MAX_FAILURE_RULES)
    yield from rule_name_errors(rules_path, [r.name for r in policy.rules])
    for i, rule in enumerate(policy.rules):
        rpath = rules_path.index(i)
        yield from failure_rule_match_errors(rpath, rule, names)
