"""The throwaway etcd (`hub.store.localetcd`): a member dies with the thread that started it,
starting one runs none of the process's fork handlers (gRPC's broke a member restarted
while the etcd client was busy), and a restarted member is back on the ports it had, which lie
outside the kernel's ephemeral range."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.store.localetcd import LocalEtcd

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir() -> Iterator[Path]:
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(prefix="multiq-test-etcd-", dir=shm if shm.is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_member_dies_when_the_thread_that_started_it_ends(data_dir: Path) -> None:
    started: list[LocalEtcd] = []
    thread = threading.Thread(target=lambda: started.append(LocalEtcd.start(data_dir)))
    thread.start()
    thread.join()
    (member,) = started
    try:
        deadline = time.monotonic() + 10
        while member.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not member.running
    finally:
        member.stop()


def test_starting_a_member_runs_none_of_the_processs_fork_handlers(data_dir: Path) -> None:
    # gRPC (the etcd client) registers handlers around fork; run in a child forked while the
    # client was busy, they broke it before it could exec etcd, and a restarted member
    # sometimes never came up.
    forks: list[int] = []
    watching = True
    os.register_at_fork(before=lambda: forks.append(1) if watching else None)
    try:
        member = LocalEtcd.start(data_dir)
        member.kill()
        member.restart()
        member.stop()
    finally:
        watching = False
    assert forks == []


def test_a_restarted_member_listens_again_on_its_ports_outside_the_ephemeral_range(
    data_dir: Path,
) -> None:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    member = LocalEtcd.start(data_dir)
    try:
        ports = {member.port, *(int(a.rsplit(":", 1)[1]) for a in member.argv if "peer-urls" in a)}
        assert len(ports) == 2
        assert not any(low <= port <= high for port in ports)
        member.kill()
        member.restart()  # (raises unless it is healthy again)
        assert member.healthy()
    finally:
        member.stop()
