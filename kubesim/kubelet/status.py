"""Pod status as a kubelet reports it, computed from per-container states.

Both runtimes keep a `ContainerState` per container and call `render_status`, which derives
the phase (Pending while init containers run, Running, Succeeded or Failed by restartPolicy),
the conditions (PodReadyToStartContainers, Initialized, Ready, ContainersReady, keeping
PodScheduled), and the containerStatuses / initContainerStatuses blocks kubectl's STATUS,
READY and RESTARTS columns are computed from. Used by `kubesim.kubelet.simulated` and
`kubesim.kubelet.process`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim.objects import JsonObject

__all__ = ["ContainerState", "render_status"]


@dataclass
class ContainerState:
    """One container's current run, in kubelet terms."""

    name: str
    image: str
    init: bool = False
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    message: str | None = None
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    container_id: str = ""
    probe_ready: bool = True
    """What the readiness probe says (True without one); the container is ready when it
    runs and this holds."""

    @property
    def ready(self) -> bool:
        return self.state == "running" and self.probe_ready

    def restart(self) -> None:
        """Archive the finished run as lastState and wait to run again."""
        self.last_terminated = self._terminated()
        self.restart_count += 1
        self.state, self.reason = "waiting", "ContainerCreating"
        self.started_at = self.finished_at = None
        self.exit_code = None

    def _terminated(self) -> dict[str, Any]:
        terminated: dict[str, Any] = {
            "exitCode": self.exit_code or 0,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "containerID": self.container_id,
        }
        if self.message:
            terminated["message"] = self.message
        return terminated

    def as_status(self) -> dict[str, Any]:
        if self.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            state = {"terminated": self._terminated()}
        else:
            waiting: dict[str, Any] = {"reason": self.reason}
            if self.message:
                waiting["message"] = self.message
            state = {"waiting": waiting}
        status: dict[str, Any] = {
            "name": self.name,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": f"kubesim://{self.image}",
            "started": self.state == "running",
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def _condition(kind: str, ok: bool, at: str, reason: str | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    if reason and not ok:
        condition["reason"] = reason
    return condition


def render_status(
    pod: JsonObject,
    containers: list[ContainerState],
    *,
    host_ip: str,
    pod_ip: str,
    start_time: str,
    at: str,
) -> None:
    """Write the kubelet-owned part of `pod["status"]` in place (pod is a private copy)."""
    restart_policy = pod.get("spec", {}).get("restartPolicy", "Always")
    init = [c for c in containers if c.init]
    main = [c for c in containers if not c.init]
    initialized = all(c.state == "terminated" and c.exit_code == 0 for c in init)
    init_failed = (
        any(c.state == "terminated" and c.exit_code not in (0, None) for c in init)
        and restart_policy == "Never"
    )
    all_done = bool(main) and all(c.state == "terminated" for c in main)
    ready = bool(main) and all(c.ready for c in main) and initialized
    if init_failed:
        phase = "Failed"
    elif not initialized:
        phase = "Pending"
    elif all_done and restart_policy != "Always":
        failed = any(c.exit_code not in (0, None) for c in main)
        phase = (
            "Failed"
            if failed and restart_policy == "Never"
            else ("Succeeded" if not failed else "Running")
        )
    elif any(c.state in ("running", "terminated") for c in main):
        phase = "Running"
    else:
        phase = "Pending"
    terminal = phase in ("Succeeded", "Failed")
    status = pod.setdefault("status", {})
    previous = {c.get("type"): c for c in status.get("conditions") or []}

    def keep_time(condition: dict[str, Any]) -> dict[str, Any]:
        old = previous.get(condition["type"])
        if old is not None and old.get("status") == condition["status"]:
            condition["lastTransitionTime"] = old.get("lastTransitionTime", at)
        return condition

    not_ready_reason = "PodCompleted" if terminal else "ContainersNotReady"
    conditions = [
        keep_time(_condition("PodReadyToStartContainers", True, at)),
        keep_time(_condition("Initialized", initialized, at, "ContainersNotInitialized")),
        keep_time(_condition("Ready", ready, at, not_ready_reason)),
        keep_time(_condition("ContainersReady", ready, at, not_ready_reason)),
    ]
    if "PodScheduled" in previous:
        conditions.append(previous["PodScheduled"])
    for kind, condition in previous.items():
        if kind not in {c["type"] for c in conditions}:
            conditions.append(condition)
    status["conditions"] = conditions
    status["phase"] = phase
    status["hostIP"] = host_ip
    status["hostIPs"] = [{"ip": host_ip}]
    status["podIP"] = pod_ip
    status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = start_time
    if init:
        status["initContainerStatuses"] = [c.as_status() for c in init]
    status["containerStatuses"] = [c.as_status() for c in main]
