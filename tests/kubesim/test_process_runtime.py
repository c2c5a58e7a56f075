"""The process runtime: real subprocesses, real logs, downward API, restarts, termination.

Includes the issue's "done when" demo: an Indexed Job created with `kubectl create -f` runs
its pods as local processes, `kubectl logs -f` streams their real output until they exit,
and `kubectl get pods,jobs` shows the real columns.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.watch import Watch

from kubesim.cluster import Cluster
from kubesim.testing import RunningSimulator, running
from tests.kubesim.conftest import Kubectl, eventually, manifest

INDEXED_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: demo
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: python:3.11
        command: [sh, -c]
        args:
        - |
          for step in 1 2 3; do
            echo "index=$JOB_COMPLETION_INDEX step=$step"
            sleep 0.3
          done
"""


def _pod(name: str, script: str, **spec: Any) -> Any:
    return manifest(
        {
            "metadata": {"name": name, "labels": {"team": "ml"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "x", "command": ["sh", "-c", script]}],
                **spec,
            },
        }
    )


def _phase(cluster: Cluster, name: str) -> str | None:
    pod = cluster.get("pods", "default", name)
    return None if pod is None else pod.get("status", {}).get("phase")


async def test_an_indexed_job_runs_as_processes_and_kubectl_logs_follow_streams_output(
    process_kubectl: Kubectl, process_cluster: Cluster
) -> None:
    await process_kubectl("create", "-f", "-", stdin=INDEXED_JOB)

    def first_pod() -> str | None:
        for pod in process_cluster.store.list(process_cluster.types.core("pods"), "default"):
            annotations = pod["metadata"].get("annotations") or {}
            index = annotations.get("batch.kubernetes.io/job-completion-index")
            if index == "1" and pod.get("status", {}).get("phase") == "Running":
                return str(pod["metadata"]["name"])
        return None

    name = await eventually(first_pod)
    logs = await process_kubectl("logs", "-f", name, within=30)
    assert logs.stdout.splitlines() == ["index=1 step=1", "index=1 step=2", "index=1 step=3"]
    await process_kubectl("wait", "--for=condition=complete", "job/demo", "--timeout=30s")
    table = await process_kubectl("get", "pods,jobs")
    pods, jobs = table.stdout.split("\n\n")
    assert pods.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert all(line.split()[1:4] == ["0/1", "Completed", "0"] for line in pods.splitlines()[1:])
    assert jobs.splitlines()[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs.splitlines()[1].split()[:3] == ["job.batch/demo", "Complete", "3/3"]


async def test_the_downward_api_and_env_reach_the_process(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    await process_core.create_namespaced_config_map(
        "default", manifest({"metadata": {"name": "cfg"}, "data": {"MODE": "fast"}})
    )
    env = [
        {"name": "GREETING", "value": "hello"},
        {"name": "COMBINED", "value": "$(GREETING)-world"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "MODE"}}},
    ]
    pod = _pod("envy", 'echo "$COMBINED $POD_NAME $NODE $TEAM $MODE"')
    pod["spec"]["containers"][0]["env"] = env
    await process_core.create_namespaced_pod("default", pod)
    await eventually(lambda: _phase(process_cluster, "envy") == "Succeeded")
    log = await process_core.read_namespaced_pod_log("envy", "default")
    node = process_cluster.get("pods", "default", "envy")["spec"]["nodeName"]  # type: ignore[index]
    assert log == f"hello-world envy {node} ml fast\n"


async def test_a_failing_command_makes_the_pod_failed_with_its_exit_code(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    await process_core.create_namespaced_pod("default", _pod("boom", "echo oops >&2; exit 3"))
    await eventually(lambda: _phase(process_cluster, "boom") == "Failed")
    pod = await process_core.read_namespaced_pod("boom", "default")
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 3
    assert terminated.reason == "Error"
    assert await process_core.read_namespaced_pod_log("boom", "default") == "oops\n"


async def test_restart_policy_on_failure_restarts_the_container(
    process_core: client.CoreV1Api, process_cluster: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-once"
    script = f"if [ -e {marker} ]; then echo second; exit 0; fi; touch {marker}; exit 1"
    await process_core.create_namespaced_pod(
        "default", _pod("retry", script, restartPolicy="OnFailure")
    )
    await eventually(lambda: _phase(process_cluster, "retry") == "Succeeded", within=15)
    pod = await process_core.read_namespaced_pod("retry", "default")
    assert pod.status.container_statuses[0].restart_count == 1


async def test_deleting_a_running_pod_sends_sigterm_and_waits_for_the_process(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    script = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.1; done"
    await process_core.create_namespaced_pod("default", _pod("graceful", script))
    await eventually(lambda: _phase(process_cluster, "graceful") == "Running")
    log = process_cluster.logs.get(
        process_cluster.get("pods", "default", "graceful")["metadata"]["uid"],  # type: ignore[index]
        "main",
    )
    assert log is not None
    await eventually(lambda: len(log.lines) >= 1)
    await process_core.delete_namespaced_pod("graceful", "default")
    await eventually(lambda: process_cluster.get("pods", "default", "graceful") is None)
    assert [line.text for line in log.lines] == [b"started\n", b"got-term\n"]


async def test_kubernetes_asyncio_log_follow_yields_lines_until_the_container_exits(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    await process_core.create_namespaced_pod(
        "default", _pod("talker", "for i in 0 1 2; do echo log $i; sleep 0.2; done")
    )
    await eventually(lambda: _phase(process_cluster, "talker") == "Running")
    lines = []
    async with Watch() as watch:
        async for line in watch.stream(process_core.read_namespaced_pod_log, "talker", "default"):
            lines.append(line)
    assert lines == ["log 0\n", "log 1\n", "log 2\n"]


async def test_logs_of_a_pod_that_has_not_started_are_a_400(
    process_core: client.CoreV1Api,
) -> None:
    pod = _pod("later", "true", nodeSelector={"no-such": "node"})
    await process_core.create_namespaced_pod("default", pod)
    with pytest.raises(client.ApiException) as caught:
        await process_core.read_namespaced_pod_log("later", "default")
    assert caught.value.status == 400
    assert "is waiting to start: ContainerCreating" in str(caught.value.body)


async def test_processes_are_killed_when_the_cluster_stops() -> None:
    async with running(runtime="process") as sim:
        cluster = sim.clusters[0]
        pods = cluster.types.core("pods")
        cluster.registry.create(pods, _pod("sleeper", "sleep 300"), namespace="default")
        await eventually(lambda: _phase(cluster, "sleeper") == "Running")
        runtime: Any = cluster.kubelet.runtimes["process"]
        processes = [p for run in runtime._pods.values() for p in run.processes.values()]
        assert processes
    await asyncio.sleep(0)
    assert all(p.returncode is not None for p in processes)


async def test_log_query_parameters_tail_timestamps_and_previous(
    process_sim: RunningSimulator,
    process_core: client.CoreV1Api,
    process_cluster: Cluster,
    tmp_path: Path,
) -> None:
    marker = tmp_path / "first-run-done"
    script = (
        f"if [ -e {marker} ]; then echo run-2-a; echo run-2-b; echo run-2-c; exit 0; fi; "
        f"touch {marker}; echo run-1; exit 1"
    )
    await process_core.create_namespaced_pod(
        "default", _pod("chatty", script, restartPolicy="OnFailure")
    )
    await eventually(lambda: _phase(process_cluster, "chatty") == "Succeeded", within=15)
    tail = await process_core.read_namespaced_pod_log("chatty", "default", tail_lines=2)
    assert tail == "run-2-b\nrun-2-c\n"
    previous = await process_core.read_namespaced_pod_log("chatty", "default", previous=True)
    assert previous == "run-1\n"
    stamped = await process_core.read_namespaced_pod_log("chatty", "default", timestamps=True)
    first = stamped.splitlines()[0]
    assert first.endswith("Z run-2-a") and first[:4].isdigit()
    limited = await process_core.read_namespaced_pod_log("chatty", "default", limit_bytes=4)
    assert limited == "run-"


async def test_a_multi_container_pod_needs_a_container_name_for_logs(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    pod = _pod("duo", "echo a")
    pod["spec"]["containers"].append(
        {"name": "side", "image": "x", "command": ["sh", "-c", "echo b"]}
    )
    await process_core.create_namespaced_pod("default", pod)
    await eventually(lambda: _phase(process_cluster, "duo") == "Succeeded")
    with pytest.raises(client.ApiException) as caught:
        await process_core.read_namespaced_pod_log("duo", "default")
    assert caught.value.status == 400
    assert "a container name must be specified for pod duo, choose one of: [main side]" in str(
        caught.value.body
    )
    assert await process_core.read_namespaced_pod_log("duo", "default", container="side") == "b\n"


async def test_init_containers_run_first_and_in_order(
    process_core: client.CoreV1Api, process_cluster: Cluster, tmp_path: Path
) -> None:
    directory = tmp_path
    pod = _pod("ordered", f"cat {directory}/trace")
    pod["spec"]["initContainers"] = [
        {
            "name": f"init-{i}",
            "image": "x",
            "command": ["sh", "-c", f"echo init-{i} >> {directory}/trace"],
        }
        for i in range(2)
    ]
    await process_core.create_namespaced_pod("default", pod)
    await eventually(lambda: _phase(process_cluster, "ordered") == "Succeeded")
    log = await process_core.read_namespaced_pod_log("ordered", "default", container="main")
    assert log == "init-0\ninit-1\n"


async def test_a_pod_annotation_picks_the_process_runtime_in_a_simulated_cluster(
    core: client.CoreV1Api, cluster: Cluster
) -> None:
    assert cluster.config.runtime == "simulated"
    pod = _pod("real", "echo from-a-process")
    pod["metadata"]["annotations"] = {"kubesim.dev/runtime": "process"}
    await core.create_namespaced_pod("default", pod)
    await eventually(lambda: _phase(cluster, "real") == "Succeeded")
    assert await core.read_namespaced_pod_log("real", "default") == "from-a-process\n"


async def test_the_working_directory_is_honoured_when_it_exists(
    process_core: client.CoreV1Api, process_cluster: Cluster, tmp_path: Path
) -> None:
    directory = str(tmp_path)
    pod = _pod("pwd", "pwd")
    pod["spec"]["containers"][0]["workingDir"] = directory
    await process_core.create_namespaced_pod("default", pod)
    await eventually(lambda: _phase(process_cluster, "pwd") == "Succeeded")
    assert await process_core.read_namespaced_pod_log("pwd", "default") == f"{directory}\n"


async def test_a_container_ends_with_its_main_process_and_takes_its_children_along(
    process_core: client.CoreV1Api, process_cluster: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "child-alive"
    script = f"(sleep 1; touch {marker}) & echo parent-done"
    await process_core.create_namespaced_pod("default", _pod("parent", script))
    await eventually(lambda: _phase(process_cluster, "parent") == "Succeeded")
    assert await process_core.read_namespaced_pod_log("parent", "default") == "parent-done\n"
    await asyncio.sleep(1.3)
    assert not marker.exists()


async def test_a_pod_past_its_active_deadline_is_killed_and_failed(
    process_core: client.CoreV1Api, process_cluster: Cluster
) -> None:
    await process_core.create_namespaced_pod(
        "default", _pod("overdue", "sleep 30", activeDeadlineSeconds=1)
    )
    await eventually(lambda: _phase(process_cluster, "overdue") == "Failed", within=10)
    pod = await process_core.read_namespaced_pod("overdue", "default")
    assert pod.status.reason == "DeadlineExceeded"
    runtime: Any = process_cluster.kubelet.runtimes["process"]
    assert pod.metadata.uid not in runtime._pods
