"""TLS: a hub started with a certificate serves HTTPS and the agents' WebSockets (wss) on one
port; qctl and an agent that trust its CA work, one that does not fails with one clear line,
and plain HTTP to it fails saying to use https. The CA and the certificate are made by the
openssl command, as an operator would."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from agent.errors import HubUnreachableError
from agent.hubclient import HubSession
from agent.settings import AgentSettings
from api.v1alpha1.messages import Hello
from hub.app import build_app
from hub.errors import SettingsError
from hub.main import server_tls
from hub.settings import HubSettings
from qctl.client import HubClient
from qctl.config import ResolvedContext
from qctl.errors import QctlError
from qctl.kinds import resolve_kind
from tests.hub.service.conftest import (
    ADMIN,
    AGENT_TOKENS,
    HubUnderTest,
    _write_users,
    fleet_objects,
)

API = "/apis/multiq.dev/v1alpha1"
CLUSTERS = resolve_kind("clusters")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt, and hub.crt/hub.key for 127.0.0.1 and localhost, signed by it; other.crt is a
    CA nobody used."""
    where = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other"):
        _openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2",
            "-subj", f"/CN=multiq test {ca}", cwd=where,
        )  # fmt: skip
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "hub.key", "-out", "hub.csr", "-subj", "/CN=127.0.0.1", cwd=where,
    )  # fmt: skip
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509", "-req", "-in", "hub.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "hub.crt", "-days", "2", "-extfile", "san.ext", cwd=where,
    )  # fmt: skip
    return where


@pytest.fixture
async def tls_hub(tmp_path: Path, pki: Path) -> AsyncIterator[HubUnderTest]:
    settings = HubSettings(
        store=f"sqlite:{tmp_path / 'hub.db'}",
        users_file=_write_users(tmp_path),
        secrets_dir=tmp_path / "secrets",
        tls_cert=pki / "hub.crt",
        tls_key=pki / "hub.key",
        dispatch_interval_seconds=0.1,
    )
    server = TestServer(await build_app(settings), host="127.0.0.1")
    await server.start_server(ssl=server_tls(settings))
    trust = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=pki / "ca.crt"))
    async with aiohttp.ClientSession(connector=trust) as session:
        hub = HubUnderTest(server, tmp_path, session)
        await hub.apply(*fleet_objects())
        yield hub
    await server.close()


async def qctl(*argv: str, ca: Path | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTIQ_")}
    env["MULTIQ_CONFIG"] = "/nonexistent/multiq-config.yaml"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "qctl.main",
        *argv,
        "--token",
        ADMIN,
        *(["--certificate-authority", str(ca)] if ca else []),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class TestQctl:
    async def test_qctl_trusting_the_ca_works_over_https(
        self, tls_hub: HubUnderTest, pki: Path
    ) -> None:
        assert tls_hub.url.startswith("https://")
        code, out, err = await qctl(
            "get", "clusters", "-o", "json", "--server", tls_hub.url, ca=pki / "ca.crt"
        )
        assert code == 0, err
        assert '"name": "east"' in out

    async def test_qctls_streaming_client_trusts_the_contexts_ca(
        self, tls_hub: HubUnderTest, pki: Path
    ) -> None:
        # The aiohttp client of `logs`, `get -w` and `submit --follow`.
        context = ResolvedContext(tls_hub.url, ADMIN, "vision", "test", str(pki / "ca.crt"))
        async with HubClient(context) as client:
            assert [c["metadata"]["name"] for c in await client.list(CLUSTERS, None)] == [
                "east",
                "west",
            ]
            async for event in client.watch(CLUSTERS, None):
                assert event["type"] == "ADDED"
                break
        untrusting = context._replace(certificate_authority=str(pki / "other.crt"))
        async with HubClient(untrusting) as client:
            with pytest.raises(QctlError, match="presented a certificate qctl does not trust"):
                await client.list(CLUSTERS, None)

    @pytest.mark.parametrize("ca", [None, "other.crt"], ids=["system-cas", "another-ca"])
    async def test_qctl_not_trusting_the_ca_fails_in_one_line(
        self, tls_hub: HubUnderTest, pki: Path, ca: str | None
    ) -> None:
        code, out, err = await qctl(
            "get", "clusters", "--server", tls_hub.url, ca=pki / ca if ca else None
        )
        assert code != 0 and out == ""
        assert err.count("\n") == 1, err
        assert f"the hub at {tls_hub.url} presented a certificate qctl does not trust" in err
        assert "--certificate-authority" in err

    async def test_plain_http_to_a_tls_hub_says_to_use_https(self, tls_hub: HubUnderTest) -> None:
        plain = tls_hub.url.replace("https://", "http://")
        code, _, err = await qctl("get", "clusters", "--server", plain)
        assert code != 0
        assert "(if the hub serves TLS, use an https:// URL)" in err, err


def agent_settings(
    hub: HubUnderTest, tmp_path: Path, ca: Path | None, url: str = ""
) -> AgentSettings:
    return AgentSettings(
        cluster="east",
        hub=url or hub.url,
        token=AGENT_TOKENS["east"],
        certificate_authority=ca,
        state_dir=tmp_path / "agent",
    )


def scripted_session(settings: AgentSettings, heard: asyncio.Event | None = None) -> HubSession:
    async def nothing(*_: object) -> None:
        return None

    async def hear(*_: object) -> None:
        if heard is not None:
            heard.set()

    return HubSession(
        settings,
        hello=lambda: Hello(cluster="east", agent_version="tls-test"),
        on_connect=nothing,
        on_message=hear,
        on_log_message=nothing,
    )


class TestAgent:
    async def test_an_agent_trusting_the_ca_holds_its_session_over_wss(
        self, tls_hub: HubUnderTest, pki: Path, tmp_path: Path
    ) -> None:
        heard = asyncio.Event()  # the hub's answer to Hello (its configuration) came back
        session = scripted_session(agent_settings(tls_hub, tmp_path, pki / "ca.crt"), heard)
        running = asyncio.create_task(session.run())
        try:
            async with asyncio.timeout(10):
                await heard.wait()
            assert tls_hub.hub.fleet.clusters["east"].connected
        finally:
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running

    @pytest.mark.parametrize("ca", [None, "other.crt"], ids=["system-cas", "another-ca"])
    async def test_an_agent_not_trusting_the_ca_says_so_in_one_line(
        self,
        tls_hub: HubUnderTest,
        pki: Path,
        tmp_path: Path,
        ca: str | None,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        session = scripted_session(agent_settings(tls_hub, tmp_path, pki / ca if ca else None))
        async with aiohttp.ClientSession() as http:
            with (
                caplog.at_level(logging.ERROR, logger="agent.hubclient"),
                pytest.raises(HubUnreachableError) as failed,
            ):
                await session._connect(http)
        message = str(failed.value)
        assert message.startswith(f"{tls_hub.url}: the hub's certificate is not trusted (")
        assert message.endswith("pass --certificate-authority with the CA that signed it")
        assert "\n" not in message
        assert [r.getMessage() for r in caplog.records] == [message]

    async def test_an_agent_dialling_plain_http_to_a_tls_hub_is_told_to_use_https(
        self, tls_hub: HubUnderTest, tmp_path: Path
    ) -> None:
        plain = tls_hub.url.replace("https://", "http://")
        session = scripted_session(agent_settings(tls_hub, tmp_path, None, url=plain))
        async with aiohttp.ClientSession() as http:
            with pytest.raises(HubUnreachableError, match="use an https:// URL"):
                await session._connect(http)


class TestTheHubsSettings:
    def test_a_certificate_without_its_key_is_refused(self, pki: Path) -> None:
        with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
            HubSettings(tls_cert=pki / "hub.crt")

    def test_a_key_that_does_not_match_is_a_settings_error_naming_the_files(
        self, pki: Path
    ) -> None:
        settings = HubSettings(tls_cert=pki / "hub.crt", tls_key=pki / "ca.key")
        with pytest.raises(SettingsError, match=r"cannot load the TLS certificate .*hub\.crt"):
            server_tls(settings)

    def test_a_tls_hub_advertises_an_https_url(self, pki: Path) -> None:
        settings = HubSettings(port=9443, tls_cert=pki / "hub.crt", tls_key=pki / "hub.key")
        assert settings.url == "https://127.0.0.1:9443"
