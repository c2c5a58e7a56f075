"""Tokens at rest and in use: the users file holds salted scrypt hashes (a plaintext or unsalted
token is refused at start-up, saying how to hash one), a token is checked against the hashes
once and then answered from a keyed MAC cache, and MemberCluster tokens come only from the
hub's secrets directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from api.tokens import MIN_N, TokenHashError, hash_token, parse_token_hash
from hub.auth import TokenAuthority, UserEntry, load_users_file, token_from_ref
from hub.errors import SettingsError, UnauthorizedError
from tests.hub.service.conftest import ADMIN, ALICE, HubUnderTest, fleet_objects, token_hash

API = "/apis/multiq.dev/v1alpha1"


def users_file(tmp_path: Path, *users: dict[str, object]) -> Path:
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"users": list(users)}))
    return path


class TestTheHash:
    def test_a_hash_carries_its_parameters_and_a_fresh_salt(self) -> None:
        first, second = hash_token("s3cret"), hash_token("s3cret")
        assert first != second  # salted
        parsed = parse_token_hash(first)
        assert (parsed.n, parsed.r, parsed.p) == (2**14, 8, 1)
        assert len(parsed.salt) == 16 and len(parsed.digest) == 32
        assert parsed.matches("s3cret") and not parsed.matches("s3cre")

    @pytest.mark.parametrize(
        ("text", "says"),
        [
            ("sha256$abc", "scrypt$N$r$p$SALT$HASH"),
            (f"scrypt${MIN_N // 2}$8$1$c2FsdHNhbHQ$" + "A" * 43, "at least 16384"),
            ("scrypt$16384$8$1$c2FsdHNhbHQ$x!", "malformed"),
            ("scrypt$16384$8$1$c2E$" + "A" * 43, "salt of 8 bytes"),
        ],
        ids=["another-scheme", "too-weak", "not-base64", "short-salt"],
    )
    def test_a_hash_that_is_not_sound_is_refused(self, text: str, says: str) -> None:
        with pytest.raises(TokenHashError, match=re.escape(says)):
            parse_token_hash(text)


class TestTheUsersFile:
    @pytest.mark.parametrize(
        ("entry", "says"),
        [
            ({"token": "admin-token"}, "`token` (a plaintext token) is no longer read"),
            ({"tokenSha256": "ab" * 32}, "`tokenSha256` (an unsalted SHA-256) is no longer read"),
        ],
        ids=["plaintext", "unsalted"],
    )
    def test_a_plaintext_or_unsalted_token_is_refused_saying_how_to_hash(
        self, tmp_path: Path, entry: dict[str, str], says: str
    ) -> None:
        path = users_file(tmp_path, {"name": "admin", **entry})
        with pytest.raises(SettingsError) as refused:
            load_users_file(path)
        assert says in refused.value.message
        assert "multiq-hub hash-token" in refused.value.message

    def test_the_hub_refuses_to_start_on_such_a_file_in_one_line(self, tmp_path: Path) -> None:
        path = users_file(tmp_path, {"name": "admin", "token": "admin-token"})
        done = subprocess.run(
            [sys.executable, "-m", "hub.main", "--users-file", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 2
        assert done.stderr.startswith(f"multiq-hub: users file {path}: users.0: `token`")
        assert done.stderr.count("\n") == 1
        assert not (tmp_path / "multiq-hub.db").exists()  # nothing started

    def test_a_weak_hash_in_the_file_is_refused_naming_the_user(self, tmp_path: Path) -> None:
        weak = hash_token("t", n=2**10)
        path = users_file(tmp_path, {"name": "carol", "tokenHash": weak})
        with pytest.raises(SettingsError, match=r"users.0.tokenHash \(carol\): scrypt N"):
            load_users_file(path)

    def test_hash_token_prints_a_hash_of_the_token_on_stdin(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "hub.main", "hash-token"],
            input="my-token\n",
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        printed = done.stdout.strip()
        assert printed.startswith("scrypt$16384$8$1$")
        assert parse_token_hash(printed).matches("my-token")


class TestTheCache:
    async def test_a_token_is_checked_against_the_hashes_once(self) -> None:
        authority = TokenAuthority([UserEntry(name="admin", token_hash=token_hash(ADMIN))])
        for _ in range(3):
            principal = await authority.authenticate(f"Bearer {ADMIN}")
            assert principal.name == "admin"
        assert authority.slow_checks == 1

    async def test_a_wrong_token_is_checked_once_and_stays_wrong(self) -> None:
        authority = TokenAuthority([UserEntry(name="admin", token_hash=token_hash(ADMIN))])
        for _ in range(3):
            with pytest.raises(UnauthorizedError):
                await authority.authenticate("Bearer not-a-token")
        assert authority.slow_checks == 1

    async def test_agent_tokens_need_no_slow_check_and_can_change(self) -> None:
        authority = TokenAuthority()
        authority.set_agent_token("east", "old")
        assert (await authority.authenticate("Bearer old")).name == "east"
        authority.set_agent_token("east", "new")
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer old")
        assert (await authority.authenticate("Bearer new")).kind == "agent"
        assert authority.slow_checks == 1  # only "old", once it was no longer east's

    async def test_a_wrong_token_becomes_good_when_it_is_a_clusters_new_one(self) -> None:
        authority = TokenAuthority()
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer next")
        authority.set_agent_token("west", "next")
        assert (await authority.authenticate("Bearer next")).name == "west"

    async def test_a_hub_answers_users_from_hashed_tokens(self, hub: HubUnderTest) -> None:
        await hub.apply(*fleet_objects())
        for _ in range(3):
            status, _ = await hub.call("GET", f"{API}/namespaces/vision/localqueues", token=ALICE)
            assert status == 200
        # admin (applying) and alice: one slow check each, whatever the number of requests.
        assert hub.hub.authority.slow_checks == 2


class TestMemberClusterTokenFiles:
    def test_a_token_file_is_read_from_the_secrets_directory(self, tmp_path: Path) -> None:
        (tmp_path / "east").mkdir()
        (tmp_path / "east" / "token").write_text("east-token\n")
        assert token_from_ref(None, "token", "east/token", tmp_path) == "east-token"

    def test_a_symbolic_link_out_of_the_secrets_directory_is_not_followed(
        self, tmp_path: Path
    ) -> None:
        secrets = tmp_path / "secrets"
        secrets.mkdir()
        outside = tmp_path / "shadow"
        outside.write_text("not-a-token")
        (secrets / "east").symlink_to(outside)
        assert token_from_ref(None, "token", "east", secrets) is None
        (secrets / "west").symlink_to(tmp_path)
        assert token_from_ref("west", "shadow", None, secrets) is None

    def test_without_a_secrets_directory_no_token_is_read(self, tmp_path: Path) -> None:
        (tmp_path / "token").write_text("t")
        assert token_from_ref(None, "token", "token", None) is None

    async def test_the_hub_refuses_a_cluster_whose_token_file_is_absolute(
        self, hub: HubUnderTest
    ) -> None:
        member = fleet_objects()[-1]
        member["spec"]["tokenRef"] = {"file": "/etc/passwd"}
        status, body = await hub.call("POST", f"{API}/memberclusters", body=member)
        assert status == 422
        assert [c["field"] for c in body["details"]["causes"]] == ["spec.tokenRef.file"]


class TestMemberClusterTokenHashes:
    """`qctl cluster join` writes only the agent token's salted hash into the MemberCluster."""

    async def test_an_agent_known_by_its_tokens_hash_is_checked_once_then_remembered(
        self,
    ) -> None:
        authority = TokenAuthority()
        authority.set_agent_token_hash("east", parse_token_hash(hash_token("minted")))
        for _ in range(3):
            principal = await authority.authenticate("Bearer minted")
            assert (principal.kind, principal.name) == ("agent", "east")
        assert authority.slow_checks == 1
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer other")

    async def test_a_new_hash_refuses_the_old_token_at_once_and_takes_the_new_one(self) -> None:
        authority = TokenAuthority()
        authority.set_agent_token_hash("east", parse_token_hash(hash_token("first")))
        assert (await authority.authenticate("Bearer first")).name == "east"
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer second")  # refused, and remembered so
        authority.set_agent_token_hash("east", parse_token_hash(hash_token("second")))
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer first")
        assert (await authority.authenticate("Bearer second")).name == "east"
        authority.set_agent_token("east", None)  # the cluster left
        with pytest.raises(UnauthorizedError):
            await authority.authenticate("Bearer second")

    async def test_the_same_hash_set_again_keeps_the_remembered_token(self) -> None:
        authority = TokenAuthority()
        text = hash_token("steady")
        authority.set_agent_token_hash("east", parse_token_hash(text))
        await authority.authenticate("Bearer steady")
        authority.set_agent_token_hash("east", parse_token_hash(text))  # (every member sync)
        await authority.authenticate("Bearer steady")
        assert authority.slow_checks == 1

    @pytest.mark.parametrize(
        ("spec", "field", "says"),
        [
            ({}, "spec.tokenHash", "exactly one of tokenHash or tokenRef"),
            (
                {"tokenHash": "HASH", "tokenRef": {"secretName": "s"}},
                "spec.tokenHash",
                "exactly one",
            ),
            ({"tokenHash": "sha256$abc"}, "spec.tokenHash", "scrypt$N$r$p$SALT$HASH"),
        ],
        ids=["neither", "both", "not-a-hash"],
    )
    async def test_a_member_cluster_names_its_agents_token_exactly_one_way(
        self, hub: HubUnderTest, spec: dict[str, object], field: str, says: str
    ) -> None:
        body = {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "north"},
            "spec": {k: (hash_token("t") if v == "HASH" else v) for k, v in spec.items()},
        }
        status, reply = await hub.call("POST", f"{API}/memberclusters", body=body)
        assert status == 422, reply
        causes = reply["details"]["causes"]
        assert [c["field"] for c in causes] == [field]
        assert says in causes[0]["message"]

    async def test_an_agent_whose_cluster_holds_its_tokens_hash_opens_its_session(
        self, hub: HubUnderTest
    ) -> None:
        member = {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "north"},
            "spec": {"tokenHash": hash_token("north-token")},
        }
        status, _ = await hub.call("POST", f"{API}/memberclusters", body=member)
        assert status == 201

        async def dial(token: str) -> int:
            try:
                ws = await hub.session.ws_connect(
                    f"{hub.url}/agent/v1/session?cluster=north",
                    headers={"Authorization": f"Bearer {token}"},
                )
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
            await ws.close()
            return 101

        assert await dial("wrong") == 401
        assert await dial("north-token") == 101
        # The hash is all the hub keeps: the token is nowhere in the stored object.
        _, stored = await hub.call("GET", f"{API}/memberclusters/north")
        assert "north-token" not in str(stored)
