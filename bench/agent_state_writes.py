"""What the agent spends to persist its held workloads when each pass writes a few of them.

    .venv/bin/python -m bench.agent_state_writes [--batches 1000] [--rows 7] [--rounds 2]

Under a steady trickle of work (the paced phase of bench.federation_dispatch: 200 workloads a
second over 3 agents) each agent's admission pass writes about 7 held workloads at a time,
some 20 times a second: new offers, then states as workloads are admitted and run. This bench
makes such batches into a real `agent.state.StateStore` — `--rows` new rows with a 5 KB offer,
then a 1 KB state update of each — with a pause of `--interval-ms` after each batch, so every
batch wakes the loop, as in the agent:

- `in_loop`: `save_many` called in the event loop;
- `thread`: `save_many` handed to `asyncio.to_thread` (how every batch was written before);

both with the log's checkpoint in the same step when one is due, as SQLite ran them before;
- `write`: `StateStore.write`, the agent's path (in the loop when small, checkpoints in a
  thread).

The figures are the process's CPU time per batch (both threads), less that of the pauses
alone (an idle round of the same length), and the 99th percentile of the time one batch
held the loop.
Rounds alternate between the modes; compare within one run. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.state import StateStore
from bench.quantiles import nearest_rank

OFFER = json.dumps({"workload": {"spec": {"script": "x" * 5000}}})
STATE = json.dumps({"phase": "Running", "status": {"message": "y" * 1000}})

Rows = list[tuple[str, str | None, str]]
Write = Callable[[StateStore, Rows], Awaitable[None]]


def _save_and_checkpoint(store: StateStore, rows: Rows) -> None:
    """A batch as SQLite's automatic checkpoints would have it: the log written back inside
    the commit that filled it."""
    store.save_many(rows)
    if store.checkpoint_due():
        store.checkpoint()


async def _in_loop(store: StateStore, rows: Rows) -> None:
    _save_and_checkpoint(store, rows)


async def _thread(store: StateStore, rows: Rows) -> None:
    await asyncio.to_thread(_save_and_checkpoint, store, rows)


async def _write(store: StateStore, rows: Rows) -> None:
    await store.write(rows, ())


async def _idle(store: StateStore, rows: Rows) -> None:
    return None


MODES: dict[str, Write] = {"in_loop": _in_loop, "thread": _thread, "write": _write}


@dataclass
class Figures:
    cpu_us: float = 0.0
    held_loop_us: float = 0.0
    """The 99th percentile of the time a batch held the loop."""


async def one_round(
    store: StateStore, mode: str, batches: int, rows: int, interval: float
) -> Figures:
    """CPU µs per batch of `mode` (or per pause, for "idle") and how long a batch held the
    loop; batches alternate between new rows with their offers and state updates."""
    write = MODES.get(mode, _idle)
    holds: list[float] = []
    started = time.process_time()
    for i in range(batches):
        keys = [f"{mode}-{time.monotonic_ns()}-{i // 2}-{k}" for k in range(rows)]
        batch: Rows = [(key, OFFER if i % 2 == 0 else None, STATE) for key in keys]
        before = time.perf_counter()
        pending = asyncio.ensure_future(write(store, batch))
        await asyncio.sleep(0)  # the first step of the write runs in the loop, the rest waits
        holds.append((time.perf_counter() - before) * 1e6)
        await pending
        await asyncio.sleep(interval)
    cpu_us = (time.process_time() - started) * 1e6 / batches
    return Figures(cpu_us, nearest_rank(holds, 0.99))


async def measure(batches: int, rows: int, interval: float, rounds: int) -> dict[str, Figures]:
    with tempfile.TemporaryDirectory(prefix="bench-agent-state-") as scratch:
        store = StateStore(Path(scratch))
        try:
            totals = {mode: Figures() for mode in [*MODES, "idle"]}
            for _ in range(rounds):
                for mode, total in totals.items():
                    figures = await one_round(store, mode, batches, rows, interval)
                    total.cpu_us += figures.cpu_us / rounds
                    total.held_loop_us = max(total.held_loop_us, figures.held_loop_us)
        finally:
            store.close()
    idle = totals.pop("idle").cpu_us
    return {
        mode: Figures(round(f.cpu_us - idle, 1), round(f.held_loop_us))
        for mode, f in totals.items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=7)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.batches, args.rows, args.interval_ms / 1000, args.rounds))
    cpu = {mode: f.cpu_us for mode, f in figures.items()}
    print(
        json.dumps(
            {
                "benchmark": "agent_state_writes",
                "batches_per_mode_and_round": args.batches,
                "rows_per_batch": args.rows,
                "interval_ms": args.interval_ms,
                "cpu_us_per_batch": cpu,
                "p99_loop_hold_us": {mode: f.held_loop_us for mode, f in figures.items()},
                "thread_over_in_loop": round(cpu["thread"] / max(cpu["in_loop"], 0.1), 2),
                "note": "CPU time of this process less that of the pauses alone; the machine "
                "is shared, so compare figures within one run",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
