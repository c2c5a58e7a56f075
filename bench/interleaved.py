"""Benchmark driver: one benchmark run on two checkouts in interleaved pairs, compared.

A shared VM's speed moves by a quarter from run to run, so a change worth a few percent shows
only against runs of the code before it taken in the same window (issue 15: "report before and
after from interleaved runs"). This runs `python -m <benchmark> <args>` in each checkout,
`--pairs` times, alternating which goes first (before-after, then after-before) so that a
machine slowing down during a pair does not always count against the same side, and reads the
named figures from each run's JSON. A checkout runs with its own `.venv` (what `./dev` makes
there), or without one with this interpreter and the checkout first on PYTHONPATH:

    git worktree add /tmp/old HEAD~3
    .venv/bin/python -m bench.interleaved --before /tmp/old --after . [--pairs 6] \\
        [--figure throughput.ratio_hub_plus_agent_to_kubesim ...] \\
        -- bench.federation_dispatch --workloads 2000 --paced 1000

A figure is a dotted path into the benchmark's JSON. Prints one JSON object: each checkout's
commit and interpreter, every pair's figures, and per figure the medians of both sides, the
change between them, and in how many pairs the after side was the lower; each pair's figures
also go to stderr as it ends. A run that fails stops the whole: its command, exit code and the
end of its stderr are printed.

Run by hand; tests/bench/test_interleaved.py runs it on a small benchmark of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["RunFailedError", "figure_of", "interpreter_of", "main", "summarize"]

DEFAULT_FIGURES = (
    "throughput.ratio_hub_plus_agent_to_kubesim",
    "latency.ratio_hub_plus_agent_to_kubesim",
    "throughput.dispatch_rate_per_s",
)
SIDES = ("before", "after")


class RunFailedError(Exception):
    """A benchmark run exited with an error, printed no JSON object, or lacked a figure."""


def figure_of(result: dict[str, Any], path: str) -> float:
    """The number at the dotted `path` of a benchmark's JSON (RunFailedError if it has none)."""
    value: Any = result
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise RunFailedError(f"the benchmark's JSON has no {path!r}")
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RunFailedError(f"{path!r} is not a number in the benchmark's JSON: {value!r}")
    return float(value)


def commit_of(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def interpreter_of(checkout: Path) -> tuple[str, dict[str, str]]:
    """The Python a checkout's benchmark runs with, and its environment: the checkout's own
    `.venv` (what `./dev` makes there), else this interpreter with the checkout first on
    PYTHONPATH — a `git worktree` of an older commit then needs no virtualenv of its own, which
    is right while both commits need the same dependencies (pyproject.toml unchanged). The
    federation's processes inherit the environment, so they import the checkout's code too."""
    own = checkout / ".venv" / "bin" / "python"
    if own.exists():
        return str(own), dict(os.environ)
    paths = [str(checkout), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return sys.executable, {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_once(checkout: Path, command: Sequence[str]) -> dict[str, Any]:
    python, env = interpreter_of(checkout)
    argv = [python, "-m", *command]
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    run = f"{' '.join(argv)} in {checkout}"
    if done.returncode != 0:
        raise RunFailedError(f"{run} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RunFailedError(f"{run} printed no JSON object: {exc}") from exc
    if not isinstance(result, dict):
        raise RunFailedError(f"{run} printed JSON that is not an object")
    return result


def summarize(pairs: list[dict[str, dict[str, float]]], figures: Sequence[str]) -> dict[str, Any]:
    """Per figure: both sides' medians, the change, and the pairs whose after side was lower."""
    out: dict[str, Any] = {}
    for name in figures:
        before = [pair["before"][name] for pair in pairs]
        after = [pair["after"][name] for pair in pairs]
        median_before, median_after = statistics.median(before), statistics.median(after)
        out[name] = {
            "before": round(median_before, 4),
            "after": round(median_after, 4),
            "change": round(median_after - median_before, 4),
            "after_lower_in": sum(a < b for a, b in zip(after, before, strict=True)),
            "pairs": len(pairs),
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(prog="bench.interleaved", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the checkout before")
    parser.add_argument("--after", type=Path, required=True, help="the checkout after")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument(
        "--figure", action="append", dest="figures", help="a dotted path into the JSON"
    )
    options = parser.parse_args(args)
    if not command:
        parser.error("give the benchmark after --, e.g. -- bench.federation_dispatch")
    if options.pairs < 1:
        parser.error("--pairs must be at least 1")
    figures: list[str] = options.figures or list(DEFAULT_FIGURES)
    checkouts = {"before": options.before.resolve(), "after": options.after.resolve()}
    pairs: list[dict[str, dict[str, float]]] = []
    try:
        for i in range(options.pairs):
            pair: dict[str, dict[str, float]] = {}
            for side in SIDES if i % 2 == 0 else tuple(reversed(SIDES)):
                result = run_once(checkouts[side], command)
                pair[side] = {name: figure_of(result, name) for name in figures}
            pairs.append(pair)
            # (A comparison takes minutes: say how far it got, beside the JSON to come.)
            print(f"bench.interleaved: pair {i + 1}/{options.pairs}: {pair}", file=sys.stderr)
    except RunFailedError as exc:
        print(f"bench.interleaved: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(
        json.dumps(
            {
                "benchmark": "interleaved",
                "command": command,
                "commits": {side: commit_of(path) for side, path in checkouts.items()},
                "interpreters": {side: interpreter_of(path)[0] for side, path in checkouts.items()},
                "pairs": pairs,
                "figures": summarize(pairs, figures),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
