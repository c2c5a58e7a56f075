"""`GET /apis/multiq.dev/v1alpha1/whoami`: who the caller is and what they may change, as the
hub decides it (hub.auth) — so a client can offer only the actions its user may take (the
dashboard hides Stop, Resume and Cancel from those who would be refused). Kubernetes answers
the same question with a SelfSubjectReview.

Called by: hub.app (registers the route before the resource routes, whose `{plural}` would
otherwise take the path).
"""

from __future__ import annotations

from aiohttp import web

from api.v1alpha1.federation import Tenant
from hub.auth import namespaces_of
from hub.http.middleware import PRINCIPAL
from hub.state import HubState

__all__ = ["WHOAMI_PATH", "add_identity_route"]

WHOAMI_PATH = "/apis/multiq.dev/v1alpha1/whoami"


def add_identity_route(app: web.Application, state: HubState) -> None:
    async def whoami(request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]
        tenants = [t for t in state.objects(Tenant) if isinstance(t, Tenant)]
        writable = namespaces_of(principal, tenants, write=True)
        readable = namespaces_of(principal, tenants)
        return web.json_response(
            {
                "kind": principal.kind,
                "name": principal.name,
                "groups": sorted(principal.groups),
                "admin": principal.is_admin,
                "readsEverything": principal.reads_everything,
                # null: every namespace.
                "readableNamespaces": None if readable is None else sorted(readable),
                "writableNamespaces": None if writable is None else sorted(writable),
            }
        )

    app.router.add_get(WHOAMI_PATH, whoami)
