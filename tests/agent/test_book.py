"""The book of records (agent.book): putting or deleting a record is the only change, and the
indexes derived from it follow — owners, timers, what to save, what the snapshot re-reads."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace

from agent.book import Book, Put
from agent.records import Cadence, Record, observable, on_offer
from api.v1alpha1.messages import WorkloadPhase
from tests.agent.conftest import job_source, offer_for

CADENCE = Cadence(finished_ttl=100.0)


def record(name: str) -> Record:
    made = on_offer(None, offer_for(job_source(name)), 0.0).record
    assert made is not None
    return made


def test_a_new_record_is_indexed_by_owner_and_forgetting_it_is_one_deletion() -> None:
    book = Book(CADENCE)
    a = record("a")
    assert book.put(a.key, a) == Put(arrived=True)
    assert book.owned_by([("team-a", "job-a"), ("team-a", "nobody")]) == {a.key}
    assert book.put(a.key, a) == Put()  # the same record: nothing changed
    assert book.put(a.key, None) == Put(freed=True)
    assert not book.records and book.owned_by([("team-a", "job-a")]) == set()
    assert book.take_changed() == {a.key}
    assert book.take_writes() == ([], [a.key])


def test_a_finish_frees_quota_and_starts_the_ttl_timer() -> None:
    book = Book(CADENCE)
    a = record("a")
    book.put(a.key, a)
    done = replace(a, phase=WorkloadPhase.SUCCEEDED, finished_at=10.0)
    assert book.put(a.key, done) == Put(freed=True)
    assert book.next_wakeup() == 110.0
    assert list(book.due(109.0)) == []
    assert list(book.due(110.0)) == [done]
    assert list(book.due(200.0)) == []  # each due once


def test_a_timer_whose_record_changed_or_went_is_skipped() -> None:
    book = Book(CADENCE)
    a, b = record("a"), record("b")
    book.put(a.key, replace(a, look_again_at=5.0))
    book.put(b.key, replace(b, look_again_at=6.0))
    later = replace(a, look_again_at=50.0)
    book.put(a.key, later)  # moved: its old entry is stale
    book.put(b.key, None)  # gone
    assert list(book.due(10.0)) == []
    assert list(book.due(50.0)) == [later]


def test_writes_are_the_latest_record_once_per_pass() -> None:
    book = Book(CADENCE)
    a = record("a")
    book.put(a.key, a)
    book.persist(a.key, with_offer=True)
    bound = replace(a, bound=True, phase=WorkloadPhase.RESERVED)
    book.put(a.key, bound)
    book.persist(a.key, with_offer=False)  # the offer still goes: it was asked for
    assert book.take_writes() == ([(a.key, a.offer_json(), bound.state_json())], [])
    assert book.take_writes() == ([], [])


def test_an_offer_given_as_the_text_it_came_in_is_saved_as_that_text() -> None:
    book = Book(CADENCE)
    a = record("a")
    book.put(a.key, a)
    book.persist(a.key, with_offer=True, offer_text='{"the": "envelope"}')
    book.persist(a.key, with_offer=False)  # (a later save in the pass keeps the text)
    assert book.take_writes() == ([(a.key, '{"the": "envelope"}', a.state_json())], [])
    book.put(a.key, None)
    book.persist(a.key, with_offer=True, offer_text="gone before the pass ended")
    assert book.take_writes() == ([], [a.key])


def test_the_log_shipper_is_told_only_of_records_put_finished_with_jobs_and_still_held() -> None:
    book = Book(CADENCE)
    a, b, c = record("a"), record("b"), record("c")
    for one in (a, b, c):
        book.put(one.key, one)
    assert book.take_finished() == set()  # nothing finished yet
    book.put(a.key, replace(a, phase=WorkloadPhase.SUCCEEDED, job_names=("job-a",)))
    book.put(b.key, replace(b, phase=WorkloadPhase.FAILED))  # no Jobs: no logs
    book.put(c.key, replace(c, phase=WorkloadPhase.SUCCEEDED, job_names=("job-c",)))
    book.put(c.key, None)  # forgotten before the shipper looked
    assert book.take_finished() == {a.key}
    assert book.take_finished() == set()  # each told once


def random_puts(seed: int) -> Iterator[Book]:
    """A book after each of 300 random puts and deletions of six workloads' records (any
    phase, with or without Jobs, admitted and reported or not)."""
    book = Book(CADENCE)
    rng = random.Random(seed)
    keys = [record(n).key for n in "abcdef"]
    base = {key: record(key.split("/job-")[1]) for key in keys}
    for _ in range(300):
        key = rng.choice(keys)
        if rng.random() < 0.15:
            book.put(key, None)
        else:
            phase = rng.choice(list(WorkloadPhase))
            jobs = rng.choice(((), ("job-x",)))
            since = rng.choice((None, 1.0))
            changed = replace(base[key], phase=phase, job_names=jobs, unreported_since=since)
            book.put(key, changed)
        yield book


def test_the_running_index_holds_exactly_the_records_a_status_pass_looks_at() -> None:
    for book in random_puts(7):
        assert set(book.running) == {k for k, r in book.records.items() if observable(r)}


def test_a_capacity_report_lists_exactly_the_admitted_records_whose_report_waits() -> None:
    for book in random_puts(11):
        listed = {(h.workload, h.generation) for h in book.admitted_unreported()}
        waiting = {
            (k, r.generation)
            for k, r in book.records.items()
            if r.unreported_since is not None and r.phase is WorkloadPhase.ADMITTED
        }
        assert listed == waiting
