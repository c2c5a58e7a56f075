"""A workload's logs at the hub: lines its bound cluster ships are kept in the hub's store
and served after the pods are gone and after the hub restarts on its data directory; a
follower that reads too slowly is told how many lines of which container it lost."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.logstamps import stamp_of
from api.v1alpha1.messages import DispatchOffer, LogData, LogLine, LogOpen, WorkloadPhase
from hub.loghub import LogRequest
from tests.hub.service.conftest import ALICE, HubUnderTest, connect_agent, running_hub
from tests.hub.service.test_dispatch_flow import API, eventually, report, submit, two_clusters

START = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


def numbered(first: int, count: int, pod: str = "train-0") -> list[LogLine]:
    return [
        LogLine(timestamp=stamp_of(START + timedelta(milliseconds=n)), text=f"{pod} line {n}")
        for n in range(first, first + count)
    ]


async def read_log(hub: HubUnderTest, key: str, **params: str) -> list[dict[str, Any]]:
    namespace, name = key.split("/")
    async with hub.session.get(
        f"{hub.url}{API}/namespaces/{namespace}/workloads/{name}/log",
        params=params,
        headers={"Authorization": f"Bearer {ALICE}"},
    ) as response:
        assert response.status == 200, await response.text()
        return [json.loads(line) for line in (await response.text()).splitlines()]


async def until(check: Any, within: float = 5.0) -> None:
    async def checked() -> bool:
        return bool(check())

    await eventually(checked, within)


async def test_shipped_logs_are_served_after_the_pods_are_gone_and_after_a_hub_restart(
    tmp_path: Path,
) -> None:
    async with running_hub(tmp_path) as hub:
        east, west = await two_clusters(hub)
        key = await submit(hub)
        await west.expect(DispatchOffer)
        await west.send(report(key, 1, WorkloadPhase.RUNNING))
        logs = await connect_agent(hub, "west", lane="logs")
        ship: dict[str, Any] = {"stream_id": f"ship/1/{key}", "workload": key, "cluster": "west"}
        for first in (1, 501):
            await logs.send(
                LogData(
                    **ship,
                    pod="train-0",
                    container="main",
                    lines=numbered(first, 500),
                    seq=first,
                    from_start=True,
                    shipped=True,
                    generation=1,
                )
            )
        await logs.send(
            LogData(
                **ship,
                pod="train-0",
                container="main",
                eof=True,
                seq=1001,
                from_start=True,
                shipped=True,
                generation=1,
                unshipped_lines=3,
                unshipped_bytes=300,
            )
        )
        await logs.send(LogData(**ship, pod="", container="", eof=True, shipped=True, generation=1))
        await west.send(report(key, 1, WorkloadPhase.SUCCEEDED))
        await until(lambda: hub.hub.logs.complete(key))
        await logs.close()
        await east.close()
        await west.close()
    # A new hub on the same data directory; no agent is connected.
    async with running_hub(tmp_path) as hub:
        records = await read_log(hub, key)
    lines = [r for r in records if "line" in r]
    assert [r["line"] for r in lines] == [f"train-0 line {n}" for n in range(1, 1001)]
    assert [r["seq"] for r in lines] == list(range(1, 1001))
    assert {(r["cluster"], r["pod"], r["container"]) for r in lines} == {
        ("west", "train-0", "main")
    }
    notes = [r for r in records if r.get("event") == "note"]
    assert len(notes) == 1 and "3 lines (300 bytes)" in notes[0]["message"]
    assert records[-1] is notes[0]


async def test_a_ship_cut_off_by_its_time_bound_is_marked_as_such_not_as_over_the_limit(
    tmp_path: Path,
) -> None:
    async with running_hub(tmp_path) as hub:
        east, west = await two_clusters(hub)
        key = await submit(hub)
        await west.expect(DispatchOffer)
        await west.send(report(key, 1, WorkloadPhase.RUNNING))
        logs = await connect_agent(hub, "west", lane="logs")
        ship: dict[str, Any] = {"stream_id": f"ship/1/{key}", "workload": key, "cluster": "west"}
        frame: dict[str, Any] = {**ship, "from_start": True, "shipped": True, "generation": 1}
        await logs.send(
            LogData(**frame, pod="train-0", container="main", lines=numbered(1, 10), seq=1)
        )
        await logs.send(
            LogData(
                **frame,
                pod="train-0",
                container="main",
                eof=True,
                seq=11,
                cut_off_lines=7,
                cut_off_bytes=700,
            )
        )
        await logs.send(LogData(**frame, pod="", container="", eof=True))
        await until(lambda: hub.hub.logs.complete(key))
        records = await read_log(hub, key)
        await logs.close()
        await east.close()
        await west.close()
    assert [r["line"] for r in records if "line" in r] == [
        f"train-0 line {n}" for n in range(1, 11)
    ]
    notes = [r["message"] for r in records if r.get("event") == "note"]
    assert len(notes) == 1
    assert "7 lines (700 bytes)" in notes[0] and "cut off by its time bound" in notes[0]
    assert "ship limit" not in notes[0]


async def test_a_follower_too_slow_for_its_workload_is_told_how_many_lines_it_lost(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    logs = await connect_agent(hub, "west", lane="logs")
    loghub = hub.hub.logs
    loghub.follower_buffer_bytes = 256 * 1024
    follower = loghub.stream("west", LogRequest(key, follow=True))
    first = asyncio.ensure_future(anext(follower))  # opens the stream; then reads nothing
    opened = await logs.expect(LogOpen)
    total = 4000
    for seq in range(1, total + 1, 500):
        pod = "train-0" if seq % 1000 == 1 else "train-1"
        await logs.send(
            LogData(
                stream_id=opened.stream_id,
                workload=key,
                cluster="west",
                pod=pod,
                container="main",
                lines=numbered(seq, 500, pod),
                seq=(seq - 1) // 1000 * 500 + 1,
                from_start=True,
            )
        )
    await logs.send(
        LogData(stream_id=opened.stream_id, workload=key, cluster="west", pod="", container="")
    )
    await logs.send(
        LogData(
            stream_id=opened.stream_id,
            workload=key,
            cluster="west",
            pod="",
            container="",
            eof=True,
        )
    )
    await until(lambda: loghub.stored_lines >= total)
    chunks = [await first]
    async for chunk in follower:
        chunks.append(chunk)
    records = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
    delivered = [r for r in records if "line" in r]
    notices = [r for r in records if r.get("event") == "dropped"]
    assert notices and {n["reason"] for n in notices} == {"follower too slow"}
    assert len(delivered) + sum(n["count"] for n in notices) == total
    for pod in ("train-0", "train-1"):
        seqs = [r["seq"] for r in delivered if r["pod"] == pod]
        assert seqs == sorted(seqs) and seqs[-1] == total // 2
    # The store has every line the hub received, whatever its followers lost.
    stored = await loghub.stored(LogRequest(key))
    assert len([r for r in stored if "line" in r]) == total
    await logs.close()
    await east.close()
    await west.close()
