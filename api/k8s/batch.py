"""batch/v1 Job as users write it, with the API server's validation rules for the fields MultiQ
relies on (counts, completion mode, restart policy, failure and success policies, selectors).

A Job is the simplest thing a researcher submits: the hub converts it to a Workload
(api.v1alpha1.conversions) and the agent creates it, suspended until admitted, on the member
cluster. JobSets embed the same JobSpec in every replicated job.

Called by: api.codec (registry), api.k8s.jobset, api.v1alpha1.jobset, api.v1alpha1.conversions,
the agent's materialiser, qctl validate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from api.errors import FieldError, Path
from api.k8s.core import LabelSelector
from api.k8s.pod import CompactModel, PodTemplateSpec, pod_template_errors
from api.meta import (
    Int32,
    Object,
    ObjectMeta,
    dns1123_subdomain_errors,
    label_key_errors,
    label_map_errors,
)

__all__ = [
    "COMPLETION_INDEX_LABEL",
    "CompletionMode",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobStatus",
    "JobTemplateSpec",
    "PodFailurePolicy",
    "PodFailurePolicyOnExitCodesRequirement",
    "PodFailurePolicyOnPodConditionsPattern",
    "PodFailurePolicyRule",
    "SuccessPolicy",
    "SuccessPolicyRule",
    "UncountedTerminatedPods",
    "job_spec_errors",
    "job_template_errors",
    "pods_count",
]

# The label (and annotation) Kubernetes puts on each pod of an Indexed Job.
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_RESTART_POLICIES = ("OnFailure", "Never")
MAX_PARALLELISM_FOR_INDEXED_JOB = 100_000
MAX_COMPLETIONS_WITH_BACKOFF_LIMIT_PER_INDEX = 100_000
MAX_POD_FAILURE_POLICY_RULES = 20
MAX_SUCCESS_POLICY_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_MANAGED_BY_LENGTH = 63
# Selectors the API server generated carry the controller uid; users may round-trip them.
_GENERATED_SELECTOR_KEYS = ("batch.kubernetes.io/controller-uid", "controller-uid")
_INDEX_INTERVALS = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")

CompletionMode = Literal["NonIndexed", "Indexed"]


class PodFailurePolicyOnExitCodesRequirement(CompactModel):
    container_name: str | None = None
    operator: Literal["In", "NotIn"]
    values: list[int]


class PodFailurePolicyOnPodConditionsPattern(CompactModel):
    type: str
    status: Literal["True", "False", "Unknown"] = "True"


class PodFailurePolicyRule(CompactModel):
    action: Literal["FailJob", "FailIndex", "Ignore", "Count"]
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodConditionsPattern] | None = None


class PodFailurePolicy(CompactModel):
    rules: list[PodFailurePolicyRule]


class SuccessPolicyRule(CompactModel):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(CompactModel):
    rules: list[SuccessPolicyRule]


class JobSpec(CompactModel):
    parallelism: Int32 | None = None
    completions: Int32 | None = None
    completion_mode: CompletionMode | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: Int32 | None = None
    backoff_limit_per_index: Int32 | None = None
    max_failed_indexes: Int32 | None = None
    pod_failure_policy: PodFailurePolicy | None = None
    success_policy: SuccessPolicy | None = None
    pod_replacement_policy: Literal["TerminatingOrFailed", "Failed"] | None = None
    ttl_seconds_after_finished: Int32 | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec

    @property
    def is_indexed(self) -> bool:
        return self.completion_mode == "Indexed"

    def pods_count(self) -> int:
        """See `pods_count`."""
        return pods_count(self)


class JobTemplateSpec(CompactModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec


class JobCondition(CompactModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None


class UncountedTerminatedPods(CompactModel):
    succeeded: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)


class JobStatus(CompactModel):
    conditions: list[JobCondition] = Field(default_factory=list)
    start_time: datetime | None = None
    completion_time: datetime | None = None
    active: int | None = None
    ready: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None


class Job(Object):
    """batch/v1 Job."""

    KIND: ClassVar[str] = "Job"
    API_VERSION: ClassVar[str] = "batch/v1"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("jobs",)
    # The Job controller puts the name in its pods' `batch.kubernetes.io/job-name` label.
    NAME_IS_LABEL: ClassVar[bool] = True
    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    spec: JobSpec
    status: JobStatus | None = None

    def semantic_errors(self) -> list[FieldError]:
        errors = super().semantic_errors()
        errors += job_spec_errors(Path("spec"), self.spec)
        return errors


def pods_count(spec: JobSpec) -> int:
    """Pods that run at once: parallelism (default 1), capped by completions — as Kueue counts."""
    count = 1 if spec.parallelism is None else spec.parallelism
    if spec.completions is not None and spec.completions < count:
        count = spec.completions
    return count


def _non_negative(path: Path, value: int | None) -> Iterator[FieldError]:
    if value is not None and value < 0:
        yield FieldError.invalid(path, value, "must be greater than or equal to 0")


_NON_NEGATIVE_SPEC_FIELDS = (
    ("parallelism", "parallelism"),
    ("completions", "completions"),
    ("activeDeadlineSeconds", "active_deadline_seconds"),
    ("backoffLimit", "backoff_limit"),
    ("backoffLimitPerIndex", "backoff_limit_per_index"),
    ("maxFailedIndexes", "max_failed_indexes"),
    ("ttlSecondsAfterFinished", "ttl_seconds_after_finished"),
)


def job_spec_errors(
    path: Path,
    spec: JobSpec,
    *,
    default_restart_policy: str | None = None,
    default_completion_mode: CompletionMode | None = None,
) -> Iterator[FieldError]:
    """The API server's JobSpec rules, applied after its defaulting (parallelism and
    completions both unset mean 1 and 1). `default_restart_policy` and
    `default_completion_mode` are what a defaulting webhook (JobSet's: OnFailure, Indexed)
    fills in when the template leaves them empty."""
    indexed = (spec.completion_mode or default_completion_mode) == "Indexed"
    for wire_name, field_name in _NON_NEGATIVE_SPEC_FIELDS:
        # (The field's path is made only for an error: every submitted Job passes here.)
        value = getattr(spec, field_name)
        if value is not None and value < 0:
            yield from _non_negative(path.child(wire_name), value)
    if indexed:
        if spec.completions is None and spec.parallelism is not None:
            yield FieldError.required(path.child("completions"), "when completion mode is Indexed")
        if spec.parallelism is not None and spec.parallelism > MAX_PARALLELISM_FOR_INDEXED_JOB:
            yield FieldError.invalid(
                path.child("parallelism"),
                spec.parallelism,
                f"must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when "
                "completion mode is Indexed",
            )
    yield from _per_index_errors(path, spec, indexed=indexed)
    restart_policy = spec.template.spec.restart_policy or default_restart_policy
    rpath = path.child("template", "spec", "restartPolicy")
    if restart_policy is None:
        yield FieldError.required(rpath, 'valid values: "OnFailure", "Never"')
    elif restart_policy not in JOB_RESTART_POLICIES:
        yield FieldError.unsupported(rpath, restart_policy, JOB_RESTART_POLICIES)
    if spec.pod_failure_policy is not None:
        yield from _pod_failure_policy_errors(path, spec, restart_policy)
    if spec.success_policy is not None:
        yield from _success_policy_errors(path.child("successPolicy"), spec, indexed=indexed)
    yield from _selector_errors(path, spec)
    if spec.managed_by is not None:
        yield from _managed_by_errors(path.child("managedBy"), spec.managed_by)
    yield from pod_template_errors(path.child("template"), spec.template)


def _per_index_errors(path: Path, spec: JobSpec, *, indexed: bool) -> Iterator[FieldError]:
    if spec.backoff_limit_per_index is not None:
        if not indexed:
            yield FieldError.invalid(
                path.child("backoffLimitPerIndex"),
                spec.backoff_limit_per_index,
                "requires indexed completion mode",
            )
        elif (
            spec.completions is not None
            and spec.completions > MAX_COMPLETIONS_WITH_BACKOFF_LIMIT_PER_INDEX
        ):
            yield FieldError.invalid(
                path.child("completions"),
                spec.completions,
                f"must be less than or equal to {MAX_COMPLETIONS_WITH_BACKOFF_LIMIT_PER_INDEX} "
                "when backoffLimitPerIndex is specified",
            )
    if spec.max_failed_indexes is not None:
        if spec.backoff_limit_per_index is None:
            yield FieldError.required(
                path.child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"
            )
        if spec.completions is not None and spec.max_failed_indexes > spec.completions:
            yield FieldError.invalid(
                path.child("maxFailedIndexes"),
                spec.max_failed_indexes,
                "must be less than or equal to completions",
            )


def _pod_failure_policy_errors(
    path: Path, spec: JobSpec, restart_policy: str | None
) -> Iterator[FieldError]:
    policy = spec.pod_failure_policy
    assert policy is not None
    ppath = path.child("podFailurePolicy")
    if restart_policy is not None and restart_policy != "Never":
        yield FieldError.invalid(
            path.child("template", "spec", "restartPolicy"),
            restart_policy,
            'only "Never" is supported when podFailurePolicy is specified',
        )
    if spec.pod_replacement_policy is not None and spec.pod_replacement_policy != "Failed":
        yield FieldError.unsupported(
            path.child("podReplacementPolicy"), spec.pod_replacement_policy, ["Failed"]
        )
    rules_path = ppath.child("rules")
    if len(policy.rules) > MAX_POD_FAILURE_POLICY_RULES:
        yield FieldError.too_many(rules_path, len(policy.rules), MAX_POD_FAILURE_POLICY_RULES)
    for i, rule in enumerate(policy.rules):
        rpath = rules_path.index(i)
        if rule.action == "FailIndex" and spec.backoff_limit_per_index is None:
            yield FieldError.invalid(
                rpath.child("action"), rule.action, "requires the backoffLimitPerIndex to be set"
            )
        if rule.on_exit_codes is not None and rule.on_pod_conditions is not None:
            yield FieldError.invalid(
                rpath, "", "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        elif rule.on_exit_codes is None and rule.on_pod_conditions is None:
            yield FieldError.invalid(
                rpath, "", "specifying one of OnExitCodes and OnPodConditions is required"
            )
        if rule.on_exit_codes is not None:
            yield from _exit_code_errors(rpath.child("onExitCodes"), rule.on_exit_codes)


def _exit_code_errors(
    path: Path, req: PodFailurePolicyOnExitCodesRequirement
) -> Iterator[FieldError]:
    vpath = path.child("values")
    if not req.values:
        yield FieldError.required(vpath, "at least one value is required")
    if len(req.values) > MAX_EXIT_CODE_VALUES:
        yield FieldError.too_many(vpath, len(req.values), MAX_EXIT_CODE_VALUES)
    for i, value in enumerate(req.values):
        if req.operator == "In" and value == 0:
            yield FieldError.invalid(vpath.index(i), value, "must not be 0 for the In operator")
        if i > 0 and value == req.values[i - 1]:
            yield FieldError.duplicate(vpath.index(i), value)
        elif i > 0 and value < req.values[i - 1]:
            yield FieldError.invalid(vpath.index(i), value, "must be ordered")


def _success_policy_errors(path: Path, spec: JobSpec, *, indexed: bool) -> Iterator[FieldError]:
    policy = spec.success_policy
    assert policy is not None
    if not indexed:
        yield FieldError.invalid(path, "", "requires indexed completion mode")
    rules_path = path.child("rules")
    if not policy.rules:
        yield FieldError.required(rules_path, "at least one rules must be specified")
    if len(policy.rules) > MAX_SUCCESS_POLICY_RULES:
        yield FieldError.too_many(rules_path, len(policy.rules), MAX_SUCCESS_POLICY_RULES)
    for i, rule in enumerate(policy.rules):
        rpath = rules_path.index(i)
        if rule.succeeded_count is None and rule.succeeded_indexes is None:
            yield FieldError.required(
                rpath, "at least one of succeededCount or succeededIndexes must be specified"
            )
        if rule.succeeded_indexes is not None and not _INDEX_INTERVALS.fullmatch(
            rule.succeeded_indexes
        ):
            yield FieldError.invalid(
                rpath.child("succeededIndexes"),
                rule.succeeded_indexes,
                "error parsing succeededIndexes: must be a comma-separated list of indexes "
                'or index ranges such as "1,3-5"',
            )
        count = rule.succeeded_count
        if count is not None:
            yield from _non_negative(rpath.child("succeededCount"), count)
            if spec.completions is not None and count > spec.completions:
                yield FieldError.invalid(
                    rpath.child("succeededCount"),
                    count,
                    f"must be less than or equal to {spec.completions} (the number of specified "
                    "completions)",
                )


def _selector_errors(path: Path, spec: JobSpec) -> Iterator[FieldError]:
    if spec.manual_selector:
        if spec.selector is None:
            yield FieldError.required(path.child("selector"))
        else:
            yield from spec.selector.errors(path.child("selector"))
            if not spec.selector.matches(spec.template.metadata.labels):
                yield FieldError.invalid(
                    path.child("template", "metadata", "labels"),
                    ",".join(f"{k}={v}" for k, v in spec.template.metadata.labels.items()),
                    "`selector` does not match template `labels`",
                )
    elif spec.selector is not None and not any(
        key in spec.selector.match_labels for key in _GENERATED_SELECTOR_KEYS
    ):
        yield FieldError.invalid(
            path.child("selector"),
            "",
            "`selector` not auto-generated: set manualSelector: true to choose your own selector",
        )


def _managed_by_errors(path: Path, managed_by: str) -> Iterator[FieldError]:
    if len(managed_by) > MAX_MANAGED_BY_LENGTH:
        yield FieldError.too_long(path, MAX_MANAGED_BY_LENGTH)
    domain, slash, rest = managed_by.partition("/")
    if not slash or not rest:
        yield FieldError.invalid(
            path, managed_by, 'must be a domain-prefixed path (such as "acme.io/foo")'
        )
    else:
        yield from dns1123_subdomain_errors(path, domain)


def job_template_errors(
    path: Path,
    template: JobTemplateSpec,
    *,
    default_restart_policy: str | None = None,
    default_completion_mode: CompletionMode | None = None,
) -> Iterator[FieldError]:
    """A JobTemplateSpec inside a JobSet replicated job (or a CronJob)."""
    meta = path.child("metadata")
    yield from label_map_errors(meta.child("labels"), template.metadata.labels)
    for key in template.metadata.annotations:
        yield from label_key_errors(meta.child("annotations"), key)
    yield from job_spec_errors(
        path.child("spec"),
        template.spec,
        default_restart_policy=default_restart_policy,
        default_completion_mode=default_completion_mode,
    )
