"""This hub's role as the HTTP layer sees it: whether it leads, and the leader's URL as last
observed — with ways to wait for either to change.

Set by: hub.election (which campaigns and observes). Read by: hub.http.leader (forwarding
and refusing), hub.app (/readyz, start-up).
"""

from __future__ import annotations

import asyncio

__all__ = ["Role"]


class Role:
    """This hub's role as the HTTP layer sees it: leading or not, and the leader's URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.leading = False
        self.leader_url: str | None = None
        """The leader's advertised URL as last observed (this hub's own when it leads)."""
        self.observed_once = asyncio.Event()
        """Set once the election has been observed (`leader_url` means something)."""
        self._changed = asyncio.Event()

    def lead(self) -> None:
        self.leading = True
        self.leader_url = self.url
        self._notify()

    def follow(self) -> None:
        self.leading = False
        self._notify()

    def observed(self, leader_url: str | None) -> None:
        self.leader_url = leader_url
        self.observed_once.set()
        self._notify()

    async def until_leading(self, within: float) -> None:
        """Return once this hub leads (TimeoutError after `within` seconds)."""
        async with asyncio.timeout(within):
            while not self.leading:
                await self._changed.wait()

    async def changed(self) -> None:
        """Return at the next change of role or of the observed leader."""
        await self._changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def leader_elsewhere(self, within: float) -> str | None:
        """The URL of the leader when another hub leads; None as soon as this hub leads.
        Waits up to `within` seconds for either (TimeoutError after that)."""
        async with asyncio.timeout(within):
            while True:
                if self.leading:
                    return None
                if self.leader_url and self.leader_url != self.url:
                    return self.leader_url
                await self._changed.wait()
