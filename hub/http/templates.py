"""Job templates at the hub: `POST /apis/multiq.dev/v1alpha1/namespaces/{ns}/
applicationprofiles/{name}/instantiate[?dryRun=All]` with a JobRequest (JSON or YAML).

The route's shape is Kubernetes' for an action that makes a new object out of a named one: a
create-only subresource taking a request object, as `serviceaccounts/{name}/token` takes a
TokenRequest and OpenShift's `buildconfigs/{name}/instantiate` a BuildRequest. The profile is
in the path (so a missing one is a plain 404 of that name, and the profile is what the caller
acts on); the request says the mode and the flags. A `jobrequests` collection would have held
objects nobody lists or gets.

The profile's mode, template and bundles are expanded (hub.templates) into a Job or JobSet,
which is submitted exactly as `qctl submit` would submit it (hub.http.submit: same checks,
same durable writes): 201 with the Workload. `?dryRun=All` runs every check and stores nothing:
200 with the expanded object — what `qctl create … --dry-run -o json` prints, byte for byte,
since qctl prints what this returns. The Slurm mode is asked through the Slurm API
(hub.http.slurm, `argv` with `--profile`).

Who may: whoever may submit workloads in the namespace (a tenant's user; admins).

Called by: hub.app (registers it); qctl create job|jobset.
"""

from __future__ import annotations

import copy
import secrets
import string

from aiohttp import web
from pydantic import ValidationError

from api.codec import pydantic_errors_to_field_errors
from api.meta import API_VERSION
from api.v1alpha1.federation import Tenant
from api.v1alpha1.templates import JobRequest
from api.v1alpha1.workload import Workload
from hub.auth import Principal, require_namespace
from hub.errors import BadRequestError, InvalidObjectError
from hub.http.middleware import PRINCIPAL, read_body
from hub.http.submit import SubmitRoutes
from hub.objects import check_path_names
from hub.state import HubState
from hub.templates import JobOverrides, expand, resolve
from hub.tracing import traced_submission

__all__ = ["TemplateRoutes", "name_suffix"]

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


def name_suffix() -> str:
    """Five random characters, as Kubernetes' generateName adds."""
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


class TemplateRoutes:
    def __init__(self, state: HubState, submissions: SubmitRoutes) -> None:
        self.state = state
        self.submissions = submissions

    def add_to(self, app: web.Application) -> None:
        path = f"/apis/{API_VERSION}/namespaces/{{ns}}/applicationprofiles/{{name}}/instantiate"
        app.router.add_post(path, traced_submission(self.instantiate))

    async def instantiate(self, request: web.Request) -> web.Response:
        ns, profile = request.match_info["ns"], request.match_info["name"]
        principal: Principal = request[PRINCIPAL]
        tenants = [t for t in self.state.objects(Tenant) if isinstance(t, Tenant)]
        require_namespace(principal, ns, tenants, "submit workloads", write=True)
        check_path_names(Workload, None, ns)
        dry_run = request.query.getall("dryRun", [])
        if any(value != "All" for value in dry_run):
            raise BadRequestError("dryRun: the only value is All")
        body = await read_body(request)
        try:
            job_request = JobRequest.model_validate(body)
        except ValidationError as exc:
            causes = pydantic_errors_to_field_errors(exc, model=JobRequest)
            raise InvalidObjectError(
                "invalid JobRequest: " + "; ".join(str(c) for c in causes), causes=causes
            ) from exc

        resolved = resolve(self.state.find, ns, profile, job_request.mode)
        expanded = expand(
            resolved.profile,
            resolved.template,
            resolved.bundles,
            job_request.mode,
            JobOverrides(job_request, principal.name, name_suffix()),
        )
        if dry_run:
            # The submission's checks run on a copy: they fill in the namespace and may adopt
            # parts of what they parse; the caller sees the expansion as it is.
            await self.submissions.accept(principal, ns, copy.deepcopy(expanded), dry_run=True)
            return web.json_response(expanded)
        created = await self.submissions.accept(principal, ns, expanded)
        return web.json_response(created, status=201)
