"""The hub's Slurm mode over its real REST routes, with scripted agents: sbatch gets numeric ids
(an array's last task keeps the array's), an array's `%` throttle bounds how many tasks are
offered at once, a dependency holds a job until it is satisfied and cancels it when it never
can be, a held job waits until released, scancel keeps the record for sacct, and the routes
say who may do what."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from api.v1alpha1.messages import Cancel, DispatchOffer, PodCounts, WorkloadPhase
from api.v1alpha1.workload import Admission
from hub.errors import InvalidObjectError
from hub.slurm import JOB_ID_KEY, WRITES_AT_ONCE, allocate_job_ids
from tests.hub.service.conftest import ALICE, MALLORY, HubUnderTest, ScriptedAgent
from tests.hub.service.test_dispatch_flow import eventually, report, two_clusters

SLURM = "/apis/slurm.multiq.dev/v1alpha1"


async def sbatch(
    hub: HubUnderTest, *argv: str, script: str | None = None, token: str = ALICE
) -> dict[str, Any]:
    body = {
        "argv": list(argv),
        "script": script,
        "scriptPath": "job.sh" if script else None,
        "environment": {"LANG": "C.UTF-8", "SBATCH_PARTITION": "vision", "API_TOKEN": "x"},
        "submitter": {"user": "alice", "uid": 1000, "gid": 1000, "host": "laptop"},
    }
    status, reply = await hub.call(
        "POST", f"{SLURM}/namespaces/vision/jobs", token=token, body=body
    )
    assert status == 201, reply
    return reply  # type: ignore[no-any-return]


async def rows(hub: HubUnderTest, **params: str) -> list[dict[str, Any]]:
    status, body = await hub.call(
        "GET", f"{SLURM}/namespaces/vision/jobs", token=ALICE, params=params
    )
    assert status == 200, body
    return body["items"]  # type: ignore[no-any-return]


async def by_id(hub: HubUnderTest) -> dict[str, dict[str, Any]]:
    return {r["jobId"]: r for r in await rows(hub, history="true")}


async def offers(agent: ScriptedAgent, count: int) -> list[DispatchOffer]:
    return [await agent.expect(DispatchOffer) for _ in range(count)]


async def run_to_end(agent: ScriptedAgent, offer: DispatchOffer, phase: WorkloadPhase) -> None:
    key = offer.workload.key()
    admission = Admission(cluster_queue="team-vision")
    await agent.send(report(key, offer.generation, WorkloadPhase.ADMITTED, admission=admission))
    await agent.send(report(key, offer.generation, phase, admission=admission))


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return bool(await value == expected)


async def _state(hub: HubUnderTest, job: str) -> str:
    return str((await by_id(hub))[job]["state"])


class TestJobIds:
    async def test_ids_count_up_and_an_arrays_last_task_keeps_the_arrays_id(
        self, hub: HubUnderTest
    ) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        first = await sbatch(hub, "--wrap", "true")
        array = await sbatch(hub, "--array=0-2", "--wrap", "true")
        after = await sbatch(hub, "--wrap", "true")
        assert (first["jobId"], array["jobId"], after["jobId"]) == (1, 2, 5)
        jobs = await by_id(hub)
        assert {k: v["id"] for k, v in jobs.items()} == {
            "1": 1,
            "2_0": 3,
            "2_1": 4,
            "2_2": 2,
            "5": 5,
        }
        assert array["workloads"] == [
            "vision/job-wrap-2-0",
            "vision/job-wrap-2-1",
            "vision/job-wrap-2-2",
        ]

    async def test_the_counter_is_one_compare_and_swap_so_racing_submissions_never_share_ids(
        self, hub: HubUnderTest
    ) -> None:
        import asyncio

        store = hub.hub.store
        firsts = await asyncio.gather(*(allocate_job_ids(store, 3) for _ in range(20)))
        blocks = [set(range(f, f + 3)) for f in firsts]
        assert len(set().union(*blocks)) == 60
        assert (await store.get(JOB_ID_KEY)).value == {"next": 61}


class TestHolds:
    async def test_an_arrays_throttle_bounds_the_tasks_offered_at_once(
        self, hub: HubUnderTest
    ) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "--array=0-4%2", "--wrap", "true")
        first = await offers(west, 2)
        jobs = await by_id(hub)
        assert [jobs[f"1_{i}"]["reason"] for i in (2, 3, 4)] == ["JobArrayTaskLimit"] * 3
        await run_to_end(west, first[0], WorkloadPhase.SUCCEEDED)
        third = await west.expect(DispatchOffer)
        assert third.workload.metadata.name == "job-wrap-1-2"  # tasks go in index order
        assert west.waiting(DispatchOffer) == []  # the throttle holds the rest back

    async def test_a_listing_by_job_and_state_shows_just_those_tasks(
        self, hub: HubUnderTest
    ) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "--array=0-2", "--wrap", "true")
        await sbatch(hub, "--wrap", "true")
        first = await west.expect(DispatchOffer)
        await run_to_end(west, first, WorkloadPhase.SUCCEEDED)

        async def listed(**params: str) -> list[str]:
            return [r["jobId"] for r in await rows(hub, history="true", **params)]

        async def first_ended() -> bool:
            return await listed(jobs="1", states="PENDING,RUNNING") == ["1_1", "1_2"]

        await eventually(first_ended)
        assert await listed(jobs="1") == ["1_0", "1_1", "1_2"]
        assert await listed(jobs="1,4", states="CD") == ["1_0"]
        assert await listed(jobs="1_2,4") == ["1_2", "4"]

    async def test_the_nodelist_names_the_nodes_the_pods_ran_on_after_they_are_gone(
        self, hub: HubUnderTest
    ) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "-N", "2", "--wrap", "true")
        offer = await west.expect(DispatchOffer)
        key, generation = offer.workload.key(), offer.generation
        admission = Admission(cluster_queue="team-vision")
        pods = PodCounts(running=2, nodes=["west-node-a", "west-node-b"])
        running = report(key, generation, WorkloadPhase.RUNNING, admission=admission, pods=pods)
        await west.send(running)

        async def node_list() -> str:
            return str((await by_id(hub))["1"]["nodeList"])

        await eventually(lambda: _is(node_list(), "west-node-a,west-node-b"))
        gone = report(key, generation, WorkloadPhase.SUCCEEDED, admission=admission)
        await west.send(gone)  # the pods are gone: the report names no node
        await eventually(lambda: _is(_state(hub, "1"), "COMPLETED"))
        assert await node_list() == "west-node-a,west-node-b"

    async def test_a_dependency_holds_a_job_until_it_is_satisfied(self, hub: HubUnderTest) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "-J", "first", "--wrap", "true")
        await sbatch(hub, "-J", "second", "--dependency=afterok:1", "--wrap", "true")
        offer = await west.expect(DispatchOffer)
        assert offer.workload.metadata.name == "job-first-1"
        assert (await by_id(hub))["2"]["reason"] == "Dependency"
        await run_to_end(west, offer, WorkloadPhase.SUCCEEDED)
        assert (await west.expect(DispatchOffer)).workload.metadata.name == "job-second-2"

    async def test_an_afterok_on_a_failed_job_cancels_with_dependency_never_satisfied(
        self, hub: HubUnderTest
    ) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "--wrap", "false")
        await sbatch(hub, "--dependency=afterok:1", "--wrap", "true")
        await sbatch(hub, "--dependency=afternotok:1", "--wrap", "true")
        await run_to_end(west, await west.expect(DispatchOffer), WorkloadPhase.FAILED)

        async def cancelled() -> dict[str, Any] | None:
            job = (await by_id(hub))["2"]
            return job if job["state"] == "CANCELLED" else None

        job = await eventually(cancelled)
        assert job["reason"] == "DependencyNeverSatisfied"
        assert (await west.expect(DispatchOffer)).workload.metadata.name == "job-wrap-3"

    async def test_a_held_job_waits_until_released(self, hub: HubUnderTest) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "-H", "--wrap", "true")
        assert (await by_id(hub))["1"]["reason"] == "JobHeldUser"
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs/release", token=ALICE, body={"jobs": "1"}
        )
        assert (status, reply) == (200, {"jobs": ["1"]})
        assert (await west.expect(DispatchOffer)).workload.metadata.name == "job-wrap-1"

    async def test_a_begin_time_is_read_against_the_hubs_clock(self, hub: HubUnderTest) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "--begin=now+1hour", "--wrap", "true")
        job = (await by_id(hub))["1"]
        assert job["reason"] == "BeginTime"
        assert job["beginTime"] > job["submitTime"]


class TestCancel:
    async def test_scancel_keeps_the_record_and_tells_the_bound_cluster(
        self, hub: HubUnderTest
    ) -> None:
        _, west = await two_clusters(hub, east_cpu="0", west_cpu="8")
        await sbatch(hub, "--wrap", "sleep 100")
        offer = await west.expect(DispatchOffer)
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs/cancel", token=ALICE, body={"jobs": "1"}
        )
        assert (status, reply) == (200, {"jobs": ["1"]})
        cancel = await west.expect(Cancel)
        assert (cancel.workload, cancel.generation) == (offer.workload.key(), offer.generation)
        assert (await by_id(hub))["1"]["state"] == "CANCELLED"

    async def test_a_user_cancels_only_their_own_jobs(self, hub: HubUnderTest) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        await sbatch(hub, "--wrap", "true")
        status, _ = await hub.call(
            "POST",
            f"{SLURM}/namespaces/vision/jobs/cancel",
            token=ALICE,
            body={"users": "bob"},
        )
        assert status == 403  # forbidden, not malformed: another user's jobs
        status, _ = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs/cancel", token=MALLORY, body={"jobs": "1"}
        )
        assert status == 403


class TestSubmission:
    async def test_the_partition_comes_from_sbatch_variables_and_secrets_never_travel(
        self, hub: HubUnderTest
    ) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        reply = await sbatch(hub, "--wrap", "true")
        status, wl = await hub.call(
            "GET",
            f"/apis/multiq.dev/v1alpha1/namespaces/{reply['workloads'][0]}".replace(
                "namespaces/vision/", "namespaces/vision/workloads/"
            ),
        )
        assert status == 200, wl
        container = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SLURM_JOB_PARTITION"] == "vision" and env["LANG"] == "C.UTF-8"
        assert "API_TOKEN" not in env and "SBATCH_PARTITION" not in env
        assert env["SLURM_JOB_USER"] == "alice"

    async def test_a_mistake_is_one_clear_error_naming_the_option(self, hub: HubUnderTest) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        body = {"argv": ["--exclusive", "--wrap", "true"], "submitter": {}}
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs", token=ALICE, body=body
        )
        assert status == 422 and "--exclusive" in reply["message"]
        body = {"argv": ["-p", "nope", "--wrap", "true"], "submitter": {}}
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs", token=ALICE, body=body
        )
        assert status == 422 and "nope" in reply["message"]
        body = {
            "argv": ["-d", "afterok:999", "--wrap", "true"],
            "environment": {"SBATCH_PARTITION": "vision"},
        }
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs", token=ALICE, body=body
        )
        assert status == 422 and "dependency" in reply["message"]
        # A profile that does not exist is named (job templates: hub.templates).
        body = {"argv": ["--profile", "gpu", "--wrap", "true"], "submitter": {}}
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs", token=ALICE, body=body
        )
        assert status == 404 and "gpu" in reply["message"], reply


class TestLargeArrays:
    async def test_an_arrays_first_tasks_are_stored_before_its_last_are_built(
        self, hub: HubUnderTest, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        service = hub.hub.slurm
        events: list[str] = []
        build, store = service._workload, service._store

        def building(*args: Any) -> Any:
            events.append(f"build {args[3].array_task_id}")
            return build(*args)

        async def storing(item: Any) -> str:
            key = await store(item)
            events.append("stored")
            return key

        monkeypatch.setattr(service, "_workload", building)
        monkeypatch.setattr(service, "_store", storing)
        reply = await sbatch(hub, f"--array=0-{2 * WRITES_AT_ONCE - 1}", "--wrap", "true")
        assert len(reply["workloads"]) == 2 * WRITES_AT_ONCE
        # The first and the last are built first (they answer for all), then a chunk at a
        # time, each stored before the next is built: dispatch need not wait for the last.
        assert events[:2] == ["build 0", f"build {2 * WRITES_AT_ONCE - 1}"]
        assert events.index("stored") < events.index(f"build {WRITES_AT_ONCE}")
        assert events.count("stored") == 2 * WRITES_AT_ONCE

    async def test_a_task_refused_after_others_were_stored_leaves_them_cancelled(
        self, hub: HubUnderTest, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await two_clusters(hub, east_cpu="0", west_cpu="0")
        service = hub.hub.slurm
        build = service._workload

        def refusing(*args: Any) -> Any:
            if args[3].array_task_id == WRITES_AT_ONCE + 3:
                raise InvalidObjectError("task refused (a test)")
            return build(*args)

        monkeypatch.setattr(service, "_workload", refusing)
        body = {
            "argv": [f"--array=0-{2 * WRITES_AT_ONCE - 1}", "--wrap", "true"],
            "environment": {"SBATCH_PARTITION": "vision"},
        }
        status, reply = await hub.call(
            "POST", f"{SLURM}/namespaces/vision/jobs", token=ALICE, body=body
        )
        assert status == 422 and "task refused" in reply["message"]
        # The first chunk was stored before the refusal: none of it may run.
        states = {r["state"] for r in await rows(hub, history="true")}
        assert states == {"CANCELLED"}
        assert len(await rows(hub, history="true")) == WRITES_AT_ONCE
