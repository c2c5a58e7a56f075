"""What every test folder shares: the event loop the async tests run on.

The hub and the agent run on uvloop's loop (runtime.loop), so the tests' own loops are
uvloop's too: what is tested is what runs. (pytest-asyncio asks this hook for the loop
factories; one factory leaves the test ids as they are.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from runtime.loop import new_event_loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"uvloop": new_event_loop}
