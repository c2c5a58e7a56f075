"""The event loop the hub and the agent run on (runtime.loop): uvloop's unless their flag or
variable asks for asyncio's own, and asyncio's, with a warning, where uvloop is missing."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest
import uvloop

from agent.settings import parse_args
from hub.main import parse_settings
from runtime.loop import new_event_loop

AGENT_REQUIRED = ["--hub", "http://hub", "--cluster", "c", "--token", "t"]


def loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    try:
        return "uvloop" if isinstance(loop, uvloop.Loop) else "asyncio"
    finally:
        loop.close()


def test_a_new_loop_is_uvloops_by_default_and_asyncios_when_asked_for() -> None:
    assert loop_kind(new_event_loop()) == "uvloop"
    assert loop_kind(new_event_loop("uvloop")) == "uvloop"
    assert loop_kind(new_event_loop("asyncio")) == "asyncio"


def test_without_uvloop_installed_the_loop_is_asyncios_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # (importing it then fails)
    with caplog.at_level(logging.WARNING, logger="runtime.loop"):
        assert loop_kind(new_event_loop("uvloop")) == "asyncio"
    assert "uvloop is not installed" in caplog.text


async def test_the_suites_own_async_tests_run_on_uvloop() -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)


@pytest.mark.parametrize(
    ("flags", "variable", "kind"),
    [
        pytest.param([], None, "uvloop", id="uvloop by default"),
        pytest.param(["--event-loop", "asyncio"], None, "asyncio", id="the flag"),
        pytest.param([], "asyncio", "asyncio", id="the variable"),
        pytest.param(["--event-loop", "uvloop"], "asyncio", "uvloop", id="the flag wins"),
    ],
)
def test_the_hub_and_the_agent_take_their_loop_from_the_flag_or_the_variable(
    flags: list[str], variable: str | None, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if variable is not None:
        monkeypatch.setenv("MULTIQ_HUB_EVENT_LOOP", variable)
        monkeypatch.setenv("MULTIQ_AGENT_EVENT_LOOP", variable)
    assert parse_settings(flags).event_loop == kind
    assert parse_args([*AGENT_REQUIRED, *flags]).event_loop == kind


def test_a_loop_neither_knows_is_refused_by_both(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as hub_exit:
        parse_settings(["--event-loop", "trio"])
    with pytest.raises(SystemExit) as agent_exit:
        parse_args([*AGENT_REQUIRED, "--event-loop", "trio"])
    assert hub_exit.value.code == agent_exit.value.code == 2
    assert capsys.readouterr().err.count("invalid choice: 'trio'") == 2
