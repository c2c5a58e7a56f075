"""waitForPodsReady through the federation: a MemberCluster set to wait 2 s for pods evicts a
workload whose pods cannot start (its node selector matches no node), the hub requeues it
after its backoff and dispatches it again, and past the backoff limit deactivates it; resumed,
it counts its requeues from zero again."""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.conftest import change_member_cluster, qctl, workload
from e2e.test_federation import eventually, sleeper_job
from qctl.commands.dev import DevFederation


def test_pods_that_cannot_start_are_evicted_requeued_then_deactivated(
    federation: DevFederation, tmp_path: Path
) -> None:
    for cluster in ("sim-0", "sim-1"):
        change_member_cluster(
            federation,
            tmp_path,
            cluster,
            waitForPodsReady={
                "timeoutSeconds": 2,
                "requeuingStrategy": {"backoffBaseSeconds": 1, "backoffLimitCount": 1},
            },
        )

    job_path = sleeper_job(tmp_path, "stuck", 60)
    job = yaml.safe_load(job_path.read_text())
    job["spec"]["template"]["spec"]["nodeSelector"] = {"no-such-label": "anywhere"}
    job_path.write_text(yaml.safe_dump(job))
    qctl(federation, "submit", "-f", str(job_path))

    def conditions() -> dict[str, dict[str, str]]:
        wl = workload(federation, "job-stuck")
        return {c["type"]: c for c in (wl.get("status") or {}).get("conditions", [])}

    evicted = eventually(
        lambda: (
            conditions().get("Evicted", {}).get("reason") == "EvictedOnCluster" and conditions()
        ),
        within=60,
    )
    assert "pods not ready within the timeout of 2s" in evicted["Evicted"]["message"]

    def deactivated() -> dict[str, object] | None:
        wl = workload(federation, "job-stuck")
        return wl if wl["spec"].get("active") is False else None

    wl = eventually(deactivated, within=60)
    status = wl["status"]
    assert status["dispatchGeneration"] >= 2, "dispatched again after its first eviction"
    requeued = next(c for c in status["conditions"] if c["type"] == "Requeued")
    assert requeued["reason"] == "RequeuingLimitExceeded"
    described = qctl(federation, "describe", "workload", "job-stuck").stdout
    assert "RequeuingLimitExceeded" in described

    # Resumed, it starts its requeuing count again (Kueue): the next timeout backs off
    # rather than deactivating it at once.
    qctl(federation, "resume", "workload", "job-stuck")

    def backed_off_again() -> dict[str, object] | None:
        wl = workload(federation, "job-stuck")
        found = {c["type"]: c for c in (wl.get("status") or {}).get("conditions", [])}
        requeued = found.get("Requeued", {})
        return (
            wl if wl["spec"].get("active") and requeued.get("reason") == "BackoffRequeue" else None
        )

    wl = eventually(backed_off_again, within=60)
    assert wl["status"]["dispatchGeneration"] > status["dispatchGeneration"]
    assert wl["status"]["requeueState"]["count"] == 1
