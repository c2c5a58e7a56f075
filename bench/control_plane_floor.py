"""Benchmark: what a control plane doing only the unavoidable I/O costs, beside kubesim.

Issue #15 asks that the hub and agent together spend at most twice kubesim's CPU per workload
in `bench.federation_dispatch`. This bench says how low that figure can go with the libraries
we build on, by running the same traffic through a *floor* control plane: the least a hub and
its agents must do per workload, written straight on the libraries, with none of MultiQ's
rules, validation (but see `--validate`), tracing, metrics, fencing or auth.

- kubesim: `kubesim up --clusters 3 --nodes 50 --runtime simulated`, as `qctl dev` starts it.
- floor hub (one process, aiohttp): takes `POST /submit` (a Job as JSON), writes it to SQLite
  (WAL, synchronous=FULL, one commit per loop turn for all writes waiting), binds it to the next
  cluster round robin (a second write) and sends it to that cluster's agent over a WebSocket;
  a Running report is a third write. Replies 201 once the submission is committed.
- floor agents (one process per cluster, kubernetes_asyncio and aiohttp): keep the watches the
  real agent keeps (nodes, pods, jobs, namespaces; events decoded with `json.loads`), save each
  offer to SQLite (WAL, synchronous=NORMAL), create its Job through the generated client (wire
  dicts passed as they are, responses not turned into models, as the real agent does), and
  report Running once its pod runs.

The driver runs the federation bench's two phases with its `small_job`: N Jobs submitted by 32
concurrent clients, then M more at a steady rate (200/s); each phase ends when the hub's
watch shows every one of its workloads Running. It reads each process's CPU from /proc.

    .venv/bin/python -m bench.control_plane_floor [--workloads 2000] [--paced 1000] [--rate 200]
        [--event-loop uvloop|asyncio] [--validate] [--agent-batch SECONDS] [--required]

The floor's processes run on the event loop multiq-hub and multiq-agent run on (`runtime.loop`:
uvloop unless `--event-loop asyncio`; sessions up to 31 measured the floor on asyncio's).
`--validate` adds to the floor hub the one thing MultiQ's standards demand of any hub, whatever
else it does: a submission is decoded with the api models and checked by its rules (bad input
gets a 422 with its field errors), then converted to the Workload the hub queues, which is
stored beside the Job. The floor agents still take offers on trust.

`--required` (implies `--validate`) adds what MultiQ's own design requires of any hub and agents
built on it, done through MultiQ's models and engine and nothing else:
- the protocol's messages (docs/protocol.md): the hub sends each offer as a DispatchOffer
  envelope with the Workload and the Job, and the agents report Running as a WorkloadStatus
  envelope with the admission; each side decodes and checks the other's messages as a peer's
  (`Envelope.decode_from_peer`: the schema, then the rules of what they carry);
- admission by the agent's engine (`FloorAdmission`): each offered Workload converted to the
  engine's, one incremental cycle per round over the dev fleet's queues and every workload
  held; a Job is created once its workload is admitted.
Left out, so that the figure stays a floor: placement at the hub, capacity reports, the agents'
records and status pass, Jobs built from the Workload, fencing, auth, metrics and tracing.

What it showed (session 36, 3 rounds of `--validate --agent-batch 0.05`, `--required
--agent-batch 0.05` and `bench.federation_dispatch` in turn): the required floor's ratio is
1.93–2.02 in the throughput phase and 2.03–2.12 paced (the `--validate` floor 1.46–1.58 and
1.60–1.62; MultiQ 2.84–2.85 and 2.93–3.10). Of what it adds, nearly all is the agents': paced,
1.76–1.96 → 2.93–2.97 ms per workload (the offer's check alone, metered live, is 450 µs in the
floor's agents and 250–340 in MultiQ's: the required parts cost the floor what they cost
MultiQ), the hub's 2.20–2.21 → 2.29–2.34. So the ≤ 2 that #15 set is
what MultiQ's protocol and engine cost by themselves. Add the one part of the hub's work it
leaves out that no design can skip, placement (`hub.placement.cycle.dispatch`, metered in
MultiQ's hub at 137 µs per workload in the throughput phase and 154 paced, 0.07–0.08 on the
ratio), and the floor is 2.01–2.10 and 2.10–2.19: above 2 in every run, before capacity
reports, records, status, fencing, auth, metrics or tracing. #15's bound was restated from it
(its closing note of session 36).

`--agent-batch SECONDS` makes the floor agents create Jobs in rounds, at most one every
SECONDS (offers that arrive meanwhile wait for the next), as multiq-agent's admission cycle
runs at most every 0.05 s. kubesim then gets MultiQ's traffic shape: at 200/s, rounds of a few
Jobs cost kubesim 10-20 % less per workload than Jobs one by one, and the floor agents less
too, so the hub's and agents' figures compare with MultiQ's component by component; the
default (each Job at once) keeps the lower ratio, the floor proper.

`--commit-interval SECONDS` gives the floor hub's group commit the rule of multiq-hub's SQLite
store (hub.store.sqlite.COMMIT_INTERVAL_SECONDS, 0.01): while writers are concurrent, commits
at least SECONDS apart, each covering what came meanwhile. A technique any hub may use, so a
floor compared with a MultiQ that uses it uses it too (`bench.control_plane_margin` passes
it); the default commits at the end of each loop turn.

Prints one JSON object, per phase: CPU ms per workload for floor hub, floor agents and
kubesim, and `(hub + agent) / kubesim` — the floor of the ratio #15 bounds. Compare it with
`bench.federation_dispatch` run just before or after (these machines are noisy, and the
ratio moves with the machine's state: session 40 read this floor at 2.07 and at 2.50–2.72
paced within one hour); `bench.control_plane_margin` runs the two in turn and prints
MultiQ's ratio over this floor's with `--required`, the figure #15 now bounds (≤ 1.2).

Run by hand; tests/bench/test_control_plane_floor_smoke.py runs it small.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import math
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from agent.engine.carry import Carry
from agent.engine.cycle import schedule_incremental
from agent.engine.from_api import build_snapshot, workload_from_api
from agent.engine.result import Admit
from agent.engine.snapshot import Snapshot, WorkloadId
from agent.engine.snapshot import Workload as EngineWorkload
from agent.snapshots import api_admission
from api.codec import decode
from api.errors import ApiError
from api.kinds import REGISTRY
from api.meta import build_schemas
from api.v1alpha1.conversions import to_workload
from api.v1alpha1.federation import TENANT_LABEL
from api.v1alpha1.messages import (
    DispatchOffer,
    Envelope,
    PodCounts,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.queues import ClusterQueue, LocalQueue, ResourceFlavor
from api.v1alpha1.workload import Workload
from bench.federation_dispatch import CpuMeter, control_plane_ratio, small_job
from qctl.commands.dev import DevFederation, free_port
from runtime.collector import tune_collector
from runtime.loop import EVENT_LOOPS, new_event_loop

NAMESPACE = "default"


# --- the floor hub -----------------------------------------------------------------------------


class GroupCommit:
    """Writes run at once; the commit waits for the end of the loop turn, and covers every
    write made in it (the real hub's writer groups its commits the same way). With a
    `commit_interval`, as the real hub's store (hub.store.sqlite.COMMIT_INTERVAL_SECONDS): while
    writers are concurrent (the last commit or the one due holds more than one write), a
    commit comes no sooner than that after the last one began, and covers what came
    meanwhile."""

    def __init__(self, conn: sqlite3.Connection, commit_interval: float = 0.0) -> None:
        self.conn = conn
        self.commit_interval = commit_interval
        self.waiting: list[asyncio.Future[None]] = []
        self.due = False
        self.last_began = -math.inf
        self.last_lone = True

    def write(self, sql: str, params: tuple[Any, ...]) -> asyncio.Future[None]:
        self.conn.execute(sql, params)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.due:
            self.due = True
            asyncio.get_running_loop().call_soon(self._at_end_of_turn)
        self.waiting.append(done)
        return done

    def _at_end_of_turn(self) -> None:
        loop = asyncio.get_running_loop()
        lone = self.last_lone and len(self.waiting) == 1
        pause = 0.0 if lone else self.last_began + self.commit_interval - loop.time()
        if pause > 0:
            loop.call_later(pause, self._commit)
        else:
            self._commit()

    def _commit(self) -> None:
        self.due = False
        self.last_began = asyncio.get_running_loop().time()
        self.last_lone = len(self.waiting) == 1
        self.conn.commit()
        waiting, self.waiting = self.waiting, []
        for done in waiting:
            done.set_result(None)


def _open_db(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level="DEFERRED")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, value TEXT)")
    conn.commit()
    return conn


def submitted_workload(body: Any) -> Workload:
    """What the real hub must do with a submission whatever else it does (hub.http.submit):
    decode the Job with the api models (schema, then its rules) and convert it to the Workload
    it queues, the Job's templates taken over rather than copied (ApiError, with field errors,
    for bad input)."""
    return to_workload(
        decode(body, REGISTRY), priority_classes={}, take_ownership=True, source_checked=True
    )


def validated(body: Any) -> Workload:
    """`--validate`: `submitted_workload` in the floor's namespace."""
    workload = submitted_workload(body)
    workload.metadata.namespace = NAMESPACE
    return workload


def floor_hub(
    db: Path,
    clusters: list[str],
    *,
    validate: bool = False,
    required: bool = False,
    commit_interval: float = 0.0,
) -> web.Application:
    """`required` (with `validate`): offers go out as the protocol's DispatchOffer envelopes
    and reports come back as WorkloadStatus envelopes, each decoded and checked as a peer's
    message (`Envelope.decode_from_peer`)."""
    store = GroupCommit(_open_db(db, "FULL"), commit_interval)
    agents: dict[str, web.WebSocketResponse] = {}
    order = itertools.cycle(clusters)
    workloads: dict[str, dict[str, Any]] = {}
    models: dict[str, Workload] = {}  # `required`: the Workload offered, by its floor key
    by_workload: dict[str, str] = {}  # `required`: floor key by the Workload's key
    sequence = itertools.count(1)
    watchers: set[asyncio.Queue[bytes]] = set()

    async def write(sql: str, text: str, key: str) -> None:
        # Each write is also an event on every watch, encoded once (the driver follows one,
        # as bench.federation_dispatch follows the hub's workload watch).
        await store.write(sql, (text, key))
        event = b'{"type":"MODIFIED","object":' + text.encode() + b"}\n"
        for queue in watchers:
            queue.put_nowait(event)

    async def submit(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        name = body.get("metadata", {}).get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return web.json_response({"message": "metadata.name: required"}, status=422)
        key = f"{NAMESPACE}/{name}"
        if key in workloads:
            return web.json_response({"message": f"{key} exists"}, status=409)
        workload = {"key": key, "job": body, "cluster": None, "phase": "Pending"}
        if validate or required:
            try:
                model = validated(body)
            except ApiError as exc:
                return web.json_response({"message": str(exc)}, status=422)
            workload["workload"] = model.to_wire()
            if required:
                models[key] = model
                by_workload[f"{NAMESPACE}/{model.metadata.name}"] = key
        workloads[key] = workload
        text = json.dumps(workload, separators=(",", ":"))
        await write("INSERT INTO objects (value, key) VALUES (?, ?)", text, key)
        asyncio.get_running_loop().create_task(bind_and_offer(workload))
        return web.json_response(workload, status=201)

    def offer_text(workload: dict[str, Any]) -> str:
        if not required:
            return json.dumps({"offer": workload}, separators=(",", ":"))
        offer = DispatchOffer(
            workload=models[workload["key"]], generation=1, source=workload["job"]
        )
        return Envelope.wrap(offer, seq=next(sequence)).to_json()

    async def bind_and_offer(workload: dict[str, Any]) -> None:
        cluster = next(order)
        workload["cluster"] = cluster
        text = json.dumps(workload, separators=(",", ":"))
        await write("UPDATE objects SET value = ? WHERE key = ?", text, workload["key"])
        await agents[cluster].send_str(offer_text(workload))

    def read_report(data: str) -> tuple[str | None, str]:
        """The floor key and phase a report is of."""
        if not required:
            report = json.loads(data)
            return report["key"], report["phase"]
        envelope, _ = Envelope.decode_from_peer(data)
        payload = envelope.payload
        assert isinstance(payload, WorkloadStatusReport)
        return by_workload.get(payload.workload), payload.phase.value

    async def session(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        agents[request.match_info["cluster"]] = ws
        async for message in ws:
            key, phase = read_report(message.data)
            workload = workloads.get(key) if key is not None else None
            if (
                key is None
                or workload is None
                or workload["cluster"] != request.match_info["cluster"]
            ):
                continue
            workload["phase"] = phase
            text = json.dumps(workload, separators=(",", ":"))
            await write("UPDATE objects SET value = ? WHERE key = ?", text, key)
            models.pop(key, None)  # offered: the agent has it
        return ws

    async def progress(request: web.Request) -> web.Response:
        return web.json_response({"agents": len(agents)})

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        watchers.add(queue)
        try:
            while True:
                await response.write(await queue.get())
        finally:
            watchers.discard(queue)

    app = web.Application()
    app.router.add_post("/submit", submit)
    app.router.add_get("/session/{cluster}", session)
    app.router.add_get("/progress", progress)
    app.router.add_get("/watch", watch)
    return app


# --- a floor agent ---------------------------------------------------------------------------


class FloorAdmission:
    """`--required`: the offers a floor agent holds, admitted by MultiQ's engine as the real
    agent admits them — each offered Workload converted to the engine's (`workload_from_api`),
    then one incremental cycle (`schedule_incremental`) per round over the dev fleet's queues
    (`DevFederation.fleet_objects`) and every workload held, the admitted ones holding their
    quota from then on. Nothing else of the agent's shell: no records, status pass, capacity
    reports, metrics or tracing."""

    def __init__(self, nodes: int) -> None:
        config = DevFederation(Path("."), nodes=nodes).fleet_objects()
        kinds = {k.KIND for k in (ResourceFlavor, ClusterQueue, LocalQueue)}
        objects = [decode(o, REGISTRY) for o in config if o["kind"] in kinds]
        self.base: Snapshot = build_snapshot(
            flavors=[o for o in objects if isinstance(o, ResourceFlavor)],
            cluster_queues=[o for o in objects if isinstance(o, ClusterQueue)],
            local_queues=[o for o in objects if isinstance(o, LocalQueue)],
            workloads=(),
            namespaces={NAMESPACE: {TENANT_LABEL: "default"}},
        )
        self.held: dict[WorkloadId, EngineWorkload] = {}
        self.changed: set[WorkloadId] = set()
        self.carry: Carry | None = None

    def offer(self, workload: Workload, now: float) -> WorkloadId:
        engine = workload_from_api(workload, arrived_at=now)
        self.held[engine.id] = engine
        self.changed.add(engine.id)
        return engine.id

    def cycle(self, now: float) -> list[Admit]:
        """One admission cycle; what it admitted."""
        snapshot = dataclasses.replace(self.base, workloads=dict(self.held))
        result, self.carry = schedule_incremental(snapshot, now, self.carry, self.changed)
        self.changed = set()
        for admit in result.admitted:
            admitted = self.held[admit.workload]
            self.held[admit.workload] = dataclasses.replace(
                admitted, admission=admit.admission, admitted_at=now
            )
            self.changed.add(admit.workload)
        return list(result.admitted)


async def floor_agent(
    hub: str,
    cluster: str,
    kubeconfig: Path,
    db: Path,
    *,
    batch_seconds: float = 0.0,
    admission: FloorAdmission | None = None,
) -> None:
    """`admission` (`--required`): offers are the protocol's envelopes, decoded and checked as
    a peer's message; a Job is created once the engine admits its workload, and its Running
    report is the protocol's WorkloadStatus with the admission."""
    state = _open_db(db, "NORMAL")
    api: Any = await k8s_config.new_client_from_config(config_file=str(kubeconfig))
    # As the real agent does (agent/k8s/client.py): wire dicts go out as they are, and the
    # proxy is not looked up in the environment on every request (no proxy here).
    convert = api.sanitize_for_serialization
    api.sanitize_for_serialization = lambda obj: obj if type(obj) is dict else convert(obj)
    pool = api.rest_client.pool_manager
    connector = pool.connector
    pool.detach()  # the connections stay; only the session around them changes
    api.rest_client.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False)
    batch: Any = k8s.BatchV1Api(api)
    core: Any = k8s.CoreV1Api(api)
    jobs: dict[str, dict[str, Any]] = {}  # Job name: its offered workload, until reported
    sequence = itertools.count(1)
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{hub}/session/{cluster}") as ws:

        def report(workload: dict[str, Any]) -> str:
            if admission is None:
                return json.dumps({"key": workload["key"], "phase": "Running"})
            running = WorkloadStatusReport(
                workload=workload["workload_key"],
                generation=1,
                phase=WorkloadPhase.RUNNING,
                observed_at=datetime.now(UTC),
                admission=api_admission(workload["admission"]),
                pods=PodCounts(running=1),
            )
            return Envelope.wrap(running, seq=next(sequence)).to_json()

        async def on_pod(event: dict[str, Any]) -> None:
            pod = event.get("object") or {}
            job = (pod.get("metadata", {}).get("labels") or {}).get("job-name")
            if job in jobs and (pod.get("status") or {}).get("phase") == "Running":
                workload = jobs.pop(job)
                state.execute(
                    "UPDATE objects SET value = ? WHERE key = ?", ("Running", workload["key"])
                )
                state.commit()
                await ws.send_str(report(workload))

        async def ignore(event: dict[str, Any]) -> None:
            pass

        watches = [
            asyncio.create_task(_watch(list_fn, on_pod if kind == "pods" else ignore))
            for kind, list_fn in (
                ("nodes", core.list_node),
                ("pods", core.list_pod_for_all_namespaces),
                ("jobs", batch.list_job_for_all_namespaces),
                ("namespaces", core.list_namespace),
            )
        ]
        creates: set[asyncio.Task[None]] = set()

        async def create(workload: dict[str, Any]) -> None:
            job = dict(workload["job"])
            job["metadata"] = {**job["metadata"], "namespace": NAMESPACE}
            jobs[job["metadata"]["name"]] = workload
            response = await batch.create_namespaced_job(NAMESPACE, job, _preload_content=False)
            json.loads(await response.read())
            response.release()

        def start_create(workload: dict[str, Any]) -> None:
            task = asyncio.create_task(create(workload))
            creates.add(task)
            task.add_done_callback(creates.discard)

        gathered: list[dict[str, Any]] = []
        waiting: dict[WorkloadId, dict[str, Any]] = {}  # `admission`: offered, not admitted
        last_round = -batch_seconds

        def admit_and_create(offered: list[dict[str, Any]]) -> None:
            if admission is None:
                for workload in offered:
                    start_create(workload)
                return
            now = loop.time()
            for workload in offered:
                waiting[admission.offer(workload["offer"], now)] = workload
            for admit in admission.cycle(now):
                workload = waiting.pop(admit.workload)
                workload["admission"] = admit.admission
                start_create(workload)

        async def create_round() -> None:
            # At most one round every batch_seconds, counted from the last round's start.
            nonlocal last_round
            await asyncio.sleep(max(0.0, last_round + batch_seconds - loop.time()))
            last_round = loop.time()
            offered = list(gathered)
            gathered.clear()
            admit_and_create(offered)

        def offered(data: str) -> dict[str, Any]:
            if admission is None:
                workload: dict[str, Any] = json.loads(data)["offer"]
                return workload
            envelope, _ = Envelope.decode_from_peer(data)
            offer = envelope.payload
            assert isinstance(offer, DispatchOffer) and offer.source is not None
            meta = offer.workload.metadata
            return {
                "key": f"{NAMESPACE}/{offer.source['metadata']['name']}",
                "workload_key": f"{meta.namespace}/{meta.name}",
                "job": offer.source,
                "offer": offer.workload,
            }

        try:
            async for message in ws:
                workload = offered(message.data)
                state.execute(
                    "INSERT OR REPLACE INTO objects VALUES (?, ?)",
                    (workload["key"], message.data),
                )
                state.commit()
                if batch_seconds <= 0:
                    admit_and_create([workload])
                    continue
                gathered.append(workload)
                if len(gathered) == 1:  # the first since the last round: it takes the rest
                    round_ = asyncio.create_task(create_round())
                    creates.add(round_)
                    round_.add_done_callback(creates.discard)
        finally:
            for task in watches:
                task.cancel()
            await api.close()


async def _watch(
    list_fn: Callable[..., Awaitable[Any]],
    on_event: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    listed = json.loads(await (await list_fn(_preload_content=False)).read())
    version = listed["metadata"]["resourceVersion"]
    response = await list_fn(
        watch=True, resource_version=version, allow_watch_bookmarks=True, _preload_content=False
    )
    while line := await response.content.readline():
        if line.strip():
            await on_event(json.loads(line))


# --- the driver ------------------------------------------------------------------------------


@dataclass
class _Fleet:
    """The processes the driver started, by name (kubesim, hub, agent-N), for `CpuMeter`."""

    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)


async def _until(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    try:
        async with asyncio.timeout(seconds):
            while True:  # polled: the state is in another process
                if await check():
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise TimeoutError(f"waited {seconds} s for {what}") from None


async def drive(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    bin_dir = Path(sys.executable).parent
    names = [f"sim-{i}" for i in range(args.clusters)]
    kube_dir = work / "kubeconfigs"
    port = free_port()
    hub_url = f"http://127.0.0.1:{port}"
    me = [sys.executable, "-m", "bench.control_plane_floor", "--event-loop", args.event_loop]
    fleet = _Fleet()
    log = (work / "processes.log").open("ab")

    def spawn(name: str, argv: list[str]) -> None:
        fleet.processes.append((name, subprocess.Popen(argv, stdout=log, stderr=log)))

    spawn(
        "kubesim",
        [str(bin_dir / "kubesim"), "up", "--clusters", str(args.clusters), "--nodes",
         str(args.nodes), "--runtime", "simulated", "--dir", str(kube_dir), "--name-prefix",
         "sim"],
    )  # fmt: skip
    checks = (["--validate"] if args.validate else []) + (["--required"] if args.required else [])
    spawn("hub", [*me, "--role", "hub", "--port", str(port), "--db", str(work / "hub.db"),
                  "--cluster-names", ",".join(names), "--commit-interval",
                  str(args.commit_interval), *checks])  # fmt: skip
    try:
        async with aiohttp.ClientSession() as http:

            async def kubeconfigs() -> bool:
                return all((kube_dir / f"{n}.kubeconfig").exists() for n in names)

            await _until(kubeconfigs, 60, "kubesim")
            for i, name in enumerate(names):
                spawn(f"agent-{i}", [*me, "--role", "agent", "--hub", hub_url.replace("http", "ws"),
                                     "--cluster", name, "--kubeconfig",
                                     str(kube_dir / f"{name}.kubeconfig"),
                                     "--db", str(work / f"agent-{i}.db"),
                                     "--agent-batch", str(args.agent_batch),
                                     "--nodes", str(args.nodes), *checks])  # fmt: skip

            async def progress() -> dict[str, int]:
                try:
                    async with http.get(f"{hub_url}/progress") as r:
                        answer: dict[str, int] = await r.json()
                        return answer
                except aiohttp.ClientConnectionError:
                    return {"agents": 0}

            async def agents_connected() -> bool:
                return (await progress())["agents"] == len(names)

            await _until(agents_connected, 60, "the floor agents")
            await asyncio.sleep(2)  # the agents' lists and watches settle

            meter = CpuMeter(fleet)

            running: set[str] = set()
            changed = asyncio.Event()

            async def follow() -> None:
                async with http.get(f"{hub_url}/watch") as r:
                    while line := await r.content.readline():
                        workload = json.loads(line)["object"]
                        if workload["phase"] == "Running":
                            running.add(workload["key"])
                            changed.set()

            async def submit(job: dict[str, Any]) -> None:
                async with http.post(f"{hub_url}/submit", json=job) as r:
                    if r.status != 201:
                        raise RuntimeError(f"submit: {r.status} {await r.text()}")

            async def phase(name: str, count: int, rate: float | None) -> dict[str, Any]:
                """Submit `count` Jobs, 32 at a time (`rate` None) or `rate` a second, and
                wait until each is reported Running."""
                jobs = [small_job(f"floor-{name}-{i}") for i in range(count)]
                keys = {f"{NAMESPACE}/{job['metadata']['name']}" for job in jobs}
                before, started = meter.sample(), time.monotonic()
                if rate is None:
                    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
                    for job in jobs:
                        queue.put_nowait(job)

                    async def client() -> None:
                        while not queue.empty():
                            await submit(queue.get_nowait())

                    await asyncio.gather(*(client() for _ in range(32)))
                else:
                    sent: list[asyncio.Task[None]] = []
                    for i, job in enumerate(jobs):
                        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
                        sent.append(asyncio.create_task(submit(job)))
                    await asyncio.gather(*sent)
                async with asyncio.timeout(300):
                    while not keys <= running:
                        changed.clear()
                        await changed.wait()
                seconds = time.monotonic() - started
                per = meter.per_workload_ms(before, count)
                del per["bench"]  # the driver: not part of the control plane
                return {
                    "workloads": count,
                    "seconds": round(seconds, 2),
                    "rate_per_s": round(count / seconds, 1),
                    "cpu_ms_per_workload": per,
                    "floor_ratio_hub_plus_agent_to_kubesim": control_plane_ratio(per),
                }

            follower = asyncio.create_task(follow())
            await asyncio.sleep(0.2)  # the watch is open
            phases = {"throughput": await phase("t", args.workloads, None)}
            if args.paced:
                phases["paced"] = await phase("p", args.paced, args.rate)
            follower.cancel()
    finally:
        for _, proc in fleet.processes:
            proc.terminate()
        for _, proc in fleet.processes:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    return {
        "benchmark": "control_plane_floor",
        "event_loop": args.event_loop,
        "validate": args.validate or args.required,
        "required": args.required,
        "agent_batch_seconds": args.agent_batch,
        "commit_interval_seconds": args.commit_interval,
        "clusters": args.clusters,
        "nodes_per_cluster": args.nodes,
        **phases,
    }


def start_as_multiq_does() -> None:
    """What multiq-hub and multiq-agent do before they serve (their `main`): build the api
    models' schemas and tune the collector (runtime.collector) — free for any control
    plane, so the floor does it too."""
    build_schemas()
    tune_collector()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--role", choices=["driver", "hub", "agent"], default="driver")
    parser.add_argument("--port", type=int)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--cluster-names")
    parser.add_argument("--hub")
    parser.add_argument("--cluster")
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument(
        "--event-loop", choices=EVENT_LOOPS, default="uvloop",
        help="the floor hub's and agents' loop (multiq-hub and multiq-agent run on uvloop)",
    )  # fmt: skip
    parser.add_argument(
        "--validate", action="store_true",
        help="the floor hub checks and converts each submission with the api models",
    )  # fmt: skip
    parser.add_argument(
        "--agent-batch", type=float, default=0.0, metavar="SECONDS",
        help="the floor agents create Jobs in rounds at most this often, as multiq-agent's "
        "admission cycle does (0.05 s); 0: each at once",
    )  # fmt: skip
    parser.add_argument(
        "--required", action="store_true",
        help="what MultiQ's protocol and agent require beyond --validate: the protocol's "
        "messages, decoded and checked as a peer's, and admission by the engine",
    )  # fmt: skip
    parser.add_argument(
        "--commit-interval", type=float, default=0.0, metavar="SECONDS",
        help="the floor hub's commits at least this far apart while writers are concurrent, "
        "as multiq-hub's SQLite store (0.01 s); 0: at the end of each loop turn",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.role == "hub":
        start_as_multiq_does()
        app = floor_hub(
            args.db,
            args.cluster_names.split(","),
            validate=args.validate,
            required=args.required,
            commit_interval=args.commit_interval,
        )
        web.run_app(
            app, host="127.0.0.1", port=args.port, print=None, access_log=None, shutdown_timeout=1,
            loop=new_event_loop(args.event_loop),
        )  # fmt: skip
        return 0
    if args.role == "agent":
        start_as_multiq_does()
        with asyncio.Runner(loop_factory=lambda: new_event_loop(args.event_loop)) as runner:
            runner.run(
                floor_agent(
                    args.hub, args.cluster, args.kubeconfig, args.db,
                    batch_seconds=args.agent_batch,
                    admission=FloorAdmission(args.nodes) if args.required else None,
                )
            )  # fmt: skip
        return 0
    with tempfile.TemporaryDirectory(prefix="multiq-floor-") as work:
        print(json.dumps(asyncio.run(drive(args, Path(work))), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
