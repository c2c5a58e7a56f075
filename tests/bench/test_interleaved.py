"""The interleaved driver runs one benchmark in two checkouts by turns, each with its own
interpreter, and compares the figures it names: medians, change, and the pairs won."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.interleaved import RunFailedError, figure_of, main, summarize

FAKE_BENCH = """
import json, os, sys
side = os.path.basename(os.getcwd())
with open(os.environ["RUN_LOG"], "a") as log:
    log.write(side + "\\n")
if "--fail" in sys.argv:
    sys.exit("it broke")
ratio = {"before": 3.0, "after": 2.5}[side]
print(json.dumps({"throughput": {"ratio": ratio, "rate": 100}, "note": "text"}))
"""


def _checkout(root: Path, name: str) -> Path:
    """A directory with a benchmark module and a `.venv/bin/python` that runs this one."""
    checkout = root / name
    (checkout / ".venv" / "bin").mkdir(parents=True)
    python = checkout / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (checkout / "fakebench.py").write_text(FAKE_BENCH)
    return checkout


@pytest.fixture
def checkouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RUN_LOG", str(log))
    return _checkout(tmp_path, "before"), _checkout(tmp_path, "after"), log


def _run(argv: list[str]) -> dict[str, object]:
    out = io.StringIO()
    with redirect_stdout(out):
        main(argv)
    result = json.loads(out.getvalue())
    assert isinstance(result, dict)
    return result


def test_pairs_alternate_which_side_runs_first_and_the_figures_are_compared(
    checkouts: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, log = checkouts
    result = _run(
        [
            *("--before", str(before), "--after", str(after), "--pairs", "3"),
            *("--figure", "throughput.ratio", "--figure", "throughput.rate"),
            *("--", "fakebench"),
        ]
    )
    assert log.read_text().split() == ["before", "after", "after", "before", "before", "after"]
    assert result["pairs"] == [
        {"before": {"throughput.ratio": 3.0, "throughput.rate": 100.0},
         "after": {"throughput.ratio": 2.5, "throughput.rate": 100.0}}
    ] * 3  # fmt: skip
    assert result["figures"] == {
        "throughput.ratio": {
            "before": 3.0, "after": 2.5, "change": -0.5, "after_lower_in": 3, "pairs": 3
        },
        "throughput.rate": {
            "before": 100.0, "after": 100.0, "change": 0.0, "after_lower_in": 0, "pairs": 3
        },
    }  # fmt: skip
    assert result["command"] == ["fakebench"]
    progress = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1] for line in progress] == [" pair 1/3", " pair 2/3", " pair 3/3"]


def test_a_failing_run_stops_the_comparison_with_its_stderr(
    checkouts: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, log = checkouts
    with pytest.raises(SystemExit) as stopped:
        main(["--before", str(before), "--after", str(after), "--", "fakebench", "--fail"])
    assert stopped.value.code == 1
    assert "exited with 1" in capsys.readouterr().err
    assert log.read_text().split() == ["before"]


def test_a_figure_the_benchmark_does_not_print_is_an_error(
    checkouts: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, _ = checkouts
    with pytest.raises(SystemExit):
        main(
            ["--before", str(before), "--after", str(after), "--figure", "nope", "--", "fakebench"]
        )
    assert "has no 'nope'" in capsys.readouterr().err


def test_a_checkout_without_its_virtualenv_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bare").mkdir()
    with pytest.raises(SystemExit):
        main(["--before", str(tmp_path / "bare"), "--after", str(tmp_path), "--", "fakebench"])
    assert "has no .venv" in capsys.readouterr().err


def test_figures_are_numbers_found_by_dotted_paths() -> None:
    result = {"a": {"b": 2, "flag": True, "text": "x"}}
    assert figure_of(result, "a.b") == 2.0
    for path in ("a.flag", "a.text", "a.c", "z"):
        with pytest.raises(RunFailedError):
            figure_of(result, path)


def test_the_median_of_an_even_number_of_pairs_lies_between_the_middle_two() -> None:
    pairs = [
        {"before": {"r": b}, "after": {"r": a}}
        for b, a in ((3.0, 2.0), (2.0, 2.5), (4.0, 3.0), (3.0, 2.0))
    ]
    assert summarize(pairs, ["r"]) == {
        "r": {"before": 3.0, "after": 2.25, "change": -0.75, "after_lower_in": 3, "pairs": 4}
    }
