"""The dashboard in a real browser against a real in-process hub: signing in, the workloads
table (filters, sorting by keyboard), the page's idea of a workload's state matching qctl's,
and accessibility — axe-core finds no serious or critical violation on any page, and the
pages work from the keyboard."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from qctl.render import workload_state
from tests.hub.service.conftest import ADMIN, HubUnderTest, fleet_objects, job
from tests.ui.conftest import Dashboard

pytestmark = pytest.mark.slow

SUBMIT = "/apis/multiq.dev/v1alpha1/namespaces/vision/submissions"


async def submitted(hub: HubUnderTest, *names: str) -> list[dict[str, Any]]:
    await hub.apply(*fleet_objects())
    made = []
    for name in names:
        status, body = await hub.call("POST", SUBMIT, body=job(name))
        assert status == 201, body
        made.append(body)
    return made


async def test_a_token_the_hub_does_not_know_is_refused_at_sign_in(
    hub: HubUnderTest, browser: Browser
) -> None:
    page = await browser.new_page()
    await page.goto(hub.url + "/ui/")
    await page.get_by_label("Token").fill("not-a-token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_have_text("That token is not valid.")
    await expect(page.locator("#nav")).to_be_hidden()


async def test_the_page_names_a_workloads_state_as_qctl_does(
    hub: HubUnderTest, browser: Browser
) -> None:
    [real] = await submitted(hub, "train")
    status: dict[str, Any] = {"conditions": []}

    def variant(**changes: Any) -> dict[str, Any]:
        obj = copy.deepcopy(real)
        obj["status"] = {**status, **changes}
        return obj

    def cond(kind: str, value: str, reason: str = "R") -> dict[str, str]:
        return {"type": kind, "status": value, "reason": reason, "message": ""}

    objects = [
        real,
        variant(clusterName="east"),
        variant(clusterName="east", conditions=[cond("Admitted", "True")]),
        variant(clusterName="east", pods={"running": 2}),
        variant(conditions=[cond("Evicted", "True", "ClusterLost")]),
        variant(conditions=[cond("Finished", "True", "Succeeded")]),
        variant(conditions=[cond("Finished", "True", "Failed"), cond("Evicted", "True")]),
        variant(conditions=[cond("Finished", "False"), cond("Admitted", "False")]),
    ]
    board = await Dashboard.open(browser, hub.url, ADMIN)
    in_page = await board.page.evaluate(
        "async (objs) => objs.map((await import('/ui/model.js')).workloadState)",
        objects,
    )
    assert in_page == [workload_state(o) for o in objects]
    assert len(set(in_page)) == 7  # every branch taken


async def test_the_workload_list_filters_by_name_and_sorts_from_the_keyboard(
    hub: HubUnderTest, browser: Browser
) -> None:
    await submitted(hub, "alpha", "bravo", "charlie")
    board = await Dashboard.open(browser, hub.url, ADMIN)
    await board.go("workloads")
    page = board.page
    await expect(page.locator("#wl-summary")).to_have_text("Showing 3 of 3 workloads.")

    name_header = page.get_by_role("columnheader", name="Name", exact=True)
    await name_header.get_by_role("button").focus()
    await page.keyboard.press("Enter")
    await expect(name_header).to_have_attribute("aria-sort", "ascending")
    names = page.locator(".vt-body .vt-row:not([hidden]) .col-name a")
    await expect(names).to_have_text(["job-alpha", "job-bravo", "job-charlie"])
    await page.keyboard.press("Enter")
    await expect(name_header).to_have_attribute("aria-sort", "descending")
    await expect(names).to_have_text(["job-charlie", "job-bravo", "job-alpha"])

    await page.get_by_label("Name", exact=True).fill("rav")
    await expect(page.locator("#wl-summary")).to_have_text("Showing 1 of 3 workloads.")
    await expect(names).to_have_text(["job-bravo"])
    board.assert_no_page_errors()


async def test_every_page_has_no_serious_accessibility_violation_and_works_by_keyboard(
    hub: HubUnderTest, browser: Browser
) -> None:
    await submitted(hub, "train")
    board = await Dashboard.open(browser, hub.url, ADMIN)
    page = board.page
    for route in ("fleet", "queues", "workloads", "workloads/vision/job-train"):
        await board.go(route)
        await page.wait_for_timeout(300)  # the first watch event renders
        assert await board.axe_violations() == [], route

    # From the top: the skip link first, then the pages' links, each reached with Tab.
    await board.go("fleet")
    await page.locator("body").focus()
    await page.keyboard.press("Tab")
    await expect(page.locator(":focus")).to_have_text("Skip to content")
    await page.keyboard.press("Tab")
    await expect(page.locator(":focus")).to_have_text("Fleet")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await expect(page.locator(":focus")).to_have_text("Workloads")
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Workloads")
    await expect(page.locator(":focus")).to_have_text("Workloads")  # the new page's heading
    board.assert_no_page_errors()
