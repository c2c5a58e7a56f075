"""The web dashboard's routes: `/ui/` serves a single-page app (plain ES modules and CSS,
committed under hub/ui/static and shipped as package data; nothing is built or fetched at run
time).

The assets are public, like /openapi.json: they are the same static files for everyone and
carry no data. The page signs in with a bearer token and reads everything through the hub's
REST API (hub.http.resources, hub.http.logs), so what it shows is what that principal may see,
decided where qctl's requests are decided. `UI_PATHS` is every path served here, exactly — the
auth middleware lets these through without a token and hub.openapi documents them; any other
path under /ui/ is not a route.

    GET /ui                 → 308 to /ui/
    GET /ui/                → index.html
    GET /ui/{asset}         → one file of ASSETS (no directories, no other names)

Called by: hub.app (`add_ui_routes`), hub.http.middleware (`UI_PATHS`), hub.openapi (`ASSETS`).
"""

from __future__ import annotations

from importlib import resources
from types import MappingProxyType

from aiohttp import web

__all__ = ["ASSETS", "INDEX", "UI_PATHS", "add_ui_routes"]

INDEX = "index.html"
_CONTENT_TYPES = MappingProxyType(
    {
        ".html": "text/html; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".svg": "image/svg+xml",
    }
)
# The page must not be framed by another site, nor load code from anywhere but the hub; it
# talks only to the hub that served it.
_SECURITY_HEADERS = MappingProxyType(
    {
        "Content-Security-Policy": (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        # Revalidate each load: a hub upgrade must not leave a page of mixed versions.
        "Cache-Control": "no-cache",
    }
)


def _load_assets() -> MappingProxyType[str, bytes]:
    static = resources.files(__package__) / "static"
    found = {}
    for entry in static.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in _CONTENT_TYPES:
            found[entry.name] = entry.read_bytes()
    return MappingProxyType(dict(sorted(found.items())))


# Read once at import: a few tens of kilobytes, served from memory.
ASSETS = _load_assets()
UI_PATHS = frozenset({"/ui", "/ui/", *(f"/ui/{name}" for name in ASSETS)})


def _reply(name: str) -> web.Response:
    suffix = "." + name.rsplit(".", 1)[-1]
    return web.Response(
        body=ASSETS[name],
        content_type=None,
        headers={"Content-Type": _CONTENT_TYPES[suffix], **_SECURITY_HEADERS},
    )


async def _redirect(_: web.Request) -> web.Response:
    raise web.HTTPPermanentRedirect("/ui/")


async def _index(_: web.Request) -> web.Response:
    return _reply(INDEX)


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["asset"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    return _reply(name)


def add_ui_routes(app: web.Application) -> None:
    app.router.add_get("/ui", _redirect)
    app.router.add_get("/ui/", _index)
    app.router.add_get("/ui/{asset}", _asset)
