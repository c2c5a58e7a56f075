"""What the benchmarks of one real agent share: kubesim in its own process (so its CPU is
not the agent's), waiting for a condition, and the garbage collector timed and tuned as
`multiq-agent` runs it.

Called by: bench.agent_dispatch, bench.agent_deep_queue.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from runtime.collector import tune_collector

__all__ = ["collector", "kubesim_process", "run_like_the_agent", "wait_until"]


async def wait_until(check: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.perf_counter() + within
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError("setup did not complete")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def kubesim_process(options: Sequence[str]) -> AsyncIterator[Path]:
    """`kubesim up` with `options` (simulated runtime, no events) in its own process: yields
    its kubeconfig."""
    with tempfile.TemporaryDirectory() as directory:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubesim.cli", "up", "--dir", directory, "--base-port", "0",
            "--runtime", "simulated", "--no-events", *options,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        kubeconfig = Path(directory) / "kubesim-0.kubeconfig"
        try:
            await wait_until(kubeconfig.exists)
            await asyncio.sleep(0.5)
            yield kubeconfig
        finally:
            process.terminate()
            await process.wait()


collector: list[float] = []
"""CPU seconds of each garbage collection since `run_like_the_agent` (callers may clear it)."""
_collecting: list[float] = []


def _time_collections(phase: str, _info: dict[str, int]) -> None:
    if phase == "start":
        _collecting[:] = [time.process_time()]
    elif _collecting:
        collector.append(time.process_time() - _collecting[0])


def run_like_the_agent() -> None:
    """As `multiq-agent` runs (agent.main): start-up objects frozen, young collections
    rarer (runtime.collector); and every collection timed into `collector`."""
    tune_collector()
    gc.callbacks.append(_time_collections)
