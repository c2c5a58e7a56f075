"""Kubeconfig files for simulated clusters: one per cluster and a merged one.

Each cluster gets a context named after it, a plain-http server URL on 127.0.0.1, and a
token user with the admin token (kubectl sends no token over plain HTTP, and kubesim takes a
request without credentials for the admin; kubernetes_asyncio sends it). Written by
`kubesim.cluster.Simulator`; read by kubectl, kubernetes_asyncio and the federation tests.
`write_token_kubeconfig` writes one for a bearer token against the cluster's HTTPS port, as a
service account's user would hold it (tests, `qctl cluster join`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "kubeconfig_document",
    "write_kubeconfig",
    "write_merged_kubeconfig",
    "write_token_kubeconfig",
]


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


def write_token_kubeconfig(
    path: Path, name: str, https_url: str, ca_cert: Path, token: str, namespace: str = "default"
) -> None:
    """A kubeconfig that reaches `https_url` as whoever `token` stands for."""
    _write(
        path,
        {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {
                    "name": name,
                    "cluster": {"server": https_url, "certificate-authority": str(ca_cert)},
                }
            ],
            "users": [{"name": f"{name}-token", "user": {"token": token}}],
            "contexts": [
                {
                    "name": name,
                    "context": {"cluster": name, "user": f"{name}-token", "namespace": namespace},
                }
            ],
            "current-context": name,
        },
    )
