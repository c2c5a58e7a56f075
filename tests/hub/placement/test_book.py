"""The dispatch book's indexes stay in step with its records, whatever the order of changes:
the open offers, and among them those an offer timeout can end (not queued where made)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from hub.placement.book import DispatchBook, DispatchRecord

NOW = datetime(2026, 12, 5, tzinfo=UTC)
CLUSTERS = ("east", "west", "north")
KEYS = tuple(f"team/w{i}" for i in range(6))


def _awaiting(book: DispatchBook) -> set[str]:
    return {
        key
        for key, record in book.records.items()
        if any(cluster not in record.queued for cluster in record.offers)
    }


def test_an_offer_queued_where_it_was_made_no_longer_awaits_an_answer() -> None:
    book = DispatchBook()
    book.put("team/a", DispatchRecord(offers={"east": NOW, "west": NOW}))
    assert book.awaiting == {"team/a"}
    book.mark_queued("team/a", "east")
    assert book.awaiting == {"team/a"}  # west has not answered
    book.mark_queued("team/a", "west")
    assert book.awaiting == set()
    assert book.offered == {"team/a"}
    book.close_offer("team/a", "east")
    book.close_offer("team/a", "west")
    assert book.awaiting == book.offered == set()


@pytest.mark.parametrize("seed", range(20))
def test_the_indexes_match_the_records_after_any_sequence_of_changes(seed: int) -> None:
    rng = random.Random(seed)
    book = DispatchBook()
    for _ in range(200):
        key, cluster = rng.choice(KEYS), rng.choice(CLUSTERS)
        match rng.randrange(5):
            case 0:
                offers = {
                    c: NOW - timedelta(seconds=rng.randrange(60))
                    for c in CLUSTERS
                    if rng.random() < 0.5
                }
                book.put(key, DispatchRecord(offers=offers))
            case 1:
                book.mark_queued(key, cluster)
            case 2:
                book.close_offer(key, cluster)
            case 3:
                book.mark_answered(key, cluster)
            case _:
                book.drop(key)
        assert book.awaiting == _awaiting(book)
        assert book.offered == {k for k, r in book.records.items() if r.offers}
