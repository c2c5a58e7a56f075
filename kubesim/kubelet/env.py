"""A container's environment as the kubelet builds it, for the process runtime.

Resolves `envFrom` (ConfigMaps, Secrets, prefixes), `env` values with `$(VAR)` expansion, and
`valueFrom`: the downward API (`fieldRef` on metadata.name / namespace / uid / labels['k'] /
annotations['k'], spec.nodeName, spec.serviceAccountName, status.hostIP / podIP; and
`resourceFieldRef` on requests/limits of cpu and memory), `configMapKeyRef` and
`secretKeyRef`. Adds what every container sees (HOSTNAME, KUBERNETES_SERVICE_HOST/PORT
pointing at this kubesim cluster's HTTPS port, PATH and HOME from the host) and, unless
`enableServiceLinks` is false, the variables of the namespace's Services (given by
`kubesim.controllers.services`), which the container's own `env` and `envFrom` override.
Called by `kubesim.kubelet.process`.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping
from typing import Any

from api.quantity import QuantityError, parse_quantity
from kubesim.apiserver.registry import ObjectRegistry
from kubesim.objects import JsonObject

__all__ = ["container_env", "expand", "field_value"]

_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion; `$$` escapes, unknown references stay as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(replace, text)


def field_value(pod: JsonObject, path: str) -> str:
    """The downward API's value for a fieldRef path ("" when the pod has none)."""
    meta = pod["metadata"]
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    status = pod.get("status", {})
    spec = pod.get("spec", {})
    values: dict[str, Any] = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.hostIPs": ",".join(i.get("ip", "") for i in status.get("hostIPs") or []),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(i.get("ip", "") for i in status.get("podIPs") or []),
        "metadata.labels": "\n".join(
            f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items())
        ),
        "metadata.annotations": "\n".join(
            f'{k}="{v}"' for k, v in sorted((meta.get("annotations") or {}).items())
        ),
    }
    value = values.get(path)
    return "" if value is None else str(value)


def _resource_value(container: JsonObject, ref: dict[str, Any], node: JsonObject | None) -> str:
    kind, _, resource = str(ref.get("resource", "")).partition(".")
    resources = container.get("resources") or {}
    amount = (resources.get(kind) or {}).get(resource)
    if amount is None and kind == "requests":
        amount = (resources.get("limits") or {}).get(resource)
    if amount is None and node is not None:
        amount = node.get("status", {}).get("allocatable", {}).get(resource)
    if amount is None:
        return "0"
    try:
        value = (
            parse_quantity(str(amount)).value / parse_quantity(str(ref.get("divisor") or "1")).value
        )
    except (QuantityError, ZeroDivisionError):
        return "0"
    return str(math.ceil(value))


def _lookup(registry: ObjectRegistry, plural: str, namespace: str, name: str) -> JsonObject | None:
    return registry.find(registry.types.core(plural), namespace, name)


def _data(obj: JsonObject | None, *, secret: bool) -> dict[str, str]:
    if obj is None:
        return {}
    if not secret:
        return {k: str(v) for k, v in (obj.get("data") or {}).items()}
    decoded = {
        k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()
    }
    decoded.update({k: str(v) for k, v in (obj.get("stringData") or {}).items()})
    return decoded


def container_env(
    registry: ObjectRegistry,
    pod: JsonObject,
    container: JsonObject,
    *,
    node: JsonObject | None,
    api_port: int,
    services: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """`api_port` is the cluster's HTTPS port; `services` the namespace's Service variables."""
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HOSTNAME": pod.get("spec", {}).get("hostname") or pod["metadata"]["name"],
    }
    if pod.get("spec", {}).get("enableServiceLinks", True):
        env.update(services or {})
    env.update(
        {
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port),
            "KUBERNETES_PORT": f"tcp://127.0.0.1:{api_port}",
        }
    )
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            obj = _lookup(registry, "configmaps", namespace, source["configMapRef"].get("name", ""))
            env.update({prefix + k: v for k, v in _data(obj, secret=False).items()})
        elif "secretRef" in source:
            obj = _lookup(registry, "secrets", namespace, source["secretRef"].get("name", ""))
            env.update({prefix + k: v for k, v in _data(obj, secret=True).items()})
    for variable in container.get("env") or []:
        name = variable.get("name")
        if not name:
            continue
        source = variable.get("valueFrom")
        if source is None:
            env[name] = expand(str(variable.get("value", "")), env)
        elif "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"].get("fieldPath", ""))
        elif "resourceFieldRef" in source:
            env[name] = _resource_value(container, source["resourceFieldRef"], node)
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            obj = _lookup(registry, "configmaps", namespace, ref.get("name", ""))
            value = _data(obj, secret=False).get(ref.get("key", ""))
            if value is not None:
                env[name] = value
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            obj = _lookup(registry, "secrets", namespace, ref.get("name", ""))
            value = _data(obj, secret=True).get(ref.get("key", ""))
            if value is not None:
                env[name] = value
    return env
