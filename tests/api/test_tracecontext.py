"""W3C traceparent headers: well-formed ones round trip, malformed ones are ignored (None),
never an error, and new contexts are made from the entropy given."""

from __future__ import annotations

import itertools

import pytest

from api.tracecontext import TraceParent, generate, parse

GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class TestParsing:
    def test_a_well_formed_header_round_trips(self) -> None:
        parsed = parse(GOOD)
        assert parsed == TraceParent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 0x01)
        assert parsed.sampled
        assert parsed.format() == GOOD

    def test_an_unsampled_header_keeps_its_flags(self) -> None:
        parsed = parse(GOOD[:-2] + "00")
        assert parsed is not None
        assert not parsed.sampled
        assert parsed.format().endswith("-00")

    def test_surrounding_whitespace_is_tolerated(self) -> None:
        assert parse(f"  {GOOD} ") == parse(GOOD)

    def test_a_later_version_may_carry_more_fields(self) -> None:
        assert parse("01" + GOOD[2:] + "-what-comes-next") == parse(GOOD)

    @pytest.mark.parametrize(
        "header",
        [
            None,
            "",
            "garbage",
            GOOD.upper(),  # upper-case hex is invalid
            "ff" + GOOD[2:],  # version ff is forbidden
            GOOD + "-extra",  # version 00 has exactly four fields
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",  # short span id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",  # short flags
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ],
    )
    def test_a_malformed_header_is_ignored(self, header: str | None) -> None:
        assert parse(header) is None


class TestGenerating:
    def test_ids_come_from_the_entropy_given(self) -> None:
        made = generate(lambda n: bytes(range(1, n + 1)))
        assert made.trace_id == int.from_bytes(bytes(range(1, 17)), "big")
        assert made.span_id == int.from_bytes(bytes(range(1, 9)), "big")
        assert made.sampled
        assert parse(made.format()) == made

    def test_all_zero_ids_are_drawn_again(self) -> None:
        draws = itertools.chain([bytes(16), bytes(8)], itertools.repeat(b"\x07" * 16))
        made = generate(lambda n: next(draws)[:n])
        assert made.trace_id != 0
        assert made.span_id != 0
