"""Which held workloads a status pass looks at (agent.status_pass): what changed and what is
due when the mirrors only changed, everything after a relist or when priming."""

from __future__ import annotations

from agent.status_pass import keys_to_look_at

HELD = ["team-a/job-c", "team-a/job-a", "team-a/job-b", "team-a/job-d"]


def test_a_pass_looks_only_at_workloads_whose_objects_changed_or_whose_timer_came() -> None:
    looked = keys_to_look_at(HELD, False, {"team-a/job-d"}, {"team-a/job-b"})
    assert looked == ["team-a/job-b", "team-a/job-d"]


def test_a_workload_both_due_and_changed_is_looked_at_once() -> None:
    assert keys_to_look_at(HELD, False, {"team-a/job-a"}, {"team-a/job-a"}) == ["team-a/job-a"]


def test_after_a_relist_every_held_workload_is_looked_at() -> None:
    assert keys_to_look_at(HELD, True, set(), set()) == HELD
