"""A real hub (aiohttp server on a loopback port, SQLite store in a temp dir) for component
tests, plus a scripted agent peer that speaks the session protocol over a real WebSocket."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import io
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer

from api.tokens import hash_token
from api.v1alpha1.messages import Envelope, Hello, LeaseRenew, Payload
from hub.app import HUB, Hub, build_app
from hub.settings import HubSettings

ADMIN = "admin-token"
ALICE = "alice-token"  # a researcher of tenant "vision" (namespace vision)
BOB = "bob-token"  # a researcher of tenant "audio" (namespace audio)
VIEWER = "viewer-token"  # in multiq:viewers: reads everything, writes nothing
MALLORY = "mallory-token"  # a user in no tenant
AGENT_TOKENS = {"east": "east-agent-token", "west": "west-agent-token"}


@functools.cache
def token_hash(token: str) -> str:
    """One slow hash per token per test run: every test's users file reuses it."""
    return hash_token(token)


@dataclass
class HubUnderTest:
    server: TestServer
    tmp: Path
    session: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    @property
    def hub(self) -> Hub:
        return self.server.app[HUB]

    async def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = ADMIN,
        body: Any = None,
        text: str | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = text if text is not None else (json.dumps(body) if body is not None else None)
        if data is not None:
            headers["Content-Type"] = content_type
        payload = io.BytesIO(data.encode()) if data is not None else None
        async with self.session.request(
            method, self.url + path, data=payload, headers=headers, params=params
        ) as response:
            raw = await response.text()
            try:
                return response.status, json.loads(raw)
            except json.JSONDecodeError:
                return response.status, raw

    async def edit(
        self, path: str, change: Callable[[dict[str, Any]], None], *, token: str | None = ADMIN
    ) -> tuple[int, Any]:
        """GET, change, PUT as `token`, as a client edits an object: again while the hub's
        own status writes in between make the PUT a 409 (its resourceVersion is stale), at
        most 20 times; the last answer. Read as the admin, so that a user who may not read
        the object still sends its PUT."""
        status, body = 409, None
        for _ in range(20):
            _, current = await self.call("GET", path)
            changed = copy.deepcopy(current)
            change(changed)
            status, body = await self.call("PUT", path, token=token, body=changed)
            if status != 409:
                break
        return status, body

    async def apply(self, *docs: dict[str, Any]) -> None:
        for doc in docs:
            kind = doc["kind"]
            plural = {
                "ClusterQueue": "clusterqueues",
                "LocalQueue": "localqueues",
                "ResourceFlavor": "resourceflavors",
                "MemberCluster": "memberclusters",
                "ClusterSet": "clustersets",
                "Tenant": "tenants",
                "GlobalQueue": "globalqueues",
                "Cohort": "cohorts",
                "WorkloadPriorityClass": "workloadpriorityclasses",
            }[kind]
            ns = doc["metadata"].get("namespace")
            path = f"/apis/multiq.dev/v1alpha1/{'namespaces/' + ns + '/' if ns else ''}{plural}"
            status, reply = await self.call("POST", path, body=doc)
            assert status == 201, reply


def _write_users(tmp: Path) -> Path:
    users = {
        "users": [
            {"name": "admin", "tokenHash": token_hash(ADMIN), "groups": ["multiq:admins"]},
            {"name": "alice", "tokenHash": token_hash(ALICE), "groups": ["vision-researchers"]},
            {"name": "bob", "tokenHash": token_hash(BOB), "groups": ["audio-researchers"]},
            {"name": "vera", "tokenHash": token_hash(VIEWER), "groups": ["multiq:viewers"]},
            {"name": "mallory", "tokenHash": token_hash(MALLORY), "groups": []},
        ]
    }
    path = tmp / "users.yaml"
    path.write_text(yaml.safe_dump(users))
    for cluster, token in AGENT_TOKENS.items():
        secret = tmp / "secrets" / f"agent-token-{cluster}"
        secret.mkdir(parents=True, exist_ok=True)  # (a hub started again on tmp)
        (secret / "token").write_text(token)
    return path


def fleet_objects() -> list[dict[str, Any]]:
    """Two clusters, a tenant, a flavor, a cluster queue and a local queue."""
    return [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default"},
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-vision"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "8"},
                                    {"name": "memory", "nominalQuota": "32Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "vision", "namespace": "vision"},
            "spec": {"clusterQueue": "team-vision"},
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": "vision"},
            "spec": {"namespaces": ["vision"], "groups": ["vision-researchers"]},
        },
        *[
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": name, "labels": {"region": name}},
                "spec": {
                    "tokenRef": {"secretName": f"agent-token-{name}"},
                    "fencing": {"lossTimeoutSeconds": 4, "leaseSeconds": 3, "graceSeconds": 1},
                },
            }
            for name in AGENT_TOKENS
        ],
    ]


def job(
    name: str = "train", *, queue: str | None = "vision", cpu: str = "1", completions: int = 2
) -> dict[str, Any]:
    labels = {"multiq.dev/queue-name": queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "vision", "labels": labels},
        "spec": {
            "parallelism": completions,
            "completions": completions,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "python:3.11",
                            "command": ["echo", "hi"],
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                        }
                    ],
                }
            },
        },
    }


@contextlib.asynccontextmanager
async def running_hub(tmp_path: Path, **settings_changes: Any) -> AsyncIterator[HubUnderTest]:
    """A real hub (SQLite, the test users, quick timings) on a loopback socket; keyword
    arguments change its HubSettings."""
    settings = HubSettings(
        store=f"sqlite:{tmp_path / 'hub.db'}",
        users_file=_write_users(tmp_path),
        secrets_dir=tmp_path / "secrets",
        offer_timeout_seconds=5,
        dispatch_interval_seconds=0.1,
        queue_status_interval_seconds=0.1,
        **settings_changes,
    )
    server = TestServer(await build_app(settings), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield HubUnderTest(server, tmp_path, session)
    finally:
        await server.close()


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[HubUnderTest]:
    async with running_hub(tmp_path) as running:
        yield running


@dataclass
class ScriptedAgent:
    """A test double of an agent: opens the control lane and exchanges envelopes."""

    name: str
    ws: aiohttp.ClientWebSocketResponse
    seq: int = 0
    inbox: asyncio.Queue[Envelope] = field(default_factory=asyncio.Queue)
    reader: asyncio.Task[None] | None = None
    renewer: asyncio.Task[None] | None = None

    async def send(self, payload: Payload) -> None:
        self.seq += 1
        await self.ws.send_str(Envelope.wrap(payload, seq=self.seq).to_json())

    async def expect(self, kind: type, within: float = 5.0) -> Any:
        """The next received payload of this type (others are skipped)."""
        async with asyncio.timeout(within):
            while True:
                envelope = await self.inbox.get()
                if isinstance(envelope.payload, kind):
                    return envelope.payload

    def waiting(self, kind: type) -> list[Any]:
        """The payloads of this type received and not read yet; the others stay unread (a
        ConfigSync may come at any time: the hub pushes one whenever a queue's status
        changes)."""
        unread = [self.inbox.get_nowait() for _ in range(self.inbox.qsize())]
        for envelope in unread:
            self.inbox.put_nowait(envelope)
        return [e.payload for e in unread if isinstance(e.payload, kind)]

    async def renew_leases(self, every: float = 1.0) -> None:
        """As a real agent does (docs/exactly-once.md): the hub treats a session whose agent
        stops renewing as lost."""
        renewal = 0
        while not self.ws.closed:
            renewal += 1
            await self.send(LeaseRenew(id=renewal))
            await asyncio.sleep(every)

    async def close(self) -> None:
        if self.renewer:
            self.renewer.cancel()
        await self.ws.close()
        if self.reader:
            await self.reader


async def connect_agent(
    hub: HubUnderTest,
    name: str,
    *,
    lane: str = "session",
    hello: Hello | None = None,
    renew: bool = True,
) -> ScriptedAgent:
    ws = await hub.session.ws_connect(
        f"{hub.url}/agent/v1/{lane}?cluster={name}",
        headers={"Authorization": f"Bearer {AGENT_TOKENS[name]}"},
    )
    agent = ScriptedAgent(name, ws)

    async def read() -> None:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                agent.inbox.put_nowait(Envelope.from_json(msg.data))

    agent.reader = asyncio.create_task(read())
    if lane == "session":
        await agent.send(hello or Hello(cluster=name, agent_version="test-0"))
        if renew:
            agent.renewer = asyncio.create_task(agent.renew_leases())
    return agent
