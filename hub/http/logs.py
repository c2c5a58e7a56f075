"""`GET /apis/multiq.dev/v1alpha1/namespaces/{ns}/workloads/{name}/log` — a workload's logs
from whichever cluster runs it, as newline-delimited JSON records
`{"cluster", "pod", "container", "time", "line", "seq"}` (`seq`: the line's number in its
container's log), and events in their place: `{"event": "dropped", "count", "reason",
"message", …}` for lines a reader will not see (it read too slowly, or they were never read
from the cluster), `{"event": "note", "message"}` for what the store says (lines the agent's
ship limit left out), `{"event": "lost"}` when the cluster's connection went.

Parameters as `kubectl logs`: follow, tailLines, sinceSeconds, timestamps, pod, container.
With follow the request waits for the workload to be placed, follows it to its cluster, and
ends when the workload's pods are done; without follow it returns what exists now. A finished
workload whose agent shipped its logs is read from the hub's log store (hub.logstore) alone;
otherwise from the cluster, or from the store when the cluster has nothing (its pods gone,
the cluster unreachable).

Called by: hub.app (route); qctl logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from api.meta import API_VERSION
from api.v1alpha1.federation import Tenant
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.auth import require_namespace
from hub.errors import NotFoundError
from hub.http.middleware import PRINCIPAL, int_param
from hub.http.streams import STREAMS
from hub.loghub import LogHub, LogRequest, encode_records
from hub.objects import check_path_names
from hub.state import HubState

__all__ = ["LogRoutes"]

WAIT_POLL_SECONDS = 0.25


class LogRoutes:
    def __init__(self, state: HubState, logs: LogHub) -> None:
        self.state = state
        self.logs = logs

    def _finished(self, key: str) -> Callable[[], bool]:
        def finished() -> bool:
            entry = self.state.workloads.get(key)
            return entry is None or transitions.is_finished(entry.workload)

        return finished

    def add_to(self, app: web.Application) -> None:
        app.router.add_get(
            f"/apis/{API_VERSION}/namespaces/{{ns}}/workloads/{{name}}/log", self.read
        )

    async def read(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["ns"], request.match_info["name"]
        tenants = [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]
        require_namespace(request[PRINCIPAL], ns, tenants, "read logs")
        check_path_names(Workload, name, ns)
        key = f"{ns}/{name}"
        if key not in self.state.workloads:
            raise NotFoundError(f'workloads "{name}" not found in namespace {ns!r}')
        query = request.query
        follow = query.get("follow") in ("true", "1")
        log_request = LogRequest(
            workload=key,
            follow=follow,
            tail_lines=int_param(query, "tailLines"),
            since_seconds=int_param(query, "sinceSeconds"),
            pod=query.get("pod") or None,
            container=query.get("container") or None,
        )
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        entry = self.state.workloads.get(key)
        if (
            entry is not None
            and transitions.is_finished(entry.workload)
            and self.logs.complete(key)
        ):
            # Its agent shipped everything it will: the store alone has the whole log, also
            # the lines the cluster no longer keeps.
            await _write(response, await self.logs.stored(log_request))
            await response.write_eof()
            return response
        async with request.app[STREAMS].until_shutdown():
            streamed_from: str | None = None
            while True:
                entry = self.state.workloads.get(key)
                if entry is None:
                    break
                status = entry.workload.status
                cluster = status.cluster_name if status else None
                finished = transitions.is_finished(entry.workload)
                if cluster and cluster != streamed_from:
                    got_any = False
                    done = self._finished(key)
                    async for chunk in self.logs.stream(cluster, log_request, finished=done):
                        got_any = True
                        await response.write(chunk)
                    if not got_any and follow and not done():
                        # Nothing yet, and more will come: the agent may not hold the workload
                        # yet (the offer and this request crossed), or its pods not have started.
                        await asyncio.sleep(WAIT_POLL_SECONDS)
                        continue
                    streamed_from = cluster
                    if not got_any:
                        await _write(response, await self.logs.stored(log_request))
                    if not follow:
                        break
                    continue
                if finished or not follow:
                    if streamed_from is None:
                        await _write(response, await self.logs.stored(log_request))
                    break
                await asyncio.sleep(WAIT_POLL_SECONDS)
        await response.write_eof()
        return response


async def _write(response: web.StreamResponse, records: list[dict[str, Any]]) -> None:
    """One write per batch (a write per line would cost more than the lines)."""
    if records:
        await response.write(encode_records(records))
