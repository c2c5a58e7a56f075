"""Job arrays and output filename patterns, as sbatch(1) defines them."""

from __future__ import annotations

import pytest

from api.slurm.arrays import ArraySpecError, parse_array
from api.slurm.patterns import NO_ARRAY_INDEX, PatternValues, default_output, expand


class TestArrays:
    def test_ranges_lists_steps_and_a_throttle(self) -> None:
        assert parse_array("0-3").indices == (0, 1, 2, 3)
        assert parse_array("0,6,16-18").indices == (0, 6, 16, 17, 18)
        stepped = parse_array("0-15:4")
        assert stepped.indices == (0, 4, 8, 12) and stepped.step == 4
        throttled = parse_array("1-10%2")
        assert throttled.throttle == 2 and throttled.count == 10
        assert (throttled.min, throttled.max) == (1, 10)

    def test_overlapping_parts_count_once(self) -> None:
        assert parse_array("0-4,2-6").indices == tuple(range(7))

    def test_the_step_of_an_uneven_list_is_one(self) -> None:
        assert parse_array("1,2,5").step == 1

    def test_the_spec_prints_back_compactly(self) -> None:
        assert str(parse_array("0-15:4%2")) == "0-12:4%2"
        assert str(parse_array("3,7")) == "3,7"

    @pytest.mark.parametrize("text", ["", "%2", "a-b", "3-1", "0-4:0", "0-1001", "0-3%x", "1,,2"])
    def test_what_sbatch_refuses(self, text: str) -> None:
        with pytest.raises(ArraySpecError):
            parse_array(text)


class TestPatterns:
    task = PatternValues(
        job_id=130, name="sweep", user="ada", node="gpu-7.rack-1", array_job_id=127, array_task_id=3
    )

    def test_every_letter(self) -> None:
        assert expand("%j %A %a %x %N %u %J %s %n %t %b", self.task) == (
            "130 127 3 sweep gpu-7 ada 130.batch batch 0 0 3"
        )

    def test_zero_padding_and_a_literal_percent(self) -> None:
        assert expand("job%4j-%3a.out%%", self.task) == "job0130-003.out%"

    def test_a_backslash_turns_expansion_off(self) -> None:
        assert expand("\\%j.out", self.task) == "%j.out"

    def test_a_plain_job_has_its_own_id_as_array_id_and_no_index(self) -> None:
        plain = PatternValues(job_id=9, name="one", user="ada")
        assert expand("%A_%a", plain) == f"9_{NO_ARRAY_INDEX}"

    def test_the_defaults(self) -> None:
        assert expand(default_output(False), self.task) == "slurm-130.out"
        assert expand(default_output(True), self.task) == "slurm-127_3.out"

    def test_an_unknown_letter_stays(self) -> None:
        assert expand("%q%j", self.task) == "%q130"
