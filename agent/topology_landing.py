"""Landing pods where a topology assignment says, pod by pod (Kueue's topology ungater), and
noticing when an assigned domain's node is lost.

A pod set whose assignment names more than one domain is materialised with its pod
templates gated (`TOPOLOGY_GATE`, `gate_template`); a single domain needs no gate — the whole
domain goes into the template's nodeSelector (agent.materialize). Our own gate name, not
Kueue's `kueue.x-k8s.io/topology`: a Kueue installed on the member cluster must not take these
pods for its own (its ungater would look for a Kueue Workload that does not exist).

As the gated pods appear, `plan_landings` (pure) gives each a domain so that each domain gets
exactly its count: a pod of an Indexed Job (and so of a JobSet's Jobs) by its rank — the
Job's first rank (`RANK_OFFSET`, set at materialisation) plus its completion index — so the
n-th pod always goes to the n-th slot of the assignment and a replaced pod goes where its
predecessor was; a pod without an index to the first domain that still has room, counting
the pods already landed there that have not failed. The landing is one merge patch: the
domain's level labels (down to the lowest level; `kubernetes.io/hostname` at the host level)
added to the pod's nodeSelector, and the gate removed — what kube-apiserver allows a gated pod.

`lost_domains` (pure) says which assigned domains can no longer take their pods: a host that
is gone, or NotReady while some of its pods failed or still wait to run there (pods running
on it are given the benefit of the doubt, as Kueue's TASReplaceNodeOnPodTermination does),
or, for a lowest level above hosts, a domain with no Ready node left — counting only domains
whose pods have not all succeeded. The shell evicts such a workload
(reason `NODE_FAILURES`) and the hub queues it again: Kueue's fail-fast rule
(TASFailedNodeReplacementFailFast) without the one-node replacement it tries first.

`TopologyLander` is the shell that sends the patches. Called by agent.status_pass (lands
pods), agent.node_checks (`workload_lost_domains`); agent.materialize calls `gate_template`
and `needs_gate`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.errors import K8sClientError, K8sNotFoundError
from agent.k8s.client import JsonObject, Kube, Resource
from agent.labels import Labels
from agent.retry import K8S_TRANSIENT
from api.v1alpha1.workload import Admission, TopologyAssignment

__all__ = [
    "COMPLETION_INDEX",
    "NODE_FAILURES",
    "POD_SET_LABEL",
    "RANK_OFFSET",
    "TOPOLOGY_GATE",
    "Landing",
    "TopologyLander",
    "gate_template",
    "lost_domains",
    "needs_gate",
    "plan_landings",
    "workload_lost_domains",
]

log = logging.getLogger(__name__)

TOPOLOGY_GATE = "multiq.dev/topology"
POD_SET_LABEL = "multiq.dev/pod-set"
"""On gated pod templates: which pod set's assignment the pod is placed by."""
RANK_OFFSET = "multiq.dev/pod-rank-offset"
"""Annotation on gated pod templates of Indexed Jobs: the rank of the Job's index 0 within its
pod set (a JobSet's replica `i` of `p` pods each starts at `i * p`)."""
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
HOSTNAME = "kubernetes.io/hostname"
NODE_FAILURES = "NodeFailures"
"""Kueue's eviction reason when a node of a topology assignment fails."""

_TERMINAL = ("Succeeded", "Failed")


def needs_gate(assignment: TopologyAssignment | None) -> bool:
    """Pods land one by one only when the assignment has more than one domain."""
    return assignment is not None and len(assignment.domains()) > 1


def gate_template(spec: JsonObject, pod_set: str, rank_offset: int | None) -> JsonObject:
    """A pod template `spec`'s metadata and spec gated for landing (copy on write); returns
    the new template."""
    template = dict(spec)
    meta = template["metadata"] = dict(template.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), POD_SET_LABEL: pod_set}
    if rank_offset is not None:
        meta["annotations"] = {**(meta.get("annotations") or {}), RANK_OFFSET: str(rank_offset)}
    pod_spec = template["spec"] = dict(template.get("spec") or {})
    gates = [g for g in pod_spec.get("schedulingGates") or [] if g.get("name") != TOPOLOGY_GATE]
    pod_spec["schedulingGates"] = [*gates, {"name": TOPOLOGY_GATE}]
    return template


@dataclass(frozen=True, slots=True)
class Landing:
    """One gated pod's placement: the labels to add to its nodeSelector, the gates it keeps."""

    namespace: str
    name: str
    uid: str
    node_selector: Mapping[str, str]
    gates_left: tuple[JsonObject, ...]

    def patch(self) -> JsonObject:
        return {
            "spec": {
                "nodeSelector": dict(self.node_selector),
                "schedulingGates": list(self.gates_left) or None,
            }
        }


def _gated(pod: JsonObject) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    # A pod group's pod still held by its admission gate waits for the whole group first
    # (agent.materialize ungates them together; two patches of the gates would race).
    names = {g.get("name") for g in gates}
    return TOPOLOGY_GATE in names and Labels.ADMISSION_GATE not in names


def _active(pod: JsonObject) -> bool:
    """Not failed, not on its way out: it holds a place in its domain."""
    return (pod.get("status") or {}).get("phase") != "Failed" and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def _rank(pod: JsonObject) -> int | None:
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    index = annotations.get(COMPLETION_INDEX) or (meta.get("labels") or {}).get(COMPLETION_INDEX)
    if index is None:
        return None
    try:
        return int(annotations.get(RANK_OFFSET) or 0) + int(index)
    except ValueError:
        return None


def _in(selector: Mapping[str, str], pod: JsonObject) -> bool:
    chosen = (pod.get("spec") or {}).get("nodeSelector") or {}
    return all(chosen.get(key) == value for key, value in selector.items())


def plan_landings(
    assignment: TopologyAssignment,
    pods: Sequence[JsonObject],
    landing: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Landing]:
    """Where each still-gated pod of one pod set goes (see the module docstring). `pods`:
    all the pod set's pods of this generation, landed or not, in any order; `landing`: the
    node selectors of pods (by uid) whose landing was sent but is not seen yet — they count
    as landed there and are not planned again."""
    landing = landing or {}
    gated = [_gated(p) and _active(p) for p in pods]
    if not any(gated):
        return []
    domains = assignment.domains()
    levels = assignment.levels
    # A domain by its level values: a pod's domain is one lookup of its selector's values.
    by_values = {
        tuple(selector.get(level) for level in levels): d for d, (selector, _) in enumerate(domains)
    }
    slots = [d for d, (_, count) in enumerate(domains) for _ in range(count)]
    taken = [0] * len(domains)
    waiting: list[tuple[bool, int, str, str, JsonObject]] = []
    for pod, is_gated in zip(pods, gated, strict=True):
        meta = pod.get("metadata") or {}
        sent = landing.get(str(meta.get("uid")))
        if is_gated and sent is None:
            rank = _rank(pod)
            order = str(meta.get("creationTimestamp") or ""), str(meta.get("name"))
            waiting.append((rank is None, rank or 0, *order, pod))
            continue
        if not _active(pod):
            continue
        where = sent if sent is not None else (pod.get("spec") or {}).get("nodeSelector") or {}
        d = by_values.get(tuple(where.get(level) for level in levels))
        if d is not None:
            taken[d] += 1
    waiting.sort(key=lambda w: w[:4])
    landings = []
    for no_rank, rank, _, _, pod in waiting:
        if not no_rank and rank < len(slots):
            chosen: int | None = slots[rank]
        else:
            chosen = next((d for d, (_, n) in enumerate(domains) if taken[d] < n), None)
        if chosen is None:
            continue  # every domain is full: it waits for a place to free
        taken[chosen] += 1
        meta = pod.get("metadata") or {}
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        landings.append(
            Landing(
                namespace=str(meta.get("namespace")),
                name=str(meta.get("name")),
                uid=str(meta.get("uid")),
                node_selector=domains[chosen][0],
                gates_left=tuple(g for g in gates if g.get("name") != TOPOLOGY_GATE),
            )
        )
    return landings


def _node_ready(node: JsonObject) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _stuck(pods: Sequence[JsonObject], count: int) -> bool:
    """Whether a domain on a NotReady node has pods that will not run there: one failed or
    being deleted, or fewer of them bound there (or done) than its count — some still wait
    to land or to be scheduled onto it."""
    placed = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Failed" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return True
        if phase == "Succeeded" or (pod.get("spec") or {}).get("nodeName"):
            placed += 1
    return placed < count


def lost_domains(
    assignment: TopologyAssignment,
    nodes: Mapping[str, JsonObject],
    pods: Sequence[JsonObject],
) -> list[str]:
    """What is wrong with each assigned domain that can no longer take its pods, as a
    sentence ("node n3 is NotReady", "node n3 is gone", "no Ready node in rack=r2"); empty
    when all can. `nodes`: every node by name; `pods`: the pod set's pods.

    A domain whose pods have all succeeded needs nothing more. A host that is gone is lost; a
    NotReady host only once its pods there cannot run (`_stuck`): pods still running on a
    node that missed a heartbeat are left alone, as Kueue does
    (TASReplaceNodeOnPodTermination). Above the host level, a domain is lost when none of
    its nodes is Ready."""
    if not assignment.levels:
        return []
    lowest = assignment.levels[-1]
    out = []
    for selector, count in assignment.domains():
        there = [p for p in pods if _in(selector, p)]
        succeeded = sum(1 for p in there if (p.get("status") or {}).get("phase") == "Succeeded")
        if succeeded >= count:
            continue
        if lowest == HOSTNAME:
            name = selector[HOSTNAME]
            node = nodes.get(name)
            if node is None:
                out.append(f"node {name} is gone")
            elif not _node_ready(node) and _stuck(there, count):
                out.append(f"node {name} is NotReady")
            continue
        if not any(
            _node_ready(node)
            and all(
                ((node.get("metadata") or {}).get("labels") or {}).get(k) == v
                for k, v in selector.items()
            )
            for node in nodes.values()
        ):
            out.append(f"no Ready node in {lowest}={selector[lowest]}")
    return out


def _of_pod_set(
    pods: Sequence[JsonObject], generation: int, pod_set: str, gated_only: bool
) -> list[JsonObject]:
    out = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(Labels.GENERATION) != str(generation):
            continue
        if gated_only and labels.get(POD_SET_LABEL) != pod_set:
            continue
        out.append(pod)
    return out


def workload_lost_domains(
    admission: Admission | None,
    generation: int,
    nodes: Mapping[str, JsonObject],
    pods: Sequence[JsonObject],
) -> list[str]:
    """`lost_domains` over every pod set of an admission with a topology assignment. A pod
    set that landed in one domain has no pod-set label on its pods: all the workload's pods
    of this generation are counted for it."""
    if admission is None:
        return []
    out = []
    for psa in admission.pod_set_assignments:
        if psa.topology_assignment is None:
            continue
        gated = needs_gate(psa.topology_assignment)
        mine = _of_pod_set(pods, generation, psa.name, gated)
        out += lost_domains(psa.topology_assignment, nodes, mine)
    return out


class TopologyLander:
    """Sends the landing patches. A pod is planned once: from the patch until the inventory
    shows it ungated, its chosen selector is remembered (`_sent`)."""

    def __init__(self, kube: Kube, *, attempts: int = 5, pause: float = 0.5) -> None:
        self.kube = kube
        self.attempts = attempts
        self.pause = pause
        self._sent: dict[str, Mapping[str, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.landed = 0
        """Pods landed since start."""

    def land(self, assignment: TopologyAssignment, pods: Sequence[JsonObject]) -> int:
        """Plan the gated pods among `pods` (one pod set's) and start their patches; returns
        how many were started."""
        for pod in pods:
            uid = str((pod.get("metadata") or {}).get("uid"))
            if uid in self._sent and not _gated(pod):
                del self._sent[uid]  # seen landed: the inventory knows it now
        landings = plan_landings(assignment, pods, self._sent)
        for landing in landings:
            self._sent[landing.uid] = landing.node_selector
            task = asyncio.create_task(self._land(landing), name=f"land {landing.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(landings)

    def land_workload(
        self, admission: Admission | None, generation: int, pods: Sequence[JsonObject]
    ) -> int:
        """`land` for every gated pod set of an admission; `pods`: the workload's pods."""
        started = 0
        for psa in admission.pod_set_assignments if admission is not None else ():
            if psa.topology_assignment is not None and needs_gate(psa.topology_assignment):
                mine = _of_pod_set(pods, generation, psa.name, True)
                started += self.land(psa.topology_assignment, mine)
        return started

    def forget(self, pods: Sequence[JsonObject]) -> None:
        """These pods are gone (their workload stopped): nothing to remember of them."""
        for pod in pods:
            self._sent.pop(str((pod.get("metadata") or {}).get("uid")), None)

    async def _land(self, landing: Landing) -> None:
        try:
            for attempt in range(self.attempts):
                try:
                    await self.kube.patch(
                        Resource.PODS, landing.namespace, landing.name, landing.patch()
                    )
                    self.landed += 1
                    return
                except K8sNotFoundError:
                    self._sent.pop(landing.uid, None)
                    return  # deleted meanwhile: its replacement is landed in its turn
                except K8S_TRANSIENT as exc:
                    log.warning("landing pod %s/%s: %s", landing.namespace, landing.name, exc)
                    await asyncio.sleep(self.pause * (2**attempt))
            log.error(
                "pod %s/%s could not be landed in %s after %d tries",
                landing.namespace,
                landing.name,
                dict(landing.node_selector),
                self.attempts,
            )
        except K8sClientError as exc:
            # Refused (422: its selector was changed by someone else): it stays gated, and
            # says so in the log; a node check or the user's delete moves it on.
            log.error("pod %s/%s cannot be landed: %s", landing.namespace, landing.name, exc)
        self._sent.pop(landing.uid, None)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
