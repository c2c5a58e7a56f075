"""Who leads: this hub's campaign for leadership, the terms it wins, and what it knows of the
leader when it does not lead.

With etcd every hub campaigns (`EtcdElection`, election "hub") with its advertised URL as its
candidate value and a short lease (`--election-ttl`, 5 s): when the leader dies, its key goes
with its lease and the next candidate leads within the TTL. With SQLite the hub is alone: it
leads from start to end.

`HubElection.run` is the loop, the only place where terms begin and end:

    campaign ──won──► writes go through the term's fenced writer (hub.store.fencing)
                      LeaderWork.start(term)            (hub.leader)
                      the role says "leader"
             ◄─ the term ends (the lease expired or could not be refreshed in time)
                      the role says "follower"; every write fails with NotLeader at once
                      LeaderWork.stop(): the loops stop, agent sessions close
                      the campaign key is given up (the next candidate leads at once)
    campaign again

A deposed leader steps down in its process and campaigns again rather than exiting: every
object that remembers anything between events is rebuilt for the next term (hub.leader),
the mirror and the HTTP server keep serving reads throughout, and nothing needs a supervisor
to come back. Whatever a deposed leader still tries to write before it has noticed is refused
by etcd (the fence), so the step-down's speed is not what safety rests on.

Followers learn the leader's URL by observing the election; the HTTP layer reads it from
`Role` (hub.role) to forward writes and to point agents at the leader (hub.http.leader).

Called by: hub.app (builds and runs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from hub.leader import LeaderTerm, LeaderWork
from hub.role import Role
from hub.store.base import Store, StoreError
from hub.store.etcd import EtcdElection, EtcdStore
from hub.store.fencing import LeaderFencedStore
from hub.tasks import cancel_all, raise_if_cancelling

__all__ = ["ELECTION", "Campaign", "EtcdCampaign", "HubElection", "SoleCampaign", "Won"]

log = logging.getLogger(__name__)

ELECTION = "hub"
RETRY_SECONDS = 1.0
"""Pause before campaigning or observing again after etcd failed us."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Won:
    """A won campaign: how to write during the term, its fencing token, and its end."""

    writer: Store
    fencing_token: int
    ended: asyncio.Event


class Campaign(Protocol):
    alone: bool
    """True when no other hub can lead (SQLite): the hub leads from its start."""

    async def win(self) -> Won:
        """Block until this hub leads."""
        ...

    async def give_up(self) -> None:
        """Leave the election (resign the term, or withdraw the candidate); best effort."""
        ...

    def leaders(self) -> AsyncIterator[str | None]:
        """The leader's URL now, then at every change (None: no leader)."""
        ...


class SoleCampaign:
    """A hub alone on its store (SQLite) leads from its start, with fencing token 0."""

    alone = True

    def __init__(self, store: Store, url: str) -> None:
        self._store = store
        self._url = url

    async def win(self) -> Won:
        return Won(self._store, 0, asyncio.Event())

    async def give_up(self) -> None:
        return None

    async def leaders(self) -> AsyncIterator[str | None]:
        yield self._url
        await asyncio.Event().wait()  # no other leader, ever


class EtcdCampaign:
    """Campaigns in etcd with this hub's URL as candidate value and a lease of `ttl` s."""

    alone = False

    def __init__(self, store: EtcdStore, url: str, *, ttl: int) -> None:
        self._store = store
        self._url = url
        self._ttl = ttl
        self._election: EtcdElection | None = None

    async def win(self) -> Won:
        # One campaign per EtcdElection: every campaign gets a new one (and a new lease).
        self._election = EtcdElection(self._store, ELECTION, ttl=self._ttl)
        leadership = await self._election.campaign(self._url)
        return Won(self._store.fenced(leadership), int(leadership.revision), leadership.lost)

    async def give_up(self) -> None:
        election, self._election = self._election, None
        if election is not None:
            with contextlib.suppress(StoreError):
                await election.resign()

    async def leaders(self) -> AsyncIterator[str | None]:
        observer = EtcdElection(self._store, ELECTION)
        async with contextlib.aclosing(observer.observe()) as leaders:
            async for leader in leaders:
                yield leader


class HubElection:
    def __init__(
        self,
        campaign: Campaign,
        *,
        role: Role,
        store: LeaderFencedStore,
        work: LeaderWork,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.campaign = campaign
        self.role = role
        self.store = store
        self.work = work
        self.clock = clock
        self.terms = 0
        """How many terms this hub has begun."""

    async def run(self) -> None:
        """Campaign, lead, step down, campaign again — until cancelled (which ends a term
        the same way, and gives it up so the next candidate leads at once)."""
        observer = asyncio.get_running_loop().create_task(self._observe(), name="hub-observer")
        try:
            while True:
                try:
                    won = await self.campaign.win()
                except StoreError as exc:
                    log.warning("campaign failed (%s); again in %gs", exc, RETRY_SECONDS)
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
                await self._lead(won)
                await asyncio.sleep(RETRY_SECONDS)
        finally:
            await cancel_all([observer])

    async def _lead(self, won: Won) -> None:
        loop = asyncio.get_running_loop()
        term = LeaderTerm(
            url=self.role.url,
            fencing_token=won.fencing_token,
            began_at=self.clock(),
            began_monotonic=loop.time(),
            ended=won.ended,
        )
        self.terms += 1
        self.store.lead(won.writer)
        try:
            await self.work.start(term)
            self.role.lead()
            log.info("this hub (%s) leads: term %d", term.url, term.fencing_token)
            raise_if_cancelling()
            await won.ended.wait()
            log.error(
                "this hub (%s) lost its leadership (term %d): stepping down, closing agent "
                "sessions, campaigning again",
                term.url,
                term.fencing_token,
            )
        except StoreError as exc:
            log.error("could not begin term %d (%s); stepping down", term.fencing_token, exc)
        except TimeoutError:
            log.error("could not begin term %d: the mirror did not catch up", term.fencing_token)
        finally:
            # Followers' writes fail at once; the rest may take a moment.
            self.store.step_down()
            self.role.follow()
            won.ended.set()
            await self.work.stop()
            await self.campaign.give_up()

    async def _observe(self) -> None:
        while True:
            try:
                async for leader in self.campaign.leaders():
                    self.role.observed(leader)
                    log.info("the leader is %s", leader or "(none)")
            except StoreError as exc:
                log.warning("cannot observe the election (%s); again in %gs", exc, RETRY_SECONDS)
            await asyncio.sleep(RETRY_SECONDS)
