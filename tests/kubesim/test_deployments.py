"""apps/v1 Deployments and ReplicaSets: rollouts, scaling, cascading deletion, kubectl's view.

The rollout arithmetic is checked as a table; the controllers through the real kubectl
(`rollout status`, `get deploy,rs,pods`, `describe`, `scale`, `rollout restart`, `logs
deploy/NAME`) and through every pod change the store sees during a rollout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.cluster import Cluster
from kubesim.controllers.workloads import HASH_LABEL, REVISION_ANNOTATION, rolling_step
from tests.kubesim.conftest import Kubectl, eventually

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  strategy: {strategy}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: main
        image: nginx:{tag}
"""

ROLLING_ONE_BY_ONE = "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"


def _deployment(replicas: int = 3, strategy: str = ROLLING_ONE_BY_ONE, tag: str = "1.27") -> str:
    return DEPLOYMENT.format(replicas=replicas, strategy=strategy, tag=tag)


@pytest.mark.parametrize(
    ("why", "args", "expected"),
    [
        ("a new Deployment starts its ReplicaSet at full size", (3, 1, 0, (0, 0), []), (3, ())),
        ("surge 1: one new pod while the old stay", (3, 1, 0, (0, 0), [(3, 3)]), (1, (3,))),
        ("unavailable 0: nothing old goes until a new pod is available",
         (3, 1, 0, (1, 0), [(3, 3)]), (1, (3,))),
        ("one new available: one old goes", (3, 1, 0, (1, 1), [(3, 3)]), (1, (2,))),
        ("unavailable 1, surge 0: one old goes first", (3, 0, 1, (0, 0), [(3, 3)]), (0, (2,))),
        ("... then the new one takes its place", (3, 0, 1, (0, 0), [(2, 2)]), (1, (2,))),
        ("nothing old goes while the budget is spent", (2, 1, 0, (1, 0), [(2, 0)]), (1, (2,))),
        ("unavailable old pods go first", (2, 1, 0, (1, 1), [(2, 0)]), (1, (1,))),
        ("the oldest ReplicaSet shrinks first", (3, 1, 0, (2, 2), [(1, 1), (1, 1)]), (2, (0, 1))),
        ("a finished rollout keeps its size", (3, 1, 0, (3, 3), [(0, 0)]), (3, (0,))),
        ("scaling down the finished ReplicaSet", (1, 1, 0, (3, 3), []), (1, ())),
    ],
)  # fmt: skip
def test_a_rolling_update_step_keeps_within_surge_and_unavailability(
    why: str, args: tuple[object, ...], expected: tuple[int, tuple[int, ...]]
) -> None:
    replicas, surge, unavailable, new, old = args
    step = rolling_step(replicas, surge, unavailable, new, old)  # type: ignore[arg-type]
    assert (step.new_replicas, step.old_replicas) == expected, why


@dataclass
class PodCensus:
    """Active and ready pods per pod-template-hash, at their worst during a rollout."""

    active: dict[str, set[str]] = field(default_factory=dict)
    ready: dict[str, set[str]] = field(default_factory=dict)
    most_active: int = 0
    fewest_ready_after_start: int | None = None
    overlap: bool = False  # pods of two templates active at once

    def observe(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        template = (meta.get("labels") or {}).get(HASH_LABEL, "")
        name = meta["name"]
        active = (
            event.type is not EventType.DELETED
            and not meta.get("deletionTimestamp")
            and event.obj.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        )
        ready = active and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in event.obj.get("status", {}).get("conditions") or ()
        )
        for book, present in ((self.active, active), (self.ready, ready)):
            if present:
                book.setdefault(template, set()).add(name)
            else:
                book.get(template, set()).discard(name)
        self.most_active = max(self.most_active, self.count(self.active))
        if self.fewest_ready_after_start is not None:
            self.fewest_ready_after_start = min(
                self.fewest_ready_after_start, self.count(self.ready)
            )
        self.overlap = self.overlap or sum(1 for pods in self.active.values() if pods) > 1

    @staticmethod
    def count(book: dict[str, set[str]]) -> int:
        return sum(len(pods) for pods in book.values())


@contextmanager
def census(cluster: Cluster) -> Iterator[PodCensus]:
    seen = PodCensus()
    for pod in cluster.store.list(cluster.types.core("pods"), "default"):
        seen.observe(StoreEvent(EventType.ADDED, cluster.types.core("pods"), pod, None, 0))
    seen.fewest_ready_after_start = seen.count(seen.ready)
    cluster.store.subscribe(cluster.types.core("pods"), seen.observe)
    yield seen


async def _rolled_out(kubectl: Kubectl) -> None:
    result = await kubectl("rollout", "status", "deploy/web", "--timeout=30s")
    assert result.stdout.strip().endswith('deployment "web" successfully rolled out')


async def test_kubectl_rollout_status_get_and_describe_show_a_finished_rollout(
    kubectl: Kubectl,
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment())
    await _rolled_out(kubectl)
    listed = (await kubectl("get", "deploy,rs,pods")).stdout.splitlines()
    assert listed[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert listed[1].split()[:4] == ["deployment.apps/web", "3/3", "3", "3"]
    assert listed[3].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    replica_set = listed[4].split()
    assert replica_set[0].startswith("replicaset.apps/web-") and replica_set[1:4] == ["3"] * 3
    pods = [line.split() for line in listed[7:] if line.strip()]
    assert len(pods) == 3, listed
    assert all(p[1:3] == ["1/1", "Running"] for p in pods), listed
    assert all(p[0].startswith(f"pod/{replica_set[0].split('/')[1]}-") for p in pods)
    described = (await kubectl("describe", "deploy", "web")).stdout
    assert (
        "Replicas:               3 desired | 3 updated | 3 total | 3 available | 0 unavailable"
        in (described)
    )
    assert "Available      True    MinimumReplicasAvailable" in described
    assert "Progressing    True    NewReplicaSetAvailable" in described
    assert f"NewReplicaSet:   {replica_set[0].split('/')[1]} (3/3 replicas created)" in described
    assert "deployment.kubernetes.io/revision: 1" in described


async def test_a_rolling_update_never_surges_past_one_nor_drops_a_ready_pod(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment())
    await _rolled_out(kubectl)
    with census(cluster) as seen:
        await kubectl("apply", "-f", "-", stdin=_deployment(tag="1.28"))
        await _rolled_out(kubectl)
    assert seen.most_active <= 4
    assert seen.fewest_ready_after_start == 3
    replica_sets = (await kubectl("get", "rs", "-o", "json")).json()["items"]
    sizes = sorted(
        (rs["metadata"]["annotations"][REVISION_ANNOTATION], rs["spec"]["replicas"])
        for rs in replica_sets
    )
    assert sizes == [("1", 0), ("2", 3)]
    owner = replica_sets[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Deployment", "web", True)


async def test_recreate_stops_every_old_pod_before_a_new_one_starts(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment(2, "{type: Recreate}"))
    await _rolled_out(kubectl)
    with census(cluster) as seen:
        await kubectl("apply", "-f", "-", stdin=_deployment(2, "{type: Recreate}", tag="1.28"))
        await _rolled_out(kubectl)
    assert not seen.overlap
    assert seen.fewest_ready_after_start == 0


async def test_rollout_restart_makes_a_new_revision_and_scale_resizes_it(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment())
    await _rolled_out(kubectl)
    await kubectl("rollout", "restart", "deploy/web")
    await _rolled_out(kubectl)
    history = (await kubectl("rollout", "history", "deploy/web")).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    await kubectl("scale", "deploy/web", "--replicas=1")

    def one_pod() -> bool:
        pods = cluster.store.list(cluster.types.core("pods"), "default")
        return len([p for p in pods if not p["metadata"].get("deletionTimestamp")]) == 1

    await eventually(one_pod)
    await _rolled_out(kubectl)
    shown = (await kubectl("get", "deploy", "web", "--no-headers")).stdout.split()
    assert shown[1:4] == ["1/1", "1", "1"]


async def test_deleting_a_deployment_cascades_to_its_replica_sets_and_pods(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment())
    await _rolled_out(kubectl)
    await kubectl("delete", "deploy", "web")

    def nothing_left() -> bool:
        return not cluster.store.list(
            cluster.types.core("replicasets"), "default"
        ) and not cluster.store.list(cluster.types.core("pods"), "default")

    await eventually(nothing_left)


async def test_orphaning_a_deployment_leaves_its_replica_set_running_unowned(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment(1))
    await _rolled_out(kubectl)
    await kubectl("delete", "deploy", "web", "--cascade=orphan")
    replica_sets = cluster.types.core("replicasets")

    def orphaned() -> bool:
        left = cluster.store.list(replica_sets, "default")
        return len(left) == 1 and not left[0]["metadata"].get("ownerReferences")

    await eventually(orphaned)
    assert len(cluster.store.list(cluster.types.core("pods"), "default")) == 1


async def test_a_selector_that_misses_the_template_is_invalid(kubectl: Kubectl) -> None:
    wrong = _deployment().replace("matchLabels: {app: web}", "matchLabels: {app: other}")
    result = await kubectl("apply", "-f", "-", stdin=wrong, check=False)
    assert result.returncode == 1
    assert "`selector` does not match template `labels`" in result.stderr


PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  {spec}
  selector:
    matchLabels: {{app: web}}
"""


async def test_a_pod_disruption_budget_is_stored_and_its_shape_checked(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=PDB.format(spec="maxUnavailable: 1"))
    shown = (await kubectl("get", "pdb", "web", "--no-headers")).stdout.split()
    assert shown[:3] == ["web", "N/A", "1"]
    both = PDB.format(spec="maxUnavailable: 1\n  minAvailable: 1").replace("name: web", "name: b")
    refused = await kubectl("apply", "-f", "-", stdin=both, check=False)
    assert "minAvailable and maxUnavailable cannot be both set" in refused.stderr
    unknown = PDB.format(spec="maxUnavailabel: 1").replace("name: web", "name: c")
    strict = await kubectl("apply", "-f", "-", stdin=unknown, check=False)
    assert 'unknown field "spec.maxUnavailabel"' in strict.stderr


PROCESS_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
spec:
  replicas: 2
  selector:
    matchLabels: {app: echo}
  template:
    metadata:
      labels: {app: echo}
    spec:
      containers:
      - name: main
        image: busybox
        command: [sh, -c, 'echo "serving from $HOSTNAME"; exec sleep 60']
"""


async def test_kubectl_logs_deploy_reads_a_pod_of_a_process_runtime_deployment(
    process_kubectl: Kubectl,
) -> None:
    await process_kubectl("apply", "-f", "-", stdin=PROCESS_DEPLOYMENT)
    status = await process_kubectl("rollout", "status", "deploy/echo", "--timeout=30s")
    assert 'deployment "echo" successfully rolled out' in status.stdout

    async def logged() -> str:
        result = await process_kubectl("logs", "deploy/echo", check=False)
        return result.stdout if result.stdout.startswith("serving from echo-") else ""

    assert (await eventually(logged)).strip().startswith("serving from echo-")


async def test_rollout_undo_brings_back_the_old_replica_set_as_the_newest_revision(
    kubectl: Kubectl,
) -> None:
    await kubectl("apply", "-f", "-", stdin=_deployment(2))
    await _rolled_out(kubectl)
    await kubectl("set", "image", "deploy/web", "main=nginx:1.28")
    await _rolled_out(kubectl)
    await kubectl("rollout", "undo", "deploy/web")
    await _rolled_out(kubectl)
    replica_sets = (await kubectl("get", "rs", "-o", "json")).json()["items"]
    shown = sorted(
        (
            rs["spec"]["template"]["spec"]["containers"][0]["image"],
            rs["metadata"]["annotations"][REVISION_ANNOTATION],
            rs["spec"]["replicas"],
        )
        for rs in replica_sets
    )
    assert shown == [("nginx:1.27", "3", 2), ("nginx:1.28", "2", 0)]
