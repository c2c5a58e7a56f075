"""Fixtures for the agent's component tests: a real kubesim cluster (process runtime), the
agent's own kubernetes_asyncio facade on it, and `FakeHub` — an in-test hub peer speaking the
session protocol (two WebSocket lanes of `Envelope` JSON; it grants every lease renewal with
its `lease` terms, or none when they are None) — so the agent runs unchanged while the real
hub is being written.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import WSMsgType, web

from agent.app import Agent
from agent.k8s.client import KubeClient, open_client
from agent.lease import LeaseTerms
from agent.records import Record
from agent.settings import AgentSettings, Timings
from api.k8s.batch import Job
from api.v1alpha1.conversions import workload_from_job
from api.v1alpha1.messages import (
    Ack,
    ConfigSync,
    DispatchOffer,
    Envelope,
    Hello,
    LeaseGrant,
    LeaseRenew,
    Payload,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.queues import ClusterQueue, LocalQueue, ResourceFlavor
from api.v1alpha1.workload import Workload
from kubesim.cluster import ClusterConfig
from kubesim.testing import RunningSimulator, running
from tests.agent.rbac import RoleCheckedKube

T = TypeVar("T")

TOKEN = "s3cret"
CLUSTER = "sim-0"


def pytest_configure(config: pytest.Config) -> None:
    # kubernetes_asyncio's generated code uses asyncio helpers deprecated in newer Pythons;
    # nothing we can change from here (same ignore as tests/kubesim).
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kubernetes_asyncio.*")
    # kubesim's process runtime (`ProcessRuntime.forget`, when a deleted pod's object goes)
    # kills the container and cancels its task without awaiting the subprocess, so asyncio
    # warns about the unclosed transport at garbage collection. Not the agent's doing; the
    # agent tests delete running pods (withdraw, preemption) and stop kubesim with pods running.
    for where in (
        "<function BaseSubprocessTransport.__del__",
        "<function _UnixReadPipeTransport.__del__",
        "<_io.FileIO name=",  # the pipe of that transport
    ):
        config.addinivalue_line(
            "filterwarnings",
            f"ignore:Exception ignored in. {where}:pytest.PytestUnraisableExceptionWarning",
        )


async def eventually(check: Callable[[], Any], *, within: float = 10.0) -> Any:
    """Poll `check` (sync or async) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.05)


class HubLane:
    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.seq = 0
        self.received = 0

    async def send(self, payload: Payload) -> None:
        self.seq += 1
        await self.ws.send_str(
            Envelope.wrap(payload, seq=self.seq, ack=self.received or None).to_json()
        )


class FakeHub:
    """The hub's side of the session, recording everything the agent sends."""

    def __init__(self, config: ConfigSync | None) -> None:
        self.config = config
        self.control: HubLane | None = None
        self.logs: HubLane | None = None
        self.envelopes: list[Envelope] = []
        self.arrivals: list[float] = []
        """time.perf_counter() at which each of `envelopes` arrived."""
        self.log_envelopes: list[Envelope] = []
        self.keep = True
        """False: envelopes are decoded and checked as ever, then not kept (`on_envelope`
        sees the control lane's): a benchmark's hub peer, whose process would otherwise have
        its garbage collector walk every envelope of a long run — a cost no agent has."""
        self.on_envelope: Callable[[Envelope, float], None] | None = None
        """Called with each control-lane envelope and when it arrived (perf_counter)."""
        self.connects = 0
        self.log_connects = 0
        self.refuse = False
        self.logs_paused = asyncio.Event()
        self.logs_paused.set()  # set: the log lane is read
        self.on_hello: Callable[[HubLane], Any] | None = None
        self.lease: LeaseTerms | None = LeaseTerms()
        """The terms every LeaseRenew is granted with; None: renewals go unanswered."""
        self.granted_at = 0.0
        """time.time() when the last granted renewal arrived: the agent's lease ends no later
        than this plus the lease."""
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._requests: list[web.Request] = []

    @property
    def payloads(self) -> list[Payload]:
        """What the agent sent on the control lane, without Acks and lease renewals."""
        return [e.payload for e in self.envelopes if not isinstance(e.payload, Ack | LeaseRenew)]

    def of_type(self, kind: type[T]) -> list[T]:
        return [p for p in self.payloads if isinstance(p, kind)]

    def log_payloads(self) -> list[Any]:
        return [e.payload for e in self.log_envelopes if not isinstance(e.payload, Ack)]

    async def _lane(self, request: web.Request, *, logs: bool) -> web.WebSocketResponse:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}" or self.refuse:
            raise web.HTTPUnauthorized()
        assert request.query.get("cluster") == CLUSTER
        ws = web.WebSocketResponse(heartbeat=5)
        await ws.prepare(request)
        self._sockets.add(ws)
        self._requests.append(request)
        lane = HubLane(ws)
        if logs:
            self.logs = lane
            self.log_connects += 1
        else:
            self.control = lane
            self.connects += 1
        try:
            async for msg in ws:
                if logs:
                    await self.logs_paused.wait()
                if msg.type is WSMsgType.ERROR:
                    break
                if msg.type is not WSMsgType.TEXT:
                    continue
                env = Envelope.decode(msg.data)
                assert env.seq == lane.received + 1, "seq must count from 1 without gaps"
                lane.received = env.seq
                if logs:
                    if self.keep:
                        self.log_envelopes.append(env)
                else:
                    arrived = time.perf_counter()
                    if self.keep:
                        self.envelopes.append(env)
                        self.arrivals.append(arrived)
                    if self.on_envelope is not None:
                        self.on_envelope(env, arrived)
                if not logs and isinstance(env.payload, LeaseRenew) and self.lease is not None:
                    self.granted_at = time.time()
                    await lane.send(
                        LeaseGrant(
                            id=env.payload.id,
                            lease_seconds=int(self.lease.lease_seconds),
                            grace_seconds=int(self.lease.grace_seconds),
                            enabled=self.lease.enabled,
                        )
                    )
                if not logs and env.type == "Hello":
                    if self.config is not None:
                        await lane.send(self.config)
                    if self.on_hello is not None:
                        result = self.on_hello(lane)
                        if asyncio.iscoroutine(result):
                            await result
        finally:
            self._sockets.discard(ws)
            if request in self._requests:
                self._requests.remove(request)
        return ws

    async def start(self) -> None:
        app = web.Application()

        async def control(request: web.Request) -> web.WebSocketResponse:
            return await self._lane(request, logs=False)

        async def logs(request: web.Request) -> web.WebSocketResponse:
            return await self._lane(request, logs=True)

        app.router.add_get("/agent/v1/session", control)
        app.router.add_get("/agent/v1/logs", logs)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}"

    async def drop(self) -> None:
        """Close every agent connection (the agent must reconnect)."""
        for ws in list(self._sockets):
            await ws.close()

    def kill(self) -> None:
        """Cut every connection at the TCP level, without WebSocket close frames (as when
        the hub process dies)."""
        for request in list(self._requests):
            if request.transport is not None:
                request.transport.abort()

    async def drop_logs(self) -> None:
        """Close only the log lane."""
        if self.logs is not None:
            await self.logs.ws.close()

    async def stop(self) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    async def offer(self, offer: DispatchOffer) -> None:
        assert self.control is not None
        await self.control.send(offer)

    async def send(self, payload: Payload) -> None:
        assert self.control is not None
        await self.control.send(payload)

    async def send_log(self, payload: Payload) -> None:
        assert self.logs is not None
        await self.logs.send(payload)

    async def wait_for(self, predicate: Callable[[Payload], bool], *, within: float = 10.0) -> Any:
        return await eventually(
            lambda: next((p for p in self.payloads if predicate(p)), None), within=within
        )


def flavor(name: str = "default") -> ResourceFlavor:
    return ResourceFlavor.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "nodeLabels": {"type": "kubesim"},
                "tolerations": [{"key": "multiq.dev/test", "operator": "Exists"}],
            },
        }
    )


def cluster_queue(name: str = "cq", cpu: str = "2", preempt: bool = False) -> ClusterQueue:
    return ClusterQueue.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority" if preempt else "Never"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                        ],
                    }
                ],
            },
        }
    )


def local_queue(name: str = "lq", namespace: str = "team-a", cq: str = "cq") -> LocalQueue:
    return LocalQueue.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}
    )


def config(revision: int = 1, cpu: str = "2", preempt: bool = False) -> ConfigSync:
    return ConfigSync(
        revision=revision,
        resource_flavors=[flavor()],
        cluster_queues=[cluster_queue(cpu=cpu, preempt=preempt)],
        local_queues=[local_queue()],
    )


def job_source(
    name: str,
    *,
    script: str = "echo hello; sleep 0.2",
    pods: int = 1,
    cpu: str = "500m",
    queue: str = "lq",
    namespace: str = "team-a",
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"multiq.dev/queue-name": queue},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", script],
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                }
            },
        },
    }


def offer_for(
    source: dict[str, Any],
    *,
    generation: int = 1,
    uid: str | None = None,
    priority: int | None = None,
) -> DispatchOffer:
    workload: Workload = workload_from_job(Job.model_validate(source))
    workload.metadata.uid = uid or f"uid-{source['metadata']['name']}"
    workload.spec.priority = priority
    return DispatchOffer(workload=workload, generation=generation, source=source)


# The agent's outbox keeps only the latest report per workload, so a workload that runs fast
# may be reported Running (or finished) without an Admitted report ever leaving: any of these
# says it was admitted.
_ADMITTED_OR_LATER = frozenset(
    {WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING, WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED}
)


def status(phase: WorkloadPhase, name: str) -> Callable[[Payload], bool]:
    """A predicate: a WorkloadStatus report of `phase` for the workload named after `name`
    (for ADMITTED, any report of an admitted workload)."""
    phases = _ADMITTED_OR_LATER if phase is WorkloadPhase.ADMITTED else frozenset({phase})
    return lambda p: (
        isinstance(p, WorkloadStatusReport) and p.phase in phases and p.workload.endswith(name)
    )


def fast_timings() -> Timings:
    return Timings(
        reconnect_initial=0.05,
        reconnect_max=0.5,
        heartbeat=5.0,
        ack_delay=0.2,
        capacity_debounce=0.1,
        capacity_heartbeat=2.0,
        watch_timeout=30,
        watch_retry=0.1,
        log_batch_interval=0.05,
        cycle_min_interval=0.01,
        status_interval=0.2,
        orphan_grace=0.5,
        unleased_renewal=0.2,
    )


@pytest.fixture
async def sim() -> AsyncIterator[RunningSimulator]:
    template = ClusterConfig(bookmark_interval=0.5)
    async with running(clusters=1, nodes=2, runtime="process", template=template) as simulator:
        yield simulator
    # Collect kubesim's leaked subprocess transports now, while the warning filters above
    # apply (at session end they would fail the run).
    gc.collect()


@pytest.fixture
async def kube(sim: RunningSimulator) -> AsyncIterator[KubeClient]:
    async with open_client(sim.kubeconfigs[CLUSTER]) as client:
        yield client


@pytest.fixture
async def hub() -> AsyncIterator[FakeHub]:
    fake = FakeHub(config())
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


class AgentRunner:
    """Starts and stops `Agent`s on one kube client and state directory."""

    def __init__(self, kube: KubeClient, hub: FakeHub, state_dir: Path) -> None:
        self.kube = kube
        self.hub = hub
        self.state_dir = state_dir
        self.tasks: list[asyncio.Task[None]] = []
        self.timings = fast_timings()
        self.overrides: dict[str, Any] = {}
        """Settings the next started agent takes instead of these tests' defaults."""

    def settings(self) -> AgentSettings:
        return AgentSettings(
            cluster=CLUSTER,
            hub=self.hub.url,
            token=TOKEN,
            state_dir=self.state_dir,
            timings=self.timings,
            log_buffer_lines=200,
            log_batch_lines=50,
        ).model_copy(update=self.overrides)

    async def start(self) -> Agent:
        # Every call the agent makes must be one its ClusterRole allows (tests/agent/rbac.py).
        agent = Agent(self.settings(), RoleCheckedKube(self.kube))
        self.tasks.append(asyncio.create_task(agent.run()))
        await eventually(lambda: agent.ready.is_set() or self.tasks[-1].done())
        if self.tasks[-1].done():
            self.tasks[-1].result()
        return agent

    async def start_with(self, **timings: float) -> Agent:
        """An agent with these timings changed, once it has said Hello to the hub."""
        self.timings = self.timings.model_copy(update=timings)
        agent = await self.start()
        await self.hub.wait_for(lambda p: isinstance(p, Hello))
        return agent

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            done, pending = await asyncio.wait(self.tasks, timeout=10)
            assert not pending, "the agent did not stop within 10s of cancellation"
            for task in done:
                if not task.cancelled():
                    task.result()
        self.tasks.clear()


@pytest.fixture
async def agents(kube: KubeClient, hub: FakeHub, tmp_path: Path) -> AsyncIterator[AgentRunner]:
    runner = AgentRunner(kube, hub, tmp_path / "state")
    try:
        yield runner
    finally:
        await runner.stop()


def holds_running(agent: Agent) -> dict[str, Record]:
    """The held workloads that are not settled (finished, or a generation given back): what
    the agent still runs or may still run. A given-back generation stays held, settled, for
    the finished TTL, so the hub re-offering it can never make it run again."""
    return {k: r for k, r in agent.admission.held.items() if not r.settled}


def given_back(agent: Agent, key: str) -> bool:
    record = agent.admission.held.get(key)
    return record is not None and record.phase in (WorkloadPhase.EVICTED, WorkloadPhase.WITHDRAWN)
