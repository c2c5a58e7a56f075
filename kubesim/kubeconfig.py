"""Kubeconfig files for simulated clusters: one per cluster and a merged one.

Each cluster gets a context named after it, a plain-http server URL on 127.0.0.1, and a
token user (kubesim does not authenticate, but clients expect a user entry). Written by
`kubesim.cluster.Simulator`; read by kubectl, kubernetes_asyncio and the federation tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["kubeconfig_document", "write_kubeconfig", "write_merged_kubeconfig"]


def kubeconfig_document(
    clusters: list[tuple[str, str]], current: str | None = None
) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context per (name, url)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in clusters],
        "users": [{"name": f"{name}-admin", "user": {"token": "kubesim"}} for name, _ in clusters],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": name, "user": f"{name}-admin", "namespace": "default"},
            }
            for name, _ in clusters
        ],
        "current-context": current or (clusters[0][0] if clusters else ""),
    }


def _write(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)


def write_kubeconfig(path: Path, name: str, url: str) -> None:
    _write(path, kubeconfig_document([(name, url)]))


def write_merged_kubeconfig(path: Path, clusters: list[tuple[str, str]]) -> None:
    _write(path, kubeconfig_document(clusters))
