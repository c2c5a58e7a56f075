"""The hub's OpenAPI 3.1 document, generated from the api/ kinds' JSON Schemas and the routes
the hub serves, so it can never drift from the code. Served at `/openapi.json`.

Tools must be able to read it whole: every schema is under `components/schemas` and every
`$ref` points there (pydantic writes `#/$defs/…` by default, which nothing resolves once the
definitions are moved; `models_json_schema` also gives two models of one name distinct
names). Every route the hub serves is a path here — the REST resources, submissions, a
profile's expansion, logs, the agent lanes and the public endpoints — with every status code
it can answer, and path parameters carry the name rules the hub checks, so generated requests
mostly reach the handlers. tests/hub/service/test_openapi.py validates it and checks it
against the router.

Called by: hub.app.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from api.meta import API_VERSION, Object
from api.v1alpha1.templates import JobRequest
from hub.ui import ASSETS

__all__ = ["openapi_document"]

_STATUS = {"$ref": "#/components/schemas/Status"}
_REF_TEMPLATE = "#/components/schemas/{model}"
_ANY_OBJECT: dict[str, Any] = {"type": "object"}

# What each error status means here (hub.errors is where they come from).
_ERRORS = {
    "400": "Bad request: the body or a parameter cannot be read (details.causes names it)",
    "401": "No or invalid bearer token",
    "403": "The caller may not do this",
    "404": "No such object or route",
    "409": "The name exists already, or resourceVersion is stale",
    "410": "The watch's resourceVersion was compacted",
    "413": "Body too large",
    "415": "Body in a content type the hub does not read",
    "422": "Invalid object (field errors in details.causes)",
    "503": "Store or leader unavailable; retry",
}
_READ_ERRORS = ("400", "401", "403", "404", "503")
_WRITE_ERRORS = ("400", "401", "403", "404", "409", "413", "415", "422", "503")

_NAMESPACE = {
    "name": "namespace",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
}
_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {
        "type": "string",
        "maxLength": 253,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    },
}


def _query(name: str, schema_type: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": schema_type},
    }


_RESOURCE_VERSION = _query(
    "resourceVersion", "string", "a resourceVersion the hub gave out (decimal digits)"
)


def _errors(*codes: str) -> dict[str, Any]:
    return {
        code: {"description": _ERRORS[code], "content": {"application/json": {"schema": _STATUS}}}
        for code in codes
    }


def _ok(schema: dict[str, Any], code: str = "200", description: str = "OK") -> dict[str, Any]:
    return {code: {"description": description, "content": {"application/json": {"schema": schema}}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": schema}, "application/yaml": {"schema": schema}},
    }


def _list_schema(kind: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"const": f"{kind}List"},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": {"$ref": f"#/components/schemas/{kind}"}},
        },
    }


def _kind_paths(kind: type[Object]) -> dict[str, Any]:
    base = f"/apis/{API_VERSION}"
    plural = kind.plural()
    ref = {"$ref": f"#/components/schemas/{kind.KIND}"}
    tag = [kind.KIND]
    scope = [_NAMESPACE] if kind.NAMESPACED else []
    collection = (
        f"{base}/namespaces/{{namespace}}/{plural}" if kind.NAMESPACED else f"{base}/{plural}"
    )
    listing: dict[str, Any] = {
        "summary": f"List {plural}; with ?watch=true, stream their changes (NDJSON)",
        "tags": tag,
        "parameters": [
            *scope,
            _query("watch", "boolean", "stream ADDED/MODIFIED/DELETED events"),
            _RESOURCE_VERSION,
            _query("timeoutSeconds", "integer", "a watch ends after this many seconds (0: never)"),
            _query("labelSelector", "string", "a=b,c!=d,e,!f"),
        ],
        "responses": {**_ok(_list_schema(kind.KIND)), **_errors(*_READ_ERRORS, "410")},
    }
    paths: dict[str, Any] = {collection: {"get": listing}}
    if kind.NAMESPACED:
        every_namespace = {**listing, "parameters": listing["parameters"][1:]}
        paths[f"{base}/{plural}"] = {
            "get": {**every_namespace, "summary": f"List {plural} of every namespace you may read"}
        }
    if kind.KIND != "Workload":  # workloads are created by submission
        paths[collection]["post"] = {
            "summary": f"Create a {kind.KIND} (admins)",
            "tags": tag,
            "parameters": list(scope),
            "requestBody": _body(ref),
            "responses": {**_ok(ref, "201", "Created"), **_errors(*_WRITE_ERRORS)},
        }
    paths[f"{collection}/{{name}}"] = {
        "get": {
            "summary": f"Read a {kind.KIND}",
            "tags": tag,
            "parameters": [*scope, _NAME],
            "responses": {**_ok(ref), **_errors(*_READ_ERRORS)},
        },
        "put": {
            "summary": (
                f"Replace a {kind.KIND} (compare-and-swap on metadata.resourceVersion; its "
                "status is kept: change it through …/status)"
            ),
            "tags": tag,
            "parameters": [*scope, _NAME],
            "requestBody": _body(ref),
            "responses": {**_ok(ref), **_errors(*_WRITE_ERRORS)},
        },
        "delete": {
            "summary": f"Delete a {kind.KIND}",
            "tags": tag,
            "parameters": [*scope, _NAME, _RESOURCE_VERSION],
            "responses": {**_ok(ref), **_errors(*_READ_ERRORS, "409")},
        },
    }
    if "status" in kind.model_fields:
        paths[f"{collection}/{{name}}/status"] = {
            "put": {
                "summary": (
                    f"Replace the status of a {kind.KIND} (admins; its spec and metadata are "
                    "kept; compare-and-swap on metadata.resourceVersion when given)"
                ),
                "tags": tag,
                "parameters": [*scope, _NAME],
                "requestBody": _body(ref),
                "responses": {**_ok(ref), **_errors(*_WRITE_ERRORS)},
            }
        }
    return paths


def _service_paths() -> dict[str, Any]:
    base = f"/apis/{API_VERSION}"
    public = ["Service"]
    agent_lane = {
        "summary": "An agent's WebSocket lane (agent tokens only; the hub's leader only)",
        "tags": ["Agent"],
        "parameters": [
            {
                "name": "cluster",
                "in": "query",
                "required": True,
                "schema": {"type": "string"},
                "description": "the MemberCluster the agent speaks for",
            }
        ],
        "responses": {
            "101": {"description": "Switching to the WebSocket protocol"},
            **_errors("400", "401", "403", "404", "409", "503"),
        },
    }
    return {
        "/healthz": {
            "get": {
                "summary": "Liveness",
                "tags": public,
                "security": [],
                "responses": _ok(_ANY_OBJECT),
            }
        },
        "/readyz": {
            "get": {
                "summary": "Readiness: the store mirror is in sync; says who leads",
                "tags": public,
                "security": [],
                "responses": {
                    **_ok(_ANY_OBJECT),
                    "503": {
                        "description": "Not ready yet",
                        "content": {"application/json": {"schema": _ANY_OBJECT}},
                    },
                },
            }
        },
        f"{base}/whoami": {
            "get": {
                "summary": "Who the caller is: name, groups, admin, and the namespaces it may "
                "read and change (null: all)",
                "tags": public,
                "responses": {**_ok(_ANY_OBJECT), **_errors("401")},
            }
        },
        "/version": {
            "get": {
                "summary": "The hub's version and API",
                "tags": public,
                "security": [],
                "responses": _ok(_ANY_OBJECT),
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "tags": public,
                "security": [],
                "responses": _ok(_ANY_OBJECT),
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (text exposition format; no token needed)",
                "tags": public,
                "security": [],
                "responses": {
                    "200": {
                        "description": "The hub's metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        f"{base}/namespaces/{{namespace}}/submissions": {
            "post": {
                "summary": "Submit a batch/v1 Job, a JobSet, a Pod or a Workload (JSON or YAML)",
                "tags": ["Workload"],
                "parameters": [
                    _NAMESPACE,
                    _query("queue", "string", "the LocalQueue (else the job's queue label)"),
                    _query("clusterSet", "string", "a ClusterSet to run in"),
                ],
                "requestBody": _body(_ANY_OBJECT),
                "responses": {
                    **_ok({"$ref": "#/components/schemas/Workload"}, "201", "Created"),
                    **_errors(*_WRITE_ERRORS),
                },
            }
        },
        f"{base}/namespaces/{{namespace}}/workloads/{{name}}/log": {
            "get": {
                "summary": "Logs of every pod of a workload, from any cluster (NDJSON)",
                "tags": ["Workload"],
                "parameters": [
                    _NAMESPACE,
                    _NAME,
                    _query("follow", "boolean", "follow until the pods are done"),
                    _query("tailLines", "integer", "lines from the end of each container"),
                    _query("sinceSeconds", "integer", "lines of the last N seconds"),
                    _query("pod", "string", "one pod"),
                    _query("container", "string", "one container"),
                ],
                "responses": {
                    "200": {
                        "description": "records {cluster, pod, container, time, line}",
                        "content": {"application/x-ndjson": {"schema": _ANY_OBJECT}},
                    },
                    **_errors(*_READ_ERRORS),
                },
            }
        },
        **_ui_paths(),
        "/agent/v1/session": {"get": agent_lane},
        "/agent/v1/logs": {"get": {**agent_lane, "summary": "An agent's log lane"}},
    }


def _ui_paths() -> dict[str, Any]:
    # The dashboard's static files (hub.ui): public, the same for everyone, no data in them.
    ui = ["Dashboard"]
    page = {"text/html": {"schema": {"type": "string"}}}
    return {
        "/ui": {
            "get": {
                "summary": "The dashboard (redirects to /ui/)",
                "tags": ui,
                "security": [],
                "responses": {"308": {"description": "Permanent redirect to /ui/"}},
            }
        },
        "/ui/": {
            "get": {
                "summary": "The dashboard: a static single-page app that signs in with a token",
                "tags": ui,
                "security": [],
                "responses": {"200": {"description": "index.html", "content": page}},
            }
        },
        "/ui/{asset}": {
            "get": {
                "summary": "One static file of the dashboard (scripts, styles, icon)",
                "tags": ui,
                "security": [],
                "parameters": [
                    {
                        "name": "asset",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "enum": sorted(ASSETS)},
                    }
                ],
                "responses": {
                    "200": {"description": "The file, in its own content type"},
                    **_errors("401", "404"),
                },
            }
        },
    }


def _slurm_paths() -> dict[str, Any]:
    """The Slurm mode's routes (hub.http.slurm)."""
    base = "/apis/slurm.multiq.dev/v1alpha1"
    tags = ["Slurm"]
    row = {"type": "object", "description": "one job or array task as squeue/sacct show it"}
    rows = {"type": "object", "properties": {"items": {"type": "array", "items": row}}}
    ids = {"type": "object", "properties": {"jobs": {"type": "array", "items": {"type": "string"}}}}
    filters = [
        _query("jobs", "string", "job ids: N, N_I or N_[1-3], comma-separated"),
        _query("users", "string", "users, comma-separated"),
        _query("names", "string", "job names, comma-separated"),
        _query("states", "string", "states or codes (PENDING, PD, …), comma-separated"),
        _query("partitions", "string", "partitions, comma-separated"),
        _query("history", "boolean", "also jobs that ended long ago (sacct)"),
        _query("start", "string", "jobs that ended at or after this ISO 8601 time"),
        _query("end", "string", "jobs submitted at or before this ISO 8601 time"),
    ]
    selection = {
        "type": "object",
        "description": "which jobs: jobs, users, names, states, partitions (comma lists)",
    }

    def acting(summary: str) -> dict[str, Any]:
        return {
            "post": {
                "summary": summary,
                "tags": tags,
                "parameters": [_NAMESPACE],
                "requestBody": _body(selection),
                "responses": {**_ok(ids), **_errors(*_WRITE_ERRORS)},
            }
        }

    return {
        f"{base}/namespaces/{{namespace}}/jobs": {
            "post": {
                "summary": "sbatch: submit a batch script (argv, script, environment, submitter)",
                "tags": tags,
                "parameters": [_NAMESPACE],
                "requestBody": _body(_ANY_OBJECT),
                "responses": {
                    **_ok(
                        {
                            "type": "object",
                            "properties": {
                                "jobId": {"type": "integer"},
                                "workloads": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        "201",
                        "Submitted",
                    ),
                    **_errors(*_WRITE_ERRORS),
                },
            },
            "get": {
                "summary": "squeue/sacct: the namespace's jobs",
                "tags": tags,
                "parameters": [_NAMESPACE, *filters],
                "responses": {**_ok(rows), **_errors(*_READ_ERRORS)},
            },
        },
        f"{base}/jobs": {
            "get": {
                "summary": "squeue/sacct: jobs of every namespace the caller may read",
                "tags": tags,
                "parameters": filters,
                "responses": {**_ok(rows), **_errors(*_READ_ERRORS)},
            }
        },
        f"{base}/namespaces/{{namespace}}/jobs/cancel": acting("scancel: cancel jobs"),
        f"{base}/namespaces/{{namespace}}/jobs/hold": acting("scontrol hold: hold pending jobs"),
        f"{base}/namespaces/{{namespace}}/jobs/release": acting(
            "scontrol release: release held jobs"
        ),
    }


def _template_paths() -> dict[str, Any]:
    """A profile's expansion (hub.http.templates)."""
    base = f"/apis/{API_VERSION}/namespaces/{{namespace}}/applicationprofiles/{{name}}"
    return {
        f"{base}/instantiate": {
            "post": {
                "summary": "Expand the profile's mode (Job or JobSet) with the request's flags and "
                "submit it (dryRun=All: the expanded object, nothing stored)",
                "tags": ["ApplicationProfile"],
                "parameters": [
                    _NAMESPACE,
                    _NAME,
                    {
                        "name": "dryRun",
                        "in": "query",
                        "required": False,
                        "description": "All: check everything, store nothing",
                        "schema": {"enum": ["All"]},
                    },
                ],
                "requestBody": _body({"$ref": "#/components/schemas/JobRequest"}),
                "responses": {
                    **_ok(_ANY_OBJECT, "200", "Dry run: the Job or JobSet that would be submitted"),
                    **_ok({"$ref": "#/components/schemas/Workload"}, "201", "Created"),
                    **_errors(*_WRITE_ERRORS),
                },
            }
        }
    }


_STATUS_SCHEMA = {
    "type": "object",
    "description": "A Kubernetes Status: why a request failed",
    "properties": {
        "kind": {"const": "Status"},
        "apiVersion": {"type": "string"},
        "metadata": {"type": "object"},
        "status": {"const": "Failure"},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "code": {"type": "integer"},
        "details": {
            "type": "object",
            "properties": {
                "causes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "reason": {"type": "string"},
                            "field": {"type": "string"},
                            "message": {"type": "string"},
                        },
                    },
                }
            },
        },
    },
    "required": ["kind", "status", "message", "reason", "code"],
}


def openapi_document(kinds: list[type[Object]], *, version: str) -> dict[str, Any]:
    names, definitions = models_json_schema(
        [(kind, "validation") for kind in kinds], by_alias=True, ref_template=_REF_TEMPLATE
    )
    schemas: dict[str, Any] = {
        "Status": _STATUS_SCHEMA,
        "JobRequest": JobRequest.model_json_schema(by_alias=True, ref_template=_REF_TEMPLATE),
        **definitions.get("$defs", {}),
    }
    for kind in kinds:
        # Each kind under its own KIND name, whatever name pydantic gave its model.
        ref = names[(kind, "validation")]["$ref"]
        schema = schemas[ref.rsplit("/", 1)[1]]
        group, _, api_version = kind.API_VERSION.rpartition("/")
        schema["x-kubernetes-group-version-kind"] = [
            {"group": group, "version": api_version, "kind": kind.KIND}
        ]
        schema["x-multiq-namespaced"] = kind.NAMESPACED
        if ref != f"#/components/schemas/{kind.KIND}":
            schemas[kind.KIND] = {"$ref": ref}
    paths: dict[str, Any] = _service_paths() | _slurm_paths() | _template_paths()
    for kind in kinds:
        paths.update(_kind_paths(kind))
    return {
        "openapi": "3.1.0",
        "info": {"title": "MultiQ hub", "version": version},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
