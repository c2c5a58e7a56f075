"""What a batch job sees: the Job built for a task, run through its real prologue in a real
/bin/sh with the values Kubernetes would give it, shows exactly the SLURM_* names Slurm 22.05
shows (shared/reference/slurm.md: 32 for a plain job, 38 for an array task) with the same
meanings; ids are shared out as Slurm does; --begin is read against a given clock."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from api.slurm.begin import BeginError, parse_begin
from api.slurm.environment import STDERR_MARK, BatchContext, exportable, split_streams
from api.slurm.ids import JobRef, TaskIds, parse_job_ref, task_ids
from api.slurm.options import parse_sbatch
from api.slurm.work import SlurmFacts, build_job

# shared/reference/slurm.md, "Plain job (32 variables)" and "Array task 0" (38): the names.
PLAIN = [
    "SLURM_CLUSTER_NAME",
    "SLURM_CONF",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GTIDS",
    "SLURM_JOBID",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_GID",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_LOCALID",
    "SLURM_MEM_PER_NODE",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_NODELIST",
    "SLURM_NODE_ALIASES",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_PRIO_PROCESS",
    "SLURM_PROCID",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TASK_PID",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
    "SLURM_WORKING_CLUSTER",
]
ARRAY = sorted(
    [
        *PLAIN,
        "SLURM_ARRAY_JOB_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MAX",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_STEP",
    ]
)
REFERENCE_OPTIONS = ["--ntasks=1", "--cpus-per-task=1", "--mem=100M", "--time=1"]
SCRIPT = "#!/bin/sh\nenv | grep -E '^(SLURM_|SLURMD_NODENAME=|ENVIRONMENT=)' | sort\n"
CONTEXT = BatchContext(
    job_name="envdump",
    partition="debug",
    user="root",
    uid=0,
    gid=0,
    submit_host="vm",
    submit_dir="/jobs",
    nice=0,
    controller="hub.example:8470",
    submitter_environment={"LANG": "C.UTF-8", "HOME": "/root", "GITHUB_TOKEN": "secret"},
)


def kubernetes_value(text: str) -> str:
    """What Kubernetes makes of a command or env value: `$$` is `$` (nothing else here)."""
    return text.replace("$$", "$")


def run_in_pod(job: dict[str, Any], *, index: int = 0, node: str = "vm") -> dict[str, str]:
    """Run the Job's container command as a kubelet would, on `node` in cluster `peer`; what
    it printed, as variables."""
    out = run_container(job, index=index, node=node)
    assert out.returncode == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def run_container(
    job: dict[str, Any], *, index: int = 0, node: str = "vm"
) -> subprocess.CompletedProcess[str]:
    """Run the Job's container command as a kubelet would, on `node` in cluster `peer`."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {"PATH": "/usr/bin:/bin", "JOB_COMPLETION_INDEX": str(index)}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = kubernetes_value(item["value"])
        elif item["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName":
            env[item["name"]] = node
        else:
            env[item["name"]] = "peer"  # the agent's multiq.dev/cluster annotation
    command = [kubernetes_value(c) for c in container["command"]]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=10, check=False)


def job_for(argv: list[str], ids: TaskIds, context: BatchContext = CONTEXT) -> dict[str, Any]:
    options, args = parse_sbatch([*argv, "envdump.sh"], SCRIPT)
    return build_job(options, SCRIPT, args, ids, context, namespace="ns", queue="debug")


def test_a_batch_job_holds_no_credential_for_the_cluster_it_runs_in() -> None:
    pod = job_for([], TaskIds(1))["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False


class TestTheEnvironmentMatchesSlurms:
    def test_a_plain_job_sees_the_32_variables_of_the_reference_list(self) -> None:
        seen = run_in_pod(job_for(REFERENCE_OPTIONS, TaskIds(2)))
        assert sorted(n for n in seen if n.startswith("SLURM_")) == sorted(PLAIN)
        assert seen["SLURMD_NODENAME"] == "vm" and seen["ENVIRONMENT"] == "BATCH"

    def test_an_array_task_sees_the_38_variables_of_the_reference_list(self) -> None:
        seen = run_in_pod(job_for([*REFERENCE_OPTIONS, "--array=0-3"], TaskIds(3, 1, 0)))
        assert sorted(n for n in seen if n.startswith("SLURM_")) == ARRAY

    def test_the_values_mean_what_they_mean_in_slurm(self) -> None:
        seen = run_in_pod(job_for([*REFERENCE_OPTIONS, "--array=0-3"], TaskIds(3, 1, 0)))
        expected = {
            "SLURM_ARRAY_JOB_ID": "1",
            "SLURM_ARRAY_TASK_COUNT": "4",
            "SLURM_ARRAY_TASK_ID": "0",
            "SLURM_ARRAY_TASK_MAX": "3",
            "SLURM_ARRAY_TASK_MIN": "0",
            "SLURM_ARRAY_TASK_STEP": "1",
            "SLURM_CLUSTER_NAME": "peer",
            "SLURM_CPUS_ON_NODE": "1",
            "SLURM_CPUS_PER_TASK": "1",
            "SLURM_GTIDS": "0",
            "SLURM_JOBID": "3",
            "SLURM_JOB_ID": "3",
            "SLURM_JOB_CPUS_PER_NODE": "1",
            "SLURM_JOB_NAME": "envdump",
            "SLURM_JOB_NODELIST": "vm",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_JOB_PARTITION": "debug",
            "SLURM_JOB_USER": "root",
            "SLURM_LOCALID": "0",
            "SLURM_MEM_PER_NODE": "100",
            "SLURM_NNODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_NODELIST": "vm",
            "SLURM_NODE_ALIASES": "(null)",
            "SLURM_NPROCS": "1",
            "SLURM_NTASKS": "1",
            "SLURM_PROCID": "0",
            "SLURM_SUBMIT_DIR": "/jobs",
            "SLURM_SUBMIT_HOST": "vm",
            "SLURM_TASKS_PER_NODE": "1",
            "SLURM_TOPOLOGY_ADDR": "vm",
            "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
            "SLURM_WORKING_CLUSTER": "peer:hub.example:8470:9728:109",
        }
        assert {k: seen[k] for k in expected} == expected
        assert re.fullmatch(r"\d+", seen["SLURM_TASK_PID"])

    def test_each_pod_of_a_two_node_job_knows_its_node_index_and_rank(self) -> None:
        job = job_for(["-N", "2", "--ntasks-per-node=2", "-c", "3"], TaskIds(7))
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2
        second = run_in_pod(job, index=1, node="n2")
        assert (second["SLURM_NODEID"], second["SLURM_PROCID"], second["SLURM_GTIDS"]) == (
            "1",
            "2",
            "2,3",
        )
        assert second["SLURM_JOB_CPUS_PER_NODE"] == "6(x2)"
        assert second["SLURM_TASKS_PER_NODE"] == "2(x2)"
        assert second["SLURM_JOB_NODELIST"] == "envdump-7-[0-1]"
        assert second["SLURMD_NODENAME"] == "n2"

    def test_export_all_carries_the_submitters_variables_but_no_secret_or_session(self) -> None:
        env = {
            e["name"]: e.get("value")
            for e in job_for([], TaskIds(1))["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["LANG"] == "C.UTF-8"
        assert "GITHUB_TOKEN" not in env and "HOME" not in env
        assert exportable({"PATH": "/bin", "MULTIQ_TOKEN": "t", "X_KEY": "k", "OK": "1"}) == {
            "OK": "1"
        }

    def test_export_none_sets_only_slurms_markers(self) -> None:
        job = job_for(["--export=NONE"], TaskIds(1))
        env = {
            e["name"]: e.get("value")
            for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert "LANG" not in env
        assert (env["SLURM_EXPORT_ENV"], env["SLURM_GET_USER_ENV"]) == ("NONE", "1")

    def test_a_file_a_dead_process_of_the_same_pid_left_in_a_shared_tmp_is_replaced(
        self, tmp_path: Path
    ) -> None:
        # Where pods share /tmp and pids (kubesim's process runtime), the prologue's pid may
        # be one an earlier pod had: leave its files for the next pids the kernel hands out.
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        for pid in range(last + 1, last + 400):
            (tmp_path / f"slurm_script.{pid}").write_text("stale")
            (tmp_path / f"slurm_stderr.{pid}").write_text("stale")
        job = job_for([*REFERENCE_OPTIONS, "-e", "x.err"], TaskIds(2))
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        env.append({"name": "TMPDIR", "value": str(tmp_path)})
        done = run_container(job)
        assert done.returncode == 0, done.stderr
        stdout, stderr = split_streams(done.stdout.splitlines())
        names = sorted(line.split("=", 1)[0] for line in stdout)
        assert names == sorted([*PLAIN, "SLURMD_NODENAME", "ENVIRONMENT"]) and stderr == []

    def test_a_dollar_in_the_script_reaches_the_shell_as_written(self) -> None:
        script = '#!/bin/sh\necho "$(echo sub) $$ $(HOME) cost=$5"\n'
        options, _ = parse_sbatch(["x.sh"], script)
        job = build_job(options, script, [], TaskIds(1), CONTEXT, namespace="n", queue="q")
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        carried = next(e["value"] for e in env if e["name"] == "MULTIQ_SLURM_SCRIPT")
        assert kubernetes_value(carried) == script

    def test_the_facts_read_back_from_the_annotations_are_those_submitted(self) -> None:
        job = job_for(
            ["--array=0-9%3", "-d", "afterok:4", "-H", "-t", "5", "--comment", "lr sweep"],
            TaskIds(12, 10, 1),
        )
        facts = SlurmFacts.from_annotations(job["metadata"]["annotations"])
        assert facts is not None
        assert facts.comment == "lr sweep"
        assert (facts.ids, facts.throttle, facts.held, facts.time_limit_seconds) == (
            TaskIds(12, 10, 1),
            3,
            True,
            300,
        )
        assert [d.type for d in facts.dependency.terms] == ["afterok"]
        assert job["spec"]["activeDeadlineSeconds"] == 300
        assert job["spec"]["backoffLimit"] == 0


NOISY = (
    "#!/bin/sh\necho out-1\necho err-1 >&2\necho out-2\n"
    'echo "pid=$$ task=$SLURM_TASK_PID"\nprintf err-2 >&2\nexit 3\n'
)


class TestTheErrorStream:
    """A pod has one log: with `--error` naming a file of its own, the prologue keeps the
    script's stderr apart and appends it after a mark, which `split_streams` reads back."""

    def job(self, *argv: str) -> dict[str, Any]:
        options, args = parse_sbatch([*argv, "noisy.sh"], NOISY)
        return build_job(options, NOISY, args, TaskIds(7), CONTEXT, namespace="ns", queue="q")

    def test_with_an_error_file_stderr_follows_stdout_apart_and_the_exit_code_is_kept(
        self,
    ) -> None:
        done = run_container(self.job("-o", "out-%j", "-e", "err-%j"))
        assert done.returncode == 3 and done.stderr == ""
        stdout, stderr = split_streams(done.stdout.splitlines())
        assert stdout[:2] == ["out-1", "out-2"] and stderr[:2] == ["err-1", "err-2"]
        pid, task = stdout[2].split()
        assert pid.removeprefix("pid=") == task.removeprefix("task=")  # still the script's pid

    def test_without_one_both_streams_stay_in_the_log_as_written_and_nothing_is_split(
        self,
    ) -> None:
        for argv in ([], ["-o", "same-%j"], ["-o", "same-%j", "-e", "same-%j"]):
            done = run_container(self.job(*argv))
            assert done.returncode == 3 and "err-1" in done.stderr, argv
            assert split_streams(done.stdout.splitlines()) == (done.stdout.splitlines(), [])

    def test_a_stdout_without_a_last_newline_keeps_its_last_line(self) -> None:
        mark = STDERR_MARK
        assert split_streams(["a", "partial", mark, "e"]) == (["a", "partial"], ["e"])
        assert split_streams(["a", "", "", mark]) == (["a", ""], [])


class TestIds:
    def test_an_array_takes_a_block_and_its_last_task_keeps_the_arrays_id(self) -> None:
        options, _ = parse_sbatch(["--array=0-3", "--wrap", "true"])
        assert task_ids(1, options.array) == [
            TaskIds(2, 1, 0),
            TaskIds(3, 1, 1),
            TaskIds(4, 1, 2),
            TaskIds(1, 1, 3),
        ]
        assert task_ids(9, None) == [TaskIds(9)]

    def test_job_references_name_a_job_a_task_or_several_tasks(self) -> None:
        assert parse_job_ref("12") == JobRef(12)
        assert parse_job_ref("12_3") == JobRef(12, (3,))
        assert parse_job_ref("12_[1-3,7]") == JobRef(12, (1, 2, 3, 7))
        with pytest.raises(ValueError, match="not a job id"):
            parse_job_ref("x12")


class TestBegin:
    NOW = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)

    def test_relative_times_count_from_the_given_clock(self) -> None:
        assert parse_begin("now+90", self.NOW) == self.NOW + timedelta(seconds=90)
        assert parse_begin("now+2hours", self.NOW) == self.NOW + timedelta(hours=2)
        assert parse_begin("now+1day", self.NOW) == self.NOW + timedelta(days=1)

    def test_a_time_of_day_that_passed_means_tomorrow_in_the_submitters_zone(self) -> None:
        assert parse_begin("16:00", self.NOW) == datetime(2026, 3, 10, 16, 0, tzinfo=UTC)
        assert parse_begin("15:00", self.NOW) == datetime(2026, 3, 11, 15, 0, tzinfo=UTC)
        plus_two = 2 * 3600  # 17:30 there: 16:00 has passed
        assert parse_begin("16:00", self.NOW, plus_two) == datetime(
            2026, 3, 11, 16, 0, tzinfo=timezone(timedelta(hours=2))
        )

    def test_dates_with_and_without_a_time(self) -> None:
        assert parse_begin("2026-04-01", self.NOW) == datetime(2026, 4, 1, tzinfo=UTC)
        assert parse_begin("2026-04-01T08:15", self.NOW) == datetime(2026, 4, 1, 8, 15, tzinfo=UTC)

    def test_anything_else_is_an_error_saying_what_is_accepted(self) -> None:
        with pytest.raises(BeginError, match="HH:MM"):
            parse_begin("next tuesday", self.NOW)
