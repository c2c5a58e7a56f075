"""Decoding the few protobuf request bodies kubectl's typed clients send, into JSON objects.

kubectl's generated clients (`auth can-i`, `auth whoami`, `create token`, `create
namespace|configmap|secret|serviceaccount`, `create role|clusterrole|rolebinding|
clusterrolebinding`) post
`application/vnd.kubernetes.protobuf` bodies and accept JSON answers. kubesim has no protobuf
library: this module reads the wire format by hand (varints and length-delimited fields, the
only ones these messages use), unwraps the `k8s\\0` + runtime.Unknown envelope, and maps
field numbers to JSON names with the schemas below, copied from the `generated.proto` files
of k8s.io/api 1.32. A kind not listed keeps the 415 kube-apiserver would never give but
kubesim must (see kubesim/README.md). Called by `kubesim.apiserver.validation.decode_body`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Union

from kubesim.errors import BadRequestError, UnsupportedMediaTypeError

__all__ = ["decode_protobuf"]

_MAGIC = b"k8s\x00"

# A schema maps field number -> (JSON name, kind); kind is "string", "int", "bool",
# "map" (map<string,string>), "bytesmap" (map<string,bytes>, base64 in JSON), a nested
# schema, or ("repeated", kind).
Kind = Union[str, "Schema", tuple[str, Any]]
Schema = Mapping[int, tuple[str, Kind]]

_OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    11: ("labels", "map"),
    12: ("annotations", "map"),
    14: ("finalizers", ("repeated", "string")),
}
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string"),
    2: ("verb", "string"),
    3: ("group", "string"),
    4: ("version", "string"),
    5: ("resource", "string"),
    6: ("subresource", "string"),
    7: ("name", "string"),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string"), 2: ("verb", "string")}
_POLICY_RULE: Schema = {
    1: ("verbs", ("repeated", "string")),
    2: ("apiGroups", ("repeated", "string")),
    3: ("resources", ("repeated", "string")),
    4: ("resourceNames", ("repeated", "string")),
    5: ("nonResourceURLs", ("repeated", "string")),
}
_SUBJECT: Schema = {
    1: ("kind", "string"),
    2: ("apiGroup", "string"),
    3: ("name", "string"),
    4: ("namespace", "string"),
}
_ROLE_REF: Schema = {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}
_NAME_REF: Schema = {1: ("name", "string")}
_ROLE: Schema = {1: ("metadata", _OBJECT_META), 2: ("rules", ("repeated", _POLICY_RULE))}
_BINDING: Schema = {
    1: ("metadata", _OBJECT_META),
    2: ("subjects", ("repeated", _SUBJECT)),
    3: ("roleRef", _ROLE_REF),
}

_KINDS: dict[tuple[str, str], Schema] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: ("metadata", _OBJECT_META),
        2: (
            "spec",
            {
                1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("namespace", "string")}),
    },
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: ("metadata", _OBJECT_META)},
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: ("metadata", _OBJECT_META),
        2: (
            "spec",
            {
                1: ("audiences", ("repeated", "string")),
                3: (
                    "boundObjectRef",
                    {
                        1: ("kind", "string"),
                        2: ("apiVersion", "string"),
                        3: ("name", "string"),
                        4: ("uid", "string"),
                    },
                ),
                4: ("expirationSeconds", "int"),
            },
        ),
    },
    ("v1", "Namespace"): {1: ("metadata", _OBJECT_META)},
    ("v1", "ConfigMap"): {
        1: ("metadata", _OBJECT_META),
        2: ("data", "map"),
        3: ("binaryData", "bytesmap"),
        4: ("immutable", "bool"),
    },
    ("v1", "Secret"): {
        1: ("metadata", _OBJECT_META),
        2: ("data", "bytesmap"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    ("v1", "ServiceAccount"): {
        1: ("metadata", _OBJECT_META),
        2: ("secrets", ("repeated", _NAME_REF)),
        3: ("imagePullSecrets", ("repeated", _NAME_REF)),
        4: ("automountServiceAccountToken", "bool"),
    },
    ("rbac.authorization.k8s.io/v1", "Role"): _ROLE,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _ROLE,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _BINDING,
}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise BadRequestError("unexpected end of protobuf data")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: an int for varints, bytes for length-delimited fields."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire_type == 2:
            length, at = _varint(data, at)
            out.append((number, data[at : at + length]))
            at += length
        elif wire_type == 1:
            at += 8
        elif wire_type == 5:
            at += 4
        else:
            raise BadRequestError(f"unsupported protobuf wire type {wire_type}")
    return out


def _value(kind: Kind, raw: int | bytes) -> Any:
    if kind == "string":
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    if kind == "int":
        return int(raw) if isinstance(raw, int) else 0
    if kind == "bool":
        return bool(raw)
    if isinstance(raw, bytes) and isinstance(kind, Mapping):
        return _message(kind, raw)
    raise BadRequestError("malformed protobuf field")


def _message(schema: Schema, data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        known = schema.get(number)
        if known is None:
            continue  # a field kubesim does not read
        name, kind = known
        if kind in ("map", "bytesmap"):
            if isinstance(raw, bytes):
                entry = dict(_fields(raw))
                key, value = entry.get(1, b""), entry.get(2, b"")
                if isinstance(key, bytes) and isinstance(value, bytes):
                    text = value.decode() if kind == "map" else base64.b64encode(value).decode()
                    out.setdefault(name, {})[key.decode()] = text
        elif isinstance(kind, tuple):
            out.setdefault(name, []).append(_value(kind[1], raw))
        else:
            out[name] = _value(kind, raw)
    return out


def decode_protobuf(body: bytes, unsupported_message: str) -> dict[str, Any]:
    """The JSON object a `k8s\\0`-framed protobuf body carries, for the kinds listed above."""
    if not body.startswith(_MAGIC):
        raise UnsupportedMediaTypeError(unsupported_message)
    envelope = dict(_fields(body[len(_MAGIC) :]))
    type_meta, raw = envelope.get(1, b""), envelope.get(2, b"")
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise BadRequestError("malformed protobuf envelope")
    meta = _message({1: ("apiVersion", "string"), 2: ("kind", "string")}, type_meta)
    api_version, kind = meta.get("apiVersion", ""), meta.get("kind", "")
    schema = _KINDS.get((api_version, kind))
    if schema is None:
        raise UnsupportedMediaTypeError(unsupported_message)
    return {"apiVersion": api_version, "kind": kind, **_message(schema, raw)}
