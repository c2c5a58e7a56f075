"""The simulated runtime: KWOK-style stages driven by pod annotations, for scale runs.

A pod moves through `STAGES` (data, evaluated in order on every change of the pod, like KWOK's
watch-driven state machine): the first stage whose selector matches is scheduled after its
delay, re-checked when its timer fires, and its effect writes the next state, whose change
event selects the next stage. Per-pod annotations drive timings and outcomes:

    kubesim.dev/start-delay              seconds from binding to Running          (default 0)
    kubesim.dev/duration                 seconds Running before containers exit
                                         (default: ClusterConfig.job_pod_duration for Job
                                         pods; other pods run until deleted)
    kubesim.dev/exit-code                exit code of every container             (default 0)
    kubesim.dev/log-lines-per-second     synthetic log lines while Running        (default 0)
    kubesim.dev/waiting-reason           stay Pending with containers waiting for this reason
                                         (e.g. ImagePullBackOff); kubesim.dev/waiting-message
                                         sets the message

restartPolicy is honoured (OnFailure / Always restart with a doubling back-off from 1 s,
capped at 10 s). A deleted pod's containers are stopped (exit 143) and the pod is removed.
Used by `kubesim.kubelet.agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubesim.apiserver.registry import DeleteOptions
from kubesim.errors import KubeSimError
from kubesim.kubelet.status import ContainerState, render_status
from kubesim.objects import JsonObject, rfc3339

if TYPE_CHECKING:
    from kubesim.kubelet.agent import Kubelet

__all__ = ["STAGES", "SimulatedRuntime", "Stage"]

START_DELAY = "kubesim.dev/start-delay"
DURATION = "kubesim.dev/duration"
EXIT_CODE = "kubesim.dev/exit-code"
LOG_RATE = "kubesim.dev/log-lines-per-second"
WAITING_REASON = "kubesim.dev/waiting-reason"
WAITING_MESSAGE = "kubesim.dev/waiting-message"
_GRACEFUL_EXIT = 143  # 128 + SIGTERM


@dataclass(eq=False)
class _SimPod:
    namespace: str
    name: str
    uid: str
    containers: list[ContainerState] = field(default_factory=list)
    start_time: str | None = None
    running_since: float = 0.0
    stage: str | None = None
    timer: asyncio.TimerHandle | None = None
    log_timer: asyncio.TimerHandle | None = None
    lines_written: int = 0
    restart_pending: bool = False
    stuck: bool = False
    due: float | None = None  # loop time the scheduled stage fires (None: never)
    seen_at: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    def cancel(self) -> None:
        for handle in (self.timer, self.log_timer):
            if handle is not None:
                handle.cancel()
        self.timer = self.log_timer = None
        self.stage = None


def _annotation_float(pod: JsonObject, key: str) -> float | None:
    value = (pod["metadata"].get("annotations") or {}).get(key)
    if value is None:
        return None
    try:
        return float(str(value).rstrip("s"))
    except ValueError:
        return None


def _is_job_pod(pod: JsonObject) -> bool:
    return any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or ())


@dataclass(frozen=True)
class Stage:
    """One step of the lifecycle: when it applies, how long to wait, what it does."""

    name: str
    selects: Callable[[JsonObject, _SimPod], bool]
    delay: Callable[[SimulatedRuntime, JsonObject, _SimPod], float]
    effect: Callable[[SimulatedRuntime, JsonObject, _SimPod], None]


def _deleting(pod: JsonObject, sim: _SimPod) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _pending(pod: JsonObject, sim: _SimPod) -> bool:
    return sim.start_time is None and pod.get("status", {}).get("phase") == "Pending"


def _stuck(pod: JsonObject, sim: _SimPod) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    return _pending(pod, sim) and WAITING_REASON in annotations and not sim.stuck


def _running(pod: JsonObject, sim: _SimPod) -> bool:
    return (
        sim.start_time is not None
        and not sim.restart_pending
        and pod.get("status", {}).get("phase") == "Running"
        and any(c.state == "running" for c in sim.containers)
    )


def _no_delay(runtime: SimulatedRuntime, pod: JsonObject, sim: _SimPod) -> float:
    return 0.0


def _start_delay(runtime: SimulatedRuntime, pod: JsonObject, sim: _SimPod) -> float:
    """Counted from when the kubelet first saw the pod, so later edits do not restart it."""
    waited = asyncio.get_running_loop().time() - sim.seen_at
    return max(0.0, (_annotation_float(pod, START_DELAY) or 0.0) - waited)


def _remaining_run(runtime: SimulatedRuntime, pod: JsonObject, sim: _SimPod) -> float:
    duration = runtime.duration_of(pod)
    if duration is None:
        return -1.0  # runs until deleted
    elapsed = asyncio.get_running_loop().time() - sim.running_since
    return max(0.0, duration - elapsed)


STAGES: tuple[Stage, ...] = (
    Stage("pod-delete", _deleting, _no_delay, lambda r, p, s: r.terminate(p, s)),
    Stage("pod-stuck", _stuck, _start_delay, lambda r, p, s: r.hold(p, s)),
    Stage(
        "pod-ready",
        lambda p, s: _pending(p, s) and not s.stuck,
        _start_delay,
        lambda r, p, s: r.start(p, s),
    ),
    Stage("pod-complete", _running, _remaining_run, lambda r, p, s: r.complete(p, s)),
)


class SimulatedRuntime:
    def __init__(self, kubelet: Kubelet) -> None:
        self.kubelet = kubelet
        self.registry = kubelet.registry
        self._pods: dict[str, _SimPod] = {}

    def duration_of(self, pod: JsonObject) -> float | None:
        duration = _annotation_float(pod, DURATION)
        if duration is None and _is_job_pod(pod):
            duration = self.kubelet.cluster.config.job_pod_duration
        return duration

    # -- stage engine -------------------------------------------------------------------------

    def observe(self, pod: JsonObject) -> None:
        meta = pod["metadata"]
        sim = self._pods.get(meta["uid"])
        if sim is None:
            sim = self._pods[meta["uid"]] = _SimPod(meta["namespace"], meta["name"], meta["uid"])
        stage = next((s for s in STAGES if s.selects(pod, sim)), None)
        if stage is None:
            return
        delay = stage.delay(self, pod, sim)
        loop = asyncio.get_running_loop()
        due = loop.time() + delay if delay >= 0 else None
        if sim.stage == stage.name and (
            due == sim.due
            or (due is not None and sim.due is not None and abs(due - sim.due) < 0.05)
        ):
            return  # already scheduled for (about) then; annotations edits reschedule below
        if sim.timer is not None:
            sim.timer.cancel()
        sim.stage, sim.due = stage.name, due
        sim.timer = None if delay < 0 else loop.call_later(delay, self._fire, sim, stage)

    def _fire(self, sim: _SimPod, stage: Stage) -> None:
        sim.timer = None
        sim.stage = None
        pod = self.registry.find(self.kubelet.pods, sim.namespace, sim.name)
        if pod is None or pod["metadata"]["uid"] != sim.uid or not stage.selects(pod, sim):
            return
        stage.effect(self, pod, sim)

    # -- effects ------------------------------------------------------------------------------

    def _publish(self, sim: _SimPod, *, phase: str | None = None) -> None:
        node = self.kubelet.registry.find(self.kubelet.pods, sim.namespace, sim.name)
        if node is None:
            return
        host_ip = self.kubelet.node_ip(node["spec"].get("nodeName", ""))
        pod_ip = self.kubelet.pod_ip(sim.uid)
        at = rfc3339()

        def write(pod: JsonObject) -> None:
            render_status(
                pod,
                sim.containers,
                host_ip=host_ip,
                pod_ip=pod_ip,
                start_time=sim.start_time or at,
                at=at,
            )
            if phase is not None:
                pod["status"]["phase"] = phase

        self.registry.mutate(self.kubelet.pods, sim.namespace, sim.name, write, touches=("status",))

    def hold(self, pod: JsonObject, sim: _SimPod) -> None:
        """Keep the pod Pending with its containers waiting for the annotated reason."""
        annotations = pod["metadata"].get("annotations") or {}
        reason = str(annotations.get(WAITING_REASON))
        message = annotations.get(WAITING_MESSAGE)
        sim.stuck = True
        sim.start_time = None
        sim.containers = [
            ContainerState(c["name"], c.get("image", ""), reason=reason, message=message)
            for c in pod.get("spec", {}).get("containers") or []
        ]
        self._publish(sim, phase="Pending")

    def start(self, pod: JsonObject, sim: _SimPod) -> None:
        now = rfc3339()
        spec = pod.get("spec", {})
        sim.start_time = now
        sim.containers = [
            ContainerState(
                c["name"],
                c.get("image", ""),
                init=True,
                state="terminated",
                reason="Completed",
                started_at=now,
                finished_at=now,
                exit_code=0,
                container_id=f"kubesim://{sim.uid[:8]}-{c['name']}",
            )
            for c in spec.get("initContainers") or []
        ] + [
            ContainerState(
                c["name"],
                c.get("image", ""),
                container_id=f"kubesim://{sim.uid[:8]}-{c['name']}",
            )
            for c in spec.get("containers") or []
        ]
        self._run_containers(pod, sim)

    def _run_containers(self, pod: JsonObject, sim: _SimPod) -> None:
        now = rfc3339()
        for container in sim.containers:
            if not container.init:
                container.state, container.reason, container.started_at = "running", "", now
                self.kubelet.cluster.logs.open(sim.uid, container.name)
        sim.running_since = asyncio.get_running_loop().time()
        sim.restart_pending = False
        rate = _annotation_float(pod, LOG_RATE) or 0.0
        if rate > 0:
            self._schedule_logs(sim, rate)
        self._publish(sim)

    def _schedule_logs(self, sim: _SimPod, rate: float) -> None:
        period = max(1.0 / rate, 0.1)
        per_tick = max(1, round(rate * period))

        def tick() -> None:
            logs = self.kubelet.cluster.logs
            for container in sim.containers:
                if container.init or container.state != "running":
                    continue
                log = logs.get(sim.uid, container.name)
                if log is None:
                    continue
                for _ in range(per_tick):
                    sim.lines_written += 1
                    log.append(f"{sim.name} {container.name} line {sim.lines_written}".encode())
            sim.log_timer = asyncio.get_running_loop().call_later(period, tick)

        sim.log_timer = asyncio.get_running_loop().call_later(period, tick)

    def _stop_containers(self, sim: _SimPod, exit_code: int) -> None:
        now = rfc3339()
        if sim.log_timer is not None:
            sim.log_timer.cancel()
            sim.log_timer = None
        for container in sim.containers:
            if container.state == "running":
                container.state, container.finished_at = "terminated", now
                container.exit_code = exit_code
                container.reason = "Completed" if exit_code == 0 else "Error"
            log = self.kubelet.cluster.logs.get(sim.uid, container.name)
            if log is not None:
                log.finish()

    def complete(self, pod: JsonObject, sim: _SimPod) -> None:
        exit_code = int(_annotation_float(pod, EXIT_CODE) or 0)
        self._stop_containers(sim, exit_code)
        policy = pod.get("spec", {}).get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
        if not restart:
            self._publish(sim)
            return
        sim.restart_pending = True
        self._publish(sim)
        restarts = max(c.restart_count for c in sim.containers) if sim.containers else 0
        backoff = min(10.0, 2.0**restarts)

        def restart_now() -> None:
            current = self.registry.find(self.kubelet.pods, sim.namespace, sim.name)
            if current is None or current["metadata"].get("deletionTimestamp"):
                return
            for container in sim.containers:
                if not container.init:
                    container.restart()
            self._run_containers(current, sim)

        sim.timer = asyncio.get_running_loop().call_later(backoff, restart_now)

    def terminate(self, pod: JsonObject, sim: _SimPod) -> None:
        """A deleted pod ends Failed (as a kubelet reports it), then goes away."""
        if pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            if sim.start_time is None:
                sim.start_time = rfc3339()  # never started: report it terminated all the same
            self._stop_containers(sim, _GRACEFUL_EXIT)
            self._publish(sim, phase="Failed")
        sim.cancel()
        meta = pod["metadata"]
        with contextlib.suppress(KubeSimError):
            self.registry.delete(
                self.kubelet.pods,
                meta["namespace"],
                meta["name"],
                DeleteOptions(grace_period_seconds=0),
            )

    # -- lifecycle ----------------------------------------------------------------------------

    def forget(self, uid: str) -> None:
        sim = self._pods.pop(uid, None)
        if sim is not None:
            sim.cancel()

    def stop(self, uid: str) -> None:
        sim = self._pods.pop(uid, None)
        if sim is not None:
            self._stop_containers(sim, 137)
            sim.cancel()

    async def shutdown(self) -> None:
        for sim in self._pods.values():
            sim.cancel()
        self._pods.clear()
