"""A throwaway single-member etcd server on loopback, for tests, benchmarks and development.

Called by: `tests/hub/store/conftest.py` (one server per test session) and
`bench/store_throughput.py`. Production hubs connect to an etcd cluster deployed by
`manifests/`; nothing in the hub's serving path starts one.

It runs Debian's `etcd` binary (package `etcd-server`, 3.4) on free loopback ports with its
data in a directory the caller owns, waits until `/health` answers, and stops it with SIGTERM
(SIGKILL after a grace period). The child is also asked to die with its parent
(`PR_SET_PDEATHSIG`), so a killed test run leaves no etcd behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EtcdNotInstalledError", "LocalEtcd"]

_PR_SET_PDEATHSIG = 1


class EtcdNotInstalledError(RuntimeError):
    pass


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LocalEtcd:
    host: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(
        cls, data_dir: Path, *, binary: str = "etcd", startup_timeout: float = 30.0
    ) -> LocalEtcd:
        """Start a server with its data in `data_dir` (created if missing) and wait for it."""
        exe = shutil.which(binary)
        if exe is None:
            raise EtcdNotInstalledError(
                f"the {binary!r} binary is not on PATH: install Debian's etcd-server"
                " (apt-get install -y etcd-server; ./dev test does it)"
            )
        data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):  # a port picked free can be taken before etcd binds it
            client, peer = _free_port(), _free_port()
            log = (data_dir / "etcd.log").open("ab")
            process = subprocess.Popen(
                [
                    exe,
                    "--name=local",
                    f"--data-dir={data_dir / 'member-data'}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=local=http://127.0.0.1:{peer}",
                    "--logger=zap",
                    "--log-level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_die_with_parent,  # noqa: PLW1509  (only prctl before exec)
            )
            log.close()
            server = cls("127.0.0.1", client, data_dir, process)
            if server._wait_healthy(startup_timeout):
                return server
            server.stop()
        tail = (data_dir / "etcd.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"etcd did not become healthy; its log ends with:\n{tail}")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _wait_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(self.url + "/health", timeout=1) as reply,
            ):
                if json.loads(reply.read()).get("health") == "true":
                    return True
            time.sleep(0.05)
        return False

    def stop(self, *, grace: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crashed member would die."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
