"""Kueue users move over unchanged: `qctl validate` and `qctl apply` take Kueue's own queue
setups (examples/kueue/), a MultiKueue setup applies as a ClusterSet and a GlobalQueue once its
clusters have joined, and `qctl get -o yaml --kueue` writes the objects back as Kueue's.

qctl runs as a real process against a real hub on a loopback socket."""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from api.tokens import hash_token
from tests.hub.service.conftest import ADMIN, HubUnderTest, running_hub

ROOT = Path(__file__).resolve().parents[2]
KUEUE_EXAMPLES = ROOT / "examples" / "kueue"
API = "/apis/multiq.dev/v1alpha1"


async def _qctl(hub: HubUnderTest, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MULTIQ_SERVER": hub.url,
        "MULTIQ_TOKEN": ADMIN,
        "MULTIQ_CONFIG": str(hub.tmp / "no-config.yaml"),
    }
    return await asyncio.to_thread(
        subprocess.run,
        [str(Path(sys.executable).parent / "qctl"), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _quantities_as_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _quantities_as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_quantities_as_strings(v) for v in value]
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _kueue_docs(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((KUEUE_EXAMPLES / name).read_text()))


async def test_a_kueue_single_cluster_setup_applies_unchanged_and_writes_back_as_kueues(
    tmp_path: Path,
) -> None:
    async with running_hub(tmp_path) as hub:
        applied = await _qctl(hub, "apply", "-f", str(KUEUE_EXAMPLES / "single-cluster-setup.yaml"))
        assert applied.returncode == 0, applied.stderr
        assert "clusterqueue/team-a created" in applied.stdout
        assert "converted from kueue.x-k8s.io/v1beta2" in applied.stdout

        status, cq = await hub.call("GET", f"{API}/clusterqueues/team-a")
        assert status == 200
        assert cq["spec"]["cohortName"] == "research"
        status, lq = await hub.call("GET", f"{API}/namespaces/default/localqueues/team-a-queue")
        assert (status, lq["spec"]["clusterQueue"]) == (200, "team-a")

        again = await _qctl(hub, "apply", "-f", str(KUEUE_EXAMPLES / "single-cluster-setup.yaml"))
        assert "clusterqueue/team-a unchanged" in again.stdout, again.stderr

        written = await _qctl(hub, "get", "cq", "team-a", "-o", "yaml", "--kueue")
        assert written.returncode == 0, written.stderr
        back = yaml.safe_load(written.stdout)
        original = next(
            d for d in _kueue_docs("single-cluster-setup.yaml") if d["kind"] == "ClusterQueue"
        )
        assert back["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert back["kind"] == "ClusterQueue"
        # Kueue's server defaults the same fields; the values given come back as given
        # (quantities as strings, as Kubernetes writes them).
        for key, value in original["spec"].items():
            assert back["spec"][key] == _quantities_as_strings(value), key

        v1beta1 = await _qctl(hub, "get", "cq", "team-a", "-o", "json", "--kueue", "v1beta1")
        assert '"cohort": "research"' in v1beta1.stdout, v1beta1.stderr

        table = await _qctl(hub, "get", "cq", "--kueue")
        assert table.returncode != 0
        assert "--kueue writes objects once: use it with -o yaml or -o json" in table.stderr


async def test_a_multikueue_setup_applies_once_its_clusters_have_joined(tmp_path: Path) -> None:
    setup = str(KUEUE_EXAMPLES / "multikueue-setup.yaml")
    async with running_hub(tmp_path) as hub:
        refused = await _qctl(hub, "apply", "-f", setup)
        assert refused.returncode != 0
        assert "MultiKueueCluster worker-1 has not joined the hub" in refused.stderr
        assert "qctl cluster join worker-1 --kubeconfig FILE --context CONTEXT" in refused.stderr
        status, _ = await hub.call("GET", f"{API}/clusterqueues/fleet")
        assert status == 404, "nothing is applied while a cluster is missing"

        await hub.apply(
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": "worker-1"},
                "spec": {"tokenHash": hash_token("worker-1-token")},
            }
        )
        applied = await _qctl(hub, "apply", "-f", setup)
        assert applied.returncode == 0, applied.stderr
        assert "clusterset/workers created" in applied.stdout
        assert "globalqueue/fleet created" in applied.stdout

        status, gq = await hub.call("GET", f"{API}/globalqueues/fleet")
        assert status == 200
        assert gq["spec"]["clusterSet"] == "workers"
        assert gq["spec"]["clusterQueues"] == ["fleet"]
        assert gq["spec"]["dispatchPolicy"]["type"] == "AllAtOnce"
        status, cs = await hub.call("GET", f"{API}/clustersets/workers")
        assert (status, cs["spec"]["clusters"]) == (200, ["worker-1"])


async def test_a_kueue_field_multiq_cannot_honour_applies_nothing_and_is_named(
    tmp_path: Path,
) -> None:
    docs = _kueue_docs("single-cluster-setup.yaml")
    broken = copy.deepcopy(docs)
    cq = next(d for d in broken if d["kind"] == "ClusterQueue")
    cq["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump_all(broken, sort_keys=False))
    async with running_hub(tmp_path) as hub:
        validated = await _qctl(hub, "validate", "-q", "-f", str(path))
        assert validated.returncode != 0
        index = broken.index(cq)
        assert (
            f"{path}: document {index} (ClusterQueue 'team-a'): spec.concurrentAdmissionPolicy: "
            "Forbidden: MultiQ does not support this Kueue field"
        ) in validated.stdout
        applied = await _qctl(hub, "apply", "-f", str(path))
        assert applied.returncode != 0
        assert "nothing applied" in applied.stderr
        status, _ = await hub.call("GET", f"{API}/resourceflavors/default-flavor")
        assert status == 404
