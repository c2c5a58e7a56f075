"""kueuectl's verbs against a real hub: stop and resume change a queue's stopPolicy or a
workload's spec.active (and only that), create builds a cluster or local queue from flags with
kueuectl's validation, list filters and prints kueuectl's columns, and the bash completion
script completes verbs, kinds, flags, their values and the hub's object names in a real bash.

What a stop does to running work (eviction, Jobs deleted, a new dispatch on resume) is shown
end to end in e2e/test_stop_resume.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qctl.commands.dev import DevFederation
from tests.qctl.test_light_imports import HEAVY, connection, one_job, run_qctl

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevFederation]:
    fed = DevFederation(tmp_path_factory.mktemp("hub"), clusters=1, port=0)
    try:
        fed.start_hub_only()
        yield fed
    finally:
        fed.stop()


def qctl_json(hub: DevFederation, tmp_path: Path, *argv: str) -> dict[str, object]:
    run = run_qctl(tmp_path, *argv, "-o", "json", env=connection(hub))
    assert run.code == 0, run.stderr
    loaded: dict[str, object] = json.loads(run.stdout)
    return loaded


def spec_of(hub: DevFederation, tmp_path: Path, *argv: str) -> dict[str, object]:
    spec = qctl_json(hub, tmp_path, "get", *argv)["spec"]
    assert isinstance(spec, dict)
    return spec


class TestStopAndResumeQueues:
    def test_stop_drains_by_default_holds_with_keep_already_running_and_resume_clears(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = connection(hub)
        stopped = run_qctl(tmp_path, "stop", "clusterqueue", "default", env=env)
        assert (stopped.code, stopped.stdout) == (0, "clusterqueue/default stopped\n")
        assert spec_of(hub, tmp_path, "cq", "default")["stopPolicy"] == "HoldAndDrain"
        assert stopped.imported(*HEAVY, "yaml") == []

        run_qctl(tmp_path, "stop", "cq", "default", "--keep-already-running", env=env)
        assert spec_of(hub, tmp_path, "cq", "default")["stopPolicy"] == "Hold"

        listed = run_qctl(tmp_path, "list", "clusterqueue", env=env)
        header, row = listed.stdout.splitlines()[:2]
        assert header.split("  ")[0] == "NAME"
        assert [c.strip() for c in header.split("   ") if c.strip()] == [
            "NAME",
            "COHORT",
            "PENDING WORKLOADS",
            "ADMITTED WORKLOADS",
            "ACTIVE",
            "AGE",
        ]
        assert row.split()[0] == "default" and "false" in row.split()

        resumed = run_qctl(tmp_path, "resume", "cq", "default", env=env)
        assert resumed.stdout == "clusterqueue/default resumed\n"
        assert spec_of(hub, tmp_path, "cq", "default")["stopPolicy"] == "None"
        again = run_qctl(tmp_path, "resume", "cq", "default", env=env)
        assert again.stdout == "clusterqueue/default unchanged\n"

    def test_a_local_queue_is_stopped_in_its_namespace_and_a_dry_run_changes_nothing(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = connection(hub)
        for dry_run in ("client", "server"):
            run = run_qctl(tmp_path, "stop", "lq", "default", f"--dry-run={dry_run}", env=env)
            assert run.code == 0, run.stderr
            assert run.stdout.startswith("localqueue/default stopped (")
            assert spec_of(hub, tmp_path, "lq", "default").get("stopPolicy", "None") == "None"
        run_qctl(tmp_path, "stop", "localqueue", "default", "-n", "default", env=env)
        assert spec_of(hub, tmp_path, "lq", "default")["stopPolicy"] == "HoldAndDrain"
        run_qctl(tmp_path, "resume", "localqueue", "default", env=env)
        assert spec_of(hub, tmp_path, "lq", "default")["stopPolicy"] == "None"

    def test_stopping_a_queue_that_does_not_exist_is_one_line(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(tmp_path, "stop", "cq", "nowhere", env=connection(hub))
        assert run.code == 1
        assert run.stderr == 'error: clusterqueues "nowhere" not found\n'


class TestStopAndResumeAWorkload:
    def test_stop_sets_it_inactive_list_shows_it_stopped_and_resume_activates_it(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = connection(hub)
        run_qctl(tmp_path, "submit", "-f", str(one_job(tmp_path, "paused")), env=env)
        stopped = run_qctl(tmp_path, "stop", "workload", "job-paused", env=env)
        assert stopped.stdout == "workload/job-paused stopped\n"
        assert spec_of(hub, tmp_path, "workload", "job-paused")["active"] is False

        listed = run_qctl(tmp_path, "list", "workload", "--status", "stopped", env=env)
        assert listed.imported(*HEAVY, "yaml", "http.client") == []
        header, *rows = listed.stdout.splitlines()
        assert header.split()[:5] == ["NAME", "JOB", "TYPE", "JOB", "NAME"]
        assert [r.split()[:3] for r in rows] == [["job-paused", "Job", "paused"]]
        assert "STOPPED" in rows[0].split()
        pending = run_qctl(tmp_path, "list", "wl", "--status", "pending", env=env)
        assert "job-paused" not in pending.stdout

        resumed = run_qctl(tmp_path, "resume", "wl", "job-paused", env=env)
        assert resumed.stdout == "workload/job-paused resumed\n"
        assert spec_of(hub, tmp_path, "workload", "job-paused")["active"] is True


class TestCreateQueues:
    def test_a_cluster_queue_from_kueuectl_flags(self, hub: DevFederation, tmp_path: Path) -> None:
        run = run_qctl(
            tmp_path,
            "create",
            "clusterqueue",
            "research",
            "--cohort",
            "lab",
            "--queuing-strategy",
            "StrictFIFO",
            "--namespace-selector",
            "team=vision,tier=gold",
            "--reclaim-within-cohort",
            "Any",
            "--preemption-within-cluster-queue",
            "LowerPriority",
            "--nominal-quota",
            "default:cpu=9;memory=36Gi,spot:cpu=18;memory=72Gi",
            "--nominal-quota",
            "gpu:nvidia.com/gpu=8",
            "--borrowing-limit",
            "default:cpu=1",
            "--lending-limit",
            "spot:memory=8Gi",
            env=connection(hub),
        )
        assert (run.code, run.stdout) == (0, "clusterqueue/research created\n"), run.stderr
        assert run.imported(*HEAVY, "yaml", "http.client") == []
        spec = spec_of(hub, tmp_path, "cq", "research")
        assert spec["cohortName"] == "lab"
        assert spec["queueingStrategy"] == "StrictFIFO"
        assert spec["namespaceSelector"] == {"matchLabels": {"team": "vision", "tier": "gold"}}
        preemption = spec["preemption"]
        assert isinstance(preemption, dict)
        assert (preemption["reclaimWithinCohort"], preemption["withinClusterQueue"]) == (
            "Any",
            "LowerPriority",
        )
        assert spec["resourceGroups"] == [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1"},
                            {"name": "memory", "nominalQuota": "36Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "18"},
                            {"name": "memory", "nominalQuota": "72Gi", "lendingLimit": "8Gi"},
                        ],
                    },
                ],
            },
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
                ],
            },
        ]

    @pytest.mark.parametrize(
        ("flags", "error"),
        [
            (
                ["--queuing-strategy", "LIFO"],
                "argument --queuing-strategy: invalid choice: 'LIFO'",
            ),
            (["--nominal-quota", "cpu=9"], "--nominal-quota: 'cpu=9' is not FLAVOR:"),
            (["--nominal-quota", "f:cpu=lots"], "--nominal-quota: 'cpu=lots' in flavor 'f'"),
            (
                ["--nominal-quota", "f:cpu=1", "--borrowing-limit", "g:cpu=1"],
                "--borrowing-limit: flavor 'g' has no --nominal-quota",
            ),
            (
                ["--nominal-quota", "f:cpu=1", "--lending-limit", "f:memory=1Gi"],
                "--lending-limit: flavor 'f' has no nominal quota of memory",
            ),
            (
                ["--nominal-quota", "f:cpu=1;memory=1Gi,g:cpu=1"],
                "--nominal-quota: flavor 'g' covers cpu with other resources",
            ),
            (["--namespace-selector", "team"], "--namespace-selector: 'team' is not KEY=VALUE"),
        ],
        ids=lambda v: " ".join(v) if isinstance(v, list) else None,
    )
    def test_a_bad_flag_is_a_usage_error_naming_it(
        self, hub: DevFederation, tmp_path: Path, flags: list[str], error: str
    ) -> None:
        run = run_qctl(tmp_path, "create", "cq", "bad", *flags, env=connection(hub))
        assert run.code == 2
        assert error in run.stderr
        listed = run_qctl(tmp_path, "get", "cq", env=connection(hub)).stdout.splitlines()
        assert "bad" not in [row.split()[0] for row in listed]

    def test_the_hubs_own_checks_come_back_as_its_field_errors(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(
            tmp_path,
            "create",
            "cq",
            "lonely",
            "--nominal-quota",
            "default:cpu=1",
            "--borrowing-limit",
            "default:cpu=1",
            env=connection(hub),
        )
        assert run.code == 1
        assert "borrowingLimit" in run.stderr and "cohort" in run.stderr

    def test_dry_runs_print_the_object_and_create_nothing(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = connection(hub)
        client = run_qctl(
            tmp_path, "create", "cq", "dry", "--dry-run=client", "-o", "yaml", env=env
        )
        assert client.code == 0, client.stderr
        assert "kind: ClusterQueue\nmetadata:\n  name: dry\n" in client.stdout
        server = run_qctl(
            tmp_path, "create", "cq", "dry", "--dry-run", "server", "-o", "json", env=env
        )
        assert server.code == 0, server.stderr
        assert json.loads(server.stdout)["metadata"]["name"] == "dry"
        missing = run_qctl(tmp_path, "get", "cq", "dry", env=env)
        assert missing.code == 1 and "not found" in missing.stderr
        taken = run_qctl(tmp_path, "create", "cq", "default", "--dry-run=server", env=env)
        assert taken.code == 1 and "already exists" in taken.stderr

    def test_a_local_queue_needs_its_cluster_queue_unless_told_to_ignore_it(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = connection(hub)
        refused = run_qctl(tmp_path, "create", "lq", "ghost", "-c", "no-such-cq", env=env)
        assert refused.code == 2
        assert refused.stderr == (
            "error: --clusterqueue: no cluster queue named 'no-such-cq' "
            "(create it first, or pass -i/--ignore-unknown-cq)\n"
        )
        made = run_qctl(
            tmp_path, "create", "localqueue", "ghost", "-c", "no-such-cq", "-i", env=env
        )
        assert made.stdout == "localqueue/ghost created\n", made.stderr
        run = run_qctl(tmp_path, "create", "lq", "team", "-c", "default", "-n", "default", env=env)
        assert run.stdout == "localqueue/team created\n", run.stderr
        listed = run_qctl(tmp_path, "list", "localqueue", "-c", "default", env=env)
        names = [row.split()[:2] for row in listed.stdout.splitlines()[1:]]
        assert names == [["default", "default"], ["team", "default"]]


class TestCompletionInBash:
    def complete(self, hub: DevFederation, tmp_path: Path, *words: str) -> list[str]:
        """Run the script `qctl completion bash` prints in a real bash, as a TAB would."""
        bin_dir = Path(sys.executable).parent
        script = (
            "source <(qctl completion bash)\n"
            'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
            '_qctl_complete\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        env = {
            **os.environ,
            **connection(hub),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "MULTIQ_CONFIG": str(tmp_path / "none.yaml"),
        }
        done = subprocess.run(
            ["bash", "-c", script, "bash", "qctl", *words],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        return done.stdout.split()

    def test_verbs_kinds_flags_and_flag_values(self, hub: DevFederation, tmp_path: Path) -> None:
        assert self.complete(hub, tmp_path, "re") == ["resume"]
        assert self.complete(hub, tmp_path, "stop", "") == [
            "clusterqueue",
            "cq",
            "localqueue",
            "lq",
            "workload",
            "wl",
        ]
        assert self.complete(hub, tmp_path, "stop", "cq", "--k") == ["--keep-already-running"]
        assert self.complete(hub, tmp_path, "create", "cq", "x", "--queuing-strategy", "S") == [
            "StrictFIFO"
        ]
        assert self.complete(hub, tmp_path, "create", "cq", "x", "--dry-run", "=", "s") == [
            "server"
        ]
        assert "__complete" not in self.complete(hub, tmp_path, "")

    def test_names_come_from_the_hub(self, hub: DevFederation, tmp_path: Path) -> None:
        run_qctl(tmp_path, "submit", "-f", str(one_job(tmp_path, "tab")), env=connection(hub))
        assert "job-tab" in self.complete(hub, tmp_path, "describe", "workload", "")
        assert self.complete(hub, tmp_path, "stop", "cq", "def") == ["default"]
        assert self.complete(hub, tmp_path, "list", "lq", "-c", "d") == ["default"]
