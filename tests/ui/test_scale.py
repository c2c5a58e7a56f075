"""10,000 workloads in the Workloads page of a real browser, from a real hub's list endpoint:
every one is counted and reachable by scrolling, while the page holds only the rows in view.
The figures — time to first render and frame times while scrolling, measured in the browser
with performance marks and requestAnimationFrame — go to artifacts/ui/scale.json and the test
output; they are reported, not asserted (speed targets live in bench/).

The workloads are written through the hub's object repository (the store behind the API)
rather than 10,000 submissions, which take minutes here; the page reads them through the same
list and watch endpoints as any other."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.hub.service.conftest import ADMIN, HubUnderTest, fleet_objects, job
from tests.ui.conftest import Dashboard, save_figures

pytestmark = pytest.mark.slow

COUNT = 10_000
SCROLL_FRAMES = 240

# Scroll the table a screenful per frame, top to bottom, and time the frames the browser
# paints meanwhile: requestAnimationFrame's timestamps are the frames' start times.
MEASURE_SCROLLING = """
async ([frames]) => {
  const viewport = document.querySelector('.vt-viewport');
  const step = (viewport.scrollHeight - viewport.clientHeight) / frames;
  const stamps = [];
  await new Promise((resolve) => {
    const tick = (t) => {
      stamps.push(t);
      if (stamps.length > frames) return resolve();
      viewport.scrollTop = step * stamps.length;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const deltas = stamps.slice(1).map((t, i) => t - stamps[i]).sort((a, b) => a - b);
  const at = (q) => deltas[Math.min(deltas.length - 1, Math.floor(q * deltas.length))];
  return {frames: deltas.length, p50: at(0.5), p95: at(0.95), max: deltas.at(-1),
          over50ms: deltas.filter((d) => d > 50).length};
}
"""


async def fill(hub: HubUnderTest, count: int) -> None:
    await hub.apply(*fleet_objects())
    status, seed = await hub.call(
        "POST", "/apis/multiq.dev/v1alpha1/namespaces/vision/submissions", body=job("seed")
    )
    assert status == 201, seed
    repo = hub.hub.repo

    async def make(i: int) -> None:
        body: dict[str, Any] = copy.deepcopy(seed)
        body.pop("status", None)
        body["metadata"] = {"name": f"bulk-{i:05d}", "namespace": "vision"}
        body["spec"]["queueName"] = ("vision", "other")[i % 2]
        await repo.create(repo.validate(body))

    for start in range(0, count - 1, 500):
        await asyncio.gather(*(make(i) for i in range(start, min(start + 500, count - 1))))


async def test_ten_thousand_workloads_render_and_scroll_with_only_the_rows_in_view(
    hub: HubUnderTest, browser: Browser
) -> None:
    started = time.monotonic()
    await fill(hub, COUNT)
    filled_seconds = time.monotonic() - started

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    board = Dashboard(page, hub.url)
    page.on("pageerror", lambda error: board.errors.append(str(error)))
    await page.goto(f"{hub.url}/ui/#/workloads")
    await page.get_by_label("Token").fill(ADMIN)
    clicked_at = await page.evaluate("performance.now()")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#wl-summary")).to_have_text(
        f"Showing {COUNT} of {COUNT} workloads.", timeout=60_000
    )
    marks = await page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))"
    )
    rows_in_dom = await page.locator(".vt-body .vt-row").count()
    scrolling = await page.evaluate(MEASURE_SCROLLING, [SCROLL_FRAMES])
    await expect(page.locator(f'.vt-row[aria-rowindex="{COUNT + 1}"]')).to_be_visible()
    rows_after_scrolling = await page.locator(".vt-body .vt-row").count()

    figures = {
        "workloads": COUNT,
        "store_fill_seconds": round(filled_seconds, 1),
        "sign_in_to_list_received_ms": round(marks["workloads:list-received"] - clicked_at),
        "sign_in_to_first_render_ms": round(marks["workloads:first-render"] - clicked_at),
        "list_received_to_first_render_ms": round(
            marks["workloads:first-render"] - marks["workloads:list-received"]
        ),
        "rows_in_dom": rows_in_dom,
        "scroll_frame_ms": {k: round(v, 1) for k, v in scrolling.items()},
    }
    print(save_figures("scale", figures).read_text())
    # Virtualised: a screenful of rows and the overscan, not 10,000.
    assert rows_in_dom < 100
    assert rows_after_scrolling < 100
    assert scrolling["frames"] == SCROLL_FRAMES
    board.assert_no_page_errors()
