"""Admin and fault hooks for tests, served under `/_kubesim/` on each cluster's port.

These paths are not Kubernetes API and are never subject to injected faults, so a test can
always disarm what it armed:

    POST /_kubesim/faults/drop-watches              close every open watch stream
    POST /_kubesim/faults/compact                   forget watch history (old RVs get 410)
    POST /_kubesim/faults/errors   {"count": N, "code": 429|500|504}
                                                    answer the next N API requests with it
    POST /_kubesim/faults/pause                     stop answering API requests
    POST /_kubesim/faults/resume                    answer again
    POST /_kubesim/faults/clear                     disarm errors and resume
    POST /_kubesim/nodes/{name}/fail | recover | cordon | uncordon
    GET  /_kubesim/status                           counts, revision, open watches
    GET  /_kubesim/history/pods                     every pod's run, kept after deletion
                                                    (kubesim.history)

Wired into the app by `kubesim.cluster`; the same operations are methods on `Cluster`
(`cluster.faults`, `cluster.nodes`, `cluster.api.watches`, `cluster.history`) for in-process tests.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from kubesim.apiserver.context import json_response
from kubesim.apiserver.faults import ADMIN_PREFIX, SUPPORTED_CODES
from kubesim.errors import BadRequestError, NotFoundError

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["add_admin_routes"]


def add_admin_routes(app: web.Application, cluster: Cluster) -> None:
    async def drop_watches(_: web.Request) -> web.Response:
        return json_response({"dropped": cluster.api.watches.drop_all()})

    async def compact(_: web.Request) -> web.Response:
        cluster.store.compact()
        return json_response({"compactedRevision": cluster.store.revision})

    async def errors(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read() or b"{}")
            count, code = int(body.get("count", 1)), int(body.get("code", 500))
        except (ValueError, TypeError, AttributeError) as error:
            raise BadRequestError(f"expected {{'count': N, 'code': C}}: {error}") from error
        if code not in SUPPORTED_CODES:
            raise BadRequestError(f"code must be one of {sorted(SUPPORTED_CODES)}")
        cluster.faults.fail_next(count, code)
        return json_response({"armed": count, "code": code})

    async def pause(_: web.Request) -> web.Response:
        cluster.faults.pause()
        return json_response({"paused": True})

    async def resume(_: web.Request) -> web.Response:
        cluster.faults.resume()
        return json_response({"paused": False})

    async def clear(_: web.Request) -> web.Response:
        cluster.faults.clear()
        return json_response({"cleared": True})

    async def node_action(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        action = request.match_info["action"]
        if action == "fail":
            cluster.nodes.fail(name)
        elif action == "recover":
            cluster.nodes.recover(name)
        elif action in ("cordon", "uncordon"):
            cluster.nodes.cordon(name, unschedulable=action == "cordon")
        else:
            raise NotFoundError(f"unknown node action {action!r}")
        return json_response({"node": name, "action": action})

    async def status(_: web.Request) -> web.Response:
        return json_response(
            {
                "cluster": cluster.config.name,
                "revision": cluster.store.revision,
                "watches": len(cluster.api.watches),
                "objects": {
                    bucket.resource.plural: bucket.count for bucket in cluster.store.buckets()
                },
                "paused": cluster.faults.paused,
            }
        )

    async def pod_history(_: web.Request) -> web.Response:
        return json_response(cluster.history.to_wire())

    prefix = ADMIN_PREFIX.rstrip("/")
    app.router.add_post(f"{prefix}/faults/drop-watches", drop_watches)
    app.router.add_post(f"{prefix}/faults/compact", compact)
    app.router.add_post(f"{prefix}/faults/errors", errors)
    app.router.add_post(f"{prefix}/faults/pause", pause)
    app.router.add_post(f"{prefix}/faults/resume", resume)
    app.router.add_post(f"{prefix}/faults/clear", clear)
    app.router.add_post(f"{prefix}/nodes/{{name}}/{{action}}", node_action)
    app.router.add_get(f"{prefix}/status", status)
    app.router.add_get(f"{prefix}/history/pods", pod_history)
