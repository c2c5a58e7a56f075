"""Who is asking: bearer tokens, service-account tokens, and impersonation.

kube-apiserver authenticates every request before it authorizes it. kubesim knows two kinds
of credentials:

* the admin token of its kubeconfigs (`ADMIN_TOKEN`, "kubesim"), which is `ADMIN`, a member of
  `system:masters`; a request with no `Authorization` header at all is also `ADMIN` unless the
  cluster says otherwise (`ClusterConfig.anonymous_is_admin`): kubesim serves loopback HTTP to
  tests that never carry a token, where kube-apiserver would call them `system:anonymous`;
* service-account tokens minted by TokenRequest (`TokenIssuer.issue`): JWT-shaped strings
  (`header.payload.signature`, base64url) signed with HMAC-SHA256 under a key of the cluster.
  The payload carries kube-apiserver's claims (iss, sub `system:serviceaccount:NS:NAME`, aud,
  exp, iat, nbf and the `kubernetes.io` block naming the namespace, service account, its uid
  and the pod the token is bound to). A token is valid while it is unexpired, its signature
  holds, the service account it names still exists with the same uid, and so does the pod it
  is bound to, if any — as kube-apiserver checks bound tokens. Anything else is 401
  Unauthorized.

Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`) is honoured after
the requester is allowed to impersonate (RBAC verb `impersonate` on users, groups or
serviceaccounts; the admin always is). Called by the middleware of `kubesim.apiserver.app`
and by the TokenRequest and review handlers in `kubesim.apiserver.reviews`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import UnauthorizedError
from kubesim.objects import JsonObject

__all__ = [
    "ADMIN",
    "ADMIN_TOKEN",
    "AUTHENTICATED",
    "DEFAULT_AUDIENCES",
    "SERVICE_ACCOUNT_PREFIX",
    "TOKEN_ISSUER",
    "TokenIssuer",
    "UserInfo",
    "service_account_user",
    "split_service_account",
]

ADMIN_TOKEN = "kubesim"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
TOKEN_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user, as authentication.k8s.io's UserInfo spells it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_master(self) -> bool:
        return MASTERS in self.groups

    def as_json(self) -> JsonObject:
        info: JsonObject = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            info["uid"] = self.uid
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra.items()}
        return info


ADMIN = UserInfo("kubesim-admin", groups=(MASTERS, AUTHENTICATED))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a service account's token stands for, with the groups kube-apiserver adds."""
    return UserInfo(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        uid=uid,
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


def split_service_account(user_name: str) -> tuple[str, str] | None:
    """("ns", "name") for `system:serviceaccount:ns:name`, else None."""
    if not user_name.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, _, name = user_name[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
    if not namespace or not name or ":" in name:
        return None
    return namespace, name


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# Looks an object (a service account, a pod) up by (namespace, name); returns it or None.
ServiceAccountLookup = Callable[[str, str], JsonObject | None]


class TokenIssuer:
    """Mints and verifies one cluster's service-account tokens."""

    def __init__(
        self,
        lookup: ServiceAccountLookup,
        key: bytes | None = None,
        *,
        pod_lookup: ServiceAccountLookup | None = None,
    ) -> None:
        self._lookup = lookup
        self._pod_lookup = pod_lookup
        self._key = key or secrets.token_bytes(32)
        self._header = _b64(json.dumps({"alg": "HS256", "kid": "kubesim"}).encode())

    def _sign(self, signing_input: str) -> str:
        return _b64(hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest())

    def issue(
        self,
        service_account: JsonObject,
        *,
        now: int,
        expiration_seconds: int,
        audiences: tuple[str, ...] = DEFAULT_AUDIENCES,
        bound_pod: JsonObject | None = None,
    ) -> tuple[str, int]:
        """A token for `service_account`, valid from `now` (epoch seconds); (token, expiry)."""
        meta = service_account["metadata"]
        expires = now + expiration_seconds
        kubernetes_io: dict[str, Any] = {
            "namespace": meta["namespace"],
            "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
        }
        if bound_pod is not None:
            pod_meta = bound_pod["metadata"]
            kubernetes_io["pod"] = {"name": pod_meta["name"], "uid": pod_meta["uid"]}
            node = bound_pod.get("spec", {}).get("nodeName")
            if node:
                kubernetes_io["node"] = {"name": node}
        claims = {
            "aud": list(audiences),
            "exp": expires,
            "iat": now,
            "iss": TOKEN_ISSUER,
            "jti": secrets.token_hex(16),
            "kubernetes.io": kubernetes_io,
            "nbf": now,
            "sub": f"{SERVICE_ACCOUNT_PREFIX}{meta['namespace']}:{meta['name']}",
        }
        signing_input = f"{self._header}.{_b64(json.dumps(claims).encode())}"
        return f"{signing_input}.{self._sign(signing_input)}", expires

    def verify(self, token: str, *, now: int) -> UserInfo:
        """The service account's user, or UnauthorizedError."""
        parts = token.split(".")
        if len(parts) != 3:
            raise UnauthorizedError("Unauthorized")
        signing_input = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._sign(signing_input), parts[2]):
            raise UnauthorizedError("Unauthorized")
        try:
            claims = json.loads(_unb64(parts[1]))
            account = claims["kubernetes.io"]
            namespace = str(account["namespace"])
            name = str(account["serviceaccount"]["name"])
            uid = str(account["serviceaccount"]["uid"])
            expires = int(claims["exp"])
            bound_pod = account.get("pod")
        except (ValueError, KeyError, TypeError, binascii.Error) as error:
            raise UnauthorizedError("Unauthorized") from error
        if expires <= now:
            raise UnauthorizedError("Unauthorized")
        stored = self._lookup(namespace, name)
        if stored is None or stored["metadata"].get("uid") != uid:
            raise UnauthorizedError("Unauthorized")
        if isinstance(bound_pod, dict) and self._pod_lookup is not None:
            pod = self._pod_lookup(namespace, str(bound_pod.get("name", "")))
            if pod is None or pod["metadata"].get("uid") != bound_pod.get("uid"):
                raise UnauthorizedError("Unauthorized")
        return service_account_user(namespace, name, uid)
