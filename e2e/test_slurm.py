"""The Slurm mode end to end on a two-cluster dev federation (kubesim, process runtime): the
examples/slurm scripts go through `qctl sbatch`; `qctl squeue`, `sacct`, `scancel`, `output`
and `sbatch --wait` show and act on them; the variables the jobs saw match Slurm 22.05's lists
and the output files appear under their expanded names (stderr in its own file with
`--error`)."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time
from pathlib import Path

from e2e.conftest import QCTL, ROOT
from qctl.commands.dev import DevFederation
from tests.api.slurm.test_environment_and_work import ARRAY, PLAIN

EXAMPLES = ROOT / "examples" / "slurm"


def run(fed: DevFederation, cwd: Path, *args: str, expect: int = 0) -> str:
    env = {
        **os.environ,
        "MULTIQ_SERVER": fed.url,
        "MULTIQ_TOKEN": fed.admin_token,
        "MULTIQ_CONFIG": str(fed.state_dir / "qctl-config.yaml"),
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [QCTL, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )
    assert result.returncode == expect, f"qctl {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


def states(fed: DevFederation, cwd: Path, job: str) -> dict[str, str]:
    out = run(fed, cwd, "sacct", "-j", job, "--noheader", "--format", "JobID%20,State%20")
    return dict(line.split() for line in out.splitlines() if line.strip())


def until(check: object, within: float = 90.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError("timed out")


def slurm_names(path: Path) -> list[str]:
    return sorted(
        line.split("=", 1)[0] for line in path.read_text().splitlines() if line.startswith("SLURM_")
    )


def test_the_example_scripts_run_and_show_in_squeue_and_sacct(
    federation: DevFederation, tmp_path: Path
) -> None:
    fed, here = federation, tmp_path
    plain = run(fed, here, "sbatch", "--parsable", str(EXAMPLES / "plain.sbatch")).strip()
    array = run(fed, here, "sbatch", "--parsable", str(EXAMPLES / "array-throttled.sbatch")).strip()
    nodes = run(fed, here, "sbatch", "--parsable", str(EXAMPLES / "two-nodes.sbatch")).strip()
    failing = run(fed, here, "sbatch", "--parsable", str(EXAMPLES / "fails.sbatch")).strip()
    after = run(
        fed, here, "sbatch", "--parsable", f"--dependency=afterok:{failing}",
        str(EXAMPLES / "after-ok.sbatch"),
    ).strip()  # fmt: skip
    sleeper = run(fed, here, "sbatch", "--parsable", "-J", "sleeper", "--wrap", "sleep 600").strip()

    # The throttle: never more than two tasks of the array running at once.
    most_running = 0

    def array_done() -> bool:
        nonlocal most_running
        out = run(fed, here, "squeue", "-t", "all", "-j", array, "--noheader", "-o", "%i %t")
        codes = [line.split()[1] for line in out.splitlines() if line.strip()]
        most_running = max(most_running, codes.count("R"))
        return len(codes) == 6 and all(c == "CD" for c in codes)

    until(array_done)
    assert 1 <= most_running <= 2

    def ended() -> bool:
        return all(
            states(fed, here, j).get(j) not in (None, "PENDING", "RUNNING")
            for j in (plain, nodes, failing, after)
        )

    until(ended)
    assert states(fed, here, plain) == {plain: "COMPLETED"}
    assert states(fed, here, nodes) == {nodes: "COMPLETED"}
    assert states(fed, here, failing) == {failing: "FAILED"}
    assert states(fed, here, after) == {after: "CANCELLED"}
    exit_codes = run(
        fed, here, "sacct", "-j", f"{failing},{after}", "--noheader", "-o", "JobID,ExitCode"
    )
    assert [line.split() for line in exit_codes.splitlines()] == [[failing, "3:0"], [after, "0:0"]]
    squeue = run(fed, here, "squeue", "-t", "all", "-j", after)
    assert "(DependencyNeverSatisfied)" in squeue

    # scancel: the record stays, CANCELLED.
    until(lambda: states(fed, here, sleeper).get(sleeper) == "RUNNING")
    run(fed, here, "scancel", sleeper)
    until(lambda: states(fed, here, sleeper).get(sleeper) == "CANCELLED")

    # Output files under their expanded names; the variables are Slurm's, name by name.
    run(fed, here, "output", plain)
    assert slurm_names(here / f"envdump-plain-{plain}.out") == sorted(PLAIN)
    extra = (here / f"envdump-plain-{plain}.out").read_text().splitlines()[-1]
    seen = re.fullmatch(r"SLURMD_NODENAME=(\S+) ENVIRONMENT=BATCH", extra)
    assert seen is not None, extra
    # sacct's NodeList names the node the job's pod ran on, as the job saw it.
    node_list = run(fed, here, "sacct", "-j", plain, "--noheader", "-o", "NodeList%60")
    assert node_list.split() == [seen[1]]
    # --error: stderr in a file of its own, stdout without it.
    run(fed, here, "output", failing)
    user = pwd.getpwuid(os.getuid()).pw_name
    assert (here / f"fails-{failing}-{user}.out").read_text() == "about to fail\n"
    assert (here / f"fails-{failing}.err").read_text() == "failing with exit code 3\n"
    run(fed, here, "output", array)
    for task in range(6):
        out = here / f"sweep-{array}_{task}.out"
        assert out.read_text().startswith(f"task {task} of array {array} is job ")
        assert slurm_names(out) == ARRAY
    run(fed, here, "output", nodes)
    lines = sorted((here / f"two-nodes-{nodes}.out").read_text().splitlines())
    assert [line.split(" on ")[0] for line in lines] == [
        "node 0 of 2 (rank 0)",
        "node 1 of 2 (rank 1)",
    ]
    pods_nodes = {line.split(" on ")[1].split(";")[0] for line in lines}
    node_list = run(fed, here, "sacct", "-j", nodes, "--noheader", "-o", "NodeList%60")
    assert set(node_list.split()[0].split(",")) == pods_nodes


def test_sbatch_wait_exits_with_the_highest_exit_code_of_an_array(
    federation: DevFederation, tmp_path: Path
) -> None:
    out = run(
        federation, tmp_path, "sbatch", "--wait", str(EXAMPLES / "wait-array.sbatch"), expect=4
    )
    job = out.split()[-1]
    assert out == f"Submitted batch job {job}\n"
    for task in (1, 2, 3, 4):
        assert (tmp_path / f"waited-{job}_{task}.out").read_text() == f"task {task}\n"
