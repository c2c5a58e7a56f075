"""One running copy in the dispatch modes that ask several clusters at once: a burst of
workloads offered to every cluster with room (AllAtOnce) creates each one's Jobs in one
cluster only — the clusters reserve, the hub binds one, the others release without ever
creating anything (docs/exactly-once.md). Watched with kubectl on every cluster for the whole
run, so a Job created and deleted a moment later is seen too."""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.conftest import JobWatch, qctl, workload
from e2e.test_federation import eventually, sleeper_job, state_of
from qctl.commands.dev import DevFederation


def test_an_all_at_once_burst_creates_every_workloads_jobs_in_one_cluster_only(
    federation: DevFederation, tmp_path: Path
) -> None:
    all_at_once = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "GlobalQueue",
        "metadata": {"name": "default"},
        "spec": {"clusterSet": "default", "dispatchPolicy": {"type": "AllAtOnce"}},
    }
    (tmp_path / "gq.yaml").write_text(yaml.safe_dump(all_at_once))
    qctl(federation, "apply", "-f", str(tmp_path / "gq.yaml"))
    watches = [JobWatch(federation, cluster) for cluster in federation.names]
    try:
        names = [f"burst-{i}" for i in range(8)]
        burst = tmp_path / "burst.yaml"
        burst.write_text(
            "---\n".join(
                yaml.safe_dump(yaml.safe_load(sleeper_job(tmp_path, n, 2).read_text()))
                for n in names
            )
        )
        qctl(federation, "submit", "-f", str(burst))

        def all_succeeded() -> bool:
            return all(state_of(federation, f"job-{n}") == "Succeeded" for n in names)

        eventually(all_succeeded, within=120)
    finally:
        for watch in watches:
            watch.stop()
    seen = {w.cluster: w.workloads for w in watches}
    everywhere = set.intersection(*seen.values())
    assert everywhere == set(), f"Jobs created in more than one cluster: {sorted(everywhere)}"
    assert set.union(*seen.values()) == {f"job-{n}" for n in names}
    generations = {workload(federation, f"job-{n}")["status"]["dispatchGeneration"] for n in names}
    assert generations == {1}  # bound at the first round of reservations
