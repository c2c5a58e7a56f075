"""The dashboard's browser tests: Playwright driving Debian's chromium (`/usr/bin/chromium`,
installed by ./dev; Playwright's own browser downloads are never used) headless against a real
hub — in-process for the component tests, a whole `qctl dev up` federation for the e2e ones.

`Dashboard` is one signed-in page: it collects the page's uncaught errors (a test fails on
any), saves screenshots under `artifacts/ui/` (git-ignored; CI keeps the folder, the README
names it) and runs axe-core (vendored in tests/ui/vendor) in the page.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.hub.service.conftest import hub  # noqa: F401 - the in-process hub fixture

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "ui"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
# axe-core's impact levels that fail a test.
BLOCKING_IMPACTS = frozenset({"serious", "critical"})


def chromium_path() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is not installed: run ./dev setup (Debian's chromium)", pytrace=False)
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--disable-gpu"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@dataclass
class Dashboard:
    page: Page
    base: str
    errors: list[str] = field(default_factory=list)

    @classmethod
    async def open(cls, browser: Browser, base: str, token: str) -> Dashboard:
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        board = cls(page, base)
        page.on("pageerror", lambda error: board.errors.append(str(error)))
        await page.goto(f"{base}/ui/")
        await page.get_by_label("Token").fill(token)
        await page.get_by_role("button", name="Sign in").click()
        await page.locator("#nav").wait_for(state="visible")
        return board

    async def go(self, route: str) -> None:
        await self.page.goto(f"{self.base}/ui/#/{route}")
        await self.page.locator("#page h1").wait_for()

    async def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        return path

    async def axe_violations(self) -> list[dict[str, Any]]:
        """axe-core's serious and critical violations on the page as it is now."""
        if not await self.page.evaluate("typeof window.axe !== 'undefined'"):
            # Evaluated through the DevTools protocol: the page's CSP (script-src 'self')
            # stays in force, and a script tag would be refused by it.
            await self.page.evaluate(AXE.read_text())
        result = await self.page.evaluate("async () => await axe.run(document)")
        return [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
            for v in result["violations"]
            if v["impact"] in BLOCKING_IMPACTS
        ]

    def assert_no_page_errors(self) -> None:
        assert self.errors == [], self.errors


def save_figures(name: str, figures: dict[str, Any]) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2))
    return path
