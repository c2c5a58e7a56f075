"""The interleaved driver runs one benchmark in two checkouts by turns, each with its own
interpreter, and compares the figures it names: medians, change, and the pairs won."""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.interleaved import RunFailedError, figure_of, interpreter_of, main, summarize

FAKE_BENCH = """
import json, os, sys
side = os.path.basename(os.getcwd())
with open(os.environ["RUN_LOG"], "a") as log:
    log.write(side + "\\n")
if "--fail" in sys.argv:
    sys.exit("it broke")
ratio = {"before": 3.0, "after": 2.5}.get(side, 1.0)
with open("seen.json", "w") as seen:  # (in the checkout: the run's own directory)
    json.dump({"python": sys.executable, "path": os.environ.get("PYTHONPATH", "")}, seen)
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


def test_a_checkout_without_a_virtualenv_runs_with_this_interpreter_and_its_code_first(
    checkouts: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, after, log = checkouts
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "fakebench.py").write_text(FAKE_BENCH)
    result = _run(
        [
            *("--before", str(bare), "--after", str(after), "--pairs", "1"),
            *("--figure", "throughput.ratio", "--", "fakebench"),
        ]
    )
    assert result["interpreters"] == {
        "before": sys.executable,
        "after": str(after / ".venv" / "bin" / "python"),
    }
    assert log.read_text().split() == ["bare", "after"]
    seen = json.loads((bare / "seen.json").read_text())
    assert seen["python"] == sys.executable
    assert seen["path"].split(os.pathsep)[0] == str(bare)


def test_the_interpreter_of_a_bare_checkout_puts_it_before_the_paths_already_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    python, env = interpreter_of(tmp_path)
    assert python == sys.executable
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    python, env = interpreter_of(tmp_path)
    assert python == str(tmp_path / ".venv" / "bin" / "python")
    assert env["PYTHONPATH"] == "/elsewhere"


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
