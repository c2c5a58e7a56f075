"""kueuectl's stop and resume through a dev federation (two kubesim clusters, their agents,
the hub): a stopped workload's Jobs go away and it waits at the hub, resumed it runs again as
a new generation; a cluster queue stopped with HoldAndDrain evicts what it runs on every
cluster and admits nothing until resumed, one stopped with --keep-already-running (Hold)
lets it run."""

from __future__ import annotations

import time
from pathlib import Path

from e2e.conftest import qctl, workload
from e2e.test_federation import eventually, jobs_for, sleeper_job
from qctl.commands.dev import DevFederation


def bound_cluster(fed: DevFederation, name: str) -> str | None:
    return (workload(fed, name).get("status") or {}).get("clusterName")


def generation(fed: DevFederation, name: str) -> int:
    return int((workload(fed, name).get("status") or {}).get("dispatchGeneration") or 0)


def running_on(fed: DevFederation, name: str) -> str:
    """Wait until the workload's pods run on a cluster with its Job there; that cluster."""

    def running() -> str | None:
        wl = workload(fed, name)
        status = wl.get("status") or {}
        cluster = status.get("clusterName")
        pods = status.get("pods") or {}
        if cluster and pods.get("running") and jobs_for(fed, cluster, name):
            return str(cluster)
        return None

    return str(eventually(running, within=90))


def no_jobs_anywhere(fed: DevFederation, name: str) -> bool:
    return all(not jobs_for(fed, cluster, name) for cluster in fed.names)


def test_a_stopped_workload_leaves_its_cluster_and_runs_again_when_resumed(
    federation: DevFederation, tmp_path: Path
) -> None:
    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "long", 600)))
    first = running_on(federation, "job-long")
    before = generation(federation, "job-long")

    stopped = qctl(federation, "stop", "workload", "job-long")
    assert stopped.stdout == "workload/job-long stopped\n"
    eventually(lambda: no_jobs_anywhere(federation, "job-long"), within=60)
    eventually(lambda: bound_cluster(federation, "job-long") is None, within=30)
    listed = qctl(federation, "list", "workload", "--status", "stopped").stdout
    assert "job-long" in listed and "STOPPED" in listed
    # Stopped stays stopped: nothing dispatches it again while it is inactive.
    time.sleep(3)
    assert bound_cluster(federation, "job-long") is None
    assert no_jobs_anywhere(federation, "job-long")
    assert jobs_for(federation, first, "job-long") == []

    qctl(federation, "resume", "workload", "job-long")
    running_on(federation, "job-long")
    assert generation(federation, "job-long") > before


def test_a_cluster_queue_stopped_drains_its_work_and_resumed_admits_it_again(
    federation: DevFederation, tmp_path: Path
) -> None:
    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "drained", 600)))
    running_on(federation, "job-drained")

    held = qctl(federation, "stop", "clusterqueue", "default", "--keep-already-running")
    assert held.stdout == "clusterqueue/default stopped\n"
    # The stop reaches the agents with the hub's next configuration push: a job submitted
    # before it lands could still be admitted (seen on a loaded machine).
    time.sleep(5)
    qctl(federation, "submit", "-f", str(sleeper_job(tmp_path, "waits", 600)))
    time.sleep(5)  # Hold keeps the running one and admits nothing new
    assert workload(federation, "job-drained")["status"]["pods"]["running"] == 1
    waiting = workload(federation, "job-waits").get("status") or {}
    assert not (waiting.get("pods") or {}).get("running")

    qctl(federation, "stop", "cq", "default")  # HoldAndDrain
    eventually(lambda: no_jobs_anywhere(federation, "job-drained"), within=60)
    time.sleep(3)
    assert no_jobs_anywhere(federation, "job-drained")
    assert no_jobs_anywhere(federation, "job-waits")

    qctl(federation, "resume", "cq", "default")
    running_on(federation, "job-drained")
    running_on(federation, "job-waits")
