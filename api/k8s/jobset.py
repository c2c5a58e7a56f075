"""Upstream JobSet (`jobset.x-k8s.io/v1alpha2`): groups of replicated batch/v1 Jobs for
multi-node training, accepted exactly as users write it for the JobSet controller, with the
JobSet webhook's defaults and rules.

The sub-models (DependsOn, Network, SuccessPolicy, StartupPolicy, Coordinator) are shared with
MultiQ's own JobSet kind (api.v1alpha1.jobset); conversion to Workload pod sets lives in
api.v1alpha1.conversions.

Called by: api.codec (registry), api.v1alpha1.jobset, api.v1alpha1.conversions, the agent's
materialiser, qctl validate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Literal, Protocol

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.batch import JobTemplateSpec, job_template_errors, pods_count
from api.k8s.pod import CompactModel
from api.meta import (
    INT32_MAX,
    Condition,
    Int32,
    Object,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_duplicates,
)

__all__ = [
    "API_VERSION",
    "JOB_INDEX_LABEL",
    "REPLICATED_JOB_REPLICAS_LABEL",
    "Coordinator",
    "DependsOn",
    "FailurePolicy",
    "FailurePolicyRule",
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "Network",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "StartupPolicy",
    "SuccessPolicy",
    "VolumeClaimPolicy",
    "coordinator_errors",
    "dns_name_errors",
    "rule_name_errors",
    "success_policy_errors",
]

API_VERSION = "jobset.x-k8s.io/v1alpha2"
# Labels the JobSet controller puts on child Jobs and pods (used for topology sub-groups).
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
REPLICATED_JOB_REPLICAS_LABEL = "jobset.sigs.k8s.io/replicatedjob-replicas"
# JobSet's webhook defaults for child Jobs.
DEFAULT_COMPLETION_MODE: Literal["Indexed"] = "Indexed"
DEFAULT_RESTART_POLICY = "OnFailure"
MAX_DEPENDS_ON = 1  # the API allows 5 entries, the controller supports one
MAX_REPLICAS_FOR_JOB_RESTARTS = 1024
MAX_DNS_NAME = 63
JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

FailurePolicyAction = Literal[
    "FailJobSet",
    "RestartJobSet",
    "RestartJobSetAndIgnoreMaxRestarts",
    "RestartJob",
    "RestartJobAndIgnoreMaxRestarts",
]
JOB_RESTART_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")


class DependsOn(CompactModel):
    """Start this replicated job once `name` is Ready (all Jobs ready) or Complete."""

    name: str
    status: Literal["Ready", "Complete"]


class ReplicatedJob(CompactModel):
    name: str
    group_name: str = "default"
    replicas: Int32 = 1
    template: JobTemplateSpec
    depends_on: list[DependsOn] = Field(default_factory=list)

    def pods_per_job(self) -> int:
        return pods_count(self.template.spec)


class Network(CompactModel):
    enable_dns_hostnames: bool | None = Field(default=None, alias="enableDNSHostnames")
    subdomain: str | None = None
    publish_not_ready_addresses: bool | None = None


class SuccessPolicy(CompactModel):
    operator: Literal["All", "Any"] = "All"
    target_replicated_jobs: list[str] = Field(default_factory=list)


class FailurePolicyRule(CompactModel):
    name: str = ""
    action: FailurePolicyAction
    on_job_failure_reasons: list[str] = Field(default_factory=list)
    on_job_failure_message_patterns: list[str] = Field(default_factory=list)
    target_replicated_jobs: list[str] = Field(default_factory=list)


class FailurePolicy(CompactModel):
    max_restarts: int = 0
    restart_strategy: Literal["Recreate", "BlockingRecreate", "InPlaceRestart"] = "Recreate"
    rules: list[FailurePolicyRule] = Field(default_factory=list)


class StartupPolicy(CompactModel):
    startup_policy_order: Literal["AnyOrder", "InOrder"] = "AnyOrder"


class Coordinator(CompactModel):
    """The pod whose stable DNS name every pod gets as `jobset.sigs.k8s.io/coordinator`."""

    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


class _RetentionPolicy(CompactModel):
    when_deleted: Literal["Delete", "Retain"] | None = None


class VolumeClaimPolicy(CompactModel):
    # PersistentVolumeClaim templates pass through to the JobSet controller untouched.
    templates: list[dict[str, Any]] = Field(default_factory=list)
    retention_policy: _RetentionPolicy | None = None


class JobSetSpec(CompactModel):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    suspend: bool | None = None
    coordinator: Coordinator | None = None
    managed_by: str | None = None
    ttl_seconds_after_finished: int | None = None
    volume_claim_policies: list[VolumeClaimPolicy] = Field(default_factory=list)


class ReplicatedJobStatus(CompactModel):
    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0
    job_restarts: list[int] = Field(default_factory=list)
    job_restarts_count_towards_max: list[int] = Field(default_factory=list)


class JobSetStatus(CompactModel):
    conditions: list[Condition] = Field(default_factory=list)
    restarts: int = 0
    restarts_count_towards_max: int = 0
    terminal_state: str | None = None
    replicated_jobs_status: list[ReplicatedJobStatus] = Field(default_factory=list)
    previous_in_place_restart_attempt: int | None = None
    current_in_place_restart_attempt: int | None = None


class JobSet(Object):
    """jobset.x-k8s.io/v1alpha2 JobSet, as the upstream controller accepts it."""

    KIND: ClassVar[str] = "JobSet"
    API_VERSION: ClassVar[str] = API_VERSION
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("jobsets",)
    api_version: Literal["jobset.x-k8s.io/v1alpha2"] = "jobset.x-k8s.io/v1alpha2"
    kind: Literal["JobSet"] = "JobSet"
    spec: JobSetSpec
    status: JobSetStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        errors += _jobset_spec_errors(Path("spec"), self.spec, self.metadata.name)
        return errors


# --- validation shared with MultiQ's JobSet -------------------------------------------------


def dns_name_errors(path: Path, value: str, generated: str, what: str) -> Iterator[FieldError]:
    """A name generated from `value` (a Job or pod name) must be an RFC 1035 label."""
    if len(generated) > MAX_DNS_NAME:
        yield FieldError.invalid(
            path,
            value,
            f"{what} {generated!r} would be longer than {MAX_DNS_NAME} characters; shorten the "
            "JobSet or replicated job name",
        )
    elif not _DNS1035_LABEL.fullmatch(generated):
        yield FieldError.invalid(
            path, value, f"{what} {generated!r} must be an RFC 1035 label (start with a letter)"
        )


def rule_name_errors(path: Path, names: Sequence[str]) -> Iterator[FieldError]:
    for i, name in enumerate(names):
        if name and not _RULE_NAME.fullmatch(name):
            yield FieldError.invalid(
                path.index(i).child("name"),
                name,
                "must match the regular expression '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'",
            )
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            yield FieldError.duplicate(path.index(i).child("name"), name)
        if name:
            seen.add(name)


def success_policy_errors(
    path: Path, policy: SuccessPolicy, known: Sequence[str]
) -> Iterator[FieldError]:
    for i, target in enumerate(policy.target_replicated_jobs):
        if target not in known:
            yield FieldError.not_found(
                path.child("targetReplicatedJobs").index(i),
                target,
                "does not appear in spec.replicatedJobs",
            )


def coordinator_errors(
    path: Path, coordinator: Coordinator, jobs: Sequence[ReplicatedJob]
) -> Iterator[FieldError]:
    target = next((rj for rj in jobs if rj.name == coordinator.replicated_job), None)
    if target is None:
        yield FieldError.not_found(
            path.child("replicatedJob"),
            coordinator.replicated_job,
            "does not appear in spec.replicatedJobs",
        )
        return
    if not 0 <= coordinator.job_index < max(target.replicas, 1):
        yield FieldError.invalid(
            path.child("jobIndex"),
            coordinator.job_index,
            f"must be between 0 and {target.replicas - 1} (replicas of {target.name})",
        )
    completions = target.template.spec.completions or target.pods_per_job()
    if not 0 <= coordinator.pod_index < max(completions, 1):
        yield FieldError.invalid(
            path.child("podIndex"),
            coordinator.pod_index,
            f"must be between 0 and {completions - 1} (completions of {target.name})",
        )


def _jobset_spec_errors(path: Path, spec: JobSetSpec, name: str) -> Iterator[FieldError]:
    rpath = path.child("replicatedJobs")
    jobs = spec.replicated_jobs
    if not jobs:
        yield FieldError.required(rpath, "must have at least 1 item")
    names = [rj.name for rj in jobs]
    for i in find_duplicates(names):
        yield FieldError.duplicate(rpath.index(i).child("name"), names[i])
    in_order = spec.startup_policy is not None and spec.startup_policy.startup_policy_order == (
        "InOrder"
    )
    if in_order and any(rj.depends_on for rj in jobs):
        yield FieldError.invalid(
            path, "", "StartupPolicy and DependsOn APIs are mutually exclusive"
        )
    for i, rj in enumerate(jobs):
        jpath = rpath.index(i)
        yield from dns1123_label_errors(jpath.child("name"), rj.name)
        if rj.replicas < 0:
            yield FieldError.invalid(
                jpath.child("replicas"), rj.replicas, "must be greater than or equal to 0"
            )
        if rj.pods_per_job() * rj.replicas > INT32_MAX:
            yield FieldError.invalid(
                jpath.child("replicas"),
                rj.replicas,
                f"the product of replicas and parallelism must not exceed {INT32_MAX}",
            )
        yield from replicated_job_errors(jpath, rj, name)
        dpath = jpath.child("dependsOn")
        if rj.depends_on and i == 0:
            yield FieldError.invalid(
                dpath, rj.depends_on[0].name, "the first replicated job cannot depend on another"
            )
        elif len(rj.depends_on) > MAX_DEPENDS_ON:
            yield FieldError.too_many(dpath, len(rj.depends_on), MAX_DEPENDS_ON)
        for di, dep in enumerate(rj.depends_on):
            if i > 0 and dep.name not in names[:i]:
                yield FieldError.invalid(
                    dpath.index(di).child("name"),
                    dep.name,
                    "must name a replicated job listed before this one",
                )
    if spec.network is not None and spec.network.subdomain:
        spath = path.child("network", "subdomain")
        yield from dns1123_subdomain_errors(spath, spec.network.subdomain)
    if spec.success_policy is not None:
        yield from success_policy_errors(path.child("successPolicy"), spec.success_policy, names)
    if spec.failure_policy is not None:
        yield from _failure_policy_errors(path.child("failurePolicy"), spec.failure_policy, jobs)
    if spec.coordinator is not None:
        yield from coordinator_errors(path.child("coordinator"), spec.coordinator, jobs)
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        yield FieldError.invalid(
            path.child("ttlSecondsAfterFinished"),
            spec.ttl_seconds_after_finished,
            "must be greater than or equal to 0",
        )
    if spec.managed_by is not None and "/" not in spec.managed_by:
        yield FieldError.invalid(
            path.child("managedBy"),
            spec.managed_by,
            'must be a domain-prefixed path (such as "acme.io/foo")',
        )


def _failure_policy_errors(
    path: Path, policy: FailurePolicy, jobs: Sequence[ReplicatedJob]
) -> Iterator[FieldError]:
    if policy.max_restarts < 0:
        yield FieldError.invalid(
            path.child("maxRestarts"), policy.max_restarts, "must be greater than or equal to 0"
        )
    rules_path = path.child("rules")
    yield from rule_name_errors(rules_path, [r.name for r in policy.rules])
    names = [rj.name for rj in jobs]
    for i, rule in enumerate(policy.rules):
        rpath = rules_path.index(i)
        yield from failure_rule_match_errors(rpath, rule, names)
        if rule.action in JOB_RESTART_ACTIONS:
            for ji, rj in enumerate(jobs):
                if rj.replicas > MAX_REPLICAS_FOR_JOB_RESTARTS:
                    yield FieldError.invalid(
                        rpath.child("action"),
                        rule.action,
                        f"requires every replicated job to have at most "
                        f"{MAX_REPLICAS_FOR_JOB_RESTARTS} replicas; spec.replicatedJobs[{ji}] "
                        f"has {rj.replicas}",
                    )


class _RuleMatch(Protocol):
    on_job_failure_reasons: list[str]
    on_job_failure_message_patterns: list[str]
    target_replicated_jobs: list[str]


def failure_rule_match_errors(
    rpath: Path, rule: _RuleMatch, names: Sequence[str]
) -> Iterator[FieldError]:
    """What a failure-policy rule matches on: known reasons, valid patterns, existing jobs.

    Shared by the upstream JobSet and MultiQ's own JobSet kind."""
    for ri, reason in enumerate(rule.on_job_failure_reasons):
        if reason not in JOB_FAILURE_REASONS:
            yield FieldError.unsupported(
                rpath.child("onJobFailureReasons").index(ri), reason, JOB_FAILURE_REASONS
            )
    for pi, pattern in enumerate(rule.on_job_failure_message_patterns):
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:  # (nesting, repeat counts)
            yield FieldError.invalid(
                rpath.child("onJobFailureMessagePatterns").index(pi),
                pattern,
                f"must be a valid regular expression: {exc}",
            )
    for ti, target in enumerate(rule.target_replicated_jobs):
        if target not in names:
            yield FieldError.not_found(
                rpath.child("targetReplicatedJobs").index(ti),
                target,
                "does not appear in spec.replicatedJobs",
            )


def replicated_job_errors(jpath: Path, rj: ReplicatedJob, jobset_name: str) -> Iterator[FieldError]:
    """The Job names a replicated job yields, and its Job template, as the JobSet webhook
    defaults and checks them. Shared by the upstream JobSet and MultiQ's own JobSet kind."""
    if jobset_name:
        yield from dns_name_errors(
            jpath.child("name"),
            rj.name,
            f"{jobset_name}-{rj.name}-{max(rj.replicas - 1, 0)}",
            "job name",
        )
    yield from job_template_errors(
        jpath.child("template"),
        rj.template,
        default_restart_policy=DEFAULT_RESTART_POLICY,
        default_completion_mode=DEFAULT_COMPLETION_MODE,
    )
