"""The hot/cold checks bench times the hub's and the agent's checks of one workload, warm,
after evicting the caches and after other code, and prints each figure and its quotient."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from api.v1alpha1.messages import DispatchOffer, Envelope
from bench.checks_hot_cold import main, offer_text, submitted_job


def test_the_offer_it_times_is_one_the_agent_accepts_for_the_submitted_job() -> None:
    envelope, unknown = Envelope.decode_from_peer(offer_text(submitted_job()))
    assert unknown == ()
    assert isinstance(envelope.payload, DispatchOffer)
    assert envelope.payload.workload.metadata.name == "job-checks-hot-cold"
    assert envelope.payload.source == submitted_job()


def test_the_bench_prints_hot_and_cold_microseconds_of_every_check_and_their_quotient() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--calls", "5", "--evict-mb", "1"]) == 0
    figures = json.loads(out.getvalue())
    assert (figures["calls"], figures["evict_mb"]) == (5, 1)
    assert figures["offer_bytes"] > 0
    for check in ("hub_submission", "agent_offer", "agent_offer_validation", "agent_offer_rules"):
        timing = figures[check]
        assert timing["hot_us"] > 0 and timing["cold_us"] > 0
        assert timing["after_other_us"] > 0
        for figure in ("cold", "after_other"):
            # The quotient is of the times before they were rounded to 0.1 µs (and itself
            # rounded to 0.01): it lies within what the rounded times allow.
            low = (timing[f"{figure}_us"] - 0.05) / (timing["hot_us"] + 0.05)
            high = (timing[f"{figure}_us"] + 0.05) / (timing["hot_us"] - 0.05)
            assert low - 0.005 <= timing[f"{figure}_over_hot"] <= high + 0.005
