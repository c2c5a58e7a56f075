"""`kubesim up`: run simulated clusters until stopped, with kubeconfigs on disk.

    kubesim up --clusters 3 --nodes 8 --profile examples/kubesim/gpu-topology.profile \\
               --runtime process --dir ./.kubesim

writes `<dir>/<name>.kubeconfig` per cluster, a merged `<dir>/kubeconfig` with one context
per cluster and `<dir>/ca.crt` (the CA of every cluster's HTTPS port), prints them with each
cluster's plain and HTTPS URLs, and serves until SIGINT / SIGTERM. Clusters are named
`<prefix>-0..N-1` (default prefix "kubesim") and listen on 127.0.0.1, on consecutive ports
from `--base-port` (default: free ephemeral ports). Entry point `kubesim` in pyproject.toml.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from kubesim.cluster import ClusterConfig, Simulator
from kubesim.profile import load_profile
from kubesim.tls import serving_material

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run simulated clusters until interrupted")
    up.add_argument("--clusters", type=int, default=1, help="number of clusters (default 1)")
    up.add_argument("--nodes", type=int, default=None, help="nodes per cluster (overrides profile)")
    up.add_argument("--profile", type=Path, default=None, help="node profile YAML")
    up.add_argument(
        "--runtime",
        choices=("simulated", "process"),
        default="simulated",
        help="default pod runtime (pods may override with kubesim.dev/runtime)",
    )
    up.add_argument("--dir", type=Path, default=Path(".kubesim"), help="kubeconfig directory")
    up.add_argument("--name-prefix", default="kubesim", help="cluster name prefix")
    up.add_argument("--base-port", type=int, default=0, help="first port (0: ephemeral)")
    up.add_argument(
        "--bookmark-interval", type=float, default=5.0, help="seconds between watch bookmarks"
    )
    up.add_argument("--lease-interval", type=float, default=10.0, help="node lease renewal")
    up.add_argument("--no-events", action="store_true", help="do not record core/v1 Events")
    up.add_argument(
        "--job-backoff-seconds",
        type=float,
        default=0.0,
        help="base delay before a Job replaces a failed pod (real clusters: 10)",
    )
    up.add_argument(
        "--job-pod-duration",
        type=float,
        default=0.0,
        help="simulated runtime: seconds a Job pod runs without a kubesim.dev/duration",
    )
    up.add_argument("-v", "--verbose", action="store_true", help="log every API request to stderr")
    return parser


def _reap_children_through_pidfds() -> None:
    """Reap the process runtime's children through pidfds watched by the event loop. Python
    3.11's default watcher starts a thread per child to wait for it, which a pod that runs a
    short command pays for each container; 3.12 picks pidfds itself where the kernel has them."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel older than 5.3: keep the default watcher
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)


async def _up(args: argparse.Namespace) -> None:
    _reap_children_through_pidfds()
    profile = load_profile(args.profile)
    if args.nodes is not None:
        profile = profile.with_total(args.nodes)
    base = ClusterConfig(
        runtime=args.runtime,
        profile=profile,
        bookmark_interval=args.bookmark_interval,
        lease_interval=args.lease_interval,
        record_events=not args.no_events,
        job_backoff_seconds=args.job_backoff_seconds,
        job_pod_duration=args.job_pod_duration,
        access_log=args.verbose,
    )
    configs = [
        replace(
            base,
            name=f"{args.name_prefix}-{i}",
            port=args.base_port + i if args.base_port else 0,
        )
        for i in range(args.clusters)
    ]
    simulator = Simulator(configs, args.dir.resolve())
    await simulator.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ca_cert = args.dir.resolve() / "ca.crt"
    ca_cert.write_text(serving_material().ca_pem)
    summary = {
        "clusters": [
            {
                "name": c.config.name,
                "url": c.url,
                "https_url": c.https_url,
                "kubeconfig": str(simulator.kubeconfigs[c.config.name]),
                "nodes": sum(g.count for g in c.config.profile.nodes),
            }
            for c in simulator.clusters
        ],
        "kubeconfig": str(simulator.merged_kubeconfig),
        "ca": str(ca_cert),
    }
    print(json.dumps(summary, indent=2), flush=True)
    print(f"export KUBECONFIG={simulator.merged_kubeconfig}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await simulator.stop()


# Young objects are collected every 50,000 net allocations instead of 700, as in the hub and
# the agent (see runtime.collector): with the default, a third of a busy simulator's CPU went
# to the collector, with pauses up to 0.44 s that every watcher then saw.
GC_THRESHOLDS = (50_000, 10, 10)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if args.command == "up":
        gc.freeze()  # what start-up built is never collected
        gc.set_threshold(*GC_THRESHOLDS)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_up(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
