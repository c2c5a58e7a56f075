"""Who is calling: bearer tokens mapped to principals, and what each principal may do.

Kinds of principal:
- users, from the hub's users file (name, groups); a user in `multiq:admins` is an admin, one
  in `multiq:viewers` a viewer (reads everything, writes nothing it does not have through a
  tenant);
- agents, one per MemberCluster, whose token comes from the cluster's `spec.tokenRef`;
- nobody else: an unknown token is 401, a known one acting outside its rights is 403.

Tokens at rest: the users file holds `tokenHash` (api.tokens: salted scrypt), never a token;
a file with a plaintext `token` or an unsalted `tokenSha256` is refused at start-up with a
SettingsError that says how to hash one. A slow hash on every request would cost every
request a tenth of a second, so a token is verified once and its principal kept under a MAC
of the token keyed with a random secret of this process (keyed BLAKE2b): a lookup costs a
microsecond, the MAC is compared in constant time, and neither the cache nor its timing says
anything about a token to someone who does not hold the key. Tokens that matched no one are
remembered the same way (bounded), so a client retrying a wrong token does not cost a scrypt
per user each time; the slow checks run one at a time in a worker thread, never on the event
loop. Agent tokens (read from the hub's secrets directory) are kept only as such MACs.

Tenancy rules (a user reaches the namespaces of the tenants whose groups or users include
them) are decided here, as data, in one place.

Called by: hub.app (builds the authority), hub.http.middleware (authenticate), handlers
(authorize), hub.fleet (agent tokens).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from api.tokens import TokenHash, TokenHashError, parse_token_hash
from api.v1alpha1.federation import Tenant
from hub.errors import ForbiddenError, SettingsError, UnauthorizedError

__all__ = [
    "ADMIN_GROUP",
    "VIEWER_GROUP",
    "Principal",
    "TokenAuthority",
    "TokenFileOutsideError",
    "UserEntry",
    "UsersFile",
    "load_users_file",
    "namespaces_of",
    "require_admin",
    "require_namespace",
    "token_from_ref",
    "token_path",
]

log = logging.getLogger(__name__)

ADMIN_GROUP = "multiq:admins"
VIEWER_GROUP = "multiq:viewers"
# Wrong tokens remembered; past this many the memory starts over (a flood of random tokens
# costs its sender a slow check each, one at a time, whatever this is).
REFUSED_KEPT = 10_000
HASH_HELP = (
    "store `tokenHash: <output of multiq-hub hash-token>` instead "
    "(echo -n TOKEN | multiq-hub hash-token)"
)


@dataclass(frozen=True, slots=True)
class Principal:
    kind: Literal["user", "agent"]
    name: str
    groups: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and ADMIN_GROUP in self.groups

    @property
    def reads_everything(self) -> bool:
        """Admins and viewers may get, list and watch every object and read every log."""
        return self.kind == "user" and bool({ADMIN_GROUP, VIEWER_GROUP} & self.groups)

    @property
    def cluster(self) -> str:
        """The member cluster an agent principal speaks for."""
        if self.kind != "agent":
            raise ForbiddenError(f"{self.name} is not an agent")
        return self.name


class UserEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=list)
    token_hash: str = Field(alias="tokenHash")

    @model_validator(mode="before")
    @classmethod
    def _no_plain_tokens(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            for old in ("token", "tokenSha256"):
                if old in raw:
                    kind = "a plaintext token" if old == "token" else "an unsalted SHA-256"
                    raise ValueError(f"`{old}` ({kind}) is no longer read: {HASH_HELP}")
        return raw

    def parsed_hash(self) -> TokenHash:
        return parse_token_hash(self.token_hash)


class UsersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[UserEntry] = Field(default_factory=list)


def load_users_file(path: Path) -> UsersFile:
    """The users file, every hash checked; anything else is a SettingsError naming the user."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        users = UsersFile.model_validate(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise SettingsError(f"users file {path}: cannot be read: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise SettingsError(f"users file {path}: {problems}") from exc
    for i, user in enumerate(users.users):
        try:
            user.parsed_hash()
        except TokenHashError as exc:
            raise SettingsError(
                f"users file {path}: users.{i}.tokenHash ({user.name}): {exc}"
            ) from exc
    return users


class TokenAuthority:
    """Resolves bearer tokens. Agent tokens are set per cluster as the hub learns them."""

    def __init__(self, users: Iterable[UserEntry] = ()) -> None:
        self._key = secrets.token_bytes(32)
        self._users = [
            (user.parsed_hash(), Principal("user", user.name, frozenset(user.groups)))
            for user in users
        ]
        self._verified: dict[bytes, tuple[bytes, Principal]] = {}
        self._refused: dict[bytes, bytes] = {}
        self._agents: dict[bytes, tuple[bytes, str]] = {}
        self._agent_macs: dict[str, bytes] = {}
        # Agents known by their token's hash (MemberCluster.spec.tokenHash), and the MAC of
        # the token that last matched each: forgotten when the hash changes.
        self._agent_hashes: dict[str, TokenHash] = {}
        self._agent_verified: dict[str, bytes] = {}
        self._slow_checks: asyncio.Semaphore | None = None
        self.slow_checks = 0
        """How many tokens were checked against the hashes (not answered from memory)."""

    def _mac(self, token: str) -> bytes:
        # Keyed BLAKE2b is a MAC in its own right, and the standard library's own code:
        # `hmac.digest` goes through OpenSSL 3, whose per-call algorithm fetch made it the
        # dearest step of authenticating a request (26 µs of CPU each, measured in the hub).
        return hashlib.blake2b(token.encode(), key=self._key, digest_size=32).digest()

    def _forget_agent(self, cluster: str) -> None:
        old = self._agent_macs.pop(cluster, None)
        if old is not None:
            self._agents.pop(old, None)
        self._agent_hashes.pop(cluster, None)
        verified = self._agent_verified.pop(cluster, None)
        if verified is not None:
            self._verified.pop(verified, None)

    def set_agent_token_hash(self, cluster: str, token_hash: TokenHash) -> None:
        """This cluster's agent is known by its token's salted hash: the first request with the
        token pays one slow check, later ones are answered from memory."""
        if self._agent_hashes.get(cluster) == token_hash:
            return
        self._forget_agent(cluster)
        self._agent_hashes[cluster] = token_hash
        self._refused.clear()  # a token refused before may be this cluster's new one

    def set_agent_token(self, cluster: str, token: str | None) -> None:
        self._forget_agent(cluster)
        if token is not None:
            mac = self._mac(token)
            self._agent_macs[cluster] = mac
            self._agents[mac] = (mac, cluster)
            # A token refused before may be this cluster's new one.
            self._refused.pop(mac, None)

    def _remembered(self, mac: bytes) -> Principal | Literal[False] | None:
        """The principal of a known token, False for a token known to be wrong, None when
        only the slow check can tell."""
        agent = self._agents.get(mac)
        if agent is not None and hmac.compare_digest(agent[0], mac):
            return Principal("agent", agent[1])
        user = self._verified.get(mac)
        if user is not None and hmac.compare_digest(user[0], mac):
            return user[1]
        refused = self._refused.get(mac)
        if refused is not None and hmac.compare_digest(refused, mac):
            return False
        return None

    async def authenticate(self, header: str | None) -> Principal:
        if not header or not header.startswith("Bearer "):
            raise UnauthorizedError("a bearer token is required (Authorization: Bearer …)")
        token = header.removeprefix("Bearer ").strip()
        mac = self._mac(token)
        known = self._remembered(mac)
        if known is None:
            if self._slow_checks is None:
                self._slow_checks = asyncio.Semaphore(1)
            async with self._slow_checks:
                known = self._remembered(mac)  # another request may have checked it meanwhile
                if known is None:
                    self.slow_checks += 1
                    agents = list(self._agent_hashes.items())  # (the thread must not see it change)
                    found = await asyncio.to_thread(self._check_hashes, token, agents)
                    known = self._remember(mac, found)
        if known is False:
            raise UnauthorizedError("the bearer token is not valid")
        return known

    def _check_hashes(self, token: str, agents: list[tuple[str, TokenHash]]) -> Principal | None:
        for token_hash, principal in self._users:
            if token_hash.matches(token):
                return principal
        for cluster, agent_hash in agents:
            if agent_hash.matches(token):
                return Principal("agent", cluster)
        return None

    def _remember(self, mac: bytes, found: Principal | None) -> Principal | Literal[False]:
        if found is not None:
            if found.kind == "agent":
                if self._agent_hashes.get(found.name) is None:
                    return False  # its hash was changed or removed while it was checked
                self._agent_verified[found.name] = mac
            self._verified[mac] = (mac, found)
            return found
        if len(self._refused) >= REFUSED_KEPT:
            self._refused.clear()
        self._refused[mac] = mac
        return False


def namespaces_of(
    principal: Principal, tenants: Iterable[Tenant], *, write: bool = False
) -> frozenset[str] | None:
    """The namespaces a user may read (or, with `write`, act) in; None means all: admins, and
    viewers for reading."""
    if principal.is_admin or (principal.reads_everything and not write):
        return None
    allowed: set[str] = set()
    if principal.kind != "user":
        return frozenset()
    for tenant in tenants:
        spec = tenant.spec
        if principal.name in spec.users or principal.groups & set(spec.groups):
            allowed.update(spec.namespaces)
    return frozenset(allowed)


def require_admin(principal: Principal, action: str) -> None:
    if principal.kind == "agent":
        raise ForbiddenError(f"agent {principal.name} may only use the agent endpoints")
    if not principal.is_admin:
        raise ForbiddenError(f"{principal.name} may not {action}: only admins may")


def require_namespace(
    principal: Principal,
    namespace: str,
    tenants: Iterable[Tenant],
    action: str,
    *,
    write: bool = False,
) -> None:
    if principal.kind == "agent":
        raise ForbiddenError(f"agent {principal.name} may only use the agent endpoints")
    allowed = namespaces_of(principal, tenants, write=write)
    if allowed is not None and namespace not in allowed:
        raise ForbiddenError(
            f"{principal.name} may not {action} in namespace {namespace!r}: "
            "it belongs to no tenant of theirs"
        )


class TokenFileOutsideError(ValueError):
    """A tokenRef.file that leads out of the hub's secrets directory."""


def token_path(
    secret_name: str | None, key: str, file: str | None, secrets_dir: Path
) -> Path | None:
    """Where a MemberCluster's token is: `<dir>/<secretName>/<key>` (a mounted Kubernetes
    secret) or `<dir>/<file>`. Both stay inside the secrets directory: a path that resolves
    outside it (through `..` or a symbolic link) is refused."""
    if file:
        path = secrets_dir / file
    elif secret_name:
        path = secrets_dir / secret_name / key
    else:
        return None
    root = secrets_dir.resolve()
    if not path.resolve().is_relative_to(root):
        raise TokenFileOutsideError(f"{path} is outside the secrets directory {root}")
    return path


def token_from_ref(
    secret_name: str | None, key: str, file: str | None, secrets_dir: Path | None
) -> str | None:
    """Read a MemberCluster token from the hub's secrets directory (None: not there)."""
    if secrets_dir is None:
        return None
    try:
        path = token_path(secret_name, key, file, secrets_dir)
    except TokenFileOutsideError as exc:
        log.warning("a MemberCluster's tokenRef is refused: %s", exc)
        return None
    if path is None or not path.is_file():
        return None
    return path.read_text().strip() or None
