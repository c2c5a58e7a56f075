"""qctl starts fast because each command imports only what it uses: help imports no model,
HTTP client or YAML parser; `get` and `submit` talk to a real hub without pydantic, aiohttp
or the api models. Each test runs qctl in a fresh interpreter and reads what it imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from qctl import config as qconfig
from qctl.cli import CREATE_KINDS, LIST_KINDS, RESUME_KINDS, STOP_KINDS, VERBS
from qctl.commands.dev import DevFederation

# Run qctl's main in this interpreter, then write every module it imported to a file.
PROBE = """
import sys
from qctl.main import main
code = 0
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
finally:
    with open(sys.argv[1], "w") as listing:
        listing.write("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""

HEAVY = ("pydantic", "aiohttp", "api.v1alpha1", "api.codec", "api.kinds")
HELP_NEVER = (*HEAVY, "yaml", "http.client", "api")


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    modules: set[str]

    def imported(self, *roots: str) -> list[str]:
        return sorted(
            m for m in self.modules if any(m == r or m.startswith(r + ".") for r in roots)
        )


def run_qctl(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> Run:
    listing = tmp_path / "modules.txt"
    environment = {
        **os.environ,
        "MULTIQ_CONFIG": str(tmp_path / "no-config.yaml"),
        "NO_COLOR": "1",
        **(env or {}),
    }
    for name in ("MULTIQ_SERVER", "MULTIQ_TOKEN", "MULTIQ_CONTEXT", "MULTIQ_NAMESPACE"):
        if env is None or name not in env:
            environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(listing), *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr, set(listing.read_text().split()))


HELP_COMMANDS = [
    pytest.param(["--help"], id="qctl --help"),
    pytest.param([], id="qctl"),
    *(pytest.param([v.name, "--help"], id=f"qctl {v.name} --help") for v in VERBS if not v.hidden),
    *(
        pytest.param([verb, kind, "--help"], id=f"qctl {verb} {kind} --help")
        for verb, kinds in (
            ("stop", STOP_KINDS),
            ("resume", RESUME_KINDS),
            ("create", CREATE_KINDS),
            ("list", LIST_KINDS),
        )
        for kind in (row.kind for row in kinds)
    ),
    *(
        pytest.param(["dev", verb, "--help"], id=f"qctl dev {verb} --help")
        for verb in ("up", "down", "demo")
    ),
]


class TestHelp:
    @pytest.mark.parametrize("argv", HELP_COMMANDS)
    def test_help_imports_no_model_http_client_or_yaml(
        self, tmp_path: Path, argv: list[str]
    ) -> None:
        run = run_qctl(tmp_path, *argv)
        assert run.code in (0, 2), run.stderr
        assert "usage: qctl" in run.stdout + run.stderr
        assert run.imported(*HELP_NEVER) == []

    def test_every_verb_is_listed_in_the_help(self, tmp_path: Path) -> None:
        run = run_qctl(tmp_path, "--help")
        for verb in VERBS:
            if verb.hidden:
                assert verb.name not in run.stdout
            else:
                assert f"    {verb.name}" in run.stdout

    @pytest.mark.parametrize(
        ("argv", "printed"),
        [
            (["completion", "bash"], "complete -o default -F _qctl_complete qctl"),
            (["completion", "zsh"], "compdef _qctl_complete qctl"),
            (["__complete", "stop", "cq", "--k"], "--keep-already-running\n"),
        ],
        ids=lambda v: " ".join(v) if isinstance(v, list) else None,
    )
    def test_completion_without_names_imports_no_model_http_client_or_yaml(
        self, tmp_path: Path, argv: list[str], printed: str
    ) -> None:
        run = run_qctl(tmp_path, *argv)
        assert run.code == 0, run.stderr
        assert printed in run.stdout
        assert run.imported(*HELP_NEVER) == []

    def test_a_wrong_flag_is_a_usage_error_without_loading_its_command(
        self, tmp_path: Path
    ) -> None:
        run = run_qctl(tmp_path, "submit", "-f", "job.yaml", "--no-such-flag")
        assert run.code == 2
        assert "unrecognized arguments: --no-such-flag" in run.stderr
        assert run.imported(*HELP_NEVER) == []


class TestTheKubectlPlugin:
    def test_kubectl_qctl_runs_qctl(self, tmp_path: Path) -> None:
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        bin_dir = Path(sys.executable).parent
        assert (bin_dir / "kubectl-qctl").exists()
        done = subprocess.run(
            [kubectl, "qctl", "get", "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: qctl get")


# --- against a real hub -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevFederation]:
    """A real hub (SQLite) with the dev fleet's queues registered; no clusters connected."""
    fed = DevFederation(tmp_path_factory.mktemp("hub"), clusters=1, port=0)
    try:
        fed.start_hub_only()
        yield fed
    finally:
        fed.stop()


def one_job(tmp_path: Path, name: str) -> Path:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                }
            }
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def connection(fed: DevFederation) -> dict[str, str]:
    return {"MULTIQ_SERVER": fed.url, "MULTIQ_TOKEN": fed.admin_token}


@pytest.mark.e2e
@pytest.mark.slow
class TestAgainstAHub:
    def test_submit_of_one_job_imports_no_model_or_async_client(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(
            tmp_path, "submit", "-f", str(one_job(tmp_path, "light")), env=connection(hub)
        )
        assert run.code == 0, run.stderr
        assert run.stdout == "workload/job-light submitted to queue default in namespace default\n"
        assert run.imported(*HEAVY, "dataclasses", "http.client", "ssl") == []

    def test_submit_of_a_json_manifest_imports_no_yaml_either(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        job = one_job(tmp_path, "as-json")
        manifest = job.with_suffix(".json")
        manifest.write_text(json.dumps(yaml.safe_load(job.read_text())))
        run = run_qctl(tmp_path, "submit", "-f", str(manifest), env=connection(hub))
        assert run.code == 0, run.stderr
        assert run.stdout.startswith("workload/job-as-json submitted")
        assert run.imported(*HEAVY, "yaml", "dataclasses", "http.client", "ssl") == []

    def test_sbatch_imports_only_what_its_one_request_needs(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        # A loop of sbatch calls is how sweeps are submitted: every module is paid per job.
        run = run_qctl(
            tmp_path, "sbatch", "--parsable", "--hold", "--wrap", "true", env=connection(hub)
        )
        assert run.code == 0, run.stderr
        assert run.stdout.strip().isdigit()
        assert (
            run.imported(*HEAVY, "yaml", "http.client", "ssl", "datetime", "qctl.slurmview") == []
        )

    def test_get_workloads_imports_no_model_async_client_or_yaml(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run_qctl(tmp_path, "submit", "-f", str(one_job(tmp_path, "listed")), env=connection(hub))
        run = run_qctl(tmp_path, "get", "workloads", env=connection(hub))
        assert run.code == 0, run.stderr
        header, *rows = run.stdout.splitlines()
        assert header.split() == ["NAME", "QUEUE", "STATE", "CLUSTER", "AGE"]
        assert "job-listed" in [row.split()[0] for row in rows]
        assert run.imported(*HEAVY, "yaml", "http.client", "ssl") == []

    def test_get_with_a_config_file_reads_it_without_a_model_or_yaml(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        path = tmp_path / "config.yaml"
        written = qconfig.ConfigFile()
        written.upsert(qconfig.Context(name="dev", server=hub.url, token=hub.admin_token))
        qconfig.save(written, path)
        run = run_qctl(tmp_path, "get", "clusters", "-o", "json", env={"MULTIQ_CONFIG": str(path)})
        assert run.code == 0, run.stderr
        assert '"kind": "List"' in run.stdout
        assert run.imported(*HEAVY, "yaml") == []

    def test_a_config_file_in_yaml_still_works(self, hub: DevFederation, tmp_path: Path) -> None:
        config = tmp_path / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "currentContext": "dev",
                    "contexts": [{"name": "dev", "server": hub.url, "token": hub.admin_token}],
                }
            )
        )
        run = run_qctl(
            tmp_path, "get", "clusters", "-o", "json", env={"MULTIQ_CONFIG": str(config)}
        )
        assert run.code == 0, run.stderr
        assert '"kind": "List"' in run.stdout
        assert run.imported(*HEAVY) == []

    def test_the_hubs_field_errors_come_back_one_per_line(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        job = one_job(tmp_path, "nowhere")
        run = run_qctl(tmp_path, "submit", "-f", str(job), "--queue", "nope", env=connection(hub))
        assert run.code == 1
        assert 'spec.queueName: Not found: "nope": no LocalQueue of that name' in run.stderr
        assert run.imported(*HEAVY) == []

    def test_a_hub_that_cannot_be_reached_is_skipped_for_the_next(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        closed = "http://127.0.0.1:9"
        run = run_qctl(
            tmp_path,
            "get",
            "queues",
            env={**connection(hub), "MULTIQ_SERVER": f"{closed},{hub.url}"},
        )
        assert run.code == 0, run.stderr
        assert run.stdout.split()[:2] == ["NAME", "CLUSTER-SET"]

        run = run_qctl(tmp_path, "get", "queues", env={**connection(hub), "MULTIQ_SERVER": closed})
        assert run.code == 1
        assert run.stderr.startswith(f"error: cannot reach the hub at {closed}: ")

    def test_a_wrong_token_is_one_clear_line(self, hub: DevFederation, tmp_path: Path) -> None:
        run = run_qctl(tmp_path, "get", "workloads", env={**connection(hub), "MULTIQ_TOKEN": "no"})
        assert run.code == 1
        assert run.stderr == "error: the bearer token is not valid\n"

    def test_describe_and_delete_a_workload(self, hub: DevFederation, tmp_path: Path) -> None:
        run_qctl(tmp_path, "submit", "-f", str(one_job(tmp_path, "gone")), env=connection(hub))
        described = run_qctl(tmp_path, "describe", "workload", "job-gone", env=connection(hub))
        assert described.code == 0, described.stderr
        assert described.stdout.splitlines()[0].split() == ["Name:", "job-gone"]
        deleted = run_qctl(tmp_path, "delete", "workload", "job-gone", env=connection(hub))
        assert deleted.code == 0, deleted.stderr
        assert deleted.stdout == "workload/job-gone deleted\n"
        assert described.imported(*HEAVY) == deleted.imported(*HEAVY) == []

    def test_apply_creates_then_leaves_an_object_unchanged(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        flavor = tmp_path / "flavor.yaml"
        flavor.write_text(
            "apiVersion: multiq.dev/v1alpha1\nkind: ResourceFlavor\nmetadata:\n  name: spot\n"
        )
        first = run_qctl(tmp_path, "apply", "-f", str(flavor), env=connection(hub))
        again = run_qctl(tmp_path, "apply", "-f", str(flavor), env=connection(hub))
        assert (first.stdout, again.stdout) == (
            "resourceflavor/spot created\n",
            "resourceflavor/spot unchanged\n",
        )
        assert first.imported("aiohttp") == []

    def test_get_watch_prints_the_table_then_a_row_per_change(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        env = {
            **os.environ,
            **connection(hub),
            "MULTIQ_CONFIG": str(tmp_path / "none.yaml"),
            "PYTHONUNBUFFERED": "1",
        }
        qctl = str(Path(sys.executable).parent / "qctl")
        with subprocess.Popen(
            [qctl, "get", "clustersets", "-w"], stdout=subprocess.PIPE, text=True, env=env
        ) as watch:
            try:
                assert watch.stdout is not None
                assert watch.stdout.readline().split()[:2] == ["NAME", "CLUSTERS"]
                assert watch.stdout.readline().split()[0] == "default"
                changed = tmp_path / "set.yaml"
                changed.write_text(
                    "apiVersion: multiq.dev/v1alpha1\nkind: ClusterSet\n"
                    "metadata:\n  name: watched\nspec:\n  clusters: [sim-0]\n"
                )
                run_qctl(tmp_path, "apply", "-f", str(changed), env=connection(hub))
                while (line := watch.stdout.readline()).split()[0] != "watched":
                    assert line, "the watch ended before the new cluster set showed"
            finally:
                watch.terminate()
