"""Benchmark: how long the federation is without a dispatching hub when its leader dies.

Starts `qctl dev up --ha 3` in a temp dir (three `multiq-hub` on a local etcd, kubesim
clusters with the simulated runtime, one agent per cluster), then, `--kills` times: SIGKILLs
the leading hub, at once submits a workload through the hub client given every hub's URL,
and measures from the SIGKILL to the moment the workload is accepted (the 201: a follower
held it until a new leader was elected and forwarded it) and to the moment it is dispatched
(the new leader offered it to a cluster: it is nominated or bound). The killed hub is started
again as a follower before the next round. Prints one JSON object with every figure and
their median and worst.

    .venv/bin/python -m bench.hub_failover [--kills 5] [--clusters 2]

The election TTL is the hubs' default (5 s): most of the failover is the dead leader's key
waiting for its lease to expire.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from api.v1alpha1.workload import Workload
from bench.federation_dispatch import small_job
from qctl.client import HubClient
from qctl.commands.dev import DevFederation
from qctl.errors import QctlError

POLL_SECONDS = 0.05


async def _role(http: aiohttp.ClientSession, url: str) -> str:
    try:
        async with http.get(url + "/readyz", timeout=aiohttp.ClientTimeout(total=2)) as reply:
            return str((await reply.json())["role"])
    except (aiohttp.ClientError, TimeoutError):
        return "down"


async def _leader(fed: DevFederation) -> str:
    async with aiohttp.ClientSession() as http:
        while True:
            for name, url in zip(fed.hub_names, fed.hub_urls, strict=True):
                if await _role(http, url) == "leader":
                    return name
            await asyncio.sleep(POLL_SECONDS)


async def _dispatched(client: HubClient, name: str) -> None:
    while True:
        try:
            status = (await client.get(Workload, name, "default")).get("status") or {}
        except QctlError:  # not there yet, or the hub answering is between leaders
            status = {}
        if status.get("clusterName") or status.get("nominatedClusterNames"):
            return
        await asyncio.sleep(POLL_SECONDS)


async def _one_failover(fed: DevFederation, round_: int) -> dict[str, Any]:
    leader = await _leader(fed)
    async with HubClient(fed.context, timeout=60) as client:
        fed.kill(leader, signal.SIGKILL)
        killed = time.monotonic()
        created = await client.submit(small_job(f"after-kill-{round_}"), namespace="default")
        accepted = time.monotonic() - killed
        await _dispatched(client, created["metadata"]["name"])
        dispatched = time.monotonic() - killed
    new_leader = await _leader(fed)
    fed.restart(leader)
    return {
        "killed": leader,
        "newLeader": new_leader,
        "acceptedSeconds": round(accepted, 2),
        "dispatchedSeconds": round(dispatched, 2),
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hub_failover")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--clusters", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="multiq-failover-") as scratch:
        fed = DevFederation(
            Path(scratch), clusters=args.clusters, nodes=4, runtime="simulated", port=0, ha=3
        )
        try:
            fed.start(detach=False)
            rounds = []
            for round_ in range(args.kills):
                rounds.append(asyncio.run(_one_failover(fed, round_)))
                time.sleep(2)  # the restarted hub rejoins as a follower
        finally:
            fed.stop()
    result = {
        "bench": "hub_failover",
        "hubs": 3,
        "clusters": args.clusters,
        "electionTtlSeconds": 5,
        "rounds": rounds,
        "acceptedSeconds": _summary([r["acceptedSeconds"] for r in rounds]),
        "dispatchedSeconds": _summary([r["dispatchedSeconds"] for r in rounds]),
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
