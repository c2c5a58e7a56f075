"""The hub serves the dashboard's files at /ui/ to anyone — they are the same static files
for everyone and hold no data — with their content types and a strict Content-Security-Policy,
and nothing else under /ui/ without a token; every file of hub/ui/static is served and shipped
as package data."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from hub.ui import ASSETS, UI_PATHS
from tests.hub.service.conftest import HubUnderTest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "hub" / "ui" / "static"


async def test_the_page_and_its_files_are_served_without_a_token(hub: HubUnderTest) -> None:
    async with hub.session.get(hub.url + "/ui/") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert '<script type="module" src="/ui/app.js">' in await response.text()
    for name, content_type in (("app.js", "text/javascript"), ("style.css", "text/css")):
        async with hub.session.get(f"{hub.url}/ui/{name}") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith(content_type)
            assert await response.read() == (STATIC / name).read_bytes()


async def test_the_page_may_load_code_only_from_the_hub_and_not_be_framed(
    hub: HubUnderTest,
) -> None:
    async with hub.session.get(hub.url + "/ui/") as response:
        policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy


async def test_ui_without_the_slash_redirects_to_the_page(hub: HubUnderTest) -> None:
    async with hub.session.get(hub.url + "/ui", allow_redirects=False) as response:
        assert response.status == 308
        assert response.headers["Location"] == "/ui/"


async def test_a_name_that_is_not_a_file_of_the_dashboard_needs_a_token_and_is_not_found(
    hub: HubUnderTest,
) -> None:
    status, _ = await hub.call("GET", "/ui/secrets.js", token=None)
    assert status == 401
    status, _ = await hub.call("GET", "/ui/secrets.js")
    assert status == 404
    status, _ = await hub.call("GET", "/ui/..%2fapp.py")
    assert status == 404


async def test_the_api_still_needs_a_token_beside_the_public_page(hub: HubUnderTest) -> None:
    status, _ = await hub.call("GET", "/apis/multiq.dev/v1alpha1/workloads", token=None)
    assert status == 401


def test_every_static_file_is_served_and_shipped_as_package_data() -> None:
    files = sorted(p.name for p in STATIC.iterdir() if p.is_file())
    assert sorted(ASSETS) == files
    assert {f"/ui/{name}" for name in files} <= UI_PATHS
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["hub.ui"]
    unshipped = [f for f in files if not any(fnmatch(f"static/{f}", g) for g in globs)]
    assert unshipped == []
