"""`kubesim up` as users run it: kubeconfigs per cluster and merged, kubectl works, clean stop."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from kubesim.profile import build_nodes, load_profile
from tests.kubesim.conftest import Kubectl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubesim"


@pytest.mark.parametrize("profile", sorted(EXAMPLES.glob("*.profile")), ids=lambda p: p.name)
def test_every_example_profile_loads_and_builds_nodes(profile: Path) -> None:
    nodes = build_nodes(load_profile(profile))
    assert nodes
    assert all(n["status"]["allocatable"] for n in nodes)


def test_the_gpu_profile_labels_blocks_and_subblocks() -> None:
    nodes = {
        n["metadata"]["name"]: n
        for n in build_nodes(load_profile(EXAMPLES / "gpu-topology.profile"))
    }
    labels = nodes["gpu-9"]["metadata"]["labels"]
    assert labels["cloud.google.com/gce-topology-block"] == "block-1"
    assert labels["cloud.google.com/gce-topology-subblock"] == "subblock-2"


async def test_kubesim_up_writes_kubeconfigs_serves_kubectl_and_stops_on_sigterm() -> None:
    directory = Path(tempfile.mkdtemp(prefix="kubesim-up-"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubesim.cli",
        "up",
        "--clusters",
        "2",
        "--nodes",
        "3",
        "--profile",
        str(EXAMPLES / "small.profile"),
        "--dir",
        str(directory),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        raw = b""
        while not raw.rstrip().endswith(b"}") or raw.count(b"{") != raw.count(b"}"):
            line = await asyncio.wait_for(process.stdout.readline(), 30)
            assert line, "kubesim up exited early"
            raw += line
        summary = json.loads(raw)
        assert [c["name"] for c in summary["clusters"]] == ["kubesim-0", "kubesim-1"]
        merged_text = await asyncio.to_thread(Path(summary["kubeconfig"]).read_text)
        merged = yaml.safe_load(merged_text)
        assert [c["name"] for c in merged["contexts"]] == ["kubesim-0", "kubesim-1"]
        kubectl = Kubectl(Path(summary["kubeconfig"]), directory / "cache")
        nodes = await kubectl("--context", "kubesim-1", "get", "nodes", "-o", "name")
        assert nodes.stdout.split() == ["node/node-0", "node/node-1", "node/node-2"]
        single = Kubectl(Path(summary["clusters"][0]["kubeconfig"]), directory / "cache0")
        assert (
            await single("get", "ns", "default", "-o", "name")
        ).stdout.strip() == "namespace/default"
        over_tls = await single(
            f"--server={summary['clusters'][0]['https_url']}",
            f"--certificate-authority={summary['ca']}",
            "auth",
            "whoami",
        )
        assert "kubesim-admin" in over_tls.stdout
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 30)
    assert code == 0
