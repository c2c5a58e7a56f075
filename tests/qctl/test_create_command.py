"""`qctl create job|jobset|slurm` starts like the other verbs: its help imports no model, HTTP
client or YAML parser, and a create against a real hub (examples/templates.yaml applied, as an
admin would) imports no model or asynchronous client — the hub does the expanding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qctl.cli import CREATE_KINDS
from qctl.commands.dev import DevFederation
from tests.qctl.test_light_imports import HEAVY, HELP_NEVER, connection, run_qctl

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", [k.kind for k in CREATE_KINDS])
def test_create_help_imports_no_model_http_client_or_yaml(tmp_path: Path, kind: str) -> None:
    run = run_qctl(tmp_path, "create", kind, "--help")
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"usage: qctl create {kind}")
    assert run.imported(*HELP_NEVER) == []


def test_a_create_without_a_profile_is_a_usage_error(tmp_path: Path) -> None:
    run = run_qctl(tmp_path, "create", "job", "--cmd", "true")
    assert run.code == 2
    assert "the following arguments are required: --profile" in run.stderr


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevFederation]:
    """A real hub with the dev fleet's queues and the example profile; no clusters."""
    fed = DevFederation(tmp_path_factory.mktemp("hub"), clusters=1, port=0)
    try:
        fed.start_hub_only()
        tmp = tmp_path_factory.mktemp("apply")
        examples = str(ROOT / "examples" / "templates.yaml")
        run = run_qctl(tmp, "apply", "-f", examples, env=connection(fed))
        assert run.code == 0, run.stderr
        yield fed
    finally:
        fed.stop()


@pytest.mark.e2e
@pytest.mark.slow
class TestAgainstAHub:
    def test_create_job_imports_no_model_or_async_client(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(
            tmp_path, "create", "job", "--profile", "research", "--name", "light",
            "--cmd", "echo hi", env=connection(hub),
        )  # fmt: skip
        assert run.code == 0, run.stderr
        assert run.stdout == "workload/job-light created\n"
        assert run.imported(*HEAVY, "yaml") == []

    def test_a_missing_required_flag_is_one_line_naming_it(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(tmp_path, "create", "job", "--profile", "research", env=connection(hub))
        assert run.code != 0
        assert run.stderr.splitlines()[0].startswith("error: ")
        assert "cmd: Required value: the profile's Job mode requires --cmd" in run.stderr

    def test_dry_run_as_yaml_shows_the_job_that_would_be_submitted(
        self, hub: DevFederation, tmp_path: Path
    ) -> None:
        run = run_qctl(
            tmp_path, "create", "job", "--profile", "research", "--name", "shown",
            "--cmd", "echo hi", "--request", "cpu=2", "--dry-run", "-o", "yaml",
            env=connection(hub),
        )  # fmt: skip
        assert run.code == 0, run.stderr
        assert run.stdout.startswith("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: shown\n")
        assert "- name: SCRATCH_DIR\n" in run.stdout
        get = run_qctl(tmp_path, "get", "workloads", env=connection(hub))
        assert "job-shown" not in get.stdout
