"""Fuzz the hub's REST API and print JSON: requests, seconds, statuses, 5xx count (must be 0),
and anything invalid that ended up in the store (must be none).

    .venv/bin/python -m bench.fuzz_api                          # ~10 minutes
    .venv/bin/python -m bench.fuzz_api --examples 50 --mutations 300   # a quick look

Two fuzzers against one real hub (the aiohttp app on a loopback socket, SQLite store, a small
fleet of queues and tenants already applied, run in a thread of its own):

- schemathesis (its CLI, every operation of the hub's /openapi.json, `--checks
  not_a_server_error,status_code_conformance,content_type_conformance`; the other checks
  judge REST conventions this API does not claim, such as a 2xx for every schema-valid body
  the semantic rules refuse; its watches end after a second, bench/schemathesis_hooks.py);
- a Hypothesis fuzzer that mutates valid objects (a Job, a Workload, queues, flavors, a
  tenant) — a value replaced by something hostile (huge or non-finite numbers, control
  characters, deep nesting, wrong types, absurd quantities), a key dropped or added — and
  sends them as submissions, creates and replaces, in JSON or YAML.

Statuses are counted by the hub itself (every response it prepares), so both fuzzers' requests
are in one tally. After the run every stored object is decoded again with the hub's own rules.
tests/hub/service/test_fuzzing.py runs the same harness bounded to CI's budget.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.codec import decode
from api.errors import ApiError
from api.kinds import REGISTRY
from api.tokens import hash_token
from hub.app import build_app
from hub.settings import HubSettings

ADMIN = "admin-token"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
"""Loaded by schemathesis' CLI (not imported here: its hooks are global to a process)."""
ALICE = "alice-token"  # tenant "vision", namespace vision
API = "/apis/multiq.dev/v1alpha1"
SOURCE_PREFIX = "/workloadsources/"


def _pod_template(cpu: object = "1") -> dict[str, Any]:
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sleep", "1"],
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
        }
    }


FLEET: list[tuple[str, dict[str, Any]]] = [
    (
        f"{API}/tenants",
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": "vision"},
            "spec": {"namespaces": ["vision"], "groups": ["vision-researchers"]},
        },
    ),
    (
        f"{API}/resourceflavors",
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default"},
        },
    ),
    (
        f"{API}/clusterqueues",
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-vision"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "8"},
                                    {"name": "memory", "nominalQuota": "32Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    ),
    (
        f"{API}/namespaces/vision/localqueues",
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "vision", "namespace": "vision"},
            "spec": {"clusterQueue": "team-vision"},
        },
    ),
]

SEEDS: dict[str, dict[str, Any]] = {
    "job": {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "labels": {"multiq.dev/queue-name": "vision"}},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "template": _pod_template(),
        },
    },
    "workload": {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "wl"},
        "spec": {
            "queueName": "vision",
            "podSets": [{"name": "main", "count": 1, "template": _pod_template("500m")}],
        },
    },
    **{doc["kind"].lower(): doc for _, doc in FLEET},
}


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


_DEEP = _nested(150)  # past api.limits' depth, short of the parser's stack

# What replaces a value: what the issue found and what a fuzzer tries first.
HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            0,
            -1,
            2**31,
            2**63,
            -(2**63) - 1,
            10**30,
            1e9,
            1e308,
            -0.0,
            "",
            "1e30",
            "9e18Ei",
            "-1",
            "x" * 300,
            "a\x00b",
            "tr\nain",
            "train\n",
            "é",
            "../..",
            "²",
            [],
            {},
            _DEEP,
            {"status": {"phase": "Admitted"}},
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=80),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=6), children, max_size=3)
        ),
        max_leaves=12,
    ),
)


def _paths(value: object, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutate(doc: dict[str, Any], path: tuple[str | int, ...], how: str, new: object) -> Any:
    """`doc` with the value at `path` replaced, removed, or given an extra key."""
    if not path:
        return new if how == "replace" else doc
    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "replace":
        parent[last] = new
    elif how == "remove":
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last]["unexpected" if not isinstance(new, str) else new or "x"] = new
    return doc


@st.composite
def mutated_requests(draw: st.DrawFn) -> tuple[str, str, str, bytes, str]:
    """(token, method, path, body, content type) of a write made from a mutated valid object."""
    seed_name = draw(st.sampled_from(sorted(SEEDS)))
    doc = copy.deepcopy(SEEDS[seed_name])
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        if how == "remove" and not path:
            continue
        # A copy: the sampled values are shared, and later mutations may change them.
        doc = _mutate(doc, path, how, copy.deepcopy(draw(HOSTILE)))
    if seed_name in ("job", "workload"):
        token, method, url = ALICE, "POST", f"{API}/namespaces/vision/submissions"
    else:
        route = next(r for r, d in FLEET if d["kind"].lower() == seed_name)
        method = draw(st.sampled_from(["POST", "PUT"]))
        token, url = ADMIN, route
        if method == "PUT":
            name = SEEDS[seed_name]["metadata"]["name"]
            url = f"{route}/{draw(st.sampled_from([name, 'other', 'Bad%01Name']))}"
    if draw(st.booleans()):
        return token, method, url, json.dumps(doc).encode(), "application/json"
    try:
        text = yaml.safe_dump(doc).encode()
    except yaml.YAMLError:
        text = json.dumps(doc).encode()
    return token, method, url, text, "application/yaml"


@dataclass
class FuzzedHub:
    """A real hub on a loopback port, run by its own event loop in a thread."""

    host: str
    port: int
    tmp: Path
    statuses: Counter[int] = field(default_factory=Counter)
    _loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = ADMIN,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def run(self, coroutine: Any) -> Any:
        assert self._loop is not None
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=120)

    def invalid_stored(self) -> list[str]:
        """Every stored object that the hub's own rules refuse, as `key: error`."""
        from hub.app import HUB

        async def collect() -> list[str]:
            store = self._app[HUB].store
            listing = await store.list("/")
            problems = []
            for item in listing.items:
                if item.key.startswith("/leader") or "/" not in item.key[1:]:
                    continue
                value = dict(item.value)
                if not isinstance(value.get("kind"), str):
                    continue
                try:
                    decode(copy.deepcopy(value), REGISTRY)
                except ApiError as exc:
                    problems.append(f"{item.key}: {exc}")
            return problems

        result: list[str] = self.run(collect())
        return result

    _app: web.Application = field(init=False)


def _users(tmp: Path) -> Path:
    users = {
        "users": [
            {"name": "admin", "tokenHash": hash_token(ADMIN), "groups": ["multiq:admins"]},
            {"name": "alice", "tokenHash": hash_token(ALICE), "groups": ["vision-researchers"]},
        ]
    }
    path = tmp / "users.yaml"
    path.write_text(yaml.safe_dump(users))
    (tmp / "secrets").mkdir()
    return path


@contextmanager
def fuzzed_hub() -> Iterator[FuzzedHub]:
    """A hub with the fleet applied; stopped (and its data removed) on exit."""
    with tempfile.TemporaryDirectory(prefix="multiq-fuzz-") as directory:
        tmp = Path(directory)
        ready: Future[FuzzedHub] = Future()
        stopping: list[asyncio.Event] = []

        async def serve() -> None:
            settings_ = HubSettings(
                store=f"sqlite:{tmp / 'hub.db'}",
                users_file=_users(tmp),
                secrets_dir=tmp / "secrets",
            )
            app = await build_app(settings_)
            hub = FuzzedHub("127.0.0.1", 0, tmp, _loop=asyncio.get_running_loop())
            hub._app = app

            async def count(_: web.Request, response: web.StreamResponse) -> None:
                hub.statuses[response.status] += 1

            app.on_response_prepare.append(count)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            server = site._server
            assert server is not None and hasattr(server, "sockets")
            hub.port = server.sockets[0].getsockname()[1]
            stopping.append(asyncio.Event())
            ready.set_result(hub)
            await stopping[0].wait()
            await runner.cleanup()

        thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        thread.start()
        hub = ready.result(timeout=60)
        try:
            for route, doc in FLEET:
                status, reply = hub.request("POST", route, body=json.dumps(doc).encode())
                assert status == 201, reply
            hub.statuses.clear()
            yield hub
        finally:
            assert hub._loop is not None
            hub._loop.call_soon_threadsafe(stopping[0].set)
            thread.join(timeout=30)


def run_schemathesis(
    hub: FuzzedHub,
    *,
    examples: int,
    seconds: float,
    report: Path,
    phases: str = "examples,coverage,fuzzing,stateful",
) -> int:
    """Run schemathesis' CLI against the hub as the admin; its exit code (0: no failure)."""
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{hub.url}/openapi.json",
        "--checks",
        "not_a_server_error,status_code_conformance,content_type_conformance",
        "--max-examples",
        str(examples),
        "--max-time",
        str(max(1, round(seconds))),
        "--header",
        f"Authorization: Bearer {ADMIN}",
        "--workers",
        "1",
        "--phases",
        phases,
        # A watch (?watch=true) is asked to end after a second (HOOKS): read it to its end.
        "--request-timeout",
        "5",
        "--seed",
        "20",
        "--exclude-path-regex",
        "^/agent/",  # WebSocket lanes: a GET without an upgrade is all schemathesis can send
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
        "--no-color",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, check=False, cwd=report.parent
    )  # (cwd: schemathesis leaves a .schemathesis folder there)
    report.with_suffix(".log").write_text(done.stdout + done.stderr)
    return done.returncode


def hypothesis_fuzzer(hub: FuzzedHub, examples: int) -> Callable[[], None]:
    """The mutation fuzzer as a Hypothesis test over `hub`; it fails on any 5xx."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(mutated_requests())
    def fuzz(request: tuple[str, str, str, bytes, str]) -> None:
        token, method, path, body, content_type = request
        status, reply = hub.request(method, path, token=token, body=body, content_type=content_type)
        assert status < 500, (status, method, path, body[:300], reply[:300])

    return fuzz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300, help="schemathesis, per operation")
    parser.add_argument("--seconds", type=float, default=420, help="schemathesis' time budget")
    parser.add_argument("--mutations", type=int, default=3000, help="Hypothesis examples")
    args = parser.parse_args()
    with fuzzed_hub() as hub:
        started = time.monotonic()
        schemathesis_exit = run_schemathesis(
            hub, examples=args.examples, seconds=args.seconds, report=hub.tmp / "junit.xml"
        )
        schemathesis_log = (hub.tmp / "junit.log").read_text()
        schemathesis_statuses = sum(hub.statuses.values())
        fuzz_started = time.monotonic()
        failure = ""
        try:
            hypothesis_fuzzer(hub, args.mutations)()
        except AssertionError as exc:
            failure = str(exc)[:2000]
        seconds = time.monotonic() - started
        statuses = dict(sorted(hub.statuses.items()))
        result = {
            "requests": sum(statuses.values()),
            "seconds": round(seconds, 1),
            "statuses": {str(code): count for code, count in statuses.items()},
            "server_errors": sum(n for code, n in statuses.items() if code >= 500),
            "schemathesis": {
                "requests": schemathesis_statuses,
                "seconds": round(fuzz_started - started, 1),
                "exit_code": schemathesis_exit,
                "summary": schemathesis_log.strip().splitlines()[-1:] if schemathesis_log else [],
            },
            "hypothesis": {
                "requests": sum(statuses.values()) - schemathesis_statuses,
                "seconds": round(time.monotonic() - fuzz_started, 1),
                "failure": failure,
            },
            "invalid_stored": hub.invalid_stored(),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
