"""`multiq-agent`: parse flags, open the cluster client, run the `Agent` until SIGTERM or
SIGINT — then close the hub lanes and exit, leaving every Job running.

    multiq-agent --kubeconfig KUBECONFIG [--context CTX] --hub http://hub:8080 \\
        --cluster NAME (--token TOKEN | --token-file FILE) [--state-dir DIR] \\
        [--log-format text|json]

Traces are exported as the standard OTEL_* variables say (telemetry.tracing: none by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from agent.app import Agent
from agent.k8s.client import open_client
from agent.settings import AgentSettings, parse_args
from api.meta import build_schemas
from runtime.collector import tune_collector
from runtime.loop import new_event_loop
from telemetry.logs import configure_logging
from telemetry.tracing import TracingConfigError, configure_tracing

__all__ = ["main", "serve"]

log = logging.getLogger("agent")


async def serve(settings: AgentSettings) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    async with open_client(settings.kubeconfig, settings.context) as kube:
        agent = Agent(settings, kube)
        with contextlib.suppress(asyncio.CancelledError):
            await agent.run()
    log.info("agent stopped; Jobs keep running")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    configure_logging(settings.log_level, settings.log_format)
    try:
        # Before the Agent is built: its parts take their tracer when they are made.
        configure_tracing("multiq-agent")
    except TracingConfigError as exc:
        log.error("%s", exc)
        return 2
    build_schemas()
    tune_collector()
    try:
        with asyncio.Runner(loop_factory=lambda: new_event_loop(settings.event_loop)) as runner:
            runner.run(serve(settings))
    except Exception:
        log.exception("agent failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
