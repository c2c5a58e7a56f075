"""Which workload a hub message is about and which transition of its record it goes through
(agent.loop_messages)."""

from __future__ import annotations

from agent.loop_messages import transition, workload_of
from agent.records import on_bind, on_offer, on_withdraw
from api.v1alpha1.messages import Bind, Cancel, Withdraw
from tests.agent.conftest import job_source, offer_for

NOW = 1000.0
KEY = "team-a/job-w"


def test_an_offer_is_about_the_workload_in_its_namespace_and_others_name_it() -> None:
    offer = offer_for(job_source("w"))
    assert workload_of(offer) == KEY
    assert workload_of(Bind(workload=KEY, generation=1)) == KEY
    assert workload_of(Cancel(workload=KEY, generation=1, reason="Cancelled")) == KEY


def test_an_offer_without_a_namespace_is_about_one_in_the_default_namespace() -> None:
    offer = offer_for(job_source("w"))
    offer.workload.metadata.namespace = None
    assert workload_of(offer) == "default/job-w"


def test_each_message_goes_through_its_own_transition() -> None:
    offer = offer_for(job_source("w"))
    held = on_offer(None, offer, NOW).record
    assert transition(None, offer, NOW) == on_offer(None, offer, NOW)
    bind = Bind(workload=KEY, generation=1)
    assert transition(held, bind, NOW) == on_bind(held, bind, NOW)
    for gone in (
        Withdraw(workload=KEY, generation=1, reason="Moved"),
        Cancel(workload=KEY, generation=1, reason="Cancelled"),
    ):
        assert transition(held, gone, NOW) == on_withdraw(held, gone, NOW)
