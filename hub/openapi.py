"""The hub's OpenAPI 3.1 document, generated from the api/ kinds' JSON Schemas and the routes
the hub serves, so it can never drift from the code. Served at `/openapi.json`.

Called by: hub.app.
"""

from __future__ import annotations

from typing import Any

from api.meta import API_VERSION, Object
from api.schema import json_schema

__all__ = ["openapi_document"]

_STATUS = {"$ref": "#/components/schemas/Status"}


def _error_responses() -> dict[str, Any]:
    codes = {
        "400": "Bad request",
        "401": "No or invalid bearer token",
        "403": "Forbidden",
        "404": "Not found",
        "409": "Conflict",
        "413": "Body too large",
        "422": "Invalid object (field errors in details.causes)",
    }
    return {
        code: {"description": text, "content": {"application/json": {"schema": _STATUS}}}
        for code, text in codes.items()
    }


def _ok(ref: str, code: str = "200") -> dict[str, Any]:
    return {code: {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}}


def openapi_document(kinds: list[type[Object]], *, version: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {
        "Status": {
            "type": "object",
            "properties": {
                "kind": {"const": "Status"},
                "status": {"const": "Failure"},
                "message": {"type": "string"},
                "reason": {"type": "string"},
                "code": {"type": "integer"},
                "details": {"type": "object"},
            },
        }
    }
    paths: dict[str, Any] = {}
    for kind in kinds:
        schema = json_schema(kind)
        for name, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas[kind.KIND] = schema
        ref = f"#/components/schemas/{kind.KIND}"
        base = f"/apis/{API_VERSION}"
        collection = (
            f"{base}/namespaces/{{namespace}}/{kind.plural()}"
            if kind.NAMESPACED
            else f"{base}/{kind.plural()}"
        )
        item = f"{collection}/{{name}}"
        tag = [kind.KIND]
        ops: dict[str, Any] = {
            "get": {
                "summary": f"List (or ?watch=true) {kind.plural()}",
                "tags": tag,
                "responses": {"200": {"description": "a list"}, **_error_responses()},
            },
        }
        if kind.KIND != "Workload":
            ops["post"] = {
                "summary": f"Create a {kind.KIND}",
                "tags": tag,
                "requestBody": {"content": {"application/json": {"schema": {"$ref": ref}}}},
                "responses": {**_ok(ref, "201"), **_error_responses()},
            }
        paths[collection] = ops
        paths[item] = {
            "get": {
                "summary": f"Read a {kind.KIND}",
                "tags": tag,
                "responses": {**_ok(ref), **_error_responses()},
            },
            "put": {
                "summary": f"Replace a {kind.KIND}",
                "tags": tag,
                "requestBody": {"content": {"application/json": {"schema": {"$ref": ref}}}},
                "responses": {**_ok(ref), **_error_responses()},
            },
            "delete": {
                "summary": f"Delete a {kind.KIND}",
                "tags": tag,
                "responses": {**_ok(ref), **_error_responses()},
            },
        }
    paths[f"/apis/{API_VERSION}/namespaces/{{namespace}}/submissions"] = {
        "post": {
            "summary": "Submit a batch/v1 Job, a JobSet, a Pod or a Workload",
            "tags": ["Workload"],
            "parameters": [
                {"name": "queue", "in": "query", "schema": {"type": "string"}},
                {"name": "clusterSet", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": {**_ok("#/components/schemas/Workload", "201"), **_error_responses()},
        }
    }
    paths[f"/apis/{API_VERSION}/namespaces/{{namespace}}/workloads/{{name}}/log"] = {
        "get": {
            "summary": "Logs of every pod of a workload, from any cluster (NDJSON)",
            "tags": ["Workload"],
            "parameters": [
                {"name": n, "in": "query", "schema": {"type": t}}
                for n, t in (
                    ("follow", "boolean"),
                    ("tailLines", "integer"),
                    ("sinceSeconds", "integer"),
                    ("pod", "string"),
                    ("container", "string"),
                )
            ],
            "responses": {
                "200": {"description": "application/x-ndjson records"},
                **_error_responses(),
            },
        }
    }
    _declare_path_parameters(paths)
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


def _declare_path_parameters(paths: dict[str, Any]) -> None:
    """Declare the `{namespace}`/`{name}` path parameters of every operation."""
    for path, ops in paths.items():
        names = [seg[1:-1] for seg in path.split("/") if seg.startswith("{")]
        for op in ops.values():
            declared = {p["name"] for p in op.get("parameters", [])}
            op.setdefault("parameters", []).extend(
                {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                for n in names
                if n not in declared
            )
