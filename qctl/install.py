"""The objects that install one MultiQ agent into a member cluster, as data.

`agent_objects` renders what `kubectl apply -k manifests/agent` installs (namespace,
ServiceAccount, the least-privilege ClusterRole and its binding, the state volume, the
Deployment) plus the Secret that connects this agent to its hub (`cluster`, `hub-url`,
`token`). manifests/agent/*.yaml are the same objects for people who install by hand;
tests/qctl/test_install.py keeps the two equal, so either can be read as the truth.

Pure (no I/O). Called by: qctl.commands.cluster (join renders and applies them; leave deletes
them), tests.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AGENT_NAME",
    "AGENT_RULES",
    "DEFAULT_IMAGE",
    "NAMESPACE",
    "agent_objects",
    "agent_secret",
]

NAMESPACE = "multiq-system"
AGENT_NAME = "multiq-agent"
DEFAULT_IMAGE = "multiq:latest"
UID = 10001
CONNECTION_DIR = "/etc/multiq/agent"
METRICS_PORT = 8471

# Exactly what the agent calls (agent/k8s/client.py is its only Kubernetes client).
AGENT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch", "create"]},
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "create", "delete"]},
    {"nonResourceURLs": ["/version"], "verbs": ["get"]},
]

_PART_OF = {"app.kubernetes.io/part-of": "multiq"}
_AGENT_LABELS = {"app.kubernetes.io/name": AGENT_NAME}


def agent_secret(
    cluster: str, hub_url: str, token: str, *, certificate_authority: str | None = None
) -> dict[str, Any]:
    """How the agent finds and proves itself to its hub; with the hub's CA certificate (PEM)
    when the hub serves https with a certificate the cluster does not already trust."""
    data = {"cluster": cluster, "hub-url": hub_url, "token": token}
    if certificate_authority is not None:
        data["ca.crt"] = certificate_authority
        # Read by the Deployment as MULTIQ_AGENT_CERTIFICATE_AUTHORITY (an optional key).
        data["certificate-authority"] = f"{CONNECTION_DIR}/ca.crt"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": AGENT_NAME, "namespace": NAMESPACE, "labels": dict(_AGENT_LABELS)},
        "type": "Opaque",
        "stringData": data,
    }


def agent_objects(
    image: str = DEFAULT_IMAGE, *, metrics_port: int = METRICS_PORT
) -> list[dict[str, Any]]:
    """The agent's objects, without its Secret, in the order they are applied. The metrics
    port matters only where pods share the host's network (kubesim's process runtime)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": dict(_PART_OF)},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": AGENT_NAME, "namespace": NAMESPACE, "labels": dict(_AGENT_LABELS)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": AGENT_NAME, "labels": dict(_AGENT_LABELS)},
            "rules": [dict(rule) for rule in AGENT_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": AGENT_NAME, "labels": dict(_AGENT_LABELS)},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": AGENT_NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "multiq-agent-state", "namespace": NAMESPACE},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "256Mi"}},
            },
        },
        _deployment(image, metrics_port),
    ]


def _deployment(image: str, metrics_port: int) -> dict[str, Any]:
    def from_secret(name: str, key: str, *, optional: bool = False) -> dict[str, Any]:
        ref: dict[str, Any] = {"name": AGENT_NAME, "key": key}
        if optional:
            ref["optional"] = True
        return {"name": name, "valueFrom": {"secretKeyRef": ref}}

    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": AGENT_NAME,
            "namespace": NAMESPACE,
            "labels": {**_AGENT_LABELS, **_PART_OF},
        },
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(_AGENT_LABELS)},
            "template": {
                "metadata": {
                    "labels": {**_AGENT_LABELS, **_PART_OF},
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(metrics_port),
                    },
                },
                "spec": {
                    "serviceAccountName": AGENT_NAME,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "fsGroup": UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": 30,
                    "containers": [
                        {
                            "name": "agent",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["multiq-agent"],
                            "env": [
                                from_secret("MULTIQ_AGENT_CLUSTER", "cluster"),
                                from_secret("MULTIQ_AGENT_HUB", "hub-url"),
                                {
                                    "name": "MULTIQ_AGENT_TOKEN_FILE",
                                    "value": f"{CONNECTION_DIR}/token",
                                },
                                from_secret(
                                    "MULTIQ_AGENT_CERTIFICATE_AUTHORITY",
                                    "certificate-authority",
                                    optional=True,
                                ),
                                {"name": "MULTIQ_AGENT_METRICS_PORT", "value": str(metrics_port)},
                                {
                                    "name": "MULTIQ_AGENT_STATE_DIR",
                                    "value": "/var/lib/multiq-agent",
                                },
                                {"name": "MULTIQ_AGENT_LOG_LEVEL", "value": "INFO"},
                            ],
                            "ports": [
                                {
                                    "name": "metrics",
                                    "containerPort": METRICS_PORT,
                                    "protocol": "TCP",
                                }
                            ],
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "metrics"},
                                "periodSeconds": 10,
                                "failureThreshold": 3,
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {
                                    "name": "connection",
                                    "mountPath": CONNECTION_DIR,
                                    "readOnly": True,
                                },
                                {"name": "state", "mountPath": "/var/lib/multiq-agent"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "connection",
                            "secret": {"secretName": AGENT_NAME},
                        },
                        {
                            "name": "state",
                            "persistentVolumeClaim": {"claimName": "multiq-agent-state"},
                        },
                    ],
                },
            },
        },
    }
