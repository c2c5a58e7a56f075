"""The words of a submission are read as getopt_long reads sbatch's, with nothing heavier than
`re` and `shlex` (qctl sbatch imports this before its one request), and `--export`'s named
variables are the ones qctl sends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from api.slurm.directives import DirectiveError, exported_names, raw_options, read_words
from api.slurm.export import exportable


class TestReadingWords:
    def test_switches_may_be_grouped_and_a_value_ends_the_word(self) -> None:
        assert read_words(["-WHJname"], "cli") == {"wait": "1", "hold": "1", "job_name": "name"}
        assert read_words(["-WHJ", "name"], "cli") == {"wait": "1", "hold": "1", "job_name": "name"}

    def test_the_script_starts_after_a_grouped_option_and_its_value(self) -> None:
        merged, rest = raw_options(["-WJ", "name", "job.sh", "-x"], "#!/bin/sh\n", {})
        assert merged == {"wait": "1", "job_name": "name"} and rest == ["job.sh", "-x"]
        merged, rest = raw_options(["-WJname", "job.sh"], "#!/bin/sh\n", {})
        assert merged == {"wait": "1", "job_name": "name"} and rest == ["job.sh"]

    def test_the_last_spelling_of_an_option_wins(self) -> None:
        assert read_words(["-J", "a", "--job-name=b"], "cli") == {"job_name": "b"}

    def test_a_switch_given_a_value_and_an_option_missing_one_are_refused(self) -> None:
        with pytest.raises(DirectiveError, match="--wait: takes no value"):
            read_words(["--wait=1"], "cli")
        with pytest.raises(DirectiveError, match="-J: expects a value"):
            read_words(["-J"], "cli")

    def test_an_unsupported_option_is_named_even_inside_a_group_of_switches(self) -> None:
        with pytest.raises(DirectiveError) as caught:
            read_words(["-Wx"], "cli")
        assert caught.value.where == "-x" and "not an sbatch option" in caught.value.detail

    def test_the_command_line_wins_over_sbatch_variables_over_the_script(self) -> None:
        script = "#!/bin/sh\n#SBATCH -J script -p p1 -o out\n"
        merged, rest = raw_options(
            ["-J", "cli", "job.sh", "-J", "arg"], script, {"SBATCH_PARTITION": "p2"}
        )
        assert merged == {"job_name": "cli", "partition": "p2", "output": "out"}
        assert rest == ["job.sh", "-J", "arg"]


class TestWhatQctlSends:
    def test_export_names_without_values_are_the_variables_sent(self) -> None:
        assert exported_names("ALL,A,B=2,C") == ["A", "C"]
        assert exported_names("NONE") == [] and exported_names(None) == []

    def test_tokens_and_the_submitters_session_are_kept_back(self) -> None:
        environment = {"LANG": "C", "HUB_TOKEN": "t", "HOME": "/h", "SLURM_JOB_ID": "1"}
        assert exportable(environment) == {"LANG": "C"}

    def test_reading_the_words_imports_neither_dataclasses_nor_argparse(self) -> None:
        probe = (
            "import sys; import api.slurm.directives, api.slurm.export; "
            "print(' '.join(sorted(sys.modules)))"
        )
        loaded = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()
        assert "api.slurm.directives" in loaded
        assert not {"dataclasses", "argparse", "api.errors", "api.slurm.options"} & set(loaded)
