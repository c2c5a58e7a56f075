"""Benchmark: the long chaos run — a federation under every fault, and what it broke.

Starts the chaos federation (3 kubesim clusters in the simulated runtime, the hub, 3 agents
behind faulty links, short fencing timings, one queue per dispatch mode), submits 600
workloads of mixed shapes lasting 3 to 20 s at 1.5/s, and meanwhile kills the hub 10 times
and an agent 10 times, freezes agents past the loss timeout, cuts and black-holes their
connections, and makes the clusters' APIs fail, pause and drop their watches (e2e.chaos).
HA faults (etcd, leader hub) run when the federation has several hubs; otherwise they are
listed as skipped, with the reason.

    .venv/bin/python -m bench.chaos [--workloads 600] [--rate 1.5] [--seed 15] [--keep DIR]

Prints one JSON object: `workloads` (submitted, accepted, finished, lost, overlapping,
overlapping_same_generation, not_exactly_one_terminal_state, stuck,
completed_more_than_once, not_accepted), `by_mode`, `faults` by kind, `skipped_faults`,
`recovery` (the worst time from a fault's end until a pod was created again where it
struck, and per kind), `wall_seconds`, `violations` (examples, with clusters and times) and
the `fault_timeline`. Exits 1 when an invariant was broken. Target (issue #15): 0 lost,
0 overlapping, 0 stuck. About 10 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from e2e.chaos.driver import ChaosConfig, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = ChaosConfig.long()
    parser.add_argument("--workloads", type=int, default=defaults.workloads)
    parser.add_argument("--rate", type=float, default=defaults.rate, help="submissions/s")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--keep", type=Path, default=None, help="run in DIR and keep it (process logs in DIR/logs)"
    )
    args = parser.parse_args()
    config = dataclasses.replace(defaults, workloads=args.workloads, rate=args.rate, seed=args.seed)
    if args.keep is not None:
        report = asyncio.run(run_chaos(config, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-chaos-") as scratch:
            report = asyncio.run(run_chaos(config, Path(scratch)))
    result = {"benchmark": "chaos", "clusters": config.clusters, **report.to_json()}
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
