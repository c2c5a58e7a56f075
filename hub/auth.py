"""Who is calling: bearer tokens mapped to principals, and what each principal may do.

Three kinds of principal:
- users, from the hub's users file (name, groups); a user in an admin group is an admin;
- agents, one per MemberCluster, whose token comes from the cluster's `spec.tokenRef`;
- nobody else: an unknown token is 401, a known one acting outside its rights is 403.

Tokens are compared in constant time; the users file may hold `tokenSha256` instead of the
token itself so the file is not a secret. Tenancy rules (a user reaches the namespaces of the
tenants whose groups or users include them) are decided here, as data, in one place.

Called by: hub.http.middleware (authenticate) and handlers (authorize).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from api.v1alpha1.federation import Tenant
from hub.errors import ForbiddenError, UnauthorizedError

__all__ = [
    "ADMIN_GROUP",
    "Principal",
    "TokenAuthority",
    "UserEntry",
    "UsersFile",
    "load_users_file",
    "namespaces_of",
    "require_admin",
    "require_namespace",
    "token_from_ref",
]

ADMIN_GROUP = "multiq:admins"


@dataclass(frozen=True, slots=True)
class Principal:
    kind: Literal["user", "agent"]
    name: str
    groups: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and ADMIN_GROUP in self.groups

    @property
    def cluster(self) -> str:
        """The member cluster an agent principal speaks for."""
        if self.kind != "agent":
            raise ForbiddenError(f"{self.name} is not an agent")
        return self.name


class UserEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    groups: list[str] = Field(default_factory=list)
    token: str | None = None
    token_sha256: str | None = Field(default=None, alias="tokenSha256")


class UsersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[UserEntry] = Field(default_factory=list)


def load_users_file(path: Path) -> UsersFile:
    return UsersFile.model_validate(yaml.safe_load(path.read_text()) or {})


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenAuthority:
    """Resolves bearer tokens. Agent tokens are set per cluster as the hub learns them."""

    def __init__(self, users: Iterable[UserEntry] = ()) -> None:
        self._users: list[tuple[str, Principal]] = []
        for user in users:
            digest = user.token_sha256 or (_digest(user.token) if user.token else None)
            if digest is None:
                continue
            self._users.append((digest, Principal("user", user.name, frozenset(user.groups))))
        self._agents: dict[str, str] = {}

    def set_agent_token(self, cluster: str, token: str | None) -> None:
        if token is None:
            self._agents.pop(cluster, None)
        else:
            self._agents[cluster] = _digest(token)

    def authenticate(self, header: str | None) -> Principal:
        if not header or not header.startswith("Bearer "):
            raise UnauthorizedError("a bearer token is required (Authorization: Bearer …)")
        digest = _digest(header.removeprefix("Bearer ").strip())
        found: Principal | None = None
        # Compare against every entry so timing does not reveal which one matched.
        for known, principal in self._users:
            if hmac.compare_digest(known, digest):
                found = principal
        for cluster, known in self._agents.items():
            if hmac.compare_digest(known, digest):
                found = Principal("agent", cluster)
        if found is None:
            raise UnauthorizedError("the bearer token is not valid")
        return found


def namespaces_of(principal: Principal, tenants: Iterable[Tenant]) -> frozenset[str] | None:
    """The namespaces a user may act in; None means all (admins)."""
    if principal.is_admin:
        return None
    allowed: set[str] = set()
    for tenant in tenants:
        spec = tenant.spec
        if principal.name in spec.users or principal.groups & set(spec.groups):
            allowed.update(spec.namespaces)
    return frozenset(allowed)


def require_admin(principal: Principal, action: str) -> None:
    if not principal.is_admin:
        raise ForbiddenError(f"{principal.name} may not {action}: only admins may")


def require_namespace(
    principal: Principal, namespace: str, tenants: Iterable[Tenant], action: str
) -> None:
    if principal.kind == "agent":
        raise ForbiddenError(f"agent {principal.name} may only use the agent endpoints")
    allowed = namespaces_of(principal, tenants)
    if allowed is not None and namespace not in allowed:
        raise ForbiddenError(
            f"{principal.name} may not {action} in namespace {namespace!r}: "
            "it belongs to no tenant of theirs"
        )


def token_from_ref(
    secret_name: str | None, key: str, file: str | None, secrets_dir: Path | None
) -> str | None:
    """Read a MemberCluster token: a mounted secret `<dir>/<name>/<key>` or a file."""
    path: Path | None = None
    if file:
        path = Path(file)
    elif secret_name and secrets_dir is not None:
        path = secrets_dir / secret_name / key
    if path is None or not path.is_file():
        return None
    return path.read_text().strip() or None
