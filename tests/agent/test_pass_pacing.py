"""How often the agent's loop runs a pass: at most once per `cycle_min_interval`, counted from
the start of a pass, so events are coalesced but a long pass is not followed by a pause."""

from __future__ import annotations

import pytest

from agent.admission import pause_after_pass


def test_a_pass_shorter_than_the_interval_waits_out_the_rest_of_it() -> None:
    assert pause_after_pass(10.0, 10.02, 0.05) == pytest.approx(0.03)


def test_a_pass_longer_than_the_interval_is_followed_at_once() -> None:
    assert pause_after_pass(10.0, 10.3, 0.05) == 0.0
