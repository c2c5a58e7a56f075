"""Bearer tokens at rest: the salted slow hash a users file stores instead of a token.

    tokenHash: "scrypt$N$r$p$SALT$HASH"       (SALT and HASH in unpadded base64url)

scrypt (the standard library's hashlib.scrypt, so no extra dependency) with N=2**14, r=8, p=1
by default: about 16 MiB and 0.1 s per hash on one core, Percival's parameters for
interactive logins. The parameters travel in the string, so they can be raised later without
breaking existing files; the hub refuses a hash weaker than `MIN_N`. The tokens themselves are
random (qctl dev up draws 192 bits), so a slow hash is the second line: a stolen users file
must not be a list of working tokens, and a weak hand-made token must not fall to a GPU.

This is the one definition both sides share: `multiq-hub hash-token` and `qctl dev up` write
hashes, the hub (hub.auth) reads and verifies them.

Called by: hub.auth, hub.main (hash-token), qctl.commands.dev, tests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import NamedTuple

__all__ = [
    "DEFAULT_N",
    "MIN_N",
    "TokenHash",
    "TokenHashError",
    "hash_token",
    "parse_token_hash",
]

SCHEME = "scrypt"
DEFAULT_N = 2**14
DEFAULT_R = 8
DEFAULT_P = 1
# Below this a hash costs an attacker too little; a file with one is refused, not trusted.
MIN_N = 2**14
SALT_BYTES = 16
HASH_BYTES = 32
# hashlib's default memory cap (32 MiB) is just above N=2**14, r=8; allow raised parameters.
MAX_MEMORY = 1024 * 1024 * 1024


class TokenHashError(ValueError):
    """A tokenHash that is not `scrypt$N$r$p$SALT$HASH` with sound parameters."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenHash(NamedTuple):
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    def matches(self, token: str) -> bool:
        """Whether `token` hashes to this (slow: one scrypt; constant-time comparison)."""
        candidate = hashlib.scrypt(
            token.encode(),
            salt=self.salt,
            n=self.n,
            r=self.r,
            p=self.p,
            maxmem=MAX_MEMORY,
            dklen=len(self.digest),
        )
        return hmac.compare_digest(candidate, self.digest)

    def encode(self) -> str:
        return f"{SCHEME}${self.n}${self.r}${self.p}${_b64(self.salt)}${_b64(self.digest)}"


def hash_token(
    token: str, *, n: int = DEFAULT_N, r: int = DEFAULT_R, p: int = DEFAULT_P, salt: bytes = b""
) -> str:
    """The `tokenHash` string of a token, with a fresh random salt unless one is given."""
    if not token:
        raise TokenHashError("an empty token cannot be hashed")
    salt = salt or os.urandom(SALT_BYTES)
    digest = hashlib.scrypt(
        token.encode(), salt=salt, n=n, r=r, p=p, maxmem=MAX_MEMORY, dklen=HASH_BYTES
    )
    return TokenHash(n, r, p, salt, digest).encode()


def parse_token_hash(text: str) -> TokenHash:
    """Read a `tokenHash`; a TokenHashError says what is wrong with it."""
    parts = text.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise TokenHashError(
            "a tokenHash is scrypt$N$r$p$SALT$HASH (make one with `multiq-hub hash-token`)"
        )
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt, digest = _unb64(parts[4]), _unb64(parts[5])
    except ValueError as exc:
        raise TokenHashError(f"a tokenHash has a malformed part: {exc}") from exc
    if n < MIN_N or n & (n - 1):
        raise TokenHashError(f"scrypt N must be a power of 2 of at least {MIN_N}, not {n}")
    if not 1 <= r <= 64 or not 1 <= p <= 16 or 128 * r * n > MAX_MEMORY:
        raise TokenHashError(f"scrypt r={r}, p={p} are out of range (r 1-64, p 1-16, ≤ 1 GiB)")
    if len(salt) < 8 or len(digest) < 16:
        raise TokenHashError("a tokenHash needs a salt of 8 bytes or more and a hash of 16 or more")
    return TokenHash(n, r, p, salt, digest)
