"""A deep queue at one agent, in real time: what the agent's CPU costs per admission while
10,000 one-CPU Jobs of 1 s wait on 4 nodes × 8 CPUs.

    .venv/bin/python -m bench.agent_deep_queue [--queued 10000] [--window 20] [--profile]
    .venv/bin/python -m bench.agent_deep_queue --floor [--window 20]

Real parts, as `bench.agent_dispatch`: the agent (`agent.app.Agent`, the production timings)
talks WebSocket to an in-process hub peer (the component tests' `FakeHub`) and HTTP to
kubesim, run in its own process (so its CPU is not counted) from
`examples/kubesim/small.profile` with every Job pod running 1 s of simulated runtime. One
cluster queue of 32 CPUs, so at best 32 Jobs finish and 32 are admitted per second.

The hub peer offers `--queued` workloads as a burst; once the agent holds them all and has
reported each once (the queue is as deep as it gets, and the fill's first Pending reports are
sent), the figures are taken over `--window` seconds of the steady state that follows:
admissions per second against the ideal 32 (an admission is the first report of a workload
as admitted or later), and the CPU the process spent per admission (the agent, plus the hub
peer receiving its reports; kubesim excluded). The hub peer decodes every envelope and keeps
none: a hub runs in a process of its own, so the agent's garbage collector never walks what
the hub holds (kept, they were nearly half of the objects the process gained in the window,
and a collection walks every one of them). The queue is still
≥ 9,000 deep when the window ends. Real time rather than simulated time because the cost
asked about is the whole agent's — its admission cycles, status passes, pending reports,
Job creates and watches — not the engine's alone (bench.engine_* measure that). Prints JSON;
`--profile` adds the functions that took the most CPU in the window (cProfile on the event
loop's thread, in its CPU time; it slows the agent several-fold, so read it for shares).

`--floor` measures what the same process must spend per admission with no agent in it: the
Jobs the agent would make (`agent.materialize.plan_jobs`) created at the ideal 32/s through
the agent's Kubernetes client, the agent's mirrors (`agent.inventory.Inventory`) taking every
watch event they cause, and each workload's Admitted, Running and Succeeded reports sent over
a WebSocket to the same hub peer, which decodes them. No admission cycle, no snapshot, no
record, no state written: what is left of `cpu_ms_per_admission` above this figure is the
agent's own.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import math
import pstats
import tempfile
import time
from pathlib import Path

import aiohttp

from agent.app import Agent
from agent.engine.snapshot import (
    Admission,
    ClusterQueueName,
    FlavorName,
    PodSetAssignment,
    ResourceName,
)
from agent.inventory import Inventory
from agent.k8s.client import Resource, open_client
from agent.materialize import plan_jobs
from agent.settings import Timings
from agent.snapshots import api_admission
from api.v1alpha1.messages import ConfigSync, Envelope, WorkloadPhase, WorkloadStatusReport
from bench.agent_common import collector, kubesim_process, run_like_the_agent, wait_until
from tests.agent.conftest import (
    CLUSTER,
    TOKEN,
    AgentRunner,
    FakeHub,
    cluster_queue,
    flavor,
    job_source,
    local_queue,
    offer_for,
)

PROFILE = Path(__file__).resolve().parent.parent / "examples" / "kubesim" / "small.profile"
CAPACITY_CPUS = 32
"""4 nodes × 8 CPUs (small.profile), one CPU per Job."""
JOB_SECONDS = 1.0
IDEAL_PER_S = CAPACITY_CPUS / JOB_SECONDS

_ADMITTED_OR_LATER = frozenset(
    {WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING, WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED}
)


async def bench(queued: int, window: float, *, profile: bool = False) -> dict[str, object]:
    config = ConfigSync(
        revision=1,
        resource_flavors=[flavor()],
        cluster_queues=[cluster_queue(cpu=str(CAPACITY_CPUS))],
        local_queues=[local_queue()],
    )
    hub = FakeHub(config)
    admitted: dict[str, float] = {}
    """Workload → when the hub peer got its first report as admitted or later."""
    reported: set[str] = set()

    def received(env: Envelope, at: float) -> None:
        p = env.payload
        if isinstance(p, WorkloadStatusReport):
            reported.add(p.workload)
            if p.phase in _ADMITTED_OR_LATER:
                admitted.setdefault(p.workload, at)

    hub.keep, hub.on_envelope = False, received
    await hub.start()
    # CPU time of the loop's thread, not wall time: the loop's idle waits are not its cost.
    profiler = cProfile.Profile(time.thread_time) if profile else None
    try:
        async with (
            kubesim_process(
                ["--profile", str(PROFILE), "--job-pod-duration", str(JOB_SECONDS)]
            ) as kubeconfig,
            open_client(kubeconfig) as kube,
        ):
            with tempfile.TemporaryDirectory() as state:
                runner = AgentRunner(kube, hub, Path(state))
                runner.timings = Timings()  # as deployed, not the tests' fast ones
                agent: Agent = await runner.start()
                await wait_until(
                    lambda: hub.control is not None and agent.admission.config is not None
                )
                started = time.perf_counter()
                for i in range(queued):
                    offer = offer_for(job_source(f"d{i}", cpu="1", script="true"))
                    await hub.offer(offer)
                await wait_until(lambda: len(agent.admission.held) >= queued, within=600)
                held = time.perf_counter() - started
                # Each workload's first report (Pending, for most) is the fill's work too: the
                # window waits for the last of them.
                await wait_until(lambda: len(reported) >= queued, within=600)
                filled = time.perf_counter() - started
                # Steady state from here: the queue is as deep as it gets.
                cycles_before = agent.admission.cycles
                admitted_before = len(admitted)
                gc_before = sum(collector)
                cpu_before = time.process_time()
                window_start = time.perf_counter()
                if profiler is not None:
                    profiler.enable()
                await asyncio.sleep(window)
                if profiler is not None:
                    profiler.disable()
                cpu = time.process_time() - cpu_before
                elapsed = time.perf_counter() - window_start
                in_window = sum(1 for at in admitted.values() if at >= window_start)
                cycles = agent.admission.cycles - cycles_before
                gc_seconds = sum(collector) - gc_before
                still_queued = queued - len(admitted)
                await runner.stop()
    finally:
        await hub.stop()
    out: dict[str, object] = {
        "benchmark": "agent_deep_queue",
        "queued": queued,
        "nodes": "4 × 8 CPUs",
        "job_seconds": JOB_SECONDS,
        "kubesim": "separate process",
        "held_seconds": round(held, 1),
        "fill_seconds": round(filled, 1),
        "admitted_before_window": admitted_before,
        "window_seconds": round(elapsed, 2),
        "admissions_in_window": in_window,
        "still_queued_after_window": still_queued,
        "admissions_per_s": round(in_window / elapsed, 1),
        "ideal_per_s": IDEAL_PER_S,
        "admissions_per_s_of_ideal": round(in_window / elapsed / IDEAL_PER_S, 3),
        "cpu_ms_per_admission": round(cpu * 1000 / in_window, 2) if in_window else None,
        "cpu_cores": round(cpu / elapsed, 3),
        "gc_ms_per_admission": round(gc_seconds * 1000 / in_window, 2) if in_window else None,
        "admission_cycles_in_window": cycles,
    }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        out["profile_tottime"] = text.getvalue().splitlines()
    return out


async def floor(window: float, warmup: float = 3.0) -> dict[str, object]:
    """CPU per admission of a Job's life and its reports alone, at the ideal rate."""
    hub = FakeHub(None)
    hub.keep = False
    await hub.start()
    default = flavor()
    admission = api_admission(
        Admission(
            ClusterQueueName("cq"),
            (
                PodSetAssignment(
                    "main",
                    1,
                    {ResourceName("cpu"): FlavorName("default")},
                    {ResourceName("cpu"): 1000},
                ),
            ),
        )
    )
    batch = 8
    made = 0
    try:
        async with (
            kubesim_process(
                ["--profile", str(PROFILE), "--job-pod-duration", str(JOB_SECONDS)]
            ) as kubeconfig,
            open_client(kubeconfig) as kube,
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"{hub.url}/agent/v1/session?cluster={CLUSTER}",
                headers={"Authorization": f"Bearer {TOKEN}"},
            ) as ws,
        ):
            events = 0

            def counted(_resource: Resource) -> None:
                nonlocal events
                events += 1

            inventory = Inventory(kube, on_change=counted)
            mirrors = [asyncio.create_task(m.run()) for m in inventory.mirrors]
            await inventory.wait_listed()
            seq = 0

            async def report(key: str, phase: WorkloadPhase) -> None:
                nonlocal seq
                seq += 1
                payload = WorkloadStatusReport(
                    workload=key, generation=1, phase=phase, admission=admission
                )
                await ws.send_str(Envelope.wrap(payload, seq=seq, ack=None).to_json())

            async def admit(i: int) -> str:
                offer = offers[i]  # held since the offer, as the agent holds it
                jobs = plan_jobs(offer.workload, 1, offer.source, admission, {"default": default})
                for job in jobs:
                    await kube.create(Resource.JOBS, "team-a", job)
                key = f"team-a/{offer.workload.metadata.name}"
                for phase in (WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING):
                    await report(key, phase)
                return key

            await kube.create(
                Resource.NAMESPACES,
                None,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
            )
            total = int((warmup + window) * IDEAL_PER_S * 1.5) + batch
            offers = [offer_for(job_source(f"d{i}", cpu="1", script="true")) for i in range(total)]
            started = time.perf_counter()
            measuring = False
            cpu_before = events_before = made_before = 0.0
            while True:
                now = time.perf_counter()
                if not measuring and now - started >= warmup:
                    measuring, window_start = True, now
                    cpu_before, events_before, made_before = time.process_time(), events, made
                if measuring and now - window_start >= window:
                    break
                keys = await asyncio.gather(*(admit(made + k) for k in range(batch)))
                for key in keys:
                    await report(key, WorkloadPhase.SUCCEEDED)
                made += batch
                # Paced to the ideal rate from the start, not from the end of the last batch.
                await asyncio.sleep(max(0.0, started + made / IDEAL_PER_S - time.perf_counter()))
            cpu = time.process_time() - cpu_before
            elapsed = time.perf_counter() - window_start
            in_window = made - made_before
            await wait_until(lambda: hub.control is not None and hub.control.received >= seq)
            for task in mirrors:
                task.cancel()
    finally:
        await hub.stop()
    return {
        "benchmark": "agent_deep_queue --floor",
        "what": "Job create + watch events through the agent's client and mirrors, and "
        "3 reports decoded by the hub peer, per admission; no agent",
        "window_seconds": round(elapsed, 2),
        "admissions_in_window": in_window,
        "admissions_per_s": round(in_window / elapsed, 1),
        "watch_events_per_admission": round((events - events_before) / in_window, 2),
        "cpu_ms_per_admission": round(cpu * 1000 / in_window, 2),
    }


def shallowest_queue(window: float) -> int:
    """The most workloads the room and `window` seconds at the ideal rate can admit: a queue
    that deep may drain before the window ends."""
    return CAPACITY_CPUS + math.ceil(IDEAL_PER_S * window)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of the window")
    parser.add_argument(
        "--floor", action="store_true", help="the cost of Jobs and reports alone, no agent"
    )
    args = parser.parse_args(argv)
    if not args.floor and args.queued <= (least := shallowest_queue(args.window)):
        # Fewer would all be admitted before the window ends: it would measure a queue that
        # drained, and say 0 admissions per second.
        parser.error(f"--queued must be more than {least} for a {args.window} s window")
    run_like_the_agent()
    if args.floor:
        print(json.dumps(asyncio.run(floor(args.window)), indent=2, ensure_ascii=False))
        return
    result = bench(args.queued, args.window, profile=args.profile)
    print(json.dumps(asyncio.run(result), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
