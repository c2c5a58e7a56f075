"""What `qctl cluster join` installs in a member cluster is exactly manifests/agent (as kubectl
renders it), so the ClusterRole the agent's tests check every call against is the one users
get either way; the agent's Secret connects it to its hub."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from qctl.install import AGENT_RULES, agent_objects, agent_secret

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "agent"


def keyed(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_qctl_renders_the_same_objects_as_the_agents_kustomization() -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl
    rendered = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS)], capture_output=True, text=True, check=True
    ).stdout
    from_files = keyed([d for d in yaml.safe_load_all(rendered) if d])
    from_qctl = keyed(agent_objects())
    assert from_files.keys() == from_qctl.keys()
    for key, obj in from_qctl.items():
        assert obj == from_files[key], f"{key} differs between qctl.install and manifests/agent"


def test_the_cluster_role_is_the_agents_rules() -> None:
    (role,) = [o for o in agent_objects() if o["kind"] == "ClusterRole"]
    assert role["rules"] == AGENT_RULES


def test_the_image_is_the_one_asked_for_and_the_secret_carries_the_connection() -> None:
    (deployment,) = [
        o for o in agent_objects("registry.local/multiq:1.2") if o["kind"] == "Deployment"
    ]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.local/multiq:1.2"
    )
    secret = agent_secret("gpu-east", "https://hub.example:8470", "t0ken")
    assert secret["stringData"] == {
        "cluster": "gpu-east",
        "hub-url": "https://hub.example:8470",
        "token": "t0ken",
    }
    assert secret["metadata"]["namespace"] == "multiq-system"
