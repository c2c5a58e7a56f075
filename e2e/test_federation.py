"""A researcher submits once and follows logs from everywhere; the federation keeps every
accepted workload through agent and hub crashes and never runs one in two clusters."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import ROOT, kubectl, qctl, workload
from qctl.commands.dev import DevFederation


def eventually(check: Callable[[], Any], *, within: float = 60.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {within}s: {check}")
        time.sleep(every)


def state_of(fed: DevFederation, name: str) -> str:
    wl = workload(fed, name)
    conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions", [])}
    finished = conditions.get("Finished")
    if finished and finished["status"] == "True":
        return str(finished["reason"])
    return "Bound" if (wl.get("status") or {}).get("clusterName") else "Pending"


def sleeper_job(
    tmp: Path, name: str, seconds: int, cpu: str = "1", *, queue: str = "default"
) -> Path:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": queue}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": [
                                "sh",
                                "-c",
                                f"echo started; sleep {seconds}; echo finished",
                            ],
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                        }
                    ],
                }
            }
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def jobs_for(fed: DevFederation, cluster: str, workload_name: str) -> list[str]:
    out = kubectl(
        fed,
        cluster,
        "get",
        "jobs",
        "-A",
        "-o",
        "json",
        "-l",
        f"multiq.dev/workload-name={workload_name}",
    )
    return [item["metadata"]["name"] for item in json.loads(out)["items"]]


def test_submitted_jobs_run_on_the_clusters_and_their_logs_stream_through_the_hub(
    federation: DevFederation,
) -> None:
    train = str(ROOT / "examples" / "demo" / "train.yaml")
    submitted = qctl(federation, "submit", "-f", train, "--follow", timeout=120)
    assert "workload/job-train submitted to queue default" in submitted.stdout
    lines = submitted.stdout.splitlines()
    assert any("/trainer worker 0: epoch 5/5" in line for line in lines)
    assert any("/trainer worker 1: done" in line for line in lines)
    assert lines[-1] == "workload/job-train succeeded"
    assert state_of(federation, "job-train") == "Succeeded"
    again = qctl(federation, "logs", "job-train")
    assert "worker 0: done" in again.stdout
    table = qctl(federation, "get", "workloads").stdout
    assert "job-train" in table and "Succeeded" in table
    # The hub and every agent `qctl dev up` started run on uvloop's event loop (runtime.loop):
    # its extension module is mapped into a process only if the loop was made with it.
    ours = [(n, p) for n, p in federation.processes if n == "hub" or n.startswith("agent-")]
    assert len(ours) == 3
    for name, process in ours:
        assert "uvloop" in Path(f"/proc/{process.pid}/maps").read_text(), name


def test_a_restarted_agent_adopts_its_job_and_status_resumes(
    federation: DevFederation, tmp_path: Path
) -> None:
    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "long", 8)))
    eventually(lambda: state_of(federation, "job-long") == "Bound")
    cluster = workload(federation, "job-long")["status"]["clusterName"]
    eventually(lambda: jobs_for(federation, cluster, "job-long"))
    federation.kill(f"agent-{cluster}", signal.SIGKILL)
    federation.restart(f"agent-{cluster}")
    eventually(lambda: state_of(federation, "job-long") == "Succeeded", within=90)
    assert len(jobs_for(federation, cluster, "job-long")) == 1


def test_a_hub_killed_with_sigkill_forgets_no_accepted_workload(
    federation: DevFederation, tmp_path: Path
) -> None:
    names = [f"batch-{i}" for i in range(6)]
    for name in names:
        qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, name, 2)))
    federation.kill("hub", signal.SIGKILL)
    federation.restart("hub")
    listed = eventually(lambda: _names(federation))
    assert {f"job-{n}" for n in names} <= listed

    def all_succeeded() -> bool:
        return all(state_of(federation, f"job-{n}") == "Succeeded" for n in names)

    eventually(all_succeeded, within=90)


def _names(fed: DevFederation) -> set[str] | None:
    result = qctl(fed, "get", "workloads", "-o", "json", check=False)
    if result.returncode != 0:
        return None
    return {item["metadata"]["name"] for item in json.loads(result.stdout)["items"]}


def test_a_lost_cluster_keeps_its_workloads_and_new_work_goes_elsewhere(
    federation: DevFederation, tmp_path: Path
) -> None:
    def admitted(name: str) -> bool:
        conditions = (workload(federation, name).get("status") or {}).get("conditions", [])
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)

    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "stays", 30)))
    # Bound is not enough: BestFit binds before it offers, so the agent may not have taken
    # it yet; killed then, the hub rightly counts it dispatched, not running.
    eventually(lambda: state_of(federation, "job-stays") == "Bound" and admitted("job-stays"))
    lost = workload(federation, "job-stays")["status"]["clusterName"]
    other = next(n for n in federation.names if n != lost)
    federation.kill(f"agent-{lost}", signal.SIGKILL)

    def shown_lost() -> bool:
        clusters = json.loads(qctl(federation, "get", "clusters", "-o", "json").stdout)
        status = next(c for c in clusters["items"] if c["metadata"]["name"] == lost)["status"]
        return status["connected"] is False and "lostSince" in status

    eventually(shown_lost, within=30)
    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "fresh", 1)))
    eventually(lambda: state_of(federation, "job-fresh") == "Succeeded")
    assert workload(federation, "job-fresh")["status"]["clusterName"] == other
    # The lost cluster may still be running it: the hub must not start it anywhere else.
    assert state_of(federation, "job-stays") == "Bound"
    assert workload(federation, "job-stays")["status"]["clusterName"] == lost
    assert jobs_for(federation, other, "job-stays") == []

    def row(kind: str, name: str) -> list[str]:
        table = qctl(federation, "get", kind).stdout.splitlines()
        return next(line.split() for line in table[1:] if line.split()[0] == name)

    # What `qctl get` shows: one of the set's two clusters connected, and the queue's one
    # workload still bound (to the lost cluster); nothing pending or offered.
    eventually(lambda: row("clustersets", "default")[1:3] == [",".join(federation.names), "1"])
    eventually(lambda: row("queues", "default")[3:6] == ["0", "0", "1"])


def test_bad_input_is_a_clear_error_and_stores_nothing(
    federation: DevFederation, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Job\nmetadata: [\n")
    result = qctl(federation, "submit", "-f", str(broken), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {broken}: invalid YAML at line 3")

    unknown = sleeper_job(tmp_path, "lost-queue", 1)
    result = qctl(federation, "submit", "-f", str(unknown), "--queue", "nope", check=False)
    assert result.returncode == 1
    assert 'spec.queueName: Not found: "nope": no LocalQueue of that name' in result.stderr

    huge = yaml.safe_load(sleeper_job(tmp_path, "huge", 1).read_text())
    huge["metadata"]["annotations"] = {"padding": "x" * (3 * 1024 * 1024)}
    (tmp_path / "huge.yaml").write_text(yaml.safe_dump(huge))
    result = qctl(federation, "submit", "-f", str(tmp_path / "huge.yaml"), check=False)
    assert result.returncode == 1
    assert "request body too large" in result.stderr

    result = qctl(federation, "get", "workloads", "--token", "wrong", check=False)
    assert result.returncode == 1
    assert result.stderr == "error: the bearer token is not valid\n"

    assert _names(federation) == set()
