"""What a held workload's Jobs and pods say about it: phase, pod counts and container exits.

`observe` is pure over the mirrored objects: Failed when any of the workload's Jobs has a
Failed condition (`fenced` when the agent's own fencing deadline failed it, see
agent.deadlines), Succeeded when every Job it made is Complete, Running once a pod runs,
otherwise Admitted. A workload made of bare Pods (a plain Pod, a pod group: its `job_names`
name pods, agent.materialize) follows Kueue's pod group: Succeeded when every pod succeeded;
finished once none is pending or running, Failed when one of them failed — a failed pod is not
replaced (Kueue waits for the user to make a replacement, unless a pod is annotated
`kueue.x-k8s.io/retriable-in-group: "false"`; nobody can add a pod to a member cluster behind
MultiQ, so every group is finished as that annotation asks). The pod counts name the nodes
the pods were scheduled to (Slurm's NodeList). `report_changed` decides whether a new report
is worth sending (phase, pod counts or exits changed). The cadence (applied by
agent.admission): a phase change is reported at once; a change of pod counts alone at most
once per `status_interval` (1 s).

Called by: agent.status_pass (after every inventory change); agent.records decides with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.deadlines import stopped_by_fencing
from agent.labels import Labels
from api.v1alpha1.messages import ContainerExit, PodCounts, WorkloadPhase, WorkloadStatusReport

__all__ = ["MAX_EXITS", "MAX_NODES", "Observation", "observe", "report_changed"]

JsonObject = dict[str, Any]

MAX_EXITS = 50
MAX_NODES = 64
"""A report names at most this many of the nodes the pods ran on."""


@dataclass(frozen=True, slots=True)
class Observation:
    phase: WorkloadPhase
    pods: PodCounts
    exits: tuple[ContainerExit, ...]
    message: str = ""
    fenced: bool = False
    """Failed by the deadline the agent set for fencing (not by the user's own)."""


def _condition(job: JsonObject, kind: str) -> JsonObject | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def _ours(obj: JsonObject, uid: str, generation: int) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(Labels.UID) == uid and labels.get(Labels.GENERATION) == str(generation))


def _pod_ready(pod: JsonObject) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _exits(pods: Sequence[JsonObject]) -> tuple[ContainerExit, ...]:
    out: list[ContainerExit] = []
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name"))):
        name = str((pod.get("metadata") or {}).get("name"))
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            out.append(
                ContainerExit(
                    pod=name,
                    container=str(cs.get("name")),
                    exit_code=int(terminated.get("exitCode", 0)),
                    reason=str(terminated.get("reason") or ""),
                    message=str(terminated.get("message") or "")[:256],
                )
            )
    return tuple(out[:MAX_EXITS])


def observe(
    *,
    uid: str,
    generation: int,
    job_names: Sequence[str],
    jobs: Sequence[JsonObject],
    pods: Sequence[JsonObject],
) -> Observation:
    """The workload's state from its Jobs and pods (those labelled with uid and generation)."""
    jobs = [j for j in jobs if _ours(j, uid, generation)]
    pods = [p for p in pods if _ours(p, uid, generation)]
    counts = _counts(pods)
    exits = _exits(pods)
    if not jobs and job_names:
        made = {str((p.get("metadata") or {}).get("name")): p for p in pods}
        if any(name in made for name in job_names):
            return _group(counts, exits, [made[n] for n in job_names if n in made], job_names)
    return _jobs_phase(jobs, job_names, counts, exits)


def _counts(pods: Sequence[JsonObject]) -> PodCounts:
    counts = PodCounts()
    nodes: set[str] = set()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            nodes.add(str(node))
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            counts.running += 1
            counts.ready += _pod_ready(pod)
        elif phase == "Succeeded":
            counts.succeeded += 1
        elif phase == "Failed":
            counts.failed += 1
        else:
            counts.pending += 1
    counts.nodes = sorted(nodes)[:MAX_NODES]
    return counts


def _group(
    counts: PodCounts,
    exits: tuple[ContainerExit, ...],
    pods: Sequence[JsonObject],
    pod_names: Sequence[str],
) -> Observation:
    """The phase of a workload made of bare pods (see the module docstring)."""
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    if len(pods) == len(pod_names) and all(phase == "Succeeded" for phase in phases):
        return Observation(WorkloadPhase.SUCCEEDED, counts, exits)
    failed = [p for p, phase in zip(pods, phases, strict=True) if phase == "Failed"]
    ended = all(phase in ("Succeeded", "Failed") for phase in phases)
    if ended and not failed:
        gone = sorted(set(pod_names) - {str((p.get("metadata") or {}).get("name")) for p in pods})
        return Observation(
            WorkloadPhase.FAILED,
            counts,
            exits,
            f"pods deleted outside MultiQ before they ran: {', '.join(gone)}",
        )
    if failed and ended:
        first = failed[0]
        name = (first.get("metadata") or {}).get("name")
        status = first.get("status") or {}
        why = f"{status.get('reason', '')} {status.get('message', '')}".strip() or "Failed"
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return Observation(WorkloadPhase.FAILED, counts, exits, f"pod {name}: {why}{more}")
    if counts.running or counts.succeeded or counts.failed:
        return Observation(WorkloadPhase.RUNNING, counts, exits)
    return Observation(WorkloadPhase.ADMITTED, counts, exits)


def _jobs_phase(
    jobs: Sequence[JsonObject],
    job_names: Sequence[str],
    counts: PodCounts,
    exits: tuple[ContainerExit, ...],
) -> Observation:
    for job in jobs:
        failed = _condition(job, "Failed")
        if failed is not None:
            meta = job.get("metadata") or {}
            message = (
                f"job {meta.get('name')}: {failed.get('reason', '')} {failed.get('message', '')}"
            )
            fenced = failed.get("reason") == "DeadlineExceeded" and stopped_by_fencing(job)
            return Observation(WorkloadPhase.FAILED, counts, exits, message.strip(), fenced)
    complete = {
        str((j.get("metadata") or {}).get("name")) for j in jobs if _condition(j, "Complete")
    }
    if job_names and complete >= set(job_names):
        return Observation(WorkloadPhase.SUCCEEDED, counts, exits)
    if counts.running or counts.succeeded or counts.failed:
        return Observation(WorkloadPhase.RUNNING, counts, exits)
    return Observation(WorkloadPhase.ADMITTED, counts, exits)


def report_changed(last: WorkloadStatusReport | None, obs: Observation) -> bool:
    if last is None:
        return True
    return (last.phase, last.pods, tuple(last.exits)) != (obs.phase, obs.pods, obs.exits)
