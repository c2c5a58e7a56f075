"""The process runtime: each container's command/args really run as a local subprocess.

The image is ignored. Each container runs `command + args` (after `$(VAR)` expansion) with the
environment `kubesim.kubelet.env` builds (downward API included), in the container's
workingDir when it exists on this machine or else a per-pod temporary directory, in its own
session so the whole process group can be signalled. stdout and stderr are merged into the
container log line by line. Init containers run one after another first; then all containers
run together. restartPolicy is honoured with a doubling back-off (1 s to 10 s). Deleting the
pod sends SIGTERM to each main process, waits the grace period, then SIGKILLs its process
group, reports the
exit codes (143 / 137) and removes the pod. Used by `kubesim.kubelet.agent`; every child is
killed on `shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kubesim.apiserver.registry import DeleteOptions
from kubesim.errors import KubeSimError
from kubesim.kubelet.env import container_env, expand
from kubesim.kubelet.probes import ProbeSchedule, probe_once
from kubesim.kubelet.status import ContainerState, render_status
from kubesim.kubelet.volumes import (
    MountError,
    VolumeBuilder,
    contained_command,
    mount_namespaces_available,
)
from kubesim.logs import ContainerLog
from kubesim.objects import JsonObject, now, rfc3339

if TYPE_CHECKING:
    from kubesim.kubelet.agent import Kubelet

__all__ = ["ProcessRuntime"]

_MAX_BACKOFF = 10.0


@dataclass(eq=False)
class _ProcessPod:
    namespace: str
    name: str
    uid: str
    states: dict[str, ContainerState] = field(default_factory=dict)
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    terminating: asyncio.Event = field(default_factory=asyncio.Event)
    grace_seconds: float = 30.0
    start_time: str | None = None
    work_dir: Path | None = None
    termination_grace: float = 30.0

    def grace_seconds_for(self, _: JsonObject) -> float:
        """How long a container killed by the kubelet (a failed liveness probe) may take."""
        return self.termination_grace


class ProcessRuntime:
    def __init__(self, kubelet: Kubelet) -> None:
        self.kubelet = kubelet
        self.registry = kubelet.registry
        self._pods: dict[str, _ProcessPod] = {}
        self._reapers: set[asyncio.Task[None]] = set()
        self._root: Path | None = None
        self.volumes = VolumeBuilder(
            self.registry,
            kubelet.cluster.api.tokens,
            pvc_root=self.claims_root,
            now=lambda: int(now().timestamp()),
        )

    def claims_root(self) -> Path:
        """Where PersistentVolumeClaims live: <work_dir>/pvs, kept after kubesim stops when
        the cluster has a work_dir, else in the runtime's temporary directory."""
        base = self.kubelet.cluster.config.work_dir
        if base is None:
            base = self._ensure_root()
        return base / "pvs"

    def _ensure_root(self) -> Path:
        if self._root is None:
            base = self.kubelet.cluster.config.work_dir
            if base is not None:
                base.mkdir(parents=True, exist_ok=True)
            self._root = Path(tempfile.mkdtemp(prefix="kubesim-pods-", dir=base))
        return self._root

    # -- kubelet interface --------------------------------------------------------------------

    def observe(self, pod: JsonObject) -> None:
        meta = pod["metadata"]
        run = self._pods.get(meta["uid"])
        if run is None:
            run = _ProcessPod(meta["namespace"], meta["name"], meta["uid"])
            self._pods[meta["uid"]] = run
            run.task = asyncio.get_running_loop().create_task(
                self._run_pod(run), name=f"pod {meta['namespace']}/{meta['name']}"
            )
        if meta.get("deletionTimestamp") and not run.terminating.is_set():
            run.grace_seconds = float(meta.get("deletionGracePeriodSeconds") or 0)
            run.terminating.set()

    def forget(self, uid: str) -> None:
        run = self._pods.pop(uid, None)
        if run is not None:
            run.terminating.set()
            processes = list(run.processes.values())
            self._kill_now(run)
            if run.task is not None:
                run.task.cancel()
            self._cleanup_dir(run)
            if processes:
                # Reap the killed children so their transports close while the loop runs.
                reaper = asyncio.get_running_loop().create_task(_reap(processes))
                self._reapers.add(reaper)
                reaper.add_done_callback(self._reapers.discard)

    def stop(self, uid: str) -> None:
        self.forget(uid)

    async def shutdown(self) -> None:
        runs = list(self._pods.values())
        self._pods.clear()
        processes = [p for run in runs for p in run.processes.values()]
        for run in runs:
            self._kill_now(run)
            if run.task is not None:
                run.task.cancel()
        for run in runs:
            if run.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run.task
            self._cleanup_dir(run)
        await _reap(processes)
        for reaper in list(self._reapers):
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    # -- running ------------------------------------------------------------------------------

    def _pod(self, run: _ProcessPod) -> JsonObject | None:
        pod = self.registry.find(self.kubelet.pods, run.namespace, run.name)
        if pod is None or pod["metadata"]["uid"] != run.uid:
            return None
        return pod

    def _publish(self, run: _ProcessPod, *, phase: str | None = None) -> None:
        pod = self._pod(run)
        if pod is None:
            return
        host_ip = self.kubelet.node_ip(pod["spec"].get("nodeName", ""))
        pod_ip = self.kubelet.pod_ip(run.uid)
        at = rfc3339()
        states = list(run.states.values())

        def write(new: JsonObject) -> None:
            render_status(
                new, states, host_ip=host_ip, pod_ip=pod_ip, start_time=run.start_time or at, at=at
            )
            if phase is not None:
                new["status"]["phase"] = phase

        self.registry.mutate(self.kubelet.pods, run.namespace, run.name, write)

    def _working_dir(self, run: _ProcessPod, container: JsonObject) -> Path:
        wanted = container.get("workingDir")
        if wanted and Path(wanted).is_dir():
            return Path(wanted)
        return self._pod_dir(run)

    def _pod_dir(self, run: _ProcessPod) -> Path:
        if run.work_dir is None:
            run.work_dir = self._ensure_root() / f"{run.namespace}_{run.name}_{run.uid[:8]}"
            run.work_dir.mkdir(parents=True, exist_ok=True)
        return run.work_dir

    async def _container_view(
        self, run: _ProcessPod, pod: JsonObject, container: JsonObject, state: ContainerState
    ) -> tuple[list[str], JsonObject] | None:
        """The argv that shows the container its volumes (and Services' names), once every
        volume can be set up; None if the pod is deleted while a volume is still missing."""
        while True:
            current = self._pod(run) or pod
            if not mount_namespaces_available():
                return [], current
            try:
                mounts = self.volumes.mounts(current, container, self._pod_dir(run))
            except MountError as error:
                state.state, state.reason = "waiting", "ContainerCreating"
                self._event(run, "FailedMount", str(error), type_="Warning")
                self._publish(run)
                try:
                    async with asyncio.timeout(1.0):
                        await run.terminating.wait()
                    return None
                except TimeoutError:
                    continue
            hosts = self._pod_dir(run) / "etc-hosts"
            hostname = current.get("spec", {}).get("hostname") or run.name
            hosts.write_text(self.kubelet.cluster.services.hosts_file(run.namespace, hostname))
            wrapper = contained_command(
                [],
                mounts,
                hosts,
                container.get("workingDir"),
                fstab=self._pod_dir(run) / f"fstab-{container['name']}",
            )
            return wrapper, current

    def _cleanup_dir(self, run: _ProcessPod) -> None:
        if run.work_dir is not None:
            shutil.rmtree(run.work_dir, ignore_errors=True)
            run.work_dir = None

    async def _run_pod(self, run: _ProcessPod) -> None:
        pod = self._pod(run)
        if pod is None:
            return
        spec = pod.get("spec", {})
        run.termination_grace = float(spec.get("terminationGracePeriodSeconds", 30))
        run.start_time = rfc3339()
        init_specs = spec.get("initContainers") or []
        main_specs = spec.get("containers") or []
        for container in init_specs:
            run.states[container["name"]] = ContainerState(
                container["name"], container.get("image", ""), init=True
            )
        for container in main_specs:
            run.states[container["name"]] = ContainerState(
                container["name"], container.get("image", "")
            )
        self._publish(run)
        policy = spec.get("restartPolicy", "Always")
        for container in init_specs:
            ok = await self._supervise(
                run, pod, container, "OnFailure" if policy != "Never" else "Never"
            )
            if not ok:
                self._publish(run)
                await self._finish(run)
                return
        await asyncio.gather(*(self._supervise(run, pod, c, policy) for c in main_specs))
        await self._finish(run)

    async def _finish(self, run: _ProcessPod) -> None:
        """After the containers stopped: wait for deletion (if any) and remove the pod."""
        await run.terminating.wait()
        pod = self._pod(run)
        if pod is None:
            return
        if pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            self._publish(run, phase="Failed")
        meta = pod["metadata"]
        with contextlib.suppress(KubeSimError):
            self.registry.delete(
                self.kubelet.pods,
                meta["namespace"],
                meta["name"],
                DeleteOptions(grace_period_seconds=0),
            )

    async def _supervise(
        self, run: _ProcessPod, pod: JsonObject, container: JsonObject, policy: str
    ) -> bool:
        """Run one container until it no longer needs restarting; True if it exited 0."""
        state = run.states[container["name"]]
        backoff = 1.0
        while True:
            exit_code = await self._run_once(run, pod, container, state)
            self._publish(run)
            if run.terminating.is_set():
                return exit_code == 0
            if not (policy == "Always" or (policy == "OnFailure" and exit_code != 0)):
                return exit_code == 0
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation.
                async with asyncio.timeout(backoff):
                    await run.terminating.wait()
                return exit_code == 0
            except TimeoutError:
                pass
            backoff = min(_MAX_BACKOFF, backoff * 2)
            state.restart()

    async def _run_once(
        self, run: _ProcessPod, pod: JsonObject, container: JsonObject, state: ContainerState
    ) -> int:
        name = container["name"]
        log = self.kubelet.cluster.logs.open(run.uid, name)
        view = await self._container_view(run, pod, container, state)
        if view is None:
            return self._start_failed(state, log, "the pod was deleted before its volumes")
        wrapper, current = view
        node = self.kubelet.node(current["spec"].get("nodeName", ""))
        cluster = self.kubelet.cluster
        env = container_env(
            self.registry,
            current,
            container,
            node=node,
            api_port=cluster.tls_port,
            services=cluster.services.environment(run.namespace),
        )
        argv = [
            expand(str(a), env)
            for a in (container.get("command") or []) + (container.get("args") or [])
        ]
        state.container_id = f"kubesim://{run.uid[:8]}-{name}-{state.restart_count}"
        state.started_at = rfc3339()
        if not argv:
            return self._start_failed(
                state, log, "no command or args: the process runtime ignores images"
            )
        if wrapper and not _executable(argv[0], env.get("PATH", "")):
            # The wrapper's sh would report it as exit 127; a runtime reports StartError.
            return self._start_failed(
                state, log, f'exec: "{argv[0]}": executable file not found in $PATH'
            )
        try:
            process = await asyncio.create_subprocess_exec(
                *wrapper,
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                cwd=self._working_dir(run, container),
                start_new_session=True,
            )
        except OSError as error:
            return self._start_failed(state, log, f"failed to start {argv[0]!r}: {error}")
        run.processes[name] = process
        state.state, state.reason = "running", ""
        state.probe_ready = "readinessProbe" not in container
        self._publish(run)
        image = container.get("image", "")
        self._event(run, "Pulled", f'Container image "{image}" already present on machine')
        self._event(run, "Created", f"Created container: {name}")
        self._event(run, "Started", f"Started container {name}")
        loop = asyncio.get_running_loop()
        killer = loop.create_task(self._kill_on_termination(run, process))
        reader = loop.create_task(_copy_lines(process, log))
        probers = [
            loop.create_task(self._probe(run, container, state, process, env, kind))
            for kind in ("readinessProbe", "livenessProbe")
            if kind in container
        ]
        try:
            # The container ends with its main process: then whatever it left behind is killed
            # (a container runtime tears down the whole PID namespace), which also closes the
            # log pipe. Process.wait() alone would wait for every holder of that pipe.
            await _main_process_exit(process)
            _kill_group(process.pid)
            code = await process.wait()
        finally:
            killer.cancel()
            for prober in probers:
                prober.cancel()
            _kill_group(process.pid)
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(reader, 5)
            run.processes.pop(name, None)
            log.finish()
        exit_code = code if code >= 0 else 128 - code
        state.state, state.finished_at, state.exit_code = "terminated", rfc3339(), exit_code
        state.reason = "Completed" if exit_code == 0 else "Error"
        return exit_code

    @staticmethod
    def _start_failed(state: ContainerState, log: object, message: str) -> int:
        state.state, state.reason, state.message = "terminated", "StartError", message
        state.exit_code, state.finished_at = 128, rfc3339()
        finish = getattr(log, "finish", None)
        if finish is not None:
            finish()
        return 128

    def _event(self, run: _ProcessPod, reason: str, message: str, *, type_: str = "Normal") -> None:
        pod = self._pod(run)
        if pod is not None:
            self.registry.record_event(
                pod, type_=type_, reason=reason, message=message, component="kubelet"
            )

    async def _kill_on_termination(
        self, run: _ProcessPod, process: asyncio.subprocess.Process
    ) -> None:
        await run.terminating.wait()
        if process.returncode is None:
            self._event(run, "Killing", "Stopping container")
        # Like a container runtime: SIGTERM to the main process only, SIGKILL to all of it.
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), run.grace_seconds)
        except TimeoutError:
            _kill_group(process.pid)

    async def _probe(
        self,
        run: _ProcessPod,
        container: JsonObject,
        state: ContainerState,
        process: asyncio.subprocess.Process,
        env: dict[str, str],
        kind: str,
    ) -> None:
        """Run one readiness or liveness probe for as long as the container runs."""
        probe = container[kind]
        readiness = kind == "readinessProbe"
        schedule = ProbeSchedule.of(probe, passing_at_start=not readiness)
        label = "Readiness" if readiness else "Liveness"
        await asyncio.sleep(schedule.initial_delay)
        while process.returncode is None and not run.terminating.is_set():
            result = await probe_once(probe, container, pid=process.pid, env=env)
            if not result.ok:
                self._event(
                    run, "Unhealthy", f"{label} probe failed: {result.message}", type_="Warning"
                )
            changed = schedule.record(result.ok)
            if readiness and changed:
                state.probe_ready = schedule.passing
                self._publish(run)
            elif not readiness and not schedule.passing:
                self._event(
                    run,
                    "Killing",
                    f"Container {container['name']} failed liveness probe, will be restarted",
                )
                await _stop(process, run.grace_seconds_for(container))
                return
            await asyncio.sleep(schedule.period)

    def _kill_now(self, run: _ProcessPod) -> None:
        for process in run.processes.values():
            _kill_group(process.pid)


def _executable(command: str, path: str) -> bool:
    if "/" in command:
        return os.access(command, os.X_OK)
    return shutil.which(command, path=path) is not None


async def _stop(process: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM, then SIGKILL to the whole group after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        _kill_group(process.pid)


async def _main_process_exit(process: asyncio.subprocess.Process) -> None:
    """Wait until the process itself exits (its pidfd becomes readable), pipes aside."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return  # already gone
    except OSError:
        await process.wait()  # no pidfd (old kernel): fall back to exit plus closed pipes
        return
    loop = asyncio.get_running_loop()
    exited = loop.create_future()

    def on_readable() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, on_readable)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


_READ_BYTES = 64 * 1024


async def _copy_lines(process: asyncio.subprocess.Process, log: ContainerLog) -> None:
    """The container's output into its log a read at a time: the whole lines one read
    brought, stamped with one moment (a read and a clock reading per line were most of
    kubesim's time under a log flood); a partial line waits for its end, unless it is a
    read long (a kubelet splits long lines too)."""
    assert process.stdout is not None
    partial = b""
    while chunk := await process.stdout.read(_READ_BYTES):
        data = partial + chunk if partial else chunk
        end = data.rfind(b"\n") + 1
        if len(data) - end >= _READ_BYTES:
            end = len(data)
        partial = data[end:]
        if end:
            lines = data[:end].split(b"\n")
            if not lines[-1]:
                lines.pop()  # (what followed the last newline: nothing)
            log.extend(lines)
    if partial:
        log.append(partial)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _reap(processes: list[asyncio.subprocess.Process]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
