"""Every kustomization under manifests/ renders with the real kubectl (1.32, its built-in
kustomize) and every object it renders is valid Kubernetes 1.32 by kubernetes-validate's
strict schemas (offline: unknown fields are errors)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUSTOMIZATIONS = sorted(p.parent for p in MANIFESTS.rglob("kustomization.yaml"))
KUBERNETES = "1.32.0"


def render(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to render the manifests"
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_there_is_a_kustomization_for_the_hub_the_agent_and_each_overlay() -> None:
    names = {str(p.relative_to(MANIFESTS)) for p in KUSTOMIZATIONS}
    assert {"hub", "agent", "overlays/kind", "overlays/ha"} <= names


@pytest.mark.parametrize(
    "directory", KUSTOMIZATIONS, ids=[str(p.relative_to(MANIFESTS)) for p in KUSTOMIZATIONS]
)
def test_the_kustomization_renders_and_every_object_is_valid_kubernetes(directory: Path) -> None:
    objects = render(directory)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_the_workloads_run_as_non_root_without_privilege_escalation() -> None:
    for directory in KUSTOMIZATIONS:
        for obj in render(directory):
            if obj["kind"] not in ("Deployment", "StatefulSet"):
                continue
            pod = obj["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
            for container in pod["containers"]:
                security = container["securityContext"]
                assert security["allowPrivilegeEscalation"] is False
                assert security["capabilities"]["drop"] == ["ALL"]
                assert "memory" in container["resources"]["limits"]
