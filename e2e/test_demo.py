"""The README's main job, run as a user runs it (`qctl dev demo`, which `./dev demo` calls):
the two demo jobs land on different clusters (the hub offers each where there is most room),
their pods' lines stream into one terminal prefixed with their cluster, both succeed, and
nothing is left running."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from e2e.conftest import QCTL, ROOT


def test_the_demo_runs_its_two_jobs_on_different_clusters_and_streams_both(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [QCTL, "dev", "demo", "--port", "0", "--color", "never"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    where = dict(re.findall(r"workload/(job-\w+)\s+cluster (sim-\d)", out))
    assert set(where) == {"job-evaluate", "job-train"}, out
    assert where["job-evaluate"] != where["job-train"], out
    assert re.search(rf"^{where['job-evaluate']}/evaluate-\w+/evaluator ", out, re.M), out
    assert re.search(rf"^{where['job-train']}/train-1-\w+/trainer worker 1: done$", out, re.M), out
    assert "workload/job-evaluate succeeded" in out and "workload/job-train succeeded" in out
    assert out.rstrip().endswith("Federation stopped; nothing left running.")
