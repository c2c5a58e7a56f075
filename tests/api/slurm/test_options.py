"""sbatch options are read as sbatch(1) reads them: `#SBATCH` lines until the first command,
SBATCH_* variables over the script, the command line over both; every supported option's
spellings; and what MultiQ does not support is an error naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.slurm.arrays import ArraySpec
from api.slurm.options import (
    Dependency,
    DependencySpec,
    ExportSpec,
    GpuCount,
    SlurmOptionsError,
    parse_sbatch,
    script_directives,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "slurm" / "train.sbatch"


def errors_of(argv: list[str], script: str | None = "", env: dict[str, str] | None = None) -> str:
    with pytest.raises(SlurmOptionsError) as caught:
        parse_sbatch(argv, script, env)
    return str(caught.value)


class TestWhereOptionsComeFrom:
    def test_the_example_script_is_read_from_its_sbatch_lines(self) -> None:
        options, args = parse_sbatch(["train.sbatch"], EXAMPLE.read_text())
        assert args == []
        assert options.job_name == "resnet-sweep"
        assert options.partition == "vision"
        assert options.array == ArraySpec(tuple(range(8)), throttle=4)
        assert (options.nodes, options.ntasks_per_node, options.cpus_per_task) == (1, 1, 4)
        assert options.mem_per_cpu_mib == 4096 and options.memory_per_node_mib == 16384
        assert options.gpus_on_node == GpuCount(1, "nvidia.com/gpu")
        assert options.time_limit_seconds == 2 * 3600
        assert options.output == "/checkpoints/%x-%A_%a.out"

    def test_the_command_line_wins_over_the_environment_which_wins_over_the_script(
        self,
    ) -> None:
        script = "#!/bin/bash\n#SBATCH -J from-script\n#SBATCH -p script-part\n#SBATCH -t 5\n"
        env = {"SBATCH_JOB_NAME": "from-env", "SBATCH_PARTITION": "env-part"}
        options, _ = parse_sbatch(["-J", "from-cli", "job.sh"], script, env)
        assert options.job_name == "from-cli"
        assert options.partition == "env-part"
        assert options.time_limit_seconds == 300

    def test_sbatch_lines_after_the_first_command_are_not_read(self) -> None:
        script = "#!/bin/sh\n# a comment\n\n#SBATCH -J early\necho hi\n#SBATCH -J late\n"
        assert script_directives(script) == ["-J", "early"]

    def test_a_directive_is_split_as_a_shell_would_and_may_end_in_a_comment(self) -> None:
        script = "#SBATCH --job-name=\"two words\"  # the name\n#SBATCH --comment='a b'\n"
        options, _ = parse_sbatch(["s"], script)
        assert options.job_name == "two words" and options.comment == "a b"

    def test_words_after_the_script_are_its_arguments_even_when_they_look_like_options(
        self,
    ) -> None:
        options, args = parse_sbatch(["-n", "2", "run.sh", "--lr", "3", "-J", "x"], "")
        assert options.ntasks == 2 and options.job_name is None
        assert args == ["--lr", "3", "-J", "x"]

    def test_short_and_long_spellings_with_and_without_equals_mean_the_same(self) -> None:
        spellings = [["-Jname"], ["-J", "name"], ["--job-name=name"], ["--job-name", "name"]]
        for words in spellings:
            options, _ = parse_sbatch([*words, "s"], "")
            assert options.job_name == "name", words

    def test_wrap_takes_the_place_of_a_script(self) -> None:
        options, args = parse_sbatch(["--wrap", "echo hi", "--parsable"], None)
        assert options.wrap == "echo hi" and options.parsable and args == []


class TestValues:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [
            ("10", 600),
            ("10:30", 630),
            ("1:02:03", 3723),
            ("2-0", 2 * 86400),
            ("1-2:30", 86400 + 2 * 3600 + 30 * 60),
            ("1-0:0:5", 86405),
            ("0", None),
            ("UNLIMITED", None),
        ],
    )
    def test_time_limits_in_every_form_sbatch_accepts(self, text: str, seconds: int | None) -> None:
        options, _ = parse_sbatch(["-t", text, "s"], "")
        assert options.time_limit_seconds == seconds

    @pytest.mark.parametrize(
        ("text", "mib"), [("100", 100), ("100M", 100), ("4G", 4096), ("1T", 1048576), ("1536K", 2)]
    )
    def test_memory_sizes_are_megabytes_unless_a_unit_says_otherwise(
        self, text: str, mib: int
    ) -> None:
        options, _ = parse_sbatch([f"--mem={text}", "s"], "")
        assert options.mem_per_node_mib == mib

    def test_tasks_cpus_and_memory_per_node_follow_from_nodes_and_tasks(self) -> None:
        options, _ = parse_sbatch(["-N", "2", "-n", "8", "-c", "3", "--mem-per-cpu=1G", "s"], "")
        assert (options.tasks, options.tasks_per_node, options.cpus_per_node) == (8, 4, 12)
        assert options.memory_per_node_mib == 12 * 1024
        options, _ = parse_sbatch(["-N", "3", "--ntasks-per-node=2", "s"], "")
        assert (options.tasks, options.tasks_per_node) == (6, 2)

    def test_gpus_in_each_form_become_gpus_per_node(self) -> None:
        cases = {
            ("-G", "a100:4", "-N", "2"): GpuCount(2, "a100"),
            ("--gpus-per-node=3",): GpuCount(3, None),
            ("--gpus-per-task=2", "-n", "2"): GpuCount(4, None),
            ("--gres=gpu:v100:2",): GpuCount(2, "v100"),
            ("--gres=gpu",): GpuCount(1, None),
        }
        for words, expected in cases.items():
            options, _ = parse_sbatch([*words, "s"], "")
            assert options.gpus_on_node == expected, words

    def test_dependencies_all_of_any_of_and_singleton(self) -> None:
        options, _ = parse_sbatch(["-d", "afterok:12:13,afterany:14_2,singleton", "s"], "")
        assert options.dependency == DependencySpec(
            (Dependency("afterok", ("12", "13")), Dependency("afterany", ("14_2",))),
            any_of=False,
            singleton=True,
        )
        options, _ = parse_sbatch(["--dependency=afternotok:5?after:6", "s"], "")
        assert options.dependency.any_of and len(options.dependency.terms) == 2

    def test_export_all_none_and_named_variables(self) -> None:
        assert parse_sbatch(["s"], "")[0].export == ExportSpec()
        assert parse_sbatch(["--export=NONE", "s"], "")[0].export == ExportSpec(all=False)
        named = parse_sbatch(["--export=ALL,A,B=2", "s"], "")[0].export
        assert named == ExportSpec(all=True, names=("A",), values=(("B", "2"),))
        assert parse_sbatch(["--export=A", "s"], "")[0].export.all is False

    def test_switches(self) -> None:
        options, _ = parse_sbatch(["-W", "-H", "--parsable", "s"], "")
        assert options.wait and options.hold and options.parsable


class TestRefusals:
    def test_an_option_multiq_does_not_support_is_named_not_ignored(self) -> None:
        for words in (["--qos=high", "s"], ["--qos", "high", "s"], ["--exclusive", "s"]):
            message = errors_of(words)
            assert words[0].split("=")[0] in message and "not an sbatch option" in message

    def test_an_unsupported_option_in_a_script_is_named_too(self) -> None:
        assert "--account" in errors_of(["s"], "#SBATCH --account=physics\n")

    @pytest.mark.parametrize(
        ("words", "option"),
        [
            (["-a", "5-2"], "--array"),
            (["-a", "0-1001"], "--array"),
            (["-a", "0-3%0"], "--array"),
            (["-N", "0"], "--nodes"),
            (["-N", "2-4"], "--nodes"),
            (["-n", "x"], "--ntasks"),
            (["-c", "0"], "--cpus-per-task"),
            (["--mem=0"], "--mem"),
            (["--mem=4X"], "--mem"),
            (["-t", "1:2:3:4"], "--time"),
            (["-G", "0"], "--gpus"),
            (["--gres=fpga:1"], "--gres"),
            (["-d", "aftercorr:5"], "--dependency"),
            (["-d", "afterok"], "--dependency"),
            (["-d", "afterok:5+10"], "--dependency"),
            (["-d", "afterok:5,afterany:6?after:7"], "--dependency"),
            (["--export=1BAD"], "--export"),
            (["--mem=1G", "--mem-per-cpu=1G"], "--mem-per-cpu"),
            (["-G", "1", "--gres=gpu:1"], "--gres"),
            (["-N", "4", "-n", "2"], "--ntasks"),
        ],
    )
    def test_a_value_sbatch_would_refuse_names_its_option(
        self, words: list[str], option: str
    ) -> None:
        assert errors_of([*words, "s"]).startswith(option)

    def test_neither_script_nor_wrap_and_both_are_refused(self) -> None:
        assert "script" in errors_of([], None)
        assert "--wrap" in errors_of(["--wrap", "true", "s"], "")
