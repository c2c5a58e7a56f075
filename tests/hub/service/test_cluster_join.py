"""`qctl cluster join`'s failures are one line each and leave nothing half-made: a name already
taken, a member cluster that cannot be reached (the registration is taken back), a hub that
cannot be reached. (The whole join, with the agent as a pod under RBAC: e2e/test_deploy.py.)"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import yaml

from qctl.commands.dev import free_port
from tests.hub.service.conftest import ADMIN, HubUnderTest, fleet_objects

API = "/apis/multiq.dev/v1alpha1"


async def qctl(*argv: str, server: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTIQ_")}
    env["MULTIQ_CONFIG"] = "/nonexistent/multiq-config.yaml"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qctl.main", *argv, "--server", server, "--token", ADMIN,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    port = free_port()  # nothing listens there
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "gone", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
        "current-context": "gone",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_taken_name_is_refused_in_one_line(hub: HubUnderTest, tmp_path: Path) -> None:
    await hub.apply(*fleet_objects())
    code, _, err = await qctl(
        "cluster", "join", "east", "--kubeconfig", str(unreachable_kubeconfig(tmp_path)),
        server=hub.url,
    )  # fmt: skip
    assert code == 1
    assert err.strip().count("\n") == 0 and "name taken: east is already a member" in err


async def test_an_unreachable_cluster_is_said_in_one_line_and_nothing_is_registered(
    hub: HubUnderTest, tmp_path: Path
) -> None:
    code, _, err = await qctl(
        "cluster", "join", "north", "--kubeconfig", str(unreachable_kubeconfig(tmp_path)),
        server=hub.url,
    )  # fmt: skip
    assert code == 1
    assert err.strip().count("\n") == 0 and "cluster unreachable" in err, err
    status, _ = await hub.call("GET", f"{API}/memberclusters/north")
    assert status == 404


async def test_an_unreachable_hub_is_said_in_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    code, _, err = await qctl(
        "cluster", "join", "north", "--kubeconfig", str(unreachable_kubeconfig(tmp_path)),
        server=f"http://127.0.0.1:{port}",
    )  # fmt: skip
    assert code == 1
    assert err.strip().count("\n") == 0 and f"127.0.0.1:{port}" in err, err
