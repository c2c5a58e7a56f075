"""Benchmark: the long chaos run — a federation under every fault, and what it broke.

Starts the chaos federation (3 kubesim clusters in the simulated runtime, two hubs on a local
etcd — or with `--single` one hub on SQLite —, 3 agents behind faulty links, short fencing
timings, one queue per dispatch mode), submits 600 workloads of mixed shapes lasting 3 to
20 s at 1.5/s, and meanwhile kills a hub 10 times (the leader or the standby, at random),
kills the leader twice with the standby running, kills etcd twice, kills an agent 10 times,
freezes agents past the loss timeout, cuts and black-holes their connections, and makes the
clusters' APIs fail, pause and drop their watches (e2e.chaos). With `--single` the etcd and
leader faults are listed as skipped, with the reason; the single-hub mode is covered here
(the bounded run in `./dev test` runs two hubs).

    .venv/bin/python -m bench.chaos [--single | --ha N] [--workloads 600] [--rate 1.5]
                                    [--seed 15] [--keep DIR]

Prints one JSON object: `hubs`, `workloads` (submitted, accepted, finished, lost,
overlapping, overlapping_same_generation, not_exactly_one_terminal_state, stuck,
completed_more_than_once, not_accepted), `by_mode`, `faults` by kind, `skipped_faults`,
`not_injected`, `recovery` (the worst time from a fault's end until a pod was created again
where it struck, and per kind), `wall_seconds`, `violations` (examples, with clusters and
times) and the `fault_timeline`. Exits 1 when an invariant was broken or a fault could not
be injected. Target (issue #15): 0 lost, 0 overlapping, 0 stuck. About 8 minutes on a
2-core machine.
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
    hubs = parser.add_mutually_exclusive_group()
    hubs.add_argument(
        "--single", action="store_true", help="one hub on SQLite (no etcd, no leader faults)"
    )
    hubs.add_argument(
        "--ha", type=int, default=defaults.ha, metavar="N", help="N ≥ 2 hubs on a local etcd"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="run in DIR and keep it (process logs in DIR/logs)"
    )
    args = parser.parse_args()
    if not args.single and args.ha < 2:
        parser.error("--ha takes 2 hubs or more (--single for one hub on SQLite)")
    config = dataclasses.replace(
        defaults,
        workloads=args.workloads,
        rate=args.rate,
        seed=args.seed,
        ha=0 if args.single else args.ha,
    )
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
