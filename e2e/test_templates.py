"""Job templates end to end: an admin applies examples/templates.yaml to a two-cluster dev
federation, a researcher types `qctl create job --profile research --cmd …` and the Job runs to
Succeeded on a member cluster with the bundle's scratch volume and variables, its log readable
with qctl logs; `qctl sbatch --profile research` runs in the profile's Slurm mode."""

from __future__ import annotations

from e2e.conftest import ROOT, qctl
from e2e.test_federation import eventually, state_of
from qctl.commands.dev import DevFederation


def test_create_job_from_a_profile_runs_to_succeeded(federation: DevFederation) -> None:
    qctl(federation, "apply", "-f", str(ROOT / "examples" / "templates.yaml"))
    command = "sh -c 'echo profile=$PROFILE scratch=$SCRATCH_DIR; ls -d $SCRATCH_DIR'"
    out = qctl(
        federation, "create", "job", "--profile", "research", "--name", "from-profile",
        "--cmd", command,
    ).stdout  # fmt: skip
    assert out == "workload/job-from-profile created\n"
    eventually(lambda: state_of(federation, "job-from-profile") == "Succeeded", within=120)
    logs = qctl(federation, "logs", "job-from-profile").stdout
    assert "profile=default_research scratch=/scratch" in logs
    assert logs.rstrip().endswith("/scratch")


def test_sbatch_with_a_profile_runs_in_its_slurm_mode(federation: DevFederation) -> None:
    qctl(federation, "apply", "-f", str(ROOT / "examples" / "templates.yaml"))
    out = qctl(
        federation, "sbatch", "--profile", "research", "--parsable", "-J", "profiled",
        "--wrap", "echo job $SLURM_JOB_ID in $SCRATCH_DIR",
    ).stdout  # fmt: skip
    job_id = int(out.strip())
    name = f"job-profiled-{job_id}"
    eventually(lambda: state_of(federation, name) == "Succeeded", within=120)
    assert f"job {job_id} in /scratch" in qctl(federation, "logs", name).stdout
