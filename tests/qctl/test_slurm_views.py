"""qctl prints Slurm jobs as Slurm's tools do: squeue's default columns and `%.18i`-style
widths, pending array tasks collapsed into `A_[…]`, sacct's `--format` fields with widths, and
sbatch's command line keeps qctl's own connection flags apart from sbatch's."""

from __future__ import annotations

from typing import Any

import pytest

from qctl.commands.slurm import strip_connection_flags
from qctl.slurmview import collapse_pending_arrays, duration, sacct_table, squeue_table


def row(job: str, state: str = "PENDING", reason: str = "Priority", **kw: Any) -> dict[str, Any]:
    array, _, task = job.partition("_")
    return {
        "jobId": job,
        "id": int(array) + (int(task) + 1 if task else 0),
        "arrayJobId": int(array) if task else None,
        "arrayTaskId": int(task) if task else None,
        "name": "train",
        "user": "alice",
        "partition": "gpu",
        "state": state,
        "reason": reason,
        "nodes": 1,
        "nodeList": "east" if state != "PENDING" else "",
        "elapsedSeconds": 75,
        "exitCode": "0:0",
        **kw,
    }


def test_squeue_prints_slurms_default_columns() -> None:
    text = squeue_table([row("12", "RUNNING", "None"), row("13", reason="Dependency")])
    assert text.splitlines() == [
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)",
        "                12       gpu    train    alice  R       1:15      1 east",
        "                13       gpu    train    alice PD       1:15      1 (Dependency)",
    ]


def test_a_format_takes_left_and_right_justified_widths_and_cuts_values() -> None:
    text = squeue_table([row("12", name="averylongname")], "%i|%.5i|%-3j|%4j|%T", header=False)
    assert text == "12|   12|%-3j|aver|PENDING\n"


def test_pending_tasks_of_one_array_and_reason_collapse_into_one_line() -> None:
    rows = [
        row("7_0", "RUNNING", "None"),
        *[row(f"7_{i}", reason="JobArrayTaskLimit") for i in (1, 2, 3, 5)],
        row("9"),
    ]
    assert [r["jobId"] for r in collapse_pending_arrays(rows)] == ["7_0", "7_[1-3,5]", "9"]


def test_sacct_prints_the_fields_asked_for_right_justified() -> None:
    rows = [row("5", "FAILED", "NonZeroExitCode", exitCode="3:0", elapsedSeconds=3661)]
    text = sacct_table(rows, "JobID,JobName%4,State,ExitCode,Elapsed,NodeList,Cluster")
    header, rule, line = text.splitlines()
    assert set(rule.split()[0]) == {"-"}
    assert header.split() == [
        "JobID",
        "Job+",
        "State",
        "ExitCode",
        "Elapsed",
        "NodeList",
        "Cluster",
    ]
    assert line.split() == ["5", "tra+", "FAILED", "3:0", "01:01:01", "east"]
    with pytest.raises(ValueError, match="invalid field 'Bogus'"):
        sacct_table(rows, "JobID,Bogus")


def test_the_comment_shows_in_squeue_and_sacct() -> None:
    rows = [row("5", comment="lr sweep"), row("6")]
    assert squeue_table(rows, "%i %k", header=False) == "5 lr sweep\n6 (null)\n"
    assert sacct_table(rows, "JobID,Comment", header=False).split() == ["5", "lr", "sweep", "6"]


def test_durations_read_as_slurms() -> None:
    assert [duration(s) for s in (5, 75, 3661, 90061)] == ["0:05", "1:15", "1:01:01", "1-01:01:01"]


def test_connection_flags_before_the_script_are_qctls_and_the_rest_sbatchs() -> None:
    connection, argv = strip_connection_flags(
        ["-n", "4", "--namespace", "vision", "--server=http://h:1", "job.sh", "--server", "x"]
    )
    assert (connection.namespace, connection.server) == ("vision", "http://h:1")
    assert argv == ["-n", "4", "job.sh", "--server", "x"]
