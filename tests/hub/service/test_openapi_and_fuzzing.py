"""The hub's OpenAPI document is one tools can read (valid OpenAPI 3.1, every `$ref`
resolves, every route the hub serves is in it), and fuzzing it finds no 5xx: schemathesis over
every documented operation and a Hypothesis fuzzer mutating valid objects, each against a real
hub on a loopback socket, with nothing invalid stored afterwards. bench/fuzz_api.py is the
longer run."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openapi_spec_validator import validate

from api.kinds import ALL_KINDS
from bench.fuzz_api import fuzzed_hub, hypothesis_fuzzer, run_schemathesis
from hub.openapi import openapi_document
from tests.hub.service.conftest import HubUnderTest

KINDS = [k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")]


def document() -> dict[str, Any]:
    return openapi_document(KINDS, version="test")


def test_the_document_is_valid_openapi() -> None:
    validate(document())  # raises on any violation of the OpenAPI 3.1 schema


def test_every_ref_points_into_the_documents_components() -> None:
    doc = document()
    refs = set(re.findall(r'"\$ref": "([^"]+)"', json.dumps(doc)))
    assert refs, "the kinds' schemas refer to shared definitions"
    schemas = doc["components"]["schemas"]
    unresolved = [
        ref
        for ref in refs
        if not ref.startswith("#/components/schemas/") or ref.rsplit("/", 1)[1] not in schemas
    ]
    assert unresolved == []


async def test_every_route_the_hub_serves_is_documented_with_its_methods(
    hub: HubUnderTest,
) -> None:
    documented = {
        (method.upper(), path) for path, ops in document()["paths"].items() for method in ops
    }
    served = set()
    for route in hub.server.app.router.routes():
        if route.method == "HEAD":
            continue
        template = route.resource.canonical if route.resource else ""
        template = template.replace("{ns}", "{namespace}")
        if "{plural}" not in template:
            served.add((route.method, template))
            continue
        for kind in KINDS:
            if "{namespace}" in template and not kind.NAMESPACED:
                continue
            if "{name}" in template and "{namespace}" not in template and kind.NAMESPACED:
                continue  # answered 404: a namespaced object is reached through its namespace
            if route.method != "GET" and "{namespace}" not in template and kind.NAMESPACED:
                continue
            if route.method == "POST" and kind.KIND == "Workload":
                continue  # workloads are created by submission
            if template.endswith("/status") and "status" not in kind.model_fields:
                continue  # answered 404: the kind has no status
            served.add((route.method, template.replace("{plural}", kind.plural())))
    assert served - documented == set()
    assert documented - served == set()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_schemathesis_finds_no_server_error_and_nothing_invalid_is_stored(tmp_path: Any) -> None:
    with fuzzed_hub() as hub:
        # The budget grows with the operations to try (93 with the Slurm routes): on a busy
        # 2-core machine 30 s ran out before the last one.
        exit_code = run_schemathesis(
            # The time is a cap, not the budget: on a quiet machine every operation is done in
            # well under it; on a loaded one 30 s ran out before every operation was tried.
            hub,
            examples=3,
            seconds=150,
            report=tmp_path / "junit.xml",
            phases="fuzzing",
        )
        log = (tmp_path / "junit.log").read_text()
        assert {code for code in hub.statuses if code >= 500} == set(), log
        # Every documented operation (the agent lanes aside) was tried, watches to their end
        # (bench/schemathesis_hooks.py), and schemathesis' own checks (5xx, undocumented
        # status codes, content types) all passed, with no error.
        selected = re.search(r"Operations:\s+(\d+) selected", log)
        passed = re.search(r"(\d+) passed", log)
        assert selected and passed, log
        assert int(passed[1]) == int(selected[1]) >= 80, log
        assert "FAILURES" not in log and "ERRORS" not in log and exit_code == 0, log
        assert hub.invalid_stored() == []


@pytest.mark.slow
def test_mutated_objects_get_no_server_error_and_nothing_invalid_is_stored() -> None:
    with fuzzed_hub() as hub:
        hypothesis_fuzzer(hub, examples=400)()
        assert sum(hub.statuses.values()) >= 400
        assert {code for code in hub.statuses if code >= 500} == set()
        assert hub.invalid_stored() == []
