"""Who may do what, as a table: every operation of the live /openapi.json (and a watch of every
list) × every kind of caller, each cell one real request to a real hub.

Callers: an admin (`multiq:admins`), alice (tenant vision), bob (tenant audio), a viewer
(`multiq:viewers`: gets, lists, watches and reads logs everywhere, writes nothing), the agents
of clusters east and west, no token, a wrong token. Namespaced cells act in namespace vision
(alice's, not bob's). What a cell expects is data: OK (the request is served: 200 for a read,
404 for a read or delete of a name that does not exist, 201 for a submission, 101 for an
agent lane, and for an admin's write any answer but 401/403/5xx — the body is minimal, so
validation may refuse it), 401 or 403. A forbidden request is a 403 whether or not the object
exists, as Kubernetes answers (it does not hide namespaced objects behind 404s).

A route in the OpenAPI document without a row, or a row without a route, fails the first
test. Beside the table: lists and watches across namespaces show only the caller's tenants'
objects; a namespaced object is not reachable without its namespace; priorities come from
WorkloadPriorityClasses a tenant may use; a cluster set stays within the queue's; status
changes only through …/status; an agent speaks only for its own cluster."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any, Literal

import aiohttp
import pytest

from api.v1alpha1.messages import DispatchOffer, OfferRejected, RejectReason, WorkloadPhase
from tests.hub.service.conftest import (
    ADMIN,
    AGENT_TOKENS,
    ALICE,
    BOB,
    VIEWER,
    HubUnderTest,
    fleet_objects,
    job,
)
from tests.hub.service.test_dispatch_flow import eventually, report, two_clusters

API = "/apis/multiq.dev/v1alpha1"
SLURM = "/apis/slurm.multiq.dev/v1alpha1"
NS = "vision"

PRINCIPALS: dict[str, str | None] = {
    "admin": ADMIN,
    "alice": ALICE,
    "bob": BOB,
    "viewer": VIEWER,
    "agent-east": AGENT_TOKENS["east"],
    "agent-west": AGENT_TOKENS["west"],
    "no-token": None,
    "wrong-token": "not-a-token-anyone-has",
}
OK: Literal["ok"] = "ok"
Expect = Literal["ok", 401, 403]
Rule = dict[str, Expect]


def rule(**allowed: Expect) -> Rule:
    """Every user and agent 403, no or a wrong token 401, unless named."""
    base: Rule = dict.fromkeys(PRINCIPALS, 403)
    base.update({"no-token": 401, "wrong-token": 401})
    base.update({k.replace("_", "-"): v for k, v in allowed.items()})
    return base


PUBLIC: Rule = dict.fromkeys(PRINCIPALS, OK)
ADMINS_ONLY = rule(admin=OK)
EVERY_USER_READS = rule(admin=OK, alice=OK, bob=OK, viewer=OK)  # lists filter by tenant
TENANT_READS = rule(admin=OK, alice=OK, viewer=OK)  # bob is not in tenant vision
TENANT_WRITES = rule(admin=OK, alice=OK)  # viewers never write
AGENT_EAST_ONLY = rule(agent_east=OK)  # the lanes are dialled with ?cluster=east

WATCH = "WATCH"  # a GET of a collection with ?watch=true


def cluster_scoped(plural: str, *, status: bool) -> dict[tuple[str, str], Rule]:
    path = f"{API}/{plural}"
    rows = {
        ("GET", path): EVERY_USER_READS,
        (WATCH, path): EVERY_USER_READS,
        ("POST", path): ADMINS_ONLY,
        ("GET", f"{path}/{{name}}"): EVERY_USER_READS,
        ("PUT", f"{path}/{{name}}"): ADMINS_ONLY,
        ("DELETE", f"{path}/{{name}}"): ADMINS_ONLY,
    }
    if status:
        rows[("PUT", f"{path}/{{name}}/status")] = ADMINS_ONLY
    return rows


def namespaced(
    plural: str, *, status: bool, create: bool = True, delete: Rule = ADMINS_ONLY
) -> dict[tuple[str, str], Rule]:
    path = f"{API}/namespaces/{{namespace}}/{plural}"
    rows = {
        ("GET", path): TENANT_READS,
        (WATCH, path): TENANT_READS,
        ("GET", f"{API}/{plural}"): EVERY_USER_READS,
        (WATCH, f"{API}/{plural}"): EVERY_USER_READS,
        ("GET", f"{path}/{{name}}"): TENANT_READS,
        ("PUT", f"{path}/{{name}}"): ADMINS_ONLY,
        ("DELETE", f"{path}/{{name}}"): delete,
    }
    if create:
        rows[("POST", path)] = ADMINS_ONLY
    if status:
        rows[("PUT", f"{path}/{{name}}/status")] = ADMINS_ONLY
    return rows


ROWS: dict[tuple[str, str], Rule] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/version"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    # Prometheus scrapes without a token; the figures name no tenant's objects.
    ("GET", "/metrics"): PUBLIC,
    # Anyone with a token may ask who they are (an agent too); no token, no answer.
    ("GET", f"{API}/whoami"): rule(
        admin=OK, alice=OK, bob=OK, viewer=OK, agent_east=OK, agent_west=OK
    ),
    # The dashboard's page and static files: the same for everyone, no data (its API calls
    # carry the signed-in token and are judged by the rows below).
    ("GET", "/ui"): PUBLIC,
    ("GET", "/ui/"): PUBLIC,
    ("GET", "/ui/{asset}"): PUBLIC,
    # The Slurm mode (hub.http.slurm): a tenant's users submit, list and act on their
    # namespace's jobs (cancel, hold and release only their own); everyone lists what they
    # may read.
    ("POST", f"{SLURM}/namespaces/{{namespace}}/jobs"): TENANT_WRITES,
    ("GET", f"{SLURM}/namespaces/{{namespace}}/jobs"): TENANT_READS,
    ("GET", f"{SLURM}/jobs"): EVERY_USER_READS,
    ("POST", f"{SLURM}/namespaces/{{namespace}}/jobs/cancel"): TENANT_WRITES,
    ("POST", f"{SLURM}/namespaces/{{namespace}}/jobs/hold"): TENANT_WRITES,
    ("POST", f"{SLURM}/namespaces/{{namespace}}/jobs/release"): TENANT_WRITES,
    ("POST", f"{API}/namespaces/{{namespace}}/submissions"): TENANT_WRITES,
    # A profile's expansion submits a workload: who may submit in the namespace may ask it.
    ("POST", f"{API}/namespaces/{{namespace}}/applicationprofiles/{{name}}/instantiate"): (
        TENANT_WRITES
    ),
    ("GET", f"{API}/namespaces/{{namespace}}/workloads/{{name}}/log"): TENANT_READS,
    ("GET", "/agent/v1/session"): AGENT_EAST_ONLY,
    ("GET", "/agent/v1/logs"): AGENT_EAST_ONLY,
    **cluster_scoped("resourceflavors", status=False),
    **cluster_scoped("clusterqueues", status=True),
    **cluster_scoped("cohorts", status=True),
    **cluster_scoped("workloadpriorityclasses", status=False),
    **cluster_scoped("topologies", status=False),
    **cluster_scoped("memberclusters", status=True),
    **cluster_scoped("clustersets", status=True),
    **cluster_scoped("globalqueues", status=True),
    **cluster_scoped("tenants", status=True),
    **namespaced("localqueues", status=True),
    **namespaced("applicationprofiles", status=False),
    **namespaced("jobtemplates", status=False),
    **namespaced("volumebundles", status=False),
    **namespaced("workloads", status=True, create=False, delete=TENANT_WRITES),
    # Its namespace's users may stop and resume a workload (spec.active alone; beside the table).
    ("PUT", f"{API}/namespaces/{{namespace}}/workloads/{{name}}"): TENANT_WRITES,
    **namespaced("jobsets", status=True),
}

# Names a GET of one object uses: these exist (a read is then 200); other kinds' reads ask
# for a name that does not exist (then 404 when allowed, 403 when not).
EXISTING = {
    "clusterqueues": "team-vision",
    "memberclusters": "east",
    "tenants": "vision",
    "resourceflavors": "default",
    "localqueues": "vision",
    "workloads": "job-train",
}
ABSENT = "matrix-none"


def audio_tenant() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": "audio"},
            "spec": {"namespaces": ["audio"], "groups": ["audio-researchers"]},
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "audio", "namespace": "audio"},
            "spec": {"clusterQueue": "team-vision"},
        },
    ]


async def two_tenants(hub: HubUnderTest) -> None:
    """Tenants vision (alice) and audio (bob), a workload `train` in each."""
    await hub.apply(*fleet_objects(), *audio_tenant())
    status, body = await hub.call("POST", f"{API}/namespaces/vision/submissions", body=job())
    assert status == 201, body
    audio_job = job()
    audio_job["metadata"]["namespace"] = "audio"
    status, body = await hub.call(
        "POST",
        f"{API}/namespaces/audio/submissions",
        token=BOB,
        body=audio_job,
        params={"queue": "audio"},
    )
    assert status == 201, body


def concrete(template: str, plural: str | None, method: str) -> str:
    name = EXISTING.get(plural or "", ABSENT) if method in ("GET", WATCH) else ABSENT
    if template.endswith("/log"):
        name = EXISTING["workloads"]
    path = template.replace("{namespace}", NS).replace("{name}", name)
    return path.replace("{asset}", "app.js")


def plural_of(template: str) -> str | None:
    parts = template.removeprefix(API + "/").split("/")
    if not template.startswith(API) or template == f"{API}/whoami":  # (not a collection)
        return None
    if parts[0] == "namespaces":
        return parts[2] if len(parts) > 2 else None
    return parts[0]


def body_for(method: str, template: str, principal: str) -> dict[str, Any] | None:
    if template.endswith("/submissions"):
        return job(f"m-{principal}")
    if method in ("POST", "PUT"):
        # Minimal: authorization is decided before validation, so a forbidden caller gets 403
        # and an admin gets whatever validation says of it.
        # (a create that succeeds makes another name than the one reads and deletes look for)
        return {"metadata": {"name": "matrix-new" if method == "POST" else ABSENT}}
    return None


async def perform(hub: HubUnderTest, method: str, template: str, principal: str) -> int:
    token = PRINCIPALS[principal]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    path = concrete(template, plural_of(template), method)
    if template.startswith("/agent/"):
        try:
            ws = await hub.session.ws_connect(
                f"{hub.url}{path}", headers=headers, params={"cluster": "east"}
            )
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.close()
        return 101
    body = body_for(method, template, principal)
    params = {"watch": "true"} if method == WATCH else None
    if template.endswith("/log"):
        params = {"follow": "false"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    async with hub.session.request(
        "GET" if method == WATCH else method,
        hub.url + path,
        headers=headers,
        params=params,
        data=json.dumps(body) if body is not None else None,
    ) as response:
        if method != WATCH:
            await response.read()
        return response.status  # (a watch: its first line is not waited for)


def served(method: str, template: str, status: int) -> bool:
    """What OK means for this cell."""
    if template.startswith("/agent/"):
        return status == 101
    if template.endswith("/submissions"):
        return status == 201
    if method in ("GET", WATCH):
        plural = plural_of(template)
        one = template.endswith("{name}")
        return status == (404 if one and plural not in EXISTING else 200)
    if method == "DELETE":
        return status == 404  # allowed, and the name does not exist
    return status not in (401, 403) and status < 500


async def documented_operations(hub: HubUnderTest) -> set[tuple[str, str]]:
    status, doc = await hub.call("GET", "/openapi.json", token=None)
    assert status == 200
    return {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}


async def test_the_table_has_a_row_for_every_operation_of_the_live_openapi_document(
    hub: HubUnderTest,
) -> None:
    documented = await documented_operations(hub)
    rows = {(m, p) for m, p in ROWS if m != WATCH}
    assert documented - rows == set(), "operations without a row in the access table"
    assert rows - documented == set(), "rows for operations the hub does not document"
    lists = {p for m, p in ROWS if m == "GET" and plural_of(p) and p.endswith(plural_of(p) or "")}
    assert lists == {p for m, p in ROWS if m == WATCH}, "every list has a watch row"


async def test_every_caller_gets_what_the_table_says_of_every_operation(
    hub: HubUnderTest,
) -> None:
    await two_tenants(hub)
    wrong: list[str] = []
    cells = 0
    for (method, template), expected in ROWS.items():
        for principal, expect in expected.items():
            status = await perform(hub, method, template, principal)
            cells += 1
            good = served(method, template, status) if expect == OK else status == expect
            if not good:
                wrong.append(f"{method} {template} as {principal}: {status}, expected {expect}")
    assert wrong == [], "\n".join(wrong)
    assert cells == len(ROWS) * len(PRINCIPALS) >= 900


# --- beside the table -----------------------------------------------------------------------


def namespaces(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["namespace"] for i in items}


@pytest.mark.parametrize(
    ("principal", "sees"),
    [
        ("admin", {"vision", "audio"}),
        ("viewer", {"vision", "audio"}),
        ("alice", {"vision"}),
        ("bob", {"audio"}),
    ],
)
async def test_a_list_and_a_watch_across_namespaces_show_only_the_callers_tenants(
    hub: HubUnderTest, principal: str, sees: set[str]
) -> None:
    await two_tenants(hub)
    token = PRINCIPALS[principal]
    status, listing = await hub.call("GET", f"{API}/workloads", token=token)
    assert status == 200 and namespaces(listing["items"]) == sees
    events = []
    async with hub.session.get(
        f"{hub.url}{API}/workloads?watch=true", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        # The ADDED events, then whatever the dispatcher changes: all filtered alike.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                while True:
                    events.append(json.loads(await response.content.readline()))
    assert namespaces([e["object"] for e in events]) == sees


async def test_a_namespaced_object_is_not_reached_without_its_namespace(
    hub: HubUnderTest,
) -> None:
    await two_tenants(hub)
    for token in (ADMIN, ALICE, BOB, VIEWER):
        status, body = await hub.call("GET", f"{API}/workloads/job-train", token=token)
        assert status == 404, body
        assert body["message"].startswith("workloads are namespaced: use")


# --- priorities -----------------------------------------------------------------------------


def priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("low", 10), ("high", 1000))
    ]


def workload_body(priority: int | None, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "vision",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": job()["spec"]["template"],
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
        spec["priorityClassSource"] = "multiq.dev/workloadpriorityclass"
    return {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": NS},
        "spec": spec,
    }


async def submit_as(
    hub: HubUnderTest, token: str, body: dict[str, Any], **params: str
) -> tuple[int, Any]:
    return await hub.call(
        "POST", f"{API}/namespaces/{NS}/submissions", token=token, body=body, params=params
    )


def causes(body: dict[str, Any]) -> list[str]:
    return [c["field"] for c in body["details"]["causes"]]


async def with_priorities(hub: HubUnderTest, usable: list[str] | None = None) -> None:
    objects = [*fleet_objects(), *priority_classes()]
    if usable is not None:
        tenant = next(o for o in objects if o["kind"] == "Tenant")
        tenant["spec"]["priorityClasses"] = usable
    await hub.apply(*objects)


class TestPriority:
    async def test_a_tenant_user_may_not_write_a_number(self, hub: HubUnderTest) -> None:
        await with_priorities(hub)
        status, body = await submit_as(hub, ALICE, workload_body(2147483647))
        assert status == 403 and causes(body) == ["spec.priority"]
        assert "only admins may write a number" in body["message"]

    async def test_a_tenant_user_may_not_write_another_number_than_its_classs(
        self, hub: HubUnderTest
    ) -> None:
        await with_priorities(hub)
        status, body = await submit_as(hub, ALICE, workload_body(2147483647, "low"))
        assert status == 403 and causes(body) == ["spec.priority"]
        assert "must equal the value of WorkloadPriorityClass low (10)" in body["message"]
        status, wl = await submit_as(hub, ALICE, workload_body(10, "low"))
        assert status == 201 and wl["spec"]["priority"] == 10

    async def test_a_job_takes_its_classs_value(self, hub: HubUnderTest) -> None:
        await with_priorities(hub)
        labelled = job()
        labelled["metadata"]["labels"]["multiq.dev/priority-class"] = "high"
        status, wl = await submit_as(hub, ALICE, labelled)
        assert status == 201 and wl["spec"]["priority"] == 1000

    async def test_a_class_the_tenant_may_not_use_is_refused_naming_the_label(
        self, hub: HubUnderTest
    ) -> None:
        await with_priorities(hub, usable=["low"])
        labelled = job()
        labelled["metadata"]["labels"]["multiq.dev/priority-class"] = "high"
        status, body = await submit_as(hub, ALICE, labelled)
        assert status == 403
        assert causes(body) == ["metadata.labels[multiq.dev/priority-class]"]
        assert "(they may use: low)" in body["message"]
        labelled["metadata"]["labels"]["multiq.dev/priority-class"] = "low"
        assert (await submit_as(hub, ALICE, labelled))[0] == 201

    async def test_an_admin_may_write_any_number(self, hub: HubUnderTest) -> None:
        await with_priorities(hub, usable=["low"])
        status, wl = await submit_as(hub, ADMIN, workload_body(2147483647))
        assert status == 201 and wl["spec"]["priority"] == 2147483647


# --- cluster sets ---------------------------------------------------------------------------


def east_only_queue() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterSet",
            "metadata": {"name": name},
            "spec": {"clusters": clusters},
        }
        for name, clusters in (("east-only", ["east"]), ("all", ["east", "west"]))
    ] + [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "GlobalQueue",
            "metadata": {"name": "vision"},
            "spec": {"clusterSet": "east-only", "tenants": ["vision"]},
        }
    ]


class TestClusterSets:
    async def test_a_set_within_the_queues_is_taken(self, hub: HubUnderTest) -> None:
        await hub.apply(*fleet_objects(), *east_only_queue())
        status, wl = await submit_as(hub, ALICE, job(), clusterSet="east-only")
        assert status == 201
        assert wl["metadata"]["annotations"]["multiq.dev/cluster-set"] == "east-only"

    @pytest.mark.parametrize("token", [ALICE, ADMIN], ids=["alice", "admin"])
    async def test_a_set_reaching_other_clusters_is_refused_naming_the_parameter(
        self, hub: HubUnderTest, token: str
    ) -> None:
        await hub.apply(*fleet_objects(), *east_only_queue())
        status, body = await submit_as(hub, token, job(), clusterSet="all")
        assert status == 403 and causes(body) == ["clusterSet"]
        assert (
            "reaches clusters west, outside what queue vision dispatches to (vision)"
            in (body["message"])
        )
        assert (await hub.hub.store.list("/workloads/")).items == ()

    async def test_a_submitted_workloads_own_annotation_is_held_to_the_same_rule(
        self, hub: HubUnderTest
    ) -> None:
        await hub.apply(*fleet_objects(), *east_only_queue())
        body = workload_body(None)
        body["metadata"]["annotations"] = {"multiq.dev/cluster-set": "all"}
        status, reply = await submit_as(hub, ALICE, body)
        assert status == 403
        assert causes(reply) == ["metadata.annotations[multiq.dev/cluster-set]"]


# --- status ---------------------------------------------------------------------------------


class TestStatus:
    async def test_status_is_ignored_on_create_and_kept_by_a_replace(
        self, hub: HubUnderTest
    ) -> None:
        await hub.apply(*fleet_objects())
        forged = workload_body(None)
        forged["status"] = {"clusterName": "east"}
        status, wl = await submit_as(hub, ADMIN, forged)
        assert status == 201 and "clusterName" not in (wl.get("status") or {})
        path = f"{API}/namespaces/{NS}/workloads/wl"
        sent: dict[str, Any] = {}

        def forge(wl: dict[str, Any]) -> None:
            sent["status"] = wl.get("status")
            wl["status"] = {"clusterName": "east"}
            wl["metadata"]["labels"] = {"team": "a"}

        status, after = await hub.edit(path, forge)
        assert status == 200, after
        assert after["metadata"]["labels"] == {"team": "a"}
        assert after.get("status") == sent["status"]

    async def test_only_an_admin_changes_the_status_and_only_it(self, hub: HubUnderTest) -> None:
        await hub.apply(*fleet_objects())
        path = f"{API}/memberclusters/east"
        _, current = await hub.call("GET", path)
        changed = copy.deepcopy(current)
        changed["status"] = {"connected": False, "agentVersion": "set-by-admin"}
        changed["spec"]["cordoned"] = True  # not a status field: ignored
        for token in (ALICE, VIEWER, AGENT_TOKENS["east"]):
            assert (await hub.call("PUT", f"{path}/status", token=token, body=changed))[0] == 403
        status, after = await hub.call("PUT", f"{path}/status", body=changed)
        assert status == 200, after
        assert after["status"]["agentVersion"] == "set-by-admin"
        assert after["spec"]["cordoned"] is False
        assert after["metadata"]["generation"] == current["metadata"]["generation"]
        stale = await hub.call("PUT", f"{path}/status", body=changed)
        assert stale[0] == 409  # compare-and-swap on the resourceVersion it was sent

    async def test_a_kind_without_a_status_has_no_status_route(self, hub: HubUnderTest) -> None:
        flavor = fleet_objects()[0]
        await hub.apply(flavor)
        status, body = await hub.call("PUT", f"{API}/resourceflavors/default/status", body=flavor)
        assert status == 404 and body["message"] == "resourceflavors have no status"


# --- stop and resume ------------------------------------------------------------------------


async def put_as(
    hub: HubUnderTest, token: str, path: str, change: Callable[[dict[str, Any]], None]
) -> tuple[int, Any]:
    """GET, change, PUT as `token` (`HubUnderTest.edit`)."""
    return await hub.edit(path, change, token=token)


class TestStopAndResume:
    PATH = f"{API}/namespaces/vision/workloads/job-train"

    async def test_a_tenants_user_stops_and_resumes_a_workload_of_their_namespace(
        self, hub: HubUnderTest
    ) -> None:
        await two_tenants(hub)
        status, body = await put_as(hub, ALICE, self.PATH, lambda w: w["spec"].update(active=False))
        assert status == 200, body
        assert body["spec"]["active"] is False
        status, body = await put_as(hub, ALICE, self.PATH, lambda w: w["spec"].update(active=True))
        assert status == 200, body
        assert body["spec"].get("active", True) is True

    async def test_a_tenants_user_changes_nothing_else_of_a_workload(
        self, hub: HubUnderTest
    ) -> None:
        await two_tenants(hub)
        _, before = await hub.call("GET", self.PATH)

        def raise_priority(wl: dict[str, Any]) -> None:
            wl["spec"]["active"] = False
            wl["spec"]["priority"] = 1_000_000

        status, body = await put_as(hub, ALICE, self.PATH, raise_priority)
        assert status == 403
        assert body["message"] == (
            "alice may only change spec.active of a workload (stop or resume it); any other "
            "change to it is an admin's"
        )
        status, _ = await put_as(
            hub, ALICE, self.PATH, lambda w: w["metadata"].update(labels={"team": "a"})
        )
        assert status == 403
        _, after = await hub.call("GET", self.PATH)
        assert after["spec"] == before["spec"]
        assert after["metadata"].get("labels") == before["metadata"].get("labels")

    @pytest.mark.parametrize("token", [BOB, VIEWER])
    async def test_nobody_else_stops_a_tenants_workload(
        self, hub: HubUnderTest, token: str
    ) -> None:
        await two_tenants(hub)
        status, body = await put_as(hub, token, self.PATH, lambda w: w["spec"].update(active=False))
        assert status == 403, body
        _, after = await hub.call("GET", self.PATH)
        assert after["spec"].get("active", True) is True


# --- agents ---------------------------------------------------------------------------------


async def test_an_agent_cannot_reject_for_another_cluster_a_workload_bound_there(
    hub: HubUnderTest,
) -> None:
    """Reports and log lines of a cluster that holds neither reservation nor binding are
    refused (test_reserve_bind); so is its rejection."""
    east, west = await two_clusters(hub)
    status, wl = await hub.call("POST", f"{API}/namespaces/vision/submissions", body=job())
    assert status == 201
    key = f"vision/{wl['metadata']['name']}"
    await west.expect(DispatchOffer)  # BestFit: west has the room, and is bound
    await west.send(report(key, 1, WorkloadPhase.ADMITTED))

    async def admitted() -> bool:
        _, body = await hub.call("GET", f"{API}/namespaces/vision/workloads/job-train")
        conditions = (body.get("status") or {}).get("conditions", [])
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)

    await eventually(admitted)
    _, before = await hub.call("GET", f"{API}/namespaces/vision/workloads/job-train")
    await east.send(
        OfferRejected(
            workload=key, generation=1, reason=RejectReason.INADMISSIBLE, message="not mine"
        )
    )
    await asyncio.sleep(0.3)  # the rejection is applied (or not) at once
    _, after = await hub.call("GET", f"{API}/namespaces/vision/workloads/job-train")
    assert after["status"] == before["status"]
    assert after["status"]["clusterName"] == "west"
    await east.close()
    await west.close()
