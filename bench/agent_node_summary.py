"""What the node summary of a capacity report costs the agent as finished pods pile up.

    .venv/bin/python -m bench.agent_node_summary [--finished 1000 10000 100000]

Finished pods stay mirrored with their Jobs for the Jobs' TTL (an hour): at a deep queue's
32 one-second Jobs a second that is 115,000 pods, and the agent reports capacity up to 4
times a second under churn. The inventory (`agent.inventory.Inventory`, its mirrors fed by
hand: no cluster) holds 4 nodes × 8 CPUs, 32 running one-CPU pods and `--finished` finished
ones; the figure is the CPU time of one `node_summary`, per count of finished pods — flat
when the room pods hold is kept as they change, growing with the count when every pod is
walked. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from agent.inventory import Inventory
from agent.k8s.client import JsonObject
from agent.k8s.watching import Relisted

NODES = 4
RUNNING = 32
CALLS = 20


def _node(name: str) -> JsonObject:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(i: int, phase: str) -> JsonObject:
    return {
        "metadata": {"name": f"p{i}", "namespace": "team-a", "uid": f"uid-{i}"},
        "spec": {
            "nodeName": f"n{i % NODES}",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": phase},
    }


def ms_per_summary(finished: int) -> float:
    inventory = Inventory(None)  # type: ignore[arg-type]  # the mirrors are fed by hand
    inventory.nodes.apply(Relisted([_node(f"n{k}") for k in range(NODES)], "1"))
    pods = [_pod(i, "Succeeded") for i in range(finished)]
    pods += [_pod(finished + i, "Running") for i in range(RUNNING)]
    inventory.pods.apply(Relisted(pods, "1"))
    summary = inventory.node_summary()
    assert summary.free["cpu"].milli() == 0, "the running pods fill every node"
    started = time.process_time()
    for _ in range(CALLS):
        inventory.node_summary()
    return (time.process_time() - started) * 1000 / CALLS


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--finished", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args(argv)
    figures = {str(n): round(ms_per_summary(n), 3) for n in args.finished}
    print(
        json.dumps(
            {
                "benchmark": "agent_node_summary",
                "nodes": f"{NODES} × 8 CPUs, {RUNNING} running one-CPU pods",
                "cpu_ms_per_node_summary_by_finished_pods": figures,
                "note": "CPU time in this process; the machine is shared, so compare counts "
                "within one run",
            },
            indent=2,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
