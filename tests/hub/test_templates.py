"""A profile's expansion (hub.templates), pure: each flag of a JobRequest and what it changes in
the Job or JobSet, what the bundles add, the Slurm mode's dressing of a task's Job, and every
error — as tables, with the objects built as an admin would apply them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.errors import FieldError
from api.meta import Object
from api.slurm.environment import BatchContext
from api.slurm.ids import TaskIds
from api.slurm.options import parse_sbatch
from api.slurm.work import build_job
from api.v1alpha1.templates import ApplicationProfile, JobRequest, JobTemplate, VolumeBundle
from hub.errors import InvalidObjectError, NotFoundError
from hub.templates import (
    JobOverrides,
    Resolved,
    SlurmTask,
    expand,
    generated_name,
    resolve,
    template_queue,
)

NS = "vision"


def profile(
    modes: list[dict[str, Any]] | None = None, bundles: tuple[str, ...] = ("data",)
) -> ApplicationProfile:
    return ApplicationProfile.model_validate(
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ApplicationProfile",
            "metadata": {"name": "research", "namespace": NS},
            "spec": {
                "supportedModes": modes
                or [
                    {"name": "Job", "template": "trainer", "requiredFlags": ["cmd"]},
                    {"name": "JobSet", "template": "trainer"},
                    {"name": "Slurm", "template": "trainer", "requiredFlags": ["partition"]},
                ],
                "volumeBundles": list(bundles),
            },
        }
    )


def template(pod_spec: dict[str, Any] | None = None) -> JobTemplate:
    return JobTemplate.model_validate(
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "JobTemplate",
            "metadata": {"name": "trainer", "namespace": NS},
            "template": {
                "metadata": {
                    "labels": {"multiq.dev/queue-name": "vision", "team": "cv"},
                    "annotations": {"owner": "platform"},
                },
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "ttlSecondsAfterFinished": 600,
                    "template": {
                        "spec": pod_spec
                        or {
                            "restartPolicy": "Never",
                            "nodeSelector": {"gpu": "a100"},
                            "initContainers": [{"name": "fetch", "image": "busybox"}],
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "pytorch:24",
                                    "args": ["--default"],
                                    "env": [{"name": "MODEL", "value": "resnet"}],
                                    "resources": {
                                        "requests": {"cpu": "4", "memory": "8Gi"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                },
                                {"name": "sidecar", "image": "logger"},
                            ],
                        }
                    },
                },
            },
        }
    )


def bundle(name: str = "data", mount_path: str = "/data", volume: str = "datasets") -> VolumeBundle:
    return VolumeBundle.model_validate(
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "VolumeBundle",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "volumes": [{"name": volume, "persistentVolumeClaim": {"claimName": "imagenet"}}],
                "containerVolumeMounts": [{"name": volume, "mountPath": mount_path}],
                "envVars": [{"name": "DATA_DIR", "value": mount_path}],
            },
        }
    )


def job_of(mode: str = "Job", **request: Any) -> dict[str, Any]:
    overrides = JobOverrides(JobRequest.model_validate({"mode": mode, **request}), "alice", "x1y2z")
    return expand(profile(), template(), [bundle()], mode, overrides)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    if obj["kind"] == "JobSet":
        spec = spec["replicatedJobs"][0]["template"]["spec"]
    return spec["template"]["spec"]  # type: ignore[no-any-return]


def first_container(obj: dict[str, Any]) -> dict[str, Any]:
    return pod_spec(obj)["containers"][0]  # type: ignore[no-any-return]


def invalid(error: pytest.ExceptionInfo[InvalidObjectError]) -> list[str]:
    return [str(c) for c in error.value.causes]


class TestTheJobMode:
    def test_without_flags_beyond_the_required_the_template_is_the_job(self) -> None:
        job = job_of(cmd=["python", "train.py"])
        assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
        assert job["metadata"] == {
            "name": "research-job-x1y2z",
            "namespace": NS,
            "labels": {
                "multiq.dev/queue-name": "vision",
                "team": "cv",
                "multiq.dev/profile": "research",
                "multiq.dev/mode": "Job",
            },
            "annotations": {"owner": "platform"},
        }
        spec = job["spec"]
        assert (spec["parallelism"], spec["completions"], spec["ttlSecondsAfterFinished"]) == (
            1,
            1,
            600,
        )
        assert pod_spec(job)["nodeSelector"] == {"gpu": "a100"}
        assert first_container(job)["image"] == "pytorch:24"

    @pytest.mark.parametrize(
        ("request_fields", "where", "expected"),
        [
            pytest.param(
                {"cmd": ["python", "train.py", "--epochs=3"]},
                lambda j: (first_container(j)["command"], first_container(j).get("args")),
                (["python", "train.py", "--epochs=3"], None),
                id="cmd replaces the first container's command and drops its args",
            ),
            pytest.param(
                {"parallelism": 4},
                lambda j: j["spec"]["parallelism"],
                4,
                id="parallelism",
            ),
            pytest.param(
                {"completions": 8},
                lambda j: j["spec"]["completions"],
                8,
                id="completions",
            ),
            pytest.param(
                {"requests": {"cpu": "2", "ephemeral-storage": "1Gi"}},
                lambda j: first_container(j)["resources"],
                {
                    "requests": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "1Gi"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
                id="requests are set over the template's",
            ),
            pytest.param(
                {"localQueue": "night"},
                lambda j: j["metadata"]["labels"].get("multiq.dev/queue-name"),
                "night",
                id="localQueue labels the queue",
            ),
            pytest.param(
                {"priority": "high"},
                lambda j: j["metadata"]["labels"].get("multiq.dev/priority-class"),
                "high",
                id="priority labels the class",
            ),
            pytest.param(
                {"time": "1:30:00"},
                lambda j: j["metadata"]["labels"].get("multiq.dev/max-exec-time-seconds"),
                "5400",
                id="time is the maximum execution time",
            ),
            pytest.param(
                {"name": "mine"},
                lambda j: j["metadata"]["name"],
                "mine",
                id="name",
            ),
            pytest.param(
                {"podTemplateLabels": {"exp": "7"}, "podTemplateAnnotations": {"note": "a"}},
                lambda j: j["spec"]["template"].get("metadata"),
                {"labels": {"exp": "7"}, "annotations": {"note": "a"}},
                id="pod template labels and annotations",
            ),
        ],
    )
    def test_each_flag_changes_its_field_and_no_other(
        self, request_fields: dict[str, Any], where: Any, expected: Any
    ) -> None:
        base = job_of(cmd=["run"])
        fields = {"cmd": ["run"], **request_fields}
        job = job_of(**fields)
        assert where(job) == expected
        assert where(base) != expected
        # Everything else is the same as without the flag.
        assert _without_flag_fields(job) == _without_flag_fields(base)

    def test_a_generated_name_fits_a_label_value(self) -> None:
        name = generated_name("p" * 80, "JobSet", "abcde")
        assert len(name) == 63 and name.endswith("abcde")
        assert generated_name("research", "Job", "abcde") == "research-job-abcde"


def _without_flag_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without the fields a Job mode flag sets."""
    out = copy.deepcopy(obj)
    out["metadata"].pop("name")
    out["metadata"]["labels"] = {
        k: v
        for k, v in out["metadata"]["labels"].items()
        if k not in ("multiq.dev/queue-name", "multiq.dev/priority-class")
        and not k.endswith("max-exec-time-seconds")
    }
    container = first_container(out)
    for key in ("command", "args", "resources"):
        container.pop(key, None)
    out["spec"].pop("parallelism")
    out["spec"].pop("completions")
    out["spec"]["template"].pop("metadata", None)
    return out


class TestTheBundlesAndTheProfilesEnvironment:
    def test_volumes_go_to_the_pod_mounts_and_env_to_every_container_and_init_container(
        self,
    ) -> None:
        spec = pod_spec(job_of(cmd=["run"]))
        assert spec["volumes"] == [
            {"name": "datasets", "persistentVolumeClaim": {"claimName": "imagenet"}}
        ]
        expected_env = [
            {"name": "DATA_DIR", "value": "/data"},
            {"name": "PROFILE", "value": "vision_research"},
            {"name": "TASK_NAME", "value": "vision_research"},
            {"name": "USER_ID", "value": "alice"},
        ]
        for container in [*spec["initContainers"], *spec["containers"]]:
            assert {"name": "datasets", "mountPath": "/data", "readOnly": False} in container[
                "volumeMounts"
            ]
            assert container["env"][-4:] == expected_env
        assert spec["containers"][0]["env"][0] == {"name": "MODEL", "value": "resnet"}

    def test_the_expansion_is_a_function_of_its_inputs(self) -> None:
        assert job_of(cmd=["run"]) == job_of(cmd=["run"])


class TestTheJobSetMode:
    def test_the_template_is_its_one_replicated_job_with_the_replicas_asked(self) -> None:
        jobset = job_of("JobSet", replicas=3, cmd=["torchrun"])
        assert (jobset["apiVersion"], jobset["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
        assert jobset["metadata"]["name"] == "research-jobset-x1y2z"
        assert jobset["metadata"]["labels"]["multiq.dev/queue-name"] == "vision"
        (replicated,) = jobset["spec"]["replicatedJobs"]
        assert (replicated["name"], replicated["replicas"]) == ("main", 3)
        assert "metadata" not in replicated["template"]
        assert first_container(jobset)["command"] == ["torchrun"]

    def test_one_replica_by_default(self) -> None:
        assert job_of("JobSet")["spec"]["replicatedJobs"][0]["replicas"] == 1


class TestErrors:
    def objects(self, *objs: Object) -> Any:
        def find(kind: type[Object], name: str, namespace: str) -> Object | None:
            return next(
                (
                    o
                    for o in objs
                    if isinstance(o, kind)
                    and o.metadata.name == name
                    and o.metadata.namespace == namespace
                ),
                None,
            )

        return find

    @pytest.mark.parametrize(
        ("present", "message"),
        [
            ((), 'applicationprofiles "research" not found in namespace vision'),
            (
                ("profile", "bundle"),
                'jobtemplates "trainer" not found in namespace vision (named by '
                "ApplicationProfile research, mode Job)",
            ),
            (
                ("profile", "template"),
                'volumebundles "data" not found in namespace vision (named by '
                "ApplicationProfile research)",
            ),
        ],
        ids=["profile", "template", "bundle"],
    )
    def test_a_missing_object_is_not_found_by_name(
        self, present: tuple[str, ...], message: str
    ) -> None:
        made = {"profile": profile(), "template": template(), "bundle": bundle()}
        find = self.objects(*(made[p] for p in present))
        with pytest.raises(NotFoundError) as error:
            resolve(find, NS, "research", "Job")
        assert error.value.message == message

    def test_everything_found_resolves(self) -> None:
        find = self.objects(profile(), template(), bundle())
        resolved = resolve(find, NS, "research", "JobSet")
        assert isinstance(resolved, Resolved)
        assert (resolved.mode.name, [b.metadata.name for b in resolved.bundles]) == (
            "JobSet",
            ["data"],
        )
        assert template_queue(resolved.template) == "vision"

    def test_a_mode_the_profile_does_not_offer_names_the_ones_it_does(self) -> None:
        only_job = profile([{"name": "Job", "template": "trainer"}])
        find = self.objects(only_job, template(), bundle())
        with pytest.raises(InvalidObjectError) as error:
            resolve(find, NS, "research", "JobSet")
        assert error.value.status == 422
        assert error.value.message == (
            "ApplicationProfile research does not offer the JobSet mode (it offers: Job)"
        )
        assert invalid(error) == ['mode: Unsupported value: "JobSet": supported values: "Job"']

    @pytest.mark.parametrize(
        ("mode", "fields", "causes"),
        [
            pytest.param(
                "Job",
                {"cmd": ["x"], "replicas": 2},
                ["replicas: Forbidden: the Job mode does not take --replicas"],
                id="replicas in the Job mode",
            ),
            pytest.param(
                "JobSet",
                {"parallelism": 2, "completions": 2},
                [
                    "parallelism: Forbidden: the JobSet mode does not take --parallelism",
                    "completions: Forbidden: the JobSet mode does not take --completions",
                ],
                id="parallelism and completions in the JobSet mode",
            ),
            pytest.param(
                "Job",
                {"parallelism": 2},
                ["cmd: Required value: the profile's Job mode requires --cmd"],
                id="a required flag not given",
            ),
            pytest.param(
                "Job",
                {"cmd": []},
                ["cmd: Required value: give the command and its arguments"],
                id="an empty command",
            ),
            pytest.param(
                "Job",
                {"cmd": ["x"], "requests": {"cpu": "two"}},
                ['requests[cpu]: Invalid value: "two"'],
                id="a request that is no quantity",
            ),
            pytest.param(
                "Job",
                {"cmd": ["x"], "time": "soon"},
                ['time: Invalid value: "soon"'],
                id="a time limit that is no time",
            ),
            pytest.param(
                "Slurm",
                {},
                ["mode: Forbidden: the Slurm mode is asked through the Slurm API"],
                id="the Slurm mode without a script",
            ),
        ],
    )
    def test_a_request_the_mode_does_not_take_is_invalid_and_names_each_field(
        self, mode: str, fields: dict[str, Any], causes: list[str]
    ) -> None:
        with pytest.raises(InvalidObjectError) as error:
            job_of(mode, **fields)
        assert error.value.status == 422
        got = invalid(error)
        assert len(got) == len(causes)
        for text, prefix in zip(got, causes, strict=True):
            assert text.startswith(prefix), text

    def test_a_bundle_volume_named_as_a_template_volume_is_invalid(self) -> None:
        spec = template().template.spec.template.spec.to_wire()
        spec["volumes"] = [{"name": "datasets", "emptyDir": {}}]
        overrides = JobOverrides(JobRequest(mode="Job", cmd=["x"]), "alice", "abcde")
        with pytest.raises(InvalidObjectError) as error:
            expand(profile(), template(spec), [bundle()], "Job", overrides)
        assert invalid(error) == [
            'spec.volumeBundles[0]: Invalid value: "data": its volume datasets (volumes[0]) is '
            "also a volume of JobTemplate trainer"
        ]

    def test_two_bundles_mounting_one_path_are_invalid(self) -> None:
        two = profile(bundles=("data", "more"))
        overrides = JobOverrides(JobRequest(mode="Job", cmd=["x"]), "alice", "abcde")
        with pytest.raises(InvalidObjectError) as error:
            expand(two, template(), [bundle(), bundle("more", volume="other")], "Job", overrides)
        causes = invalid(error)
        assert causes[0] == (
            'spec.volumeBundles: Invalid value: "/data": mount path /data is mounted twice in '
            "container fetch of JobTemplate trainer"
        )
        assert len(causes) == 3  # each container: fetch, main, sidecar

    def test_field_errors_are_field_errors(self) -> None:
        # (the hub renders them as a Status's causes)
        with pytest.raises(InvalidObjectError) as error:
            job_of(replicas=1)
        assert all(isinstance(c, FieldError) for c in error.value.causes)


class TestTheSlurmMode:
    def task(self, *argv: str) -> tuple[dict[str, Any], frozenset[str]]:
        options, args = parse_sbatch([*argv, "--wrap", "python train.py"], None, {})
        context = BatchContext(
            job_name="wrap", partition="vision", user="alice", uid=1000, gid=1000,
            submit_host="laptop", submit_dir="/home/alice", nice=0, controller="hub:8470",
            submitter_environment={},
        )  # fmt: skip
        wire = build_job(
            options, "#!/bin/sh\npython train.py\n", args, TaskIds(7), context,
            namespace=NS, queue="vision",
        )  # fmt: skip
        return wire, options.given

    def test_the_task_keeps_its_command_env_resources_and_job_spec(self) -> None:
        wire, given = self.task("-p", "vision", "-c", "2")
        job = expand(profile(), template(), [bundle()], "Slurm", SlurmTask(wire, "alice", given))
        container = first_container(job)
        batch = wire["spec"]["template"]["spec"]["containers"][0]
        assert container["name"] == batch["name"]
        assert container["command"] == batch["command"]
        assert container["resources"] == batch["resources"]
        assert "args" not in container
        assert container["image"] == "pytorch:24"  # the template's
        # The template's, the bundle's and the profile's variables, then the task's (which win).
        names = [e["name"] for e in container["env"]]
        assert names[:5] == ["MODEL", "DATA_DIR", "PROFILE", "TASK_NAME", "USER_ID"]
        assert names[5:] == [e["name"] for e in batch["env"]]
        spec = job["spec"]
        assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"]) == (0, 600)
        assert pod_spec(job)["restartPolicy"] == "Never"
        assert pod_spec(job)["nodeSelector"] == {"gpu": "a100"}
        assert [c["name"] for c in pod_spec(job)["containers"]] == ["batch", "sidecar"]
        assert pod_spec(job)["volumes"][0]["name"] == "datasets"
        meta = job["metadata"]
        assert meta["name"] == wire["metadata"]["name"]
        assert meta["annotations"] == {"owner": "platform", **wire["metadata"]["annotations"]}
        assert meta["labels"]["multiq.dev/profile"] == "research"
        assert meta["labels"]["multiq.dev/mode"] == "Slurm"
        assert meta["labels"]["team"] == "cv"

    def test_a_task_gets_no_service_account_token_unless_its_template_names_an_account(
        self,
    ) -> None:
        wire, given = self.task("-p", "vision")
        plain = expand(profile(), template(), [], "Slurm", SlurmTask(wire, "alice", given))
        assert pod_spec(plain)["automountServiceAccountToken"] is False
        containers = [{"name": "main", "image": "pytorch:24"}]
        for account in ({"serviceAccountName": "trainer"}, {"automountServiceAccountToken": True}):
            named = template({"restartPolicy": "Never", "containers": containers, **account})
            job = expand(profile(), named, [], "Slurm", SlurmTask(wire, "alice", given))
            # The account's own setting (a token by default) or the template's field holds.
            assert {k: pod_spec(job).get(k) for k in account} == account
            assert pod_spec(job).get("automountServiceAccountToken", True) is True

    def test_a_required_sbatch_option_not_given_is_invalid(self) -> None:
        wire, given = self.task("-c", "2")
        with pytest.raises(InvalidObjectError) as error:
            expand(profile(), template(), [bundle()], "Slurm", SlurmTask(wire, "alice", given))
        assert invalid(error) == [
            "--partition: Required value: the profile's Slurm mode requires --partition"
        ]
