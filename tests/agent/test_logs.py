"""Log streams on the log lane: every pod of a workload, tagged, ending with eof; and a
saturated log lane never holds up the control lane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.book import Book
from agent.errors import K8sConnectionError
from agent.inventory import Inventory
from agent.k8s.client import Kube
from agent.logs import LogStreams, _Stream, parse_line
from agent.records import Cadence, Record, on_offer
from api.logstamps import stamp_of
from api.v1alpha1.messages import (
    Hello,
    LogClose,
    LogData,
    LogOpen,
    WorkloadPhase,
)
from tests.agent.conftest import AgentRunner, FakeHub, eventually, job_source, offer_for, status
from tests.api.test_logstamps import kubelet_form


async def test_following_a_two_pod_workload_streams_both_pods_tagged_and_ends_each_with_eof(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    script = "for i in 1 2 3; do echo line-$i; sleep 0.1; done"
    offer = offer_for(job_source("talk", pods=2, script=script))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "talk"))
    await hub.send_log(LogOpen(stream_id="s1", workload=key, follow=True))

    def frames() -> list[LogData]:
        return [p for p in hub.log_payloads() if isinstance(p, LogData) and p.stream_id == "s1"]

    # Each pod's container ends with eof; once the workload finished, the stream ends with
    # an eof frame that names no pod.
    end = await eventually(
        lambda: next((f for f in frames() if f.eof and not f.pod), None), within=20
    )
    assert end.container == "" and not end.lines
    assert frames()[-1] is end
    by_pod: dict[str, list[str]] = {}
    for frame in frames()[:-1]:
        assert frame.stream_id == "s1" and frame.workload == key
        assert frame.cluster == "sim-0" and frame.container == "main"
        by_pod.setdefault(frame.pod, []).extend(line.text for line in frame.lines)
        assert all(line.timestamp is not None for line in frame.lines)
    assert len(by_pod) == 2
    assert all(p.startswith("talk-") for p in by_pod)
    assert all(lines == ["line-1", "line-2", "line-3"] for lines in by_pod.values())
    eofs = [f for f in frames()[:-1] if f.eof]
    assert sorted(f.pod for f in eofs) == sorted(by_pod)


async def test_a_saturated_log_stream_holds_its_readers_back_drops_nothing_and_never_delays_control(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    # 20,000 lines (~680 KB): kubesim keeps 10 MiB per container, so all wait there (and in
    # the agent's buffer) while the reader waits; past that the cluster itself drops the oldest.
    script = (
        "sleep 2; i=1; while [ $i -le 20000 ]; do echo line-$i-padding-padding-padding; "
        "i=$((i+1)); done; sleep 5"
    )
    noisy = offer_for(job_source("noisy", script=script, cpu="100m"))
    await hub.offer(noisy)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "noisy"))
    hub.logs_paused.clear()  # the hub stops reading the log lane
    key = f"team-a/{noisy.workload.metadata.name}"
    await hub.send_log(LogOpen(stream_id="flood", workload=key, follow=True))
    # The stream's buffer fills and its reader waits for room instead of dropping.
    await eventually(
        lambda: any(len(s.buffer) >= agent.logs.buffer_lines for s in agent.logs.streams.values()),
        within=20,
    )

    quiet = offer_for(job_source("quiet", script="true", cpu="100m"))
    started = asyncio.get_running_loop().time()
    await hub.offer(quiet)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "quiet"), within=5)
    assert asyncio.get_running_loop().time() - started < 3

    hub.logs_paused.set()

    def lines() -> list[tuple[int, str]]:
        return [
            (frame.seq + n, line.text)
            for frame in hub.log_payloads()
            if isinstance(frame, LogData) and frame.stream_id == "flood"
            for n, line in enumerate(frame.lines)
        ]

    await eventually(lambda: len(lines()) >= 20_000, within=60)
    assert lines() == [(n, f"line-{n}-padding-padding-padding") for n in range(1, 20_001)]
    frames = [p for p in hub.log_payloads() if isinstance(p, LogData)]
    assert not any(f.dropped for f in frames)
    assert all(f.from_start for f in frames if f.stream_id == "flood")
    await hub.send_log(LogClose(stream_id="flood"))


async def test_losing_only_the_log_lane_redials_it_without_touching_the_control_lane(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await eventually(lambda: hub.log_connects == 1)
    await hub.drop_logs()
    await eventually(lambda: hub.log_connects == 2)
    assert hub.connects == 1 and agent.session.connections == 1
    offer = offer_for(job_source("after-drop", script="echo still-here"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "after-drop"), within=20)
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.send_log(LogOpen(stream_id="s2", workload=key, follow=False))
    frame = await eventually(
        lambda: next(
            (
                p
                for p in hub.log_payloads()
                if isinstance(p, LogData) and p.lines and p.stream_id == "s2"
            ),
            None,
        )
    )
    assert [line.text for line in frame.lines] == ["still-here"]


async def test_a_log_request_without_follow_honours_tail_lines_and_ends(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("tail", script="echo one; echo two; echo three"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "tail"), within=20)
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.send_log(LogOpen(stream_id="t", workload=key, tail_lines=2))

    def frames() -> list[LogData]:
        return [p for p in hub.log_payloads() if isinstance(p, LogData) and p.stream_id == "t"]

    await eventually(lambda: any(f.eof and not f.pod for f in frames()))
    assert [line.text for f in frames() for line in f.lines] == ["two", "three"]
    assert [(f.pod != "", f.eof) for f in frames()] == [(True, False), (True, True), (False, True)]
    await eventually(lambda: "t" not in agent.logs.streams)


async def test_a_log_request_for_a_workload_not_held_here_ends_at_once(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await eventually(lambda: hub.logs is not None)
    await hub.send_log(LogOpen(stream_id="none", workload="team-a/nothing", follow=True))
    end = await eventually(
        lambda: next((p for p in hub.log_payloads() if isinstance(p, LogData)), None)
    )
    assert (end.stream_id, end.pod, end.eof, end.lines) == ("none", "", True, [])


class _BreakingKube:
    """pod_log that breaks after two lines the first time, then serves everything."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    async def pod_log(self, namespace: str, name: str, **kwargs: object) -> AsyncIterator[str]:
        self.calls.append(kwargs)
        lines = [f"2026-12-02T10:00:0{i}.000000Z line-{i}" for i in range(4)]
        for i, line in enumerate(lines):
            if len(self.calls) == 1 and i == 2:
                raise K8sConnectionError("reset")
            yield line


async def test_a_broken_log_stream_resumes_after_the_last_line_without_repeating_it() -> None:
    kube = _BreakingKube()
    sent: list[LogData] = []

    async def send(data: LogData) -> None:
        sent.append(data)

    streams = LogStreams(
        cluster="c",
        kube=kube,  # type: ignore[arg-type]
        inventory=None,  # type: ignore[arg-type]
        send=send,
        batch_interval=0,
    )
    stream = _Stream(streams, LogOpen(stream_id="s", workload="ns/w", follow=True, tail_lines=10))
    await stream.read("ns", ("pod", "main"))
    assert [e.text for e in stream.buffer] == ["line-0", "line-1", "line-2", "line-3"]
    assert stream.ended == [("pod", "main")]
    assert kube.calls[0]["tail_lines"] == 10
    assert kube.calls[1]["tail_lines"] is None and kube.calls[1]["since_seconds"] is not None


class _TiedKube:
    """pod_log of five lines where one read of the container's output stamped three alike
    (line-1..3); the first read breaks after line-2."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    async def pod_log(self, namespace: str, name: str, **kwargs: object) -> AsyncIterator[str]:
        self.calls.append(kwargs)
        for i, second in enumerate((0, 1, 1, 1, 2)):
            if len(self.calls) == 1 and i == 3:
                raise K8sConnectionError("reset")
            yield f"2026-12-02T10:00:0{second}.000000Z line-{i}"


@pytest.mark.parametrize("tail_lines", [None, 10], ids=["from the start", "by time"])
async def test_lines_stamped_alike_are_each_passed_on_once_across_a_broken_read(
    tail_lines: int | None,
) -> None:
    streams = LogStreams(
        cluster="c",
        kube=_TiedKube(),  # type: ignore[arg-type]
        inventory=None,  # type: ignore[arg-type]
        send=lambda _data: asyncio.sleep(0),
        batch_interval=0,
    )
    request = LogOpen(stream_id="s", workload="ns/w", follow=True, tail_lines=tail_lines)
    stream = _Stream(streams, request)
    await stream.read("ns", ("pod", "main"))
    assert [(e.seq, e.text) for e in stream.buffer] == [(n + 1, f"line-{n}") for n in range(5)]


class _HangingKube:
    """pod_log that serves three lines, then nothing more until cancelled."""

    async def pod_log(self, namespace: str, name: str, **kwargs: object) -> AsyncIterator[str]:
        for i in range(3):
            yield f"2026-12-02T10:00:0{i}.000000Z line-{i}"
        await asyncio.Event().wait()


class _OnePod:
    def workload_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        running = {"name": "main", "state": {"running": {}}}
        return [
            {
                "metadata": {"name": "pod"},
                "spec": {"containers": [{"name": "main"}]},
                "status": {"containerStatuses": [running]},
            }
        ]


async def test_an_evictions_cut_off_ship_sends_what_it_left_behind_before_it_returns() -> None:
    # The Evicted report follows the return and ends the binding the hub takes the counts
    # under: the eof frames must be on the lane first, not in the background.
    lane_open = asyncio.Event()
    sent: list[LogData] = []

    async def send(data: LogData) -> None:
        await lane_open.wait()  # the lane is stuck while the ship runs
        sent.append(data)

    streams = LogStreams(
        cluster="c",
        kube=_HangingKube(),  # type: ignore[arg-type]
        inventory=_OnePod(),  # type: ignore[arg-type]
        send=send,
        batch_lines=1,
        batch_interval=0,
        finished=lambda _workload: True,
    )
    assert await streams.open_before_stop("ns/w", 1, wait=5.0)
    loop = asyncio.get_running_loop()
    loop.call_later(0.7, lane_open.set)  # it drains after the cut-off, within the bound
    await streams.ship_before_stop("ns/w", 1, 0.5, asyncio.Event(), jobs_gone=True)
    eof = [f for f in sent if f.eof and f.pod == "pod"]
    assert len(eof) == 1 and eof[0].cut_off_lines == 2  # (the third was in a frame on its way)
    assert sent[-1].eof and not sent[-1].pod


def shipped_frames(hub: FakeHub, key: str) -> list[LogData]:
    return [
        p for p in hub.log_payloads() if isinstance(p, LogData) and p.shipped and p.workload == key
    ]


def shipped_lines(hub: FakeHub, key: str) -> list[tuple[int, str]]:
    return [
        (frame.seq + n, line.text)
        for frame in shipped_frames(hub, key)
        for n, line in enumerate(frame.lines)
    ]


async def test_a_finished_workloads_logs_are_shipped_unasked_with_their_generation(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    script = "i=1; while [ $i -le 300 ]; do echo out-$i; i=$((i+1)); done"
    offer = offer_for(job_source("done", script=script))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "done"), within=20)
    end = await eventually(
        lambda: next((f for f in shipped_frames(hub, key) if f.eof and not f.pod), None),
        within=20,
    )
    assert shipped_lines(hub, key) == [(n, f"out-{n}") for n in range(1, 301)]
    frames = shipped_frames(hub, key)
    assert frames[-1] is end
    assert all(f.generation == 1 and f.from_start for f in frames)
    assert all(f.unshipped_lines == 0 for f in frames)


async def test_shipping_stops_at_the_limit_and_says_how_much_it_left_behind(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agents.overrides = {"log_ship_limit_bytes": 1000}
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    # 300 lines of 9 bytes and a newline each: 100 fit in 1000 bytes.
    script = "i=1; while [ $i -le 300 ]; do printf 'line-%04d\\n' $i; i=$((i+1)); done"
    offer = offer_for(job_source("big-log", script=script))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "big-log"), within=20)
    await eventually(lambda: any(f.eof and not f.pod for f in shipped_frames(hub, key)), within=20)
    assert shipped_lines(hub, key) == [(n, f"line-{n:04d}") for n in range(1, 101)]
    eof = next(f for f in shipped_frames(hub, key) if f.eof and f.pod)
    assert (eof.unshipped_lines, eof.unshipped_bytes) == (200, 200 * 10)


class _CountedRecords(dict[str, Record]):
    """The held records, counting how often the log shipper walks all of them."""

    walks = 0

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return super().__iter__()


class _StartRecorder(LogStreams):
    """Log streams that record which workloads a ship starts instead of reading any log."""

    started: list[str]

    def _start(self, stream: _Stream) -> asyncio.Task[None]:
        self.started.append(stream.request.workload)
        return asyncio.create_task(asyncio.sleep(0))


def _finished(name: str) -> Record:
    made = on_offer(None, offer_for(job_source(name)), 0.0).record
    assert made is not None
    return replace(made, phase=WorkloadPhase.SUCCEEDED, job_names=(f"job-{name}",))


async def test_the_log_shipper_looks_at_what_finished_not_at_every_held_workload() -> None:
    book = Book(Cadence())
    held = _CountedRecords()
    lane = {"up": True}
    streams = _StartRecorder(
        cluster="c",
        kube=cast(Kube, None),
        inventory=cast(Inventory, None),
        send=cast(Callable[[LogData], Awaitable[None]], None),
        poll_interval=0.01,
        lane_up=lambda: lane["up"],
    )
    streams.started = []

    def put(record: Record) -> None:
        book.put(record.key, record)
        held[record.key] = record

    put(_finished("before"))  # restored finished: the first look finds it
    for n in range(50):
        pending = on_offer(None, offer_for(job_source(f"wait-{n}")), 0.0).record
        assert pending is not None
        put(pending)
    shipper = asyncio.create_task(streams.watch_finished(lambda: held, book.take_finished))
    try:
        await eventually(lambda: streams.started == ["team-a/job-before"])
        put(_finished("a"))
        await eventually(lambda: streams.started[1:] == ["team-a/job-a"])
        lane["up"] = False
        put(_finished("b"))
        await asyncio.sleep(0.05)
        assert streams.started[2:] == []  # the lane is down: b waits for it
        lane["up"] = True
        await eventually(lambda: streams.started[2:] == ["team-a/job-b"])
        assert held.walks == 1  # only the first look walked every held workload
        await streams.close_all()  # the lane is lost: what was shipped over it is forgotten
        again = ["team-a/job-a", "team-a/job-b", "team-a/job-before"]
        await eventually(lambda: sorted(streams.started[3:]) == again)
        assert held.walks == 2
    finally:
        shipper.cancel()
        await asyncio.gather(shipper, return_exceptions=True)


class _KubeletStampsKube:
    """pod_log as a kubelet prints it: RFC3339Nano (trailing zeros left out), and a line
    whose first word only looks like a stamp."""

    async def pod_log(self, namespace: str, name: str, **kwargs: object) -> AsyncIterator[str]:
        for line in (
            "2026-12-02T10:00:00Z start",
            "2026-12-02T10:00:00.5Z half",
            "2026-12-02T10:00:00.500000001Z a nanosecond later",
            "2026-12-02T10:00:01.123456789Z then",
            "2026-12-02T25:00:01Z not a stamp",
        ):
            yield line


async def test_the_clusters_stamps_go_out_canonical_and_a_line_without_one_goes_whole() -> None:
    streams = LogStreams(
        cluster="c",
        kube=_KubeletStampsKube(),  # type: ignore[arg-type]
        inventory=None,  # type: ignore[arg-type]
        send=lambda _data: asyncio.sleep(0),
        batch_interval=0,
    )
    stream = _Stream(streams, LogOpen(stream_id="s", workload="ns/w"))
    await stream.read("ns", ("pod", "main"))
    frame = stream._frame(("pod", "main"), list(stream.buffer), eof=False)
    assert [(line.timestamp, line.text) for line in frame.lines] == [
        ("2026-12-02T10:00:00.000000+00:00", "start"),
        ("2026-12-02T10:00:00.500000+00:00", "half"),
        ("2026-12-02T10:00:00.500000+00:00", "a nanosecond later"),
        ("2026-12-02T10:00:01.123456+00:00", "then"),
        (None, "2026-12-02T25:00:01Z not a stamp"),
    ]


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30)),
    st.integers(min_value=0, max_value=999),
)
def test_a_lines_stamp_is_read_as_the_canonical_stamp_of_its_time(
    when: datetime, nanos: int
) -> None:
    for stamp in (  # kubesim's form (6 digits, the reader's fast path), and RFC3339Nano's
        when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        kubelet_form(when.replace(tzinfo=UTC), nanos),
    ):
        assert parse_line(f"{stamp} the text") == (stamp_of(when), "the text")


@pytest.mark.parametrize(
    "raw", ["2026-12-02T25:00:01.000000Z looks like one", "2026-12-02T10:00:01.000000Zx", "text"]
)
def test_a_line_without_a_stamp_is_read_whole(raw: str) -> None:
    assert parse_line(raw) == (None, raw)
