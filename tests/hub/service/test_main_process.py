"""`multiq-hub` as a process, as a Deployment runs it: SIGTERM (what the kubelet sends) ends it
cleanly — exit code 0, its store closed with everything it accepted — and a hub started again
on the same store serves what the first one was given."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from api.tokens import hash_token
from qctl.commands.dev import free_port

TOKEN = "process-test-admin-token"
API = "/apis/multiq.dev/v1alpha1"
HASH = hash_token(TOKEN)


def start_hub(tmp_path: Path, port: int, *flags: str) -> subprocess.Popen[bytes]:
    users = {"users": [{"name": "admin", "groups": ["multiq:admins"], "tokenHash": HASH}]}
    (tmp_path / "users.yaml").write_text(yaml.safe_dump(users))
    return subprocess.Popen(
        [sys.executable, "-m", "hub.main", "--port", str(port),
         "--store", f"sqlite:{tmp_path / 'hub.db'}", "--users-file", str(tmp_path / "users.yaml"),
         *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )  # fmt: skip


def call(port: int, method: str, path: str, body: object | None = None) -> tuple[int, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the hub was not ready within 30 s")


def test_sigterm_ends_the_hub_cleanly_and_a_new_one_serves_what_it_accepted(
    tmp_path: Path,
) -> None:
    port = free_port()
    hub = start_hub(tmp_path, port)
    try:
        wait_ready(port, hub)
        flavor = {"apiVersion": "multiq.dev/v1alpha1", "kind": "ResourceFlavor",
                  "metadata": {"name": "kept"}}  # fmt: skip
        status, _ = call(port, "POST", f"{API}/resourceflavors", flavor)
        assert status == 201
        hub.send_signal(signal.SIGTERM)
        _, stderr = hub.communicate(timeout=20)
        assert hub.returncode == 0, stderr.decode()
    finally:
        if hub.poll() is None:
            hub.kill()
    again = start_hub(tmp_path, port)
    try:
        wait_ready(port, again)
        status, body = call(port, "GET", f"{API}/resourceflavors/kept")
        assert status == 200 and body["metadata"]["name"] == "kept"  # type: ignore[index]
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=20)


@pytest.mark.parametrize(
    ("flags", "uvloop_loaded"),
    [pytest.param([], True, id="uvloop by default"),
     pytest.param(["--event-loop", "asyncio"], False, id="asyncio's own when asked")],
)  # fmt: skip
def test_the_hub_process_serves_on_the_event_loop_its_flag_names(
    tmp_path: Path, flags: list[str], uvloop_loaded: bool
) -> None:
    port = free_port()
    hub = start_hub(tmp_path, port, *flags)
    try:
        wait_ready(port, hub)
        # The extension module is mapped into the process only if the loop was made with it.
        maps = Path(f"/proc/{hub.pid}/maps").read_text()
        assert ("uvloop" in maps) is uvloop_loaded
    finally:
        hub.send_signal(signal.SIGTERM)
        _, stderr = hub.communicate(timeout=20)
    assert hub.returncode == 0, stderr.decode()
