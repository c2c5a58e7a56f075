"""The batch/v1 Job controller.

Implements the behaviour agents and users rely on: suspend / resume (Suspended condition,
startTime reset), parallelism (lowering it removes the newest pods) and completions,
podReplacementPolicy (TerminatingOrFailed / Failed), NonIndexed and Indexed completion modes
(JOB_COMPLETION_INDEX, completion-index label and annotation, completedIndexes),
backoffLimit, activeDeadlineSeconds, a basic podFailurePolicy (FailJob / Ignore / Count on
exit codes and pod conditions), ttlSecondsAfterFinished, and terminal conditions reached
through the interim SuccessCriteriaMet / FailureTarget conditions. Pods carry the standard
labels, a controller ownerReference and the `batch.kubernetes.io/job-tracking` finalizer,
which is removed only after the pod is counted in the Job status. Jobs whose
`spec.managedBy` names another controller are left alone.

Keyed by (namespace, name); fed by Job and Pod store events; started by `kubesim.cluster`.
Replacements for failed pods wait `job_backoff_seconds * 2^(failed-1)` (capped at 6 min; the
real controller uses 10 s; kubesim defaults to 0 so tests stay fast). Also honoured:
successPolicy (Indexed: succeededIndexes and/or succeededCount), backoffLimitPerIndex with
maxFailedIndexes (failedIndexes, the index failure-count annotation) and the podFailurePolicy
FailIndex action.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.apiserver.registry import DeleteOptions
from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.errors import KubeSimError
from kubesim.objects import JsonObject, clone, now, parse_time, rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["JOB_CONTROLLER", "JobController", "format_indexes", "parse_indexes"]

JOB_CONTROLLER = "kubernetes.io/job-controller"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
_FAIL_INDEX = 2**31  # a failure count beyond any backoffLimitPerIndex
_TERMINAL = ("Succeeded", "Failed")
_BACKGROUND = DeleteOptions(propagation_policy="Background")
_ORPHANS = ("", "")  # work-queue key: pods holding the tracking finalizer with no Job left


def parse_indexes(text: str | None) -> set[int]:
    """ "1,3-5" -> {1, 3, 4, 5} (status.completedIndexes)."""
    result: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        result.update(range(int(low), int(high or low) + 1))
    return result


def format_indexes(indexes: set[int]) -> str:
    parts: list[str] = []
    ordered = sorted(indexes)
    start = previous = None
    for index in ordered:
        if start is None:
            start = previous = index
        elif previous is not None and index == previous + 1:
            previous = index
        else:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = previous = index
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


def _is_true(status: dict[str, Any], kind: str) -> bool:
    condition = _condition(status, kind)
    return condition is not None and condition.get("status") == "True"


def _set_condition(
    status: dict[str, Any], kind: str, value: str, reason: str, message: str
) -> None:
    stamp = rfc3339()
    conditions = status.setdefault("conditions", [])
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != value:
                condition["lastTransitionTime"] = stamp
            condition.update(
                {"status": value, "reason": reason, "message": message, "lastProbeTime": stamp}
            )
            return
    conditions.append(
        {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": message,
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
        }
    )


def _pod_index(pod: JsonObject) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


def _is_ready(pod: JsonObject) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or []
    )


@dataclass
class _Accounting:
    """What one reconcile learned from the terminal pods it saw for the first time."""

    succeeded: int = 0
    failed: int = 0
    succeeded_indexes: set[int] = field(default_factory=set)
    failure: tuple[str, str] | None = None
    counted: list[JsonObject] = field(default_factory=list)
    # backoffLimitPerIndex: index -> failures so far, from the failed pods' annotations.
    index_failures: dict[int, int] = field(default_factory=dict)


class JobController(QueueController[tuple[str, str]]):
    name = "job-controller"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.jobs = cluster.types.core("jobs")
        self.pods = cluster.types.core("pods")
        self._pods_by_job: dict[str, set[tuple[str, str]]] = {}
        self._deleted_by_me: set[str] = set()
        self._orphans: set[tuple[str, str]] = set()
        self._last_failure: dict[str, float] = {}
        self._index_failures: dict[tuple[str, int], int] = {}
        self.backoff_base = cluster.config.job_backoff_seconds
        self.store.subscribe(self.jobs, self._on_job)
        self.store.subscribe(self.pods, self._on_pod)

    # -- events -------------------------------------------------------------------------------

    def _on_job(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if event.type is EventType.DELETED:
            # Its pods may still hold the tracking finalizer: release them as they finish.
            self._orphans.update(self._pods_by_job.pop(meta["uid"], ()))
            self._last_failure.pop(meta["uid"], None)
            self.enqueue(_ORPHANS)
            return
        self.enqueue((meta["namespace"], meta["name"]))

    def _on_pod(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        owner = next(
            (
                ref
                for ref in meta.get("ownerReferences") or ()
                if ref.get("controller") and ref.get("kind") == "Job"
            ),
            None,
        )
        if owner is None or self.store.get(self.jobs, meta["namespace"], owner["name"]) is None:
            if event.type is not EventType.DELETED and TRACKING_FINALIZER in (
                meta.get("finalizers") or ()
            ):
                self._orphans.add(key)
                self.enqueue(_ORPHANS)
            if owner is None:
                return
        pods = self._pods_by_job.setdefault(owner["uid"], set())
        if event.type is EventType.DELETED:
            pods.discard(key)
            self._deleted_by_me.discard(meta["uid"])
        else:
            pods.add(key)
        self.enqueue((meta["namespace"], owner["name"]))

    # -- reconcile ----------------------------------------------------------------------------

    def _release_orphans(self) -> None:
        """Drop the tracking finalizer from finished or deleting pods whose Job is gone."""
        orphans, self._orphans = self._orphans, set()
        for pod_key in orphans:
            pod = self.store.get(self.pods, *pod_key)
            if pod is None or TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or ()):
                continue
            finished = pod.get("status", {}).get("phase") in _TERMINAL
            if finished or pod["metadata"].get("deletionTimestamp"):
                self._release(pod)

    def reconcile(self, key: tuple[str, str]) -> None:
        if key == _ORPHANS:
            self._release_orphans()
            return
        namespace, name = key
        job = self.store.get(self.jobs, namespace, name)
        if job is None:
            return
        spec = job.get("spec", {})
        if spec.get("managedBy", JOB_CONTROLLER) != JOB_CONTROLLER:
            return
        uid = job["metadata"]["uid"]
        pods = [
            pod
            for pod_key in list(self._pods_by_job.get(uid, ()))
            if (pod := self.store.get(self.pods, *pod_key)) is not None
        ]
        status: dict[str, Any] = clone(job.get("status") or {})
        finished = _is_true(status, "Complete") or _is_true(status, "Failed")
        accounting = self._account(job, pods)
        if accounting.failed:
            self._last_failure[uid] = asyncio.get_running_loop().time()
        status["succeeded"] = status.get("succeeded", 0) + accounting.succeeded
        status["failed"] = status.get("failed", 0) + accounting.failed
        indexed = spec.get("completionMode") == "Indexed"
        completed_indexes = parse_indexes(status.get("completedIndexes"))
        if indexed:
            completed_indexes |= accounting.succeeded_indexes
            status["completedIndexes"] = format_indexes(completed_indexes)
            status["succeeded"] = len(completed_indexes)
        failed_indexes = self._track_index_failures(job, status, accounting)
        active = [
            p
            for p in pods
            if p.get("status", {}).get("phase") not in _TERMINAL
            and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = [
            p
            for p in pods
            if p.get("status", {}).get("phase") not in _TERMINAL
            and p["metadata"].get("deletionTimestamp")
        ]
        current = now()
        # A Job being deleted only has its pods accounted for: the garbage collector, not
        # this controller, takes it from here (creating pods would race the GC forever).
        live = not finished and not job["metadata"].get("deletionTimestamp")
        if live and not spec.get("suspend"):
            self._judge(job, status, accounting, completed_indexes, failed_indexes, active, current)
        if live:
            active = self._drive(
                job, status, active, terminating, completed_indexes | failed_indexes, current
            )
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if _is_ready(p))
        status["terminating"] = len(terminating)
        status.setdefault("uncountedTerminatedPods", {})
        self._write_status(job, status)
        for pod in accounting.counted:
            self._release(pod)
        if finished or _is_true(status, "Complete") or _is_true(status, "Failed"):
            self._schedule_ttl(job, status, current)

    def _account(self, job: JsonObject, pods: list[JsonObject]) -> _Accounting:
        """Count terminal pods still holding the tracking finalizer (each exactly once)."""
        accounting = _Accounting()
        rules = (job["spec"].get("podFailurePolicy") or {}).get("rules") or []
        for pod in pods:
            meta = pod["metadata"]
            if TRACKING_FINALIZER not in (meta.get("finalizers") or ()):
                continue
            phase = pod.get("status", {}).get("phase")
            if meta["uid"] in self._deleted_by_me:
                # Removed by this controller (suspend, success, failure): never counted.
                accounting.counted.append(pod)
            elif phase == "Succeeded":
                accounting.succeeded += 1
                index = _pod_index(pod)
                if index is not None:
                    accounting.succeeded_indexes.add(index)
                accounting.counted.append(pod)
            elif phase == "Failed":
                action, message = _failure_policy_action(rules, pod)
                if action == "FailJob" and accounting.failure is None:
                    accounting.failure = ("PodFailurePolicy", message)
                if action != "Ignore":
                    accounting.failed += 1
                    index = _pod_index(pod)
                    if index is not None:
                        before = int((meta.get("annotations") or {}).get(FAILURE_COUNT_KEY, 0))
                        # FailIndex fails the index outright, whatever its retries left.
                        count = _FAIL_INDEX if action == "FailIndex" else before + 1
                        accounting.index_failures[index] = max(
                            accounting.index_failures.get(index, 0), count
                        )
                accounting.counted.append(pod)
            elif meta.get("deletionTimestamp") and not pod.get("spec", {}).get("nodeName"):
                # Deleted before it was scheduled: nothing ran, nothing to count.
                accounting.counted.append(pod)
        return accounting

    def _judge(
        self,
        job: JsonObject,
        status: dict[str, Any],
        accounting: _Accounting,
        completed_indexes: set[int],
        failed_indexes: set[int],
        active: list[JsonObject],
        current: dt.datetime,
    ) -> None:
        """Reach the interim condition (FailureTarget or SuccessCriteriaMet) when due."""
        if _is_true(status, "FailureTarget") or _is_true(status, "SuccessCriteriaMet"):
            return
        spec = job["spec"]
        failure = accounting.failure
        per_index = spec.get("backoffLimitPerIndex") is not None
        if failure is None and not per_index and status["failed"] > spec.get("backoffLimit", 6):
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        most = spec.get("maxFailedIndexes")
        if failure is None and per_index and most is not None and len(failed_indexes) > most:
            failure = (
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes",
            )
        completions = spec.get("completions") or 0
        settled = all(i in completed_indexes or i in failed_indexes for i in range(completions))
        if failure is None and per_index and failed_indexes and settled:
            failure = ("FailedIndexes", "Job has failed indexes")
        deadline = spec.get("activeDeadlineSeconds")
        if failure is None and deadline is not None and status.get("startTime"):
            elapsed = (current - parse_time(status["startTime"])).total_seconds()
            if elapsed >= deadline:
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            else:
                meta = job["metadata"]
                self.enqueue_after((meta["namespace"], meta["name"]), deadline - elapsed + 0.01)
        if failure is not None:
            _set_condition(status, "FailureTarget", "True", *failure)
            return
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            done = completions is not None and all(
                i in completed_indexes for i in range(completions)
            )
        elif completions is not None:
            done = status["succeeded"] >= completions
        else:
            done = status["succeeded"] > 0 and not active
        if done:
            _set_condition(
                status,
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            return
        matched = _success_policy_rule(spec, completed_indexes)
        if matched is not None:
            _set_condition(
                status,
                "SuccessCriteriaMet",
                "True",
                "SuccessPolicy",
                f"Matched rules at index {matched}",
            )

    def _drive(
        self,
        job: JsonObject,
        status: dict[str, Any],
        active: list[JsonObject],
        terminating: list[JsonObject],
        completed_indexes: set[int],
        current: dt.datetime,
    ) -> list[JsonObject]:
        """Delete, create or finish; returns the pods still active afterwards."""
        spec = job["spec"]
        for interim, final in (("FailureTarget", "Failed"), ("SuccessCriteriaMet", "Complete")):
            condition = _condition(status, interim)
            if condition is None or condition.get("status") != "True":
                continue
            self._delete_pods(active)
            if not terminating:
                _set_condition(status, final, "True", condition["reason"], condition["message"])
                if final == "Complete":
                    status["completionTime"] = rfc3339(current)
                    self._event(job, "Normal", "Completed", "Job completed")
                else:
                    self._event(job, "Warning", condition["reason"], condition["message"])
            return []
        if spec.get("suspend"):
            self._delete_pods(active)
            if not _is_true(status, "Suspended"):
                _set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended")
                self._event(job, "Normal", "Suspended", "Job suspended")
            status.pop("startTime", None)
            return []
        if _is_true(status, "Suspended"):
            _set_condition(status, "Suspended", "False", "JobResumed", "Job resumed")
            self._event(job, "Normal", "Resumed", "Job resumed")
        if not status.get("startTime"):
            status["startTime"] = rfc3339(current)
            deadline = spec.get("activeDeadlineSeconds")
            if deadline is not None:
                meta = job["metadata"]
                self.enqueue_after((meta["namespace"], meta["name"]), float(deadline) + 0.01)
        wait = self._backoff_remaining(job, status)
        if wait > 0:
            meta = job["metadata"]
            self.enqueue_after((meta["namespace"], meta["name"]), wait)
            return active
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        if len(active) > parallelism:
            # Parallelism was lowered: remove the newest pods beyond it.
            newest_first = sorted(
                active, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True
            )
            excess = newest_first[: len(active) - parallelism]
            self._delete_pods(excess)
            active = [p for p in active if p not in excess]
        created: list[JsonObject] = []
        # podReplacementPolicy Failed: a terminating pod still holds its slot (and index).
        occupying = active + terminating if spec.get("podReplacementPolicy") == "Failed" else active
        if spec.get("completionMode") == "Indexed" and completions is not None:
            busy = {_pod_index(p) for p in occupying}
            missing = [
                i for i in range(completions) if i not in completed_indexes and i not in busy
            ]
            for index in missing[: max(0, parallelism - len(occupying))]:
                failures = self._index_failures.get((job["metadata"]["uid"], index), 0)
                created.append(self._create_pod(job, index, failures=failures))
        else:
            if completions is None:
                wanted = 0 if status["succeeded"] > 0 else parallelism
            else:
                wanted = min(parallelism, completions - status["succeeded"])
            for _ in range(max(0, wanted - len(occupying))):
                created.append(self._create_pod(job, None))
        return active + [p for p in created if p]

    def _track_index_failures(
        self, job: JsonObject, status: dict[str, Any], accounting: _Accounting
    ) -> set[int]:
        """backoffLimitPerIndex: remember failures per index; an index over the limit fails."""
        failed = parse_indexes(status.get("failedIndexes"))
        limit = job["spec"].get("backoffLimitPerIndex")
        if limit is None:
            return failed
        uid = job["metadata"]["uid"]
        for index, count in accounting.index_failures.items():
            self._index_failures[(uid, index)] = max(
                self._index_failures.get((uid, index), 0), count
            )
            if count > limit:
                failed.add(index)
        status["failedIndexes"] = format_indexes(failed)
        return failed

    def _backoff_remaining(self, job: JsonObject, status: dict[str, Any]) -> float:
        """Seconds before replacements may be created: base * 2^(failed-1), capped at 6 min."""
        failed = int(status.get("failed", 0))
        last = self._last_failure.get(job["metadata"]["uid"])
        if not self.backoff_base or not failed or last is None:
            return 0.0
        delay = min(360.0, self.backoff_base * 2.0 ** (failed - 1))
        return last + delay - asyncio.get_running_loop().time()

    # -- effects ------------------------------------------------------------------------------

    def _create_pod(self, job: JsonObject, index: int | None, *, failures: int = 0) -> JsonObject:
        meta = job["metadata"]
        template = clone(job["spec"].get("template") or {})
        template_meta = template.get("metadata") or {}
        labels = dict(template_meta.get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": meta["uid"],
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": meta["uid"],
                "job-name": meta["name"],
            }
        )
        annotations = dict(template_meta.get("annotations") or {})
        pod_spec = template.get("spec") or {}
        generate_name = f"{meta['name']}-"
        if index is not None:
            labels[INDEX_KEY] = str(index)
            annotations[INDEX_KEY] = str(index)
            if job["spec"].get("backoffLimitPerIndex") is not None:
                annotations[FAILURE_COUNT_KEY] = str(failures)
            generate_name = f"{meta['name']}-{index}-"
            env_var = {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.annotations['{INDEX_KEY}']",
                    }
                },
            }
            for container in (pod_spec.get("initContainers") or []) + (
                pod_spec.get("containers") or []
            ):
                container.setdefault("env", []).append(dict(env_var))
            if pod_spec.get("subdomain"):
                pod_spec.setdefault("hostname", f"{meta['name']}-{index}")
        pod: JsonObject = {
            "metadata": {
                "generateName": generate_name,
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": pod_spec,
        }
        if not annotations:
            del pod["metadata"]["annotations"]
        try:
            created = self.registry.create(
                self.pods, pod, namespace=meta["namespace"], validate=False
            )
        except KubeSimError as error:
            self._event(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
            return {}
        self._event(
            job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return created

    def _delete_pods(self, pods: list[JsonObject]) -> None:
        for pod in pods:
            meta = pod["metadata"]
            self._deleted_by_me.add(meta["uid"])
            with contextlib.suppress(KubeSimError):
                self.registry.delete(self.pods, meta["namespace"], meta["name"], _BACKGROUND)

    def _release(self, pod: JsonObject) -> None:
        meta = pod["metadata"]

        def drop_finalizer(new: JsonObject) -> None:
            remaining = [
                f for f in new["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER
            ]
            if remaining:
                new["metadata"]["finalizers"] = remaining
            else:
                new["metadata"].pop("finalizers", None)

        self.registry.mutate(self.pods, meta["namespace"], meta["name"], drop_finalizer, touches=())

    def _write_status(self, job: JsonObject, status: dict[str, Any]) -> None:
        if status == job.get("status"):
            return
        meta = job["metadata"]

        def set_status(new: JsonObject) -> None:
            new["status"] = status

        self.registry.mutate(self.jobs, meta["namespace"], meta["name"], set_status, touches=())

    def _schedule_ttl(self, job: JsonObject, status: dict[str, Any], current: dt.datetime) -> None:
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        finished_at = status.get("completionTime") or next(
            (
                c.get("lastTransitionTime")
                for c in status.get("conditions") or []
                if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            ),
            None,
        )
        if finished_at is None:
            return
        meta = job["metadata"]
        remaining = ttl - (current - parse_time(finished_at)).total_seconds()
        if remaining > 0:
            self.enqueue_after((meta["namespace"], meta["name"]), remaining + 0.01)
            return
        with contextlib.suppress(KubeSimError):
            self.registry.delete(self.jobs, meta["namespace"], meta["name"], _BACKGROUND)

    def _event(self, job: JsonObject, type_: str, reason: str, message: str) -> None:
        self.registry.record_event(
            job, type_=type_, reason=reason, message=message, component="job-controller"
        )


def _success_policy_rule(spec: dict[str, Any], completed: set[int]) -> int | None:
    """The index of the first successPolicy rule the completed indexes satisfy (Indexed only)."""
    if spec.get("completionMode") != "Indexed":
        return None
    for number, rule in enumerate((spec.get("successPolicy") or {}).get("rules") or []):
        wanted = (
            parse_indexes(rule["succeededIndexes"])
            if rule.get("succeededIndexes")
            else set(range(spec.get("completions") or 0))
        )
        count = rule.get("succeededCount")
        succeeded = len(wanted & completed)
        if (count is not None and succeeded >= count) or (count is None and wanted <= completed):
            return number
    return None


def _failure_policy_action(rules: list[dict[str, Any]], pod: JsonObject) -> tuple[str, str]:
    """The first matching podFailurePolicy rule's action ("Count" when none matches)."""
    meta = pod["metadata"]
    statuses = pod.get("status", {}).get("containerStatuses") or []
    for number, rule in enumerate(rules):
        on_codes = rule.get("onExitCodes")
        if on_codes:
            values = set(on_codes.get("values") or [])
            operator = on_codes.get("operator", "In")
            for container in statuses:
                if (
                    on_codes.get("containerName")
                    and container.get("name") != on_codes["containerName"]
                ):
                    continue
                terminated = (container.get("state") or {}).get("terminated")
                if not terminated:
                    continue
                code = terminated.get("exitCode", 0)
                if code == 0:
                    continue
                if (code in values) == (operator == "In"):
                    return rule.get("action", "Count"), (
                        f"Container {container.get('name')} for pod {meta['namespace']}/"
                        f"{meta['name']} failed with exit code {code} matching "
                        f"{rule.get('action')} rule at index {number}"
                    )
        for pattern in rule.get("onPodConditions") or []:
            for condition in pod.get("status", {}).get("conditions") or []:
                if condition.get("type") == pattern.get("type") and condition.get(
                    "status"
                ) == pattern.get("status", "True"):
                    return rule.get("action", "Count"), (
                        f"Pod {meta['namespace']}/{meta['name']} has condition "
                        f"{pattern.get('type')} matching {rule.get('action')} rule at index "
                        f"{number}"
                    )
    return "Count", ""
