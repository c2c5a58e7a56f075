"""A JobSet submitted to the federation runs as the JobSet controller would run it, on member
clusters with no JobSet controller: InOrder startup, and successPolicy Any finishing the
workload when its first target job (the driver) completes while the workers still run."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from e2e.conftest import kubectl, qctl
from e2e.test_federation import eventually, state_of
from qctl.commands.dev import DevFederation


def _role(name: str, replicas: int, script: str) -> dict[str, object]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "command": ["sh", "-c", script],
                                "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}},
                            }
                        ],
                    }
                },
            }
        },
    }


def test_an_in_order_jobset_with_success_policy_any_finishes_with_its_driver(
    federation: DevFederation, tmp_path: Path
) -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "pipeline", "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["driver"]},
            "replicatedJobs": [
                _role("driver", 1, "echo driving; sleep 4; echo driven"),
                _role("workers", 2, "echo working; sleep 300"),
            ],
        },
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(jobset))
    submitted = qctl(federation, "submit", "-f", str(path))
    assert "submitted" in submitted.stdout, submitted.stderr
    name = submitted.stdout.split()[0].split("/", 1)[1]

    assert eventually(lambda: state_of(federation, name) == "Succeeded", within=90)
    cluster = json.loads(qctl(federation, "get", "workload", name, "-o", "json").stdout)["status"][
        "clusterName"
    ]

    def jobs() -> dict[str, dict[str, object]]:
        out = kubectl(federation, cluster, "get", "jobs", "-A", "-o", "json")
        return {
            item["metadata"]["name"]: item
            for item in json.loads(out)["items"]
            if item["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name")
            == "pipeline"
        }

    # The driver completed; the workers (started after it, still running) were deleted.
    assert eventually(lambda: set(jobs()) == {"pipeline-driver-0"}, within=30)
    logs = qctl(federation, "logs", name).stdout
    assert "driven" in logs
