"""Wiring of the hub: open the store, build the state mirror, fleet, dispatcher, config
pusher and log hub, register routes and middlewares, and run the eternal tasks under a guard
that logs crashes. `build_app(settings)` returns the aiohttp application.

Called by: hub.main (the `multiq-hub` command) and tests (aiohttp test server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from api.kinds import ALL_KINDS
from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.workload import Workload
from hub.answers import AgentAnswers
from hub.auth import TokenAuthority, load_users_file
from hub.config_push import ConfigPusher
from hub.dispatch import Dispatcher
from hub.fleet import Fleet
from hub.http.logs import LogRoutes
from hub.http.middleware import error_middleware, make_auth_middleware
from hub.http.resources import ResourceRoutes
from hub.http.submit import SubmitRoutes
from hub.loghub import LogHub
from hub.objects import ObjectRepository
from hub.openapi import openapi_document
from hub.queue_status import QueueStatusWriter
from hub.sessions import SessionRoutes
from hub.settings import HubSettings
from hub.state import SOURCE_PREFIX, HubState
from hub.store import base as store_base
from hub.store.base import Store
from hub.store.etcd import EtcdStore
from hub.store.sqlite import SqliteStore

__all__ = ["HUB", "VERSION", "Hub", "build_app", "open_store"]

log = logging.getLogger(__name__)

VERSION = "0.1.0"


@dataclass
class Hub:
    """Everything one running hub holds; stored on the app under `HUB`."""

    settings: HubSettings
    store: Store
    repo: ObjectRepository
    state: HubState
    authority: TokenAuthority
    fleet: Fleet
    dispatcher: Dispatcher
    answers: AgentAnswers
    config: ConfigPusher
    logs: LogHub


HUB = web.AppKey("hub", Hub)


async def open_store(spec: str) -> Store:
    """`sqlite:PATH` or `etcd:HOST:PORT` (the first endpoint of a comma-separated list)."""
    scheme, _, rest = spec.partition(":")
    if scheme == "sqlite" and rest:
        return await SqliteStore.open(rest)
    if scheme == "etcd" and rest:
        host, _, port = rest.split(",")[0].rpartition(":")
        return await EtcdStore.connect(host or "127.0.0.1", int(port or 2379))
    raise ValueError(f"unknown store {spec!r}: want sqlite:PATH or etcd:HOST:PORT")


async def _guard(name: str, run: Callable[[], Awaitable[None]]) -> None:
    """Run an eternal task; log (and restart after a pause) if it ever ends or crashes."""
    while True:
        try:
            await run()
            log.error("task %s ended unexpectedly; restarting", name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("task %s crashed; restarting in 1s", name)
        await asyncio.sleep(1)


def _wire_listeners(hub: Hub) -> None:
    state = hub.state

    def config_changed(plural: str) -> None:
        hub.config.changed(plural)
        if plural == MemberCluster.plural():
            hub.fleet.load(
                [m for m in state.objects(MemberCluster) if isinstance(m, MemberCluster)]
            )
        hub.dispatcher.wake()

    def workload_changed(key: str, old: Workload | None, new: Workload | None) -> None:
        hub.dispatcher.wake()
        if new is None and old is not None:
            hub.answers.on_workload_deleted(key, old)
            asyncio.get_running_loop().create_task(_forget_source(hub.store, key))

    state.on_config.append(config_changed)
    state.on_workload.append(workload_changed)


async def _forget_source(store: Store, key: str) -> None:
    with contextlib.suppress(store_base.StoreError):
        await store.delete(f"{SOURCE_PREFIX}{key}", expected=None)


async def build_app(settings: HubSettings, *, store: Store | None = None) -> web.Application:
    """Open the store (unless given one) and build the whole hub; tasks start with the app."""
    users = load_users_file(settings.users_file).users if settings.users_file else []
    authority = TokenAuthority(users)
    opened = store or await open_store(settings.store)
    repo = ObjectRepository(opened)
    state = HubState(opened)
    fleet = Fleet(repo, authority, secrets_dir=settings.secrets_dir)
    dispatcher = Dispatcher(
        state,
        fleet,
        offer_timeout_seconds=settings.offer_timeout_seconds,
        interval_seconds=settings.dispatch_interval_seconds,
    )
    hub = Hub(
        settings,
        opened,
        repo,
        state,
        authority,
        fleet,
        dispatcher,
        AgentAnswers(dispatcher),
        ConfigPusher(state, fleet),
        LogHub(fleet, tail_lines=settings.log_tail_lines),
    )
    _wire_listeners(hub)
    statuses = QueueStatusWriter(
        state, fleet, dispatcher, repo, interval_seconds=settings.queue_status_interval_seconds
    )
    app = web.Application(
        middlewares=[error_middleware, make_auth_middleware(authority)],
        client_max_size=settings.max_body_bytes,
    )
    app[HUB] = hub

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(_guard("state", state.run), name="hub-state"),
            asyncio.create_task(_guard("dispatch", dispatcher.run), name="hub-dispatch"),
            asyncio.create_task(_guard("config-push", hub.config.run), name="hub-config-push"),
            asyncio.create_task(_guard("queue-status", statuses.run), name="hub-queue-status"),
        ]
        await state.synced.wait()
        yield
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for cluster in fleet.clusters.values():
            for lane in (cluster.control, cluster.logs):
                if lane is not None:
                    await lane.close()
        if store is None:
            await opened.close()

    app.cleanup_ctx.append(lifecycle)
    _add_routes(app, hub)
    return app


def _add_routes(app: web.Application, hub: Hub) -> None:
    kinds = [k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")]

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        ready = hub.state.synced.is_set()
        return web.json_response({"ready": ready}, status=200 if ready else 503)

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"version": VERSION, "api": "multiq.dev/v1alpha1"})

    document = openapi_document(kinds, version=VERSION)

    async def openapi(_: web.Request) -> web.Response:
        return web.json_response(document)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/version", version)
    app.router.add_get("/openapi.json", openapi)
    SubmitRoutes(hub.repo, hub.state).add_to(app)
    LogRoutes(hub.state, hub.logs).add_to(app)
    SessionRoutes(hub.fleet, hub.answers, hub.config, hub.logs).add_to(app)
    ResourceRoutes(hub.repo, kinds).add_to(app)
