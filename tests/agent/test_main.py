"""`multiq-agent` as a process: it dials the hub with its flags, and SIGTERM closes the
session and exits cleanly, leaving the Jobs it made running."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.messages import Hello, WorkloadPhase
from kubesim.testing import RunningSimulator
from tests.agent.conftest import CLUSTER, TOKEN, FakeHub, eventually, job_source, offer_for, status


async def test_the_agent_process_stops_on_sigterm_and_leaves_its_jobs_running(
    sim: RunningSimulator, hub: FakeHub, kube: KubeClient, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent",
        f"--kubeconfig={sim.kubeconfigs[CLUSTER]}",
        f"--hub={hub.url}",
        f"--cluster={CLUSTER}",
        f"--token-file={token_file}",
        f"--state-dir={tmp_path / 'state'}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        await hub.wait_for(lambda p: isinstance(p, Hello), within=30)
        await hub.offer(offer_for(job_source("survivor", script="sleep 20")))
        await hub.wait_for(status(WorkloadPhase.RUNNING, "survivor"), within=20)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 0, stderr.decode()
        assert b"Jobs keep running" in stderr
        await eventually(lambda: hub.control is None or hub.control.ws.closed)
        job = await kube.get(Resource.JOBS, "team-a", "survivor")
        assert not job["metadata"].get("deletionTimestamp")
        assert (job.get("status") or {}).get("active") == 1
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
