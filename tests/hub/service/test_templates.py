"""A profile's expansion over the hub's real REST route (POST …/applicationprofiles/{name}/
instantiate) and through qctl: a dry run answers with the expanded object and stores nothing,
and qctl's `create --dry-run -o json` prints that answer byte for byte; a submission makes the
workload `qctl submit` would; `qctl create slurm` runs the profile's Slurm mode; every mistake
is a 4xx naming what is wrong, and generated bodies never get a 5xx."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.documents import load_documents
from bench.fuzz_api import fuzzed_hub
from tests.hub.service.conftest import ADMIN, ALICE, BOB, HubUnderTest, fleet_objects

API = "/apis/multiq.dev/v1alpha1"
ROOT = Path(__file__).resolve().parents[3]
INSTANTIATE = f"{API}/namespaces/vision/applicationprofiles/research/instantiate"
PLURALS = {
    "ApplicationProfile": "applicationprofiles",
    "JobTemplate": "jobtemplates",
    "VolumeBundle": "volumebundles",
}


def example_objects(namespace: str = "vision", queue: str = "vision") -> list[dict[str, Any]]:
    """examples/templates.yaml, moved to `namespace` and its queue."""
    docs = [d.body for d in load_documents((ROOT / "examples" / "templates.yaml").read_text())]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] == "JobTemplate":
            doc["template"]["metadata"]["labels"]["multiq.dev/queue-name"] = queue
    return docs


async def with_templates(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    for doc in example_objects():
        path = f"{API}/namespaces/vision/{PLURALS[doc['kind']]}"
        status, reply = await hub.call("POST", path, body=doc)
        assert status == 201, reply


async def instantiate(
    hub: HubUnderTest,
    body: dict[str, Any],
    *,
    dry_run: bool = False,
    token: str = ALICE,
    profile: str = "research",
) -> tuple[int, Any]:
    path = INSTANTIATE.replace("/research/", f"/{profile}/")
    params = {"dryRun": "All"} if dry_run else None
    return await hub.call("POST", path, token=token, body=body, params=params)


async def qctl(hub: HubUnderTest, *argv: str, token: str = ALICE) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTIQ_")}
    env["MULTIQ_CONFIG"] = "/nonexistent/multiq-config.yaml"
    connection = ["--server", hub.url, "--token", token, "--namespace", "vision"]
    at = argv.index("--") if "--" in argv else len(argv)  # (after --, words are sbatch's)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qctl.main", *argv[:at], *connection, *argv[at:],
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


TRAIN = {
    "mode": "Job",
    "name": "train",
    "cmd": ["python3", "train.py"],
    "parallelism": 2,
    "completions": 2,
}


class TestADryRun:
    async def test_answers_the_expanded_job_and_stores_nothing(self, hub: HubUnderTest) -> None:
        await with_templates(hub)
        status, job = await instantiate(hub, TRAIN, dry_run=True)
        assert status == 200, job
        assert (job["kind"], job["metadata"]["name"]) == ("Job", "train")
        assert job["metadata"]["labels"] == {
            "multiq.dev/queue-name": "vision",
            "multiq.dev/profile": "research",
            "multiq.dev/mode": "Job",
        }
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert (container["image"], container["command"]) == (
            "python:3.11-slim",
            ["python3", "train.py"],
        )
        assert {"name": "USER_ID", "value": "alice"} in container["env"]
        assert job["spec"]["parallelism"] == 2
        status, listing = await hub.call("GET", f"{API}/namespaces/vision/workloads")
        assert (status, listing["items"]) == (200, [])

    async def test_qctl_create_dry_run_prints_the_hubs_answer_byte_for_byte(
        self, hub: HubUnderTest
    ) -> None:
        await with_templates(hub)
        status, job = await instantiate(hub, TRAIN, dry_run=True)
        assert status == 200
        code, out, err = await qctl(
            hub, "create", "job", "--profile", "research", "--name", "train",
            "--cmd", "python3 train.py", "--parallelism", "2", "--completions", "2",
            "--dry-run", "-o", "json",
        )  # fmt: skip
        assert code == 0, err
        assert out == json.dumps(job, indent=2) + "\n"
        code, out, err = await qctl(
            hub, "create", "job", "--profile", "research", "--name", "train",
            "--cmd", "python3 train.py", "--dry-run",
        )  # fmt: skip
        assert (code, out) == (0, "job/train created (dry run)\n"), err

    async def test_runs_the_submissions_checks(self, hub: HubUnderTest) -> None:
        await with_templates(hub)
        status, reply = await instantiate(hub, {**TRAIN, "localQueue": "nowhere"}, dry_run=True)
        assert status == 422
        assert reply["details"]["causes"][0]["field"] == "spec.queueName"
        assert "unknown queue 'nowhere'" in reply["message"]


class TestASubmission:
    async def test_makes_the_workload_qctl_submit_would(self, hub: HubUnderTest) -> None:
        await with_templates(hub)
        status, wl = await instantiate(hub, {**TRAIN, "requests": {"cpu": "2"}})
        assert status == 201, wl
        assert (wl["kind"], wl["metadata"]["name"]) == ("Workload", "job-train")
        assert wl["spec"]["queueName"] == "vision"
        (pod_set,) = wl["spec"]["podSets"]
        assert pod_set["count"] == 2
        requests = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert requests == {"cpu": "2", "memory": "1Gi"}
        status, again = await instantiate(hub, TRAIN)
        assert status == 409, again

    async def test_a_generated_name_is_the_profile_and_mode_and_five_characters(
        self, hub: HubUnderTest
    ) -> None:
        await with_templates(hub)
        code, out, err = await qctl(
            hub, "create", "jobset", "--profile", "research", "--replicas", "2"
        )
        assert code == 0, err
        name = out.removeprefix("workload/").removesuffix(" created\n")
        assert name.startswith("jobset-research-jobset-") and len(name) == len(
            "jobset-research-jobset-abcde"
        ), out
        status, wl = await hub.call("GET", f"{API}/namespaces/vision/workloads/{name}")
        assert status == 200, wl
        assert wl["spec"]["podSets"][0]["count"] == 2

    async def test_qctl_create_slurm_runs_the_profiles_slurm_mode(
        self, hub: HubUnderTest, tmp_path: Path
    ) -> None:
        await with_templates(hub)
        script = tmp_path / "hello.sh"
        script.write_text("#!/bin/sh\necho hello from $SCRATCH_DIR\n")
        code, out, err = await qctl(
            hub, "create", "slurm", "--profile", "research", "--", "-J", "hello", str(script)
        )
        assert code == 0, err
        assert out.startswith("Submitted batch job ")
        job_id = int(out.split()[-1])
        name = f"job-hello-{job_id}"
        status, wl = await hub.call("GET", f"{API}/namespaces/vision/workloads/{name}")
        assert status == 200, wl
        assert wl["spec"]["queueName"] == "vision"  # the template's queue: no -p was given
        pod = wl["spec"]["podSets"][0]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == "python:3.11-slim"  # the template's, not the default
        assert {"name": "scratch", "mountPath": "/scratch", "readOnly": False} in container[
            "volumeMounts"
        ]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SCRATCH_DIR"] == "/scratch" and env["SLURM_JOB_ID"] == str(job_id)
        assert pod["volumes"] == [{"name": "scratch", "emptyDir": {}}]

    async def test_sbatch_with_a_profile_that_does_not_exist_names_it(
        self, hub: HubUnderTest
    ) -> None:
        await with_templates(hub)
        code, _, err = await qctl(hub, "sbatch", "--profile", "nope", "--wrap", "true")
        assert code != 0
        assert 'applicationprofiles "nope" not found in namespace vision' in err


class TestErrors:
    @pytest.mark.parametrize(
        ("profile", "body", "status", "says"),
        [
            ("nope", TRAIN, 404, 'applicationprofiles "nope" not found in namespace vision'),
            (
                "research",
                {"mode": "Slurm"},
                422,
                "the Slurm mode takes a batch script",
            ),
            (
                "research",
                {**TRAIN, "replicas": 2},
                422,
                "replicas: the Job mode does not take --replicas",
            ),
            (
                "research",
                {"mode": "Job"},
                422,
                "cmd: the profile's Job mode requires --cmd",
            ),
            ("research", {**TRAIN, "nodes": 2}, 422, "nodes: Unknown field"),
            ("research", {"mode": "Ray"}, 422, 'mode: Unsupported value: "Ray"'),
            ("research", {**TRAIN, "parallelism": -1}, 422, "parallelism: Invalid value: -1"),
        ],
        ids=[
            "unknown profile",
            "slurm without a script",
            "a flag the mode does not take",
            "a required flag missing",
            "a field no mode has",
            "no such mode",
            "a negative count",
        ],
    )
    async def test_each_mistake_is_a_4xx_naming_it(
        self, hub: HubUnderTest, profile: str, body: dict[str, Any], status: int, says: str
    ) -> None:
        await with_templates(hub)
        for dry_run in (True, False):
            got, reply = await instantiate(hub, body, dry_run=dry_run, profile=profile)
            assert got == status, reply
            assert says in reply["message"], reply["message"]

    async def test_a_mode_the_profile_does_not_offer_names_those_it_does(
        self, hub: HubUnderTest
    ) -> None:
        await hub.apply(*fleet_objects())
        docs = example_objects()
        docs[0]["spec"]["supportedModes"] = [{"name": "Job", "template": "research-job"}]
        for doc in docs:
            status, reply = await hub.call(
                "POST", f"{API}/namespaces/vision/{PLURALS[doc['kind']]}", body=doc
            )
            assert status == 201, reply
        status, reply = await instantiate(hub, {"mode": "JobSet"})
        assert status == 422
        assert reply["message"] == (
            "ApplicationProfile research does not offer the JobSet mode (it offers: Job)"
        )

    async def test_a_template_or_bundle_the_profile_names_must_exist(
        self, hub: HubUnderTest
    ) -> None:
        await hub.apply(*fleet_objects())
        profile = example_objects()[0]
        status, reply = await hub.call(
            "POST", f"{API}/namespaces/vision/applicationprofiles", body=profile
        )
        assert status == 201, reply
        status, reply = await instantiate(hub, TRAIN)
        assert status == 404
        assert reply["message"].startswith('jobtemplates "research-job" not found')

    @pytest.mark.parametrize(
        ("kind", "change", "field"),
        [
            (
                "JobTemplate",
                lambda d: d["template"]["spec"]["template"]["spec"].update(containers=[]),
                "template.spec.template.spec.containers",
            ),
            (
                "VolumeBundle",
                lambda d: d["spec"]["containerVolumeMounts"][0].update(name="elsewhere"),
                "spec.containerVolumeMounts[0].name",
            ),
        ],
        ids=["a template without containers", "a mount of a volume not in the bundle"],
    )
    async def test_a_bad_template_is_refused_when_applied(
        self, hub: HubUnderTest, kind: str, change: Any, field: str
    ) -> None:
        (doc,) = [d for d in example_objects() if d["kind"] == kind]
        change(doc)
        status, reply = await hub.call("POST", f"{API}/namespaces/vision/{PLURALS[kind]}", body=doc)
        assert status == 422, reply
        assert [c["field"] for c in reply["details"]["causes"]] == [field]

    async def test_only_who_may_submit_in_the_namespace_may_ask(self, hub: HubUnderTest) -> None:
        await with_templates(hub)
        status, reply = await instantiate(hub, TRAIN, token=BOB, dry_run=True)
        assert status == 403, reply
        status, reply = await instantiate(hub, TRAIN, token=ADMIN, dry_run=True)
        assert status == 200, reply

    async def test_dry_run_has_one_value(self, hub: HubUnderTest) -> None:
        await with_templates(hub)
        status, reply = await hub.call(
            "POST", INSTANTIATE, token=ALICE, body=TRAIN, params={"dryRun": "Some"}
        )
        assert status == 400
        assert reply["message"] == "dryRun: the only value is All"


# --- generated bodies -------------------------------------------------------------------------

_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
)
_FIELDS = (
    "mode",
    "name",
    "cmd",
    "parallelism",
    "completions",
    "replicas",
    "requests",
    "localQueue",
    "priority",
    "time",
    "podTemplateLabels",
    "podTemplateAnnotations",
    "apiVersion",
    "kind",
)


@st.composite
def request_bodies(draw: st.DrawFn) -> tuple[bytes, bool]:
    body: dict[str, Any] = {"mode": draw(st.sampled_from(["Job", "JobSet", "Slurm", "x"]))}
    for name in draw(st.lists(st.sampled_from(_FIELDS), max_size=5, unique=True)):
        body[name] = draw(_ANY)
    if draw(st.booleans()):
        body["cmd"] = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3))
    raw = json.dumps(body).encode()
    if draw(st.integers(0, 9)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]  # cut short
    return raw, draw(st.booleans())


@pytest.mark.slow
def test_generated_bodies_get_no_server_error() -> None:
    with fuzzed_hub() as hub:
        for doc in example_objects():
            path = f"{API}/namespaces/vision/{PLURALS[doc['kind']]}"
            status, reply = hub.request("POST", path, body=json.dumps(doc).encode())
            assert status == 201, reply

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(request_bodies())
        def post(request: tuple[bytes, bool]) -> None:
            body, dry_run = request
            path = INSTANTIATE + ("?dryRun=All" if dry_run else "")
            status, reply = hub.request("POST", path, token=ALICE, body=body)
            assert status in (200, 201, 400, 404, 409, 422), (status, body, reply[:300])

        post()
        assert {code for code in hub.statuses if code >= 500} == set()
        assert hub.invalid_stored() == []
