"""Throwaway etcd servers on loopback, for tests, benchmarks and development: one member
(`LocalEtcd`) or a cluster of several (`LocalEtcdCluster`).

Called by: `tests/hub/store/conftest.py` (one server per test session), the hub HA tests (a
three-member cluster), `bench/store_throughput.py`, and `qctl dev up --ha`, which runs this
module as a command (`python -m hub.store.localetcd --data-dir DIR --endpoints-file FILE`)
because qctl may not import the hub. Production hubs connect to an etcd cluster deployed by
`manifests/`; nothing in the hub's serving path starts one.

It runs Debian's `etcd` binary (package `etcd-server`, 3.4) on free loopback ports with its
data in a directory the caller owns, waits until every member's `/health` answers, and stops
members with SIGTERM (SIGKILL after a grace period). A killed member can be restarted on its
own data and ports, and rejoins its cluster. Children are also asked to die with their parent
(`PR_SET_PDEATHSIG`, set by util-linux's `setpriv` just before it execs etcd), so a killed test
run leaves no etcd behind; Linux sends that signal when the *thread* that started the child
ends, so start and restart members from a thread that lives as long as they should (not from
`asyncio.to_thread` in a test whose loop then closes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from localports import free_ports

__all__ = ["EtcdNotInstalledError", "LocalEtcd", "LocalEtcdCluster", "main"]


class EtcdNotInstalledError(RuntimeError):
    pass


def _dying_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGKILL when the thread that started it ends.

    Not a `preexec_fn`: Python runs its at-fork handlers around one, and gRPC's (the etcd
    client's, when it is busy in another thread) then broke the child before it could exec —
    a restarted member sometimes never came up. `setpriv` sets the signal in the child it
    execs instead. Without it (not on Debian), the member simply outlives a killed parent."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


def _etcd_binary(binary: str) -> str:
    exe = shutil.which(binary)
    if exe is None:
        raise EtcdNotInstalledError(
            f"the {binary!r} binary is not on PATH: install Debian's etcd-server"
            " (apt-get install -y etcd-server; ./dev test does it)"
        )
    return exe


@dataclass
class LocalEtcd:
    """One etcd member: its client address, its data, its process."""

    host: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]
    name: str = "local"
    argv: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls, data_dir: Path, *, binary: str = "etcd", startup_timeout: float = 30.0
    ) -> LocalEtcd:
        """Start a single-member server with its data in `data_dir` and wait for it."""
        exe = _etcd_binary(binary)
        data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):  # a port picked free can still be named by another process
            client, peer = free_ports(2)
            cluster = f"local=http://127.0.0.1:{peer}"
            server = cls._spawn(exe, "local", data_dir, client, peer, cluster)
            if server._wait_healthy(startup_timeout):
                return server
            server.stop()
            shutil.rmtree(data_dir / "member-data", ignore_errors=True)
        raise RuntimeError(f"etcd did not become healthy; its log ends with:\n{_tail(data_dir)}")

    @classmethod
    def _spawn(
        cls, exe: str, name: str, data_dir: Path, client: int, peer: int, cluster: str
    ) -> LocalEtcd:
        argv = [
            exe,
            f"--name={name}",
            f"--data-dir={data_dir / 'member-data'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn",
        ]
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls("127.0.0.1", client, data_dir, _run(argv, data_dir), name, argv)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def _wait_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                return False
            if self.healthy():
                return True
            time.sleep(0.05)
        return False

    def healthy(self) -> bool:
        with (
            contextlib.suppress(OSError, ValueError),
            urllib.request.urlopen(self.url + "/health", timeout=1) as reply,
        ):
            return bool(json.loads(reply.read()).get("health") == "true")
        return False

    def stop(self, *, grace: float = 5.0) -> None:
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crashed member would die."""
        if self.running:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self, *, startup_timeout: float = 30.0) -> None:
        """Start a stopped or killed member again on its data and ports (it rejoins its
        cluster) and wait until it is healthy."""
        if self.running:
            raise RuntimeError(f"etcd member {self.name} is still running")
        self.process = _run(self.argv, self.data_dir)
        if not self._wait_healthy(startup_timeout):
            raise RuntimeError(
                f"etcd member {self.name} did not come back; its log ends with:\n"
                f"{_tail(self.data_dir)}"
            )


@dataclass
class LocalEtcdCluster:
    """Several etcd members forming one cluster on loopback."""

    members: list[LocalEtcd]

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        size: int = 3,
        ports: Sequence[tuple[int, int]] | None = None,
        binary: str = "etcd",
        startup_timeout: float = 30.0,
    ) -> LocalEtcdCluster:
        """Start `size` members (data in `data_dir/m<i>`) and wait until all are healthy.
        `ports`: each member's (client, peer) port, for a cluster that must come back where
        it was (its data kept, on the same ports); by default free ones are picked."""
        if size < 1:
            raise ValueError("an etcd cluster has at least one member")
        if ports is not None and len(ports) != size:
            raise ValueError(f"{len(ports)} port pairs for {size} members")
        exe = _etcd_binary(binary)
        # A port picked free can still be named by another process: try thrice (not with
        # `ports`).
        for _ in range(1 if ports else 3):
            if ports:
                chosen = list(ports)
            else:
                free = iter(free_ports(2 * size))
                chosen = [(next(free), next(free)) for _ in range(size)]
            initial = ",".join(
                f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(chosen)
            )
            members = [
                LocalEtcd._spawn(exe, f"m{i}", data_dir / f"m{i}", client, peer, initial)
                for i, (client, peer) in enumerate(chosen)
            ]
            cluster = cls(members)
            # Members wait for each other (a quorum) before answering healthy.
            if all(m._wait_healthy(startup_timeout) for m in members):
                return cluster
            cluster.stop()
            if ports is None:  # a failed first start: its data is worth nothing
                for i in range(size):
                    shutil.rmtree(data_dir / f"m{i}" / "member-data", ignore_errors=True)
        raise RuntimeError(
            f"the etcd cluster did not become healthy; m0's log ends with:\n"
            f"{_tail(data_dir / 'm0')}"
        )

    @property
    def endpoints(self) -> str:
        """`host:port,host:port,…`, as `multiq-hub --store etcd://…` takes them."""
        return ",".join(m.endpoint for m in self.members)

    def stop(self) -> None:
        for member in self.members:
            member.stop()


def _run(argv: list[str], data_dir: Path) -> subprocess.Popen[bytes]:
    with (data_dir / "etcd.log").open("ab") as log:
        return subprocess.Popen(
            _dying_with_parent(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )


def _tail(data_dir: Path) -> str:
    with contextlib.suppress(OSError):
        return (data_dir / "etcd.log").read_text(errors="replace")[-2000:]
    return "(no log)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run a local etcd in the foreground until SIGTERM or SIGINT; write its endpoints to a
    file once it is healthy (for `qctl dev up --ha`, which waits for that file)."""
    parser = argparse.ArgumentParser(
        prog="python -m hub.store.localetcd", description="A throwaway local etcd."
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--members", type=int, default=1)
    parser.add_argument(
        "--ports",
        help="CLIENT:PEER[,CLIENT:PEER…], one pair per member (default: free ports); with the "
        "same ports and data directory, a stopped etcd comes back as it was",
    )
    parser.add_argument("--endpoints-file", type=Path, help="where to write host:port[,…]")
    args = parser.parse_args(argv)
    ports = None
    if args.ports:
        pairs = [p.split(":") for p in args.ports.split(",")]
        ports = [(int(client), int(peer)) for client, peer in pairs]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster = LocalEtcdCluster.start(args.data_dir, size=args.members, ports=ports)
    except (EtcdNotInstalledError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        print(f"etcd ready at {cluster.endpoints}", flush=True)
        if args.endpoints_file:
            tmp = args.endpoints_file.with_suffix(".tmp")
            tmp.write_text(cluster.endpoints)
            tmp.replace(args.endpoints_file)
        while not stop.wait(1.0):
            for member in cluster.members:
                if not member.running:
                    print(f"etcd member {member.name} exited", file=sys.stderr, flush=True)
                    return 1
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
