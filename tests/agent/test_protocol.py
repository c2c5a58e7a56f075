"""The pieces of the protocol and error handling on their own: the outbox keeps the latest
report per workload until acknowledged, lanes drop duplicates and send bare Acks, Kubernetes
statuses map to one error class each, and only transient errors are retried."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent.capacity import CapacityPacer
from agent.errors import (
    K8sAlreadyExistsError,
    K8sConflictError,
    K8sGoneError,
    K8sInvalidError,
    K8sNotFoundError,
    K8sServerError,
    K8sTooManyRequestsError,
    k8s_error,
)
from agent.hubclient import Lane, Outbox
from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.messages import (
    Ack,
    ConfigSync,
    Hello,
    LogClose,
    OfferRejected,
    RejectReason,
    WorkloadPhase,
    WorkloadStatusReport,
)
from kubesim.testing import RunningSimulator
from tests.agent.conftest import AgentRunner, FakeHub, config, eventually


def report(name: str, phase: WorkloadPhase) -> WorkloadStatusReport:
    return WorkloadStatusReport(workload=f"ns/{name}", generation=1, phase=phase)


def test_the_outbox_keeps_only_the_latest_report_per_workload_until_it_is_acknowledged() -> None:
    outbox = Outbox(limit=2)
    outbox.put(report("a", WorkloadPhase.ADMITTED))
    running = report("a", WorkloadPhase.RUNNING)
    outbox.put(running)
    outbox.put(report("b", WorkloadPhase.PENDING))
    assert [p.workload for p in outbox.unsent()] == ["ns/a", "ns/b"]
    assert outbox.unsent()[0] is running
    outbox.mark_sent(running, 7)
    assert [p.workload for p in outbox.unsent()] == ["ns/b"]
    outbox.reset()  # reconnect: everything unacknowledged goes again
    assert len(outbox.unsent()) == 2
    outbox.mark_sent(running, 3)
    outbox.acknowledge(3)
    assert [p.workload for p in outbox.unsent()] == ["ns/b"]
    assert len(outbox) == 1  # the acknowledged report is gone
    outbox.put(OfferRejected(workload="ns/c", generation=1, reason=RejectReason.INVALID))
    outbox.put(report("d", WorkloadPhase.PENDING))
    assert [p.workload for p in outbox.unsent()] == ["ns/c", "ns/d"]
    assert outbox.dropped == 1  # bounded: the oldest went


def test_a_newer_report_survives_the_acknowledgement_of_the_one_it_replaced() -> None:
    outbox = Outbox()
    admitted = report("a", WorkloadPhase.ADMITTED)
    outbox.put(admitted)
    outbox.mark_sent(admitted, 1)
    running = report("a", WorkloadPhase.RUNNING)
    outbox.put(running)  # before the hub acknowledged seq 1
    outbox.acknowledge(1)
    assert outbox.unsent() == [running]
    outbox.mark_sent(running, 2)
    outbox.acknowledge(2)
    assert len(outbox) == 0


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (404, "NotFound", K8sNotFoundError),
        (409, "AlreadyExists", K8sAlreadyExistsError),
        (409, "Conflict", K8sConflictError),
        (410, "Expired", K8sGoneError),
        (422, "Invalid", K8sInvalidError),
        (429, "TooManyRequests", K8sTooManyRequestsError),
        (503, "ServiceUnavailable", K8sServerError),
    ],
)
def test_each_kubernetes_status_maps_to_one_error_class(
    status: int, reason: str, cls: type[Exception]
) -> None:
    body = f'{{"kind":"Status","reason":"{reason}","message":"m","code":{status}}}'
    error = k8s_error(status, body, {"Retry-After": "2"})
    assert type(error) is cls
    assert error.status == status and error.reason == reason
    assert error.retry_after == 2.0


async def test_transient_kubernetes_errors_are_retried_and_429_waits_for_retry_after(
    sim: RunningSimulator, kube: KubeClient
) -> None:
    faults = sim.clusters[0].faults
    faults.fail_next(2, 500)
    assert (await kube.list(Resource.NODES)).items
    faults.fail_next(1, 429)
    loop = asyncio.get_running_loop()  # the wait's own clock (see tests/agent/test_retry.py)
    started = loop.time()
    assert (await kube.list(Resource.NODES)).items
    assert loop.time() - started >= 1.0  # kubesim says Retry-After: 1


async def test_errors_that_retrying_cannot_cure_are_raised_at_once(kube: KubeClient) -> None:
    started = time.monotonic()
    with pytest.raises(K8sNotFoundError):
        await kube.get(Resource.JOBS, "nowhere", "nothing")
    with pytest.raises(K8sInvalidError):
        await kube.create(Resource.JOBS, "default", {"metadata": {"name": "x"}, "spec": {}})
    assert time.monotonic() - started < 1.0


async def test_the_agent_acknowledges_hub_messages_with_a_bare_ack_when_it_has_nothing_to_say(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await eventually(lambda: hub.logs is not None)
    # LogClose of an unknown stream: the agent has nothing to send on the log lane.
    await hub.send_log(LogClose(stream_id="nothing"))
    ack = await eventually(
        lambda: next((e for e in hub.log_envelopes if isinstance(e.payload, Ack)), None)
    )
    assert ack.ack == 1 and ack.seq == 1  # numbered like any message
    await asyncio.sleep(0.5)
    # Nothing more to acknowledge: one Ack only (Acks are never acknowledged themselves).
    assert sum(isinstance(e.payload, Ack) for e in hub.log_envelopes) == 1
    # Control lane: the ConfigSync (seq 1) is acknowledged, piggy-backed or bare.
    await eventually(lambda: any((e.ack or 0) >= 1 for e in hub.envelopes))


async def test_a_new_config_replaces_the_old_one_and_is_kept_on_disk(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await eventually(lambda: agent.admission.config is not None)
    newer: ConfigSync = config(revision=7, cpu="5")
    await hub.send(newer)
    await eventually(
        lambda: agent.admission.config is not None and agent.admission.config.revision == 7
    )
    assert agent.store.load_config() == newer


async def test_a_frame_that_is_not_a_valid_envelope_is_logged_and_the_session_goes_on(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hub.control is not None
    await hub.control.ws.send_str('{"type": "DispatchOffer", "seq": 99, "payload": {}}')
    await hub.control.ws.send_str("not json at all")
    newer = config(revision=2)
    await hub.send(newer)
    await eventually(
        lambda: agent.admission.config is not None and agent.admission.config.revision == 2
    )
    assert agent.session.connections == 1


async def test_capacity_is_reported_at_once_after_a_quiet_spell_then_paced_by_debounce() -> None:
    pacer = CapacityPacer(debounce=0.2, heartbeat=0.6)
    started = time.monotonic()
    await pacer.wait()  # nothing changed: the heartbeat
    assert 0.58 <= time.monotonic() - started < 0.9
    await asyncio.sleep(0.25)  # (a report is a report: the heartbeat's counts)
    pacer.changed()
    started = time.monotonic()
    await pacer.wait()  # a change after a quiet spell: at once
    assert time.monotonic() - started < 0.1
    pacer.changed()
    pacer.changed()
    started = time.monotonic()
    await pacer.wait()  # changes keep coming: held to the debounce, and coalesced
    assert 0.15 <= time.monotonic() - started < 0.4
    started = time.monotonic()
    await pacer.wait()  # the two changes made one report
    assert time.monotonic() - started >= 0.55


class _SlowSocket:
    """A WebSocket whose sends finish only when told, recording what they carried."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.release = asyncio.Event()

    async def send_str(self, text: str) -> None:
        self.sent.append(text)
        await self.release.wait()


async def test_a_message_given_as_a_function_is_made_only_once_the_lane_is_free() -> None:
    # A capacity report made before a status report ahead of it on the lane would undo, at
    # the hub, the room that answer stands for (agent.app `send_capacity`).
    socket = _SlowSocket()
    lane = Lane(socket, "control")  # type: ignore[arg-type]
    made_at: list[int] = []

    def capacity() -> Hello:
        made_at.append(len(socket.sent))
        return Hello(cluster="east", agent_version="test")

    first = asyncio.create_task(lane.send(Hello(cluster="east", agent_version="test")))
    second = asyncio.create_task(lane.send(capacity))
    await asyncio.sleep(0.05)
    assert made_at == []  # the lane is busy with the first message: nothing made yet
    socket.release.set()
    await asyncio.gather(first, second)
    assert made_at == [1]  # made after the first message went out
    assert len(socket.sent) == 2
