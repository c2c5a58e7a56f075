"""The Slurm mode's REST routes (group `slurm.multiq.dev/v1alpha1`), for qctl sbatch, squeue,
sacct, scancel and scontrol:

    POST {ns}/jobs           sbatch → 201 {jobId, workloads}
    GET  {ns}/jobs           squeue/sacct rows
    GET  /jobs               the same, in every namespace the caller may read
    POST {ns}/jobs/cancel    scancel → {jobs}
    POST {ns}/jobs/hold      scontrol hold → {jobs}
    POST {ns}/jobs/release   scontrol release → {jobs}

(`{ns}` is `/namespaces/NAMESPACE`; every path is under /apis/slurm.multiq.dev/v1alpha1.)

Who may: a user of a tenant of the namespace (admins: any), as for submissions; a user who is
not an admin cancels, holds and releases only their own jobs. Listing filters (query
parameters, or the JSON body's fields for the POSTs): `jobs` (N, N_I, N_[1-3]), `users`,
`names`, `states` (names or codes), `partitions` — comma lists — and `history`, `start`, `end`
(sacct). The job's user is the caller; an admin (the dev federation's one token) submits as
the user qctl names.

Called by: hub.app (registers them).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.v1alpha1.federation import Tenant
from hub.auth import Principal, namespaces_of, require_namespace
from hub.errors import BadRequestError, ForbiddenError
from hub.http.middleware import PRINCIPAL, read_body
from hub.slurm import JobFilter, SlurmService, parse_filter
from hub.state import HubState

__all__ = ["SLURM_API", "SlurmRoutes"]

SLURM_API = "/apis/slurm.multiq.dev/v1alpha1"


class SlurmRoutes:
    def __init__(self, service: SlurmService, state: HubState) -> None:
        self.service = service
        self.state = state

    def add_to(self, app: web.Application) -> None:
        namespaced = f"{SLURM_API}/namespaces/{{ns}}/jobs"
        app.router.add_post(namespaced, self.submit)
        app.router.add_get(namespaced, self.list_namespaced)
        app.router.add_get(f"{SLURM_API}/jobs", self.list_all)
        app.router.add_post(f"{namespaced}/cancel", self.cancel)
        app.router.add_post(f"{namespaced}/hold", self.hold)
        app.router.add_post(f"{namespaced}/release", self.release)

    def _tenants(self) -> list[Tenant]:
        return [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]

    def _namespace(
        self, request: web.Request, action: str, *, write: bool
    ) -> tuple[Principal, str]:
        ns = request.match_info["ns"]
        principal: Principal = request[PRINCIPAL]
        require_namespace(principal, ns, self._tenants(), action, write=write)
        return principal, ns

    async def submit(self, request: web.Request) -> web.Response:
        principal, ns = self._namespace(request, "submit jobs", write=True)
        body = await read_body(request)
        claimed = (body.get("submitter") or {}).get("user") if isinstance(body, dict) else None
        user = (
            claimed
            if principal.is_admin and isinstance(claimed, str) and claimed
            else principal.name
        )
        submitted = await self.service.submit(ns, user, body)
        return web.json_response(
            {"jobId": submitted.job_id, "workloads": list(submitted.workloads)}, status=201
        )

    async def list_namespaced(self, request: web.Request) -> web.Response:
        _, ns = self._namespace(request, "list jobs", write=False)
        selection = parse_filter(request.query, frozenset({ns}))
        return web.json_response({"items": self.service.job_rows(selection)})

    async def list_all(self, request: web.Request) -> web.Response:
        principal: Principal = request[PRINCIPAL]
        if principal.kind == "agent":
            raise ForbiddenError(f"agent {principal.name} may only use the agent endpoints")
        selection = parse_filter(request.query, namespaces_of(principal, self._tenants()))
        return web.json_response({"items": self.service.job_rows(selection)})

    async def _selection(self, request: web.Request, action: str) -> tuple[Principal, JobFilter]:
        principal, ns = self._namespace(request, action, write=True)
        body = await read_body(request)
        fields: dict[str, str] = {}
        for name in ("jobs", "users", "names", "states", "partitions"):
            value: Any = body.get(name)
            if value is None:
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = ",".join(value)
            if not isinstance(value, str):
                raise BadRequestError(f"{name}: give a string or a list of strings")
            fields[name] = value
        if not fields:
            raise BadRequestError("name the jobs: give job ids, users, names or states")
        if not principal.is_admin:
            users = [u for u in fields.get("users", "").split(",") if u]
            if any(u != principal.name for u in users):
                raise ForbiddenError(f"{principal.name} may act only on their own jobs")
            fields["users"] = principal.name
        return principal, parse_filter(fields, frozenset({ns}), history=False)

    async def cancel(self, request: web.Request) -> web.Response:
        principal, selection = await self._selection(request, "cancel jobs")
        done = await self.service.cancel(selection, by=principal.name)
        return web.json_response({"jobs": done})

    async def hold(self, request: web.Request) -> web.Response:
        _, selection = await self._selection(request, "hold jobs")
        return web.json_response({"jobs": await self.service.set_hold(selection, held=True)})

    async def release(self, request: web.Request) -> web.Response:
        _, selection = await self._selection(request, "release jobs")
        return web.json_response({"jobs": await self.service.set_hold(selection, held=False)})
