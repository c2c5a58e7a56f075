"""Wiring of the hub: open the store, build the state mirror, fleet, log hub, the leader-only
work and the election, register routes and middlewares, and run the eternal tasks under a
guard that logs crashes. `build_app(settings)` returns the aiohttp application.

Every hub mirrors the store and serves reads. Which hub does the rest — dispatch, config
push, queue statuses, agent sessions — is decided by hub.election (with etcd, the hub that
won the election; with SQLite, the only one) and done by hub.leader; a hub that does not
lead forwards writes to the leader and refuses agent sessions (hub.http.leader). Every
write of every part goes through one `LeaderFencedStore`, which lets writes through only
while this hub leads, fenced by its election key.

Called by: hub.main (the `multiq-hub` command) and tests (aiohttp test server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.kinds import ALL_KINDS
from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.workload import Workload
from hub.answers import AgentAnswers
from hub.auth import TokenAuthority, load_users_file
from hub.config_push import ConfigPusher
from hub.dispatch import Dispatcher
from hub.election import Campaign, EtcdCampaign, HubElection, SoleCampaign
from hub.fleet import Fleet
from hub.http.identity import add_identity_route
from hub.http.leader import LeaderRouting
from hub.http.logs import LogRoutes
from hub.http.metrics import MetricsRoutes
from hub.http.middleware import error_middleware, make_auth_middleware
from hub.http.resources import ResourceRoutes
from hub.http.slurm import SlurmRoutes
from hub.http.streams import STREAMS, OpenStreams
from hub.http.submit import SubmitRoutes
from hub.http.templates import TemplateRoutes
from hub.leader import LeaderWork
from hub.loghub import LogHub
from hub.logstore import LogStore
from hub.metrics import UNCOUNTED, HubMetrics
from hub.objects import ObjectRepository
from hub.openapi import openapi_document
from hub.role import Role
from hub.settings import HubSettings
from hub.slurm import SlurmService
from hub.slurm_index import SlurmIndex
from hub.state import SOURCE_PREFIX, HubState
from hub.store import base as store_base
from hub.store.base import Store
from hub.store.etcd import EtcdStore, parse_endpoints
from hub.store.fencing import LeaderFencedStore
from hub.store.sqlite import SqliteStore
from hub.tasks import cancel_all, start_guarded
from hub.ui import add_ui_routes

__all__ = ["HUB", "VERSION", "Hub", "build_app", "open_store"]

log = logging.getLogger(__name__)

VERSION = "0.1.0"
# A hub answers requests once its role is known: alone on its store, once it leads; beside
# others, once it has observed who leads. Or after this long, if that keeps failing (it
# goes on trying; a follower that knows no leader holds writes a while, then answers 503).
STARTUP_ROLE_SECONDS = 30.0


@dataclass
class Hub:
    """Everything one running hub holds; stored on the app under `HUB`."""

    settings: HubSettings
    store: LeaderFencedStore
    repo: ObjectRepository
    state: HubState
    authority: TokenAuthority
    fleet: Fleet
    logs: LogHub
    role: Role
    leader: LeaderWork
    election: HubElection
    slurm: SlurmService
    metrics: HubMetrics = UNCOUNTED

    @property
    def dispatcher(self) -> Dispatcher:
        """The current (or next) term's dispatcher."""
        return self.leader.dispatcher

    @property
    def answers(self) -> AgentAnswers:
        return self.leader.answers

    @property
    def config(self) -> ConfigPusher:
        return self.leader.config


HUB = web.AppKey("hub", Hub)


async def open_store(spec: str) -> Store:
    """`sqlite:PATH`, or `etcd://HOST:PORT[,HOST:PORT…]` (also `etcd:HOST:PORT[,…]`): every
    endpoint is used, the next when one is unavailable."""
    scheme, _, rest = spec.partition(":")
    if scheme == "sqlite" and rest:
        return await SqliteStore.open(rest)
    if scheme == "etcd" and rest.removeprefix("//"):
        return await EtcdStore.connect_to(parse_endpoints(rest.removeprefix("//")))
    raise ValueError(f"unknown store {spec!r}: want sqlite:PATH or etcd://HOST:PORT[,HOST:PORT…]")


def _campaign(backend: Store, settings: HubSettings) -> Campaign:
    if isinstance(backend, EtcdStore):
        return EtcdCampaign(backend, settings.url, ttl=settings.election_ttl_seconds)
    return SoleCampaign(backend, settings.url)


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
        # Only the leader acts on a deletion; a later leader learns of it from the store (and
        # from the agents' Hellos, which list what they hold).
        if new is None and old is not None and hub.leader.leading:
            hub.answers.on_workload_deleted(key, old)
            _in_background(_forget_source(hub.store, key))
        elif new is not None and not new.spec.active and hub.leader.leading:
            hub.answers.on_workload_changed(key, old, new)
        elif (
            new is not None
            and old is not None
            and new.spec.active
            and not old.spec.active
            and hub.leader.leading
        ):
            _in_background(hub.answers.on_reactivated(key))

    state.on_config.append(config_changed)
    state.on_workload.append(workload_changed)


_BACKGROUND: set[asyncio.Task[None]] = set()
"""Writes started from the mirror's listeners, held so they are not collected mid-way."""


def _in_background(write: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(write)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def _forget_source(store: Store, key: str) -> None:
    with contextlib.suppress(store_base.StoreError):
        await store.delete(f"{SOURCE_PREFIX}{key}", expected=None)


async def build_app(
    settings: HubSettings, *, store: Store | None = None, campaign: Campaign | None = None
) -> web.Application:
    """Open the store (unless given one) and build the whole hub; tasks start with the app.
    `campaign` (default: from the store) decides when this hub leads."""
    users = load_users_file(settings.users_file).users if settings.users_file else []
    authority = TokenAuthority(users)
    backend = store or await open_store(settings.store)
    metrics = HubMetrics()
    fenced = LeaderFencedStore(backend, metrics)
    repo = ObjectRepository(fenced)
    state = HubState(fenced)
    fleet = Fleet(repo, authority, secrets_dir=settings.secrets_dir)

    def binding(key: str) -> tuple[str | None, int | None]:
        entry = state.workloads.get(key)
        status = entry.workload.status if entry is not None else None
        return (status.cluster_name, status.dispatch_generation) if status else (None, None)

    logs = LogHub(
        fleet,
        LogStore(
            settings.log_store_dir,
            max_age_seconds=settings.log_retention_seconds,
            max_bytes=settings.log_retention_bytes,
        ),
        binding=binding,
        follower_buffer_bytes=settings.log_follower_buffer_bytes,
        metrics=metrics,
    )
    role = Role(settings.url)
    slurm_index = SlurmIndex(state)
    leader = LeaderWork(
        settings=settings,
        state=state,
        fleet=fleet,
        repo=repo,
        logs=logs,
        metrics=metrics,
        slurm=slurm_index,
    )
    campaign = campaign or _campaign(backend, settings)
    election = HubElection(campaign, role=role, store=fenced, work=leader)
    slurm = SlurmService(
        state=state,
        repo=repo,
        index=slurm_index,
        controller=settings.url.split("://", 1)[-1],
        # The current term's dispatcher, whichever that is when a job is cancelled.
        send_cancel=lambda cluster, cancel: leader.dispatcher.send(cluster, cancel),  # noqa: PLW0108
        # Job ids are reserved per leadership term (hub.slurm.JobIds).
        term=lambda: leader.term,
    )
    hub = Hub(
        settings,
        fenced,
        repo,
        state,
        authority,
        fleet,
        logs,
        role,
        leader,
        election,
        slurm,
        metrics,
    )
    _wire_listeners(hub)
    routing = LeaderRouting(
        role,
        forward_wait_seconds=settings.forward_wait_seconds,
        certificate_authority=settings.certificate_authority,
    )
    app = web.Application(
        middlewares=[
            metrics.http_middleware(),
            error_middleware,
            make_auth_middleware(authority),
            routing.middleware,
        ],
        client_max_size=settings.max_body_bytes,
    )
    app[HUB] = hub
    app[STREAMS] = OpenStreams()

    campaigning: list[asyncio.Task[None]] = []

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await routing.start()
        logs.start()
        mirror = start_guarded("state", state.run)
        await state.synced.wait()
        campaigning.append(start_guarded("election", election.run))
        # Serve once the role means something: the sole hub leads; a replica knows who does.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STARTUP_ROLE_SECONDS):
                if campaign.alone:
                    while not role.leading:
                        await role.changed()
                else:
                    await role.observed_once.wait()
        yield
        await end_term(app)
        await cancel_all([mirror])
        await routing.close()
        await logs.stop()
        if store is None:
            await fenced.close()

    async def end_term(_: web.Application) -> None:
        # At shutdown, before aiohttp waits for open connections: ending the term closes the
        # agents' sessions (they would hold the shutdown up) and gives the leadership up, so
        # another hub leads at once rather than when the lease expires.
        await cancel_all(campaigning)
        campaigning.clear()

    async def end_streams(app: web.Application) -> None:
        # Watches and log follows would hold the shutdown up as long as aiohttp waits.
        app[STREAMS].end_all()

    app.on_shutdown.append(end_term)
    app.on_shutdown.append(end_streams)
    app.cleanup_ctx.append(lifecycle)
    _add_routes(app, hub)
    return app


def _add_routes(app: web.Application, hub: Hub) -> None:
    kinds = [k for k in ALL_KINDS if k.API_VERSION.startswith("multiq.dev/")]

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        # Ready: the mirror is in sync, so reads are served here, whatever the role.
        ready = hub.state.synced.is_set()
        body = {
            "ready": ready,
            "role": "leader" if hub.role.leading else "follower",
            "leader": hub.role.leader_url,
            "url": hub.role.url,
        }
        return web.json_response(body, status=200 if ready else 503)

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"version": VERSION, "api": "multiq.dev/v1alpha1"})

    document = openapi_document(kinds, version=VERSION)

    async def openapi(_: web.Request) -> web.Response:
        return web.json_response(document)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/version", version)
    app.router.add_get("/openapi.json", openapi)
    MetricsRoutes(
        hub.metrics,
        state=hub.state,
        fleet=hub.fleet,
        logs=hub.logs,
        role=hub.role,
        dispatcher=lambda: hub.leader.dispatcher,
    ).add_to(app)
    submissions = SubmitRoutes(hub.repo, hub.state)
    submissions.add_to(app)
    TemplateRoutes(hub.state, submissions).add_to(app)
    add_identity_route(app, hub.state)
    SlurmRoutes(hub.slurm, hub.state).add_to(app)
    LogRoutes(hub.state, hub.logs).add_to(app)
    hub.leader.sessions.add_to(app)
    ResourceRoutes(hub.repo, kinds).add_to(app)
    add_ui_routes(app)
