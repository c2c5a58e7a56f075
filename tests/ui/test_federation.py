"""The dashboard against a real `qctl dev up` federation (kubesim clusters, the hub, one agent
per cluster, processes like the README's): every page loads (screenshots saved under
artifacts/ui/), the workload list shows a job submitted with qctl without a reload, a running
workload's logs stream into its page with cluster/pod/container prefixes, Cancel on the page
removes its Job from its cluster, and a tenant's token shows that tenant's workloads only."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.async_api import Browser, expect

from api.tokens import hash_token
from e2e.conftest import QCTL, ROOT, kubectl
from qctl.commands.dev import DevFederation
from tests.ui.conftest import Dashboard

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Two tenants besides the dev federation's own, each with one user.
TENANT_USERS = {"alice": "team-a", "bob": "team-b"}


class TenantFederation(DevFederation):
    """The dev federation, with a user per tenant in the hub's users file."""

    def user_token(self, user: str) -> str:
        return f"{user}-{self.admin_token}"

    def _write_secrets(self) -> None:
        super()._write_secrets()
        users_file = self.state_dir / "users.yaml"
        users = yaml.safe_load(users_file.read_text())
        users["users"] += [
            {"name": u, "tokenHash": hash_token(self.user_token(u))} for u in TENANT_USERS
        ]
        users_file.write_text(yaml.safe_dump(users))

    def fleet_objects(self) -> list[dict[str, Any]]:
        api = "multiq.dev/v1alpha1"
        tenants = [
            {
                "apiVersion": api,
                "kind": "Tenant",
                "metadata": {"name": ns},
                "spec": {"namespaces": [ns], "users": [user]},
            }
            for user, ns in TENANT_USERS.items()
        ]
        queues = [
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": ns},
                "spec": {"clusterQueue": "default"},
            }
            for ns in TENANT_USERS.values()
        ]
        return [*super().fleet_objects(), *tenants, *queues]


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TenantFederation]:
    fed = TenantFederation(
        tmp_path_factory.mktemp("ui") / "fed", clusters=2, nodes=2, runtime="process", port=0
    )
    try:
        fed.start(detach=False)
        yield fed
    finally:
        fed.stop()


def qctl(fed: TenantFederation, *args: str, token: str | None = None) -> str:
    env = {
        **os.environ,
        "MULTIQ_SERVER": fed.url,
        "MULTIQ_TOKEN": token or fed.admin_token,
        "MULTIQ_CONFIG": str(fed.state_dir / "qctl-config.yaml"),
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [QCTL, *args], capture_output=True, text=True, env=env, timeout=60, check=False, cwd=ROOT
    )
    assert result.returncode == 0, f"qctl {args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def job_file(directory: Path, name: str, script: str, namespace: str = "default") -> Path:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"multiq.dev/queue-name": "default"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", script],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                }
            }
        },
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


async def submit(fed: TenantFederation, path: Path, token: str | None = None) -> str:
    out = await asyncio.to_thread(qctl, fed, "submit", "-f", str(path), token=token)
    # "workload/NAME submitted to queue …"
    return out.split()[0].removeprefix("workload/")


async def test_every_page_loads_and_is_saved_as_a_screenshot(
    federation: TenantFederation, browser: Browser, tmp_path: Path
) -> None:
    name = await submit(federation, job_file(tmp_path, "shot", "echo hello; sleep 20"))
    board = await Dashboard.open(browser, federation.url, federation.admin_token)
    page = board.page
    await board.go("fleet")
    for cluster in federation.names:
        await expect(page.locator(f'[data-cluster="{cluster}"] .badge-ok')).to_have_text(
            "connected"
        )
    await expect(page.get_by_role("meter").first).to_be_visible()
    await board.screenshot("fleet")
    await board.go("queues")
    await expect(page.locator('table tr[data-queue="default"]').first).to_be_visible()
    await board.screenshot("queues")
    await board.go("workloads")
    await expect(page.get_by_role("link", name=name)).to_be_visible()
    await board.screenshot("workloads")
    await board.go(f"workloads/default/{name}")
    await expect(page.locator("#logs")).to_contain_text("hello", timeout=30_000)
    await board.screenshot("workload")
    for route in ("fleet", "queues", "workloads", f"workloads/default/{name}"):
        await board.go(route)
        assert await board.axe_violations() == [], route
    board.assert_no_page_errors()


async def test_the_workload_list_shows_a_job_submitted_with_qctl_without_a_reload(
    federation: TenantFederation, browser: Browser, tmp_path: Path
) -> None:
    board = await Dashboard.open(browser, federation.url, federation.admin_token)
    await board.go("workloads")
    page = board.page
    await expect(page.locator("#wl-summary")).to_contain_text("Showing")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    name = await submit(federation, job_file(tmp_path, "live", "sleep 2"))
    row = page.locator(".vt-row", has=page.get_by_role("link", name=name, exact=True))
    await expect(row).to_be_visible()
    # The same row then follows the workload to its end, still without a reload.
    await expect(row.locator(".col-state")).to_have_text("Succeeded", timeout=60_000)
    await expect(row.locator(".col-cluster")).to_have_text(re.compile("^sim-[01]$"))
    assert navigations == []
    board.assert_no_page_errors()


async def test_a_running_workloads_logs_stream_into_its_page_with_their_prefixes(
    federation: TenantFederation, browser: Browser, tmp_path: Path
) -> None:
    script = "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 1; done"
    name = await submit(federation, job_file(tmp_path, "ticker", script))
    board = await Dashboard.open(browser, federation.url, federation.admin_token)
    await board.go(f"workloads/default/{name}")
    page = board.page
    logs = page.locator("#logs")
    await expect(logs).to_contain_text("tick 2", timeout=60_000)
    # Lines arrive while it runs: the page says Running with only some of them there.
    await expect(page.locator("#wl-state")).to_have_text("Running")
    assert "tick 10" not in await logs.inner_text()
    first = page.locator(".log-line").first
    cluster = await page.locator("#wl-cluster").inner_text()
    await expect(first.locator(".log-prefix")).to_have_text(
        re.compile(rf"^\[{cluster}/[a-z0-9.-]+/main\]$")
    )
    await expect(logs).to_contain_text("tick 10", timeout=30_000)
    board.assert_no_page_errors()


async def test_cancel_on_the_page_removes_the_workloads_job_from_its_cluster(
    federation: TenantFederation, browser: Browser, tmp_path: Path
) -> None:
    name = await submit(federation, job_file(tmp_path, "doomed", "echo up; sleep 300"))
    board = await Dashboard.open(browser, federation.url, federation.admin_token)
    await board.go(f"workloads/default/{name}")
    page = board.page
    await expect(page.locator("#wl-state")).to_have_text("Running", timeout=60_000)
    cluster = await page.locator("#wl-cluster").inner_text()

    def jobs() -> list[str]:
        out = kubectl(
            federation, cluster, "get", "jobs", "-A", "-o", "json",
            "-l", f"multiq.dev/workload-name={name}",
        )  # fmt: skip
        return [j["metadata"]["name"] for j in json.loads(out)["items"]]

    assert await asyncio.to_thread(jobs) != []
    await page.get_by_role("button", name="Cancel workload").click()
    await expect(page.locator("#gone")).to_be_visible()
    for _ in range(120):
        if not await asyncio.to_thread(jobs):
            break
        await asyncio.sleep(0.5)
    assert await asyncio.to_thread(jobs) == []
    board.assert_no_page_errors()


async def test_a_tenants_token_shows_only_that_tenants_workloads(
    federation: TenantFederation, browser: Browser, tmp_path: Path
) -> None:
    alice, bob = (federation.user_token(u) for u in TENANT_USERS)
    mine = await submit(federation, job_file(tmp_path, "mine", "sleep 1", "team-a"), alice)
    theirs = await submit(federation, job_file(tmp_path, "theirs", "sleep 1", "team-b"), bob)
    board = await Dashboard.open(browser, federation.url, alice)
    await board.go("workloads")
    page = board.page
    await expect(page.get_by_role("link", name=mine, exact=True)).to_be_visible()
    await expect(page.locator("#wl-filter-namespace option")).to_have_text(["all", "team-a"])
    assert await page.get_by_role("link", name=theirs, exact=True).count() == 0
    # Going to the other tenant's workload by its address shows the hub's refusal, not it.
    await board.go(f"workloads/team-b/{theirs}")
    await expect(page.locator("#gone")).to_contain_text("may not")
    await expect(page.locator("#logs .log-line")).to_have_count(0)
    # Only what alice may do is offered: Cancel on her own workload, no Stop on any queue.
    await board.go(f"workloads/team-a/{mine}")
    await expect(page.locator("#cancel")).to_be_visible()
    await board.go("queues")
    await expect(page.locator("#page table").first).to_be_visible()
    assert await page.get_by_role("button", name="Stop").count() == 0
    board.assert_no_page_errors()


async def test_an_admin_stops_and_resumes_a_cluster_queue_from_the_page(
    federation: TenantFederation, browser: Browser
) -> None:
    board = await Dashboard.open(browser, federation.url, federation.admin_token)
    await board.go("queues")
    page = board.page

    def stop_policy() -> str:
        out = qctl(federation, "get", "clusterqueues", "default", "-o", "json")
        return str(json.loads(out)["spec"].get("stopPolicy", "None"))

    await page.get_by_role("button", name="Stop cluster queue default").click()
    for _ in range(40):
        if await asyncio.to_thread(stop_policy) == "Hold":
            break
        await asyncio.sleep(0.25)
    assert await asyncio.to_thread(stop_policy) == "Hold"
    resume = page.get_by_role("button", name="Resume cluster queue default")
    await expect(resume).to_be_visible(timeout=15_000)  # (the page re-lists queues every 5 s)
    await resume.click()
    for _ in range(40):
        if await asyncio.to_thread(stop_policy) == "None":
            break
        await asyncio.sleep(0.25)
    assert await asyncio.to_thread(stop_policy) == "None"
    board.assert_no_page_errors()
