"""`kubesim up` as users run it: kubeconfigs per cluster and merged, kubectl works, clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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


@contextlib.asynccontextmanager
async def kubesim_up(directory: Path, *flags: str) -> AsyncIterator[dict[str, Any]]:
    """`kubesim up FLAGS` in a process of its own: its summary (with `pid`), then SIGTERM; it
    must stop with exit code 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubesim.cli",
        "up",
        *flags,
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
        yield json.loads(raw) | {"pid": process.pid}
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 30)
    assert code == 0


async def test_kubesim_up_writes_kubeconfigs_serves_kubectl_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    directory = tmp_path
    flags = ("--clusters", "2", "--nodes", "3", "--profile", str(EXAMPLES / "small.profile"))
    async with kubesim_up(directory, *flags) as summary:
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


async def test_the_process_runtime_reaps_containers_without_a_thread_each(tmp_path: Path) -> None:
    directory = tmp_path
    pods = 12
    async with kubesim_up(directory, "--runtime", "process") as summary:
        kubectl = Kubectl(Path(summary["kubeconfig"]), directory / "cache")
        pod = (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  restartPolicy: Never\n"
            "  containers: [{name: main, image: busybox, command: [sh, -c, 'sleep 2; exit CODE']}]"
        )
        manifests = "\n---\n".join(
            pod.replace("NAME", f"p{i}").replace("CODE", str(i % 3)) for i in range(pods)
        )
        await kubectl("apply", "-f", "-", stdin=manifests)
        await kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod", "--all")
        threads = len(os.listdir(f"/proc/{summary['pid']}/task"))
        assert threads < 4, threads  # Python 3.11's default watcher: one thread per running child
        await kubectl("wait", "--for=jsonpath={.status.phase}=Failed", "pod", "p1", "p2")
        listed = (await kubectl("get", "pods", "-o", "json")).json()["items"]
        exit_codes = {
            p["metadata"]["name"]: p["status"]["containerStatuses"][0]["state"]["terminated"][
                "exitCode"
            ]
            for p in listed
        }
        assert exit_codes == {f"p{i}": i % 3 for i in range(pods)}
