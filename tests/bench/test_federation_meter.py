"""The federation meter: which functions it takes (plain functions and methods that import,
never coroutine functions), how the call meter it puts into a process counts calls and CPU
and answers its signals, and a small federation metered end to end."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.federation_meter import SITE, checked_target, main, per_workload


def test_a_plain_function_or_method_is_taken() -> None:
    assert checked_target("hub.state:HubState._apply") == "hub.state:HubState._apply"
    assert checked_target("agent.records:next_report") == "agent.records:next_report"


def test_gc_names_the_garbage_collector() -> None:
    assert checked_target("gc") == "gc"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("hub.state:HubState.run", "coroutine"),
        ("hub.state", "expected module:Qualified.name"),
        ("hub.nowhere:f", "cannot import"),
        ("hub.state:HubState.nothing", "has no"),
        ("hub.state:HubState", "not a function"),
    ],
)
def test_what_cannot_be_metered_is_refused_with_the_reason(spec: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        checked_target(spec)


def test_figures_are_per_workload_and_per_call_and_uncalled_functions_are_left_out() -> None:
    figures = per_workload({"hub": {"m:f": [300, 0.03], "m:g": [0, 0.0]}}, 100)
    assert figures == {
        "hub": {
            "m:f": {
                "calls_per_workload": 3.0,
                "cpu_us_per_workload": 300.0,
                "cpu_us_per_call": 100.0,
            }
        }
    }


def meter_env(meters: str, dump_dir: Path, *on_path: Path, at_exit: bool = False) -> dict[str, str]:
    """The environment of a process with the call meter on for `meters` (and `on_path`
    importable; `at_exit`: MULTIQ_METER_AT_EXIT=1), dumping into `dump_dir`."""
    return {
        **{k: v for k, v in os.environ.items() if k != "MULTIQ_METER_AT_EXIT"},
        "PYTHONPATH": os.pathsep.join([str(SITE), *map(str, on_path)]),
        "MULTIQ_METER": meters,
        "MULTIQ_METER_DIR": str(dump_dir),
        **({"MULTIQ_METER_AT_EXIT": "1"} if at_exit else {}),
    }


def metered_run(
    script: str, meters: str, dump_dir: Path, *on_path: Path, at_exit: bool = False
) -> dict[str, list[float]]:
    """Run `script` in a fresh interpreter under `meter_env`; the totals it dumped into
    `dump_dir`."""
    env = meter_env(meters, dump_dir, *on_path, at_exit=at_exit)
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    [dump] = dump_dir.glob("*.json")
    totals: dict[str, list[float]] = json.loads(dump.read_text())["totals"]
    return totals


def test_the_call_meter_counts_calls_and_cpu_and_answers_reset_and_dump(tmp_path: Path) -> None:
    script = """
import os, signal
from colorsys import rgb_to_hsv  # imported after the hook: the wrapped function
from fractions import Fraction
for _ in range(3):
    rgb_to_hsv(0.1, 0.2, 0.3)
os.kill(os.getpid(), signal.SIGUSR2)  # reset: the three calls above are forgotten
for _ in range(5):
    rgb_to_hsv(0.1, 0.2, 0.3)
Fraction(355, 113).limit_denominator(10)
os.kill(os.getpid(), signal.SIGUSR1)
"""
    totals = metered_run(
        script, "colorsys:rgb_to_hsv,fractions:Fraction.limit_denominator", tmp_path
    )
    assert totals["colorsys:rgb_to_hsv"][0] == 5
    assert totals["fractions:Fraction.limit_denominator"][0] == 1
    assert all(seconds >= 0 for _, seconds in totals.values())


def calls(n: int) -> str:
    """A script that calls `colorsys.rgb_to_hsv` `n` times."""
    return f"from colorsys import rgb_to_hsv\nfor _ in range({n}): rgb_to_hsv(0.1, 0.2, 0.3)\n"


def test_with_at_exit_a_process_dumps_its_totals_when_it_exits_unsignalled(
    tmp_path: Path,
) -> None:
    totals = metered_run(calls(4), "colorsys:rgb_to_hsv", tmp_path, at_exit=True)
    assert totals["colorsys:rgb_to_hsv"][0] == 4


def test_with_at_exit_a_process_sent_sigterm_dumps_its_totals_and_dies_of_it(
    tmp_path: Path,
) -> None:
    script = calls(2) + (
        "import os, signal\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "raise SystemExit('SIGTERM did not end the process')\n"
    )
    env = meter_env("colorsys:rgb_to_hsv", tmp_path, at_exit=True)
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env)
    assert done.returncode == -signal.SIGTERM
    [dump] = tmp_path.glob("*.json")
    assert json.loads(dump.read_text())["totals"]["colorsys:rgb_to_hsv"][0] == 2


def test_without_at_exit_an_unsignalled_process_dumps_nothing(tmp_path: Path) -> None:
    env = meter_env("colorsys:rgb_to_hsv", tmp_path)
    subprocess.run([sys.executable, "-c", calls(1)], check=True, env=env)
    assert not list(tmp_path.glob("*.json"))


def test_the_collector_meter_counts_each_generation_s_collections_and_their_cpu(
    tmp_path: Path,
) -> None:
    script = """
import gc, os, signal
gc.collect()
os.kill(os.getpid(), signal.SIGUSR2)  # reset: the collection above is forgotten
for generation in (0, 0, 1, 2):
    gc.collect(generation)
from colorsys import rgb_to_hsv
rgb_to_hsv(0.1, 0.2, 0.3)
os.kill(os.getpid(), signal.SIGUSR1)
"""
    totals = metered_run(script, "gc,colorsys:rgb_to_hsv", tmp_path)
    # (An automatic collection may come too, but none of generation 2 in so short a run.)
    assert totals["gc:generation0"][0] >= 2
    assert totals["gc:generation1"][0] >= 1
    assert totals["gc:generation2"][0] == 1
    assert totals["colorsys:rgb_to_hsv"][0] == 1  # the functions named beside it still are
    assert all(seconds >= 0 for _, seconds in totals.values())


def test_a_function_of_the_gc_module_is_metered_as_a_function(tmp_path: Path) -> None:
    script = "import gc, os, signal\ngc.isenabled()\nos.kill(os.getpid(), signal.SIGUSR1)\n"
    totals = metered_run(script, "gc:isenabled", tmp_path)
    assert totals == {"gc:isenabled": [1, totals["gc:isenabled"][1]]}


def test_static_and_class_methods_stay_what_they_are_when_metered(tmp_path: Path) -> None:
    (tmp_path / "meter_probe.py").write_text(
        "class Probe:\n"
        "    @staticmethod\n"
        "    def twice(x):\n"
        "        return 2 * x\n"
        "    @classmethod\n"
        "    def named(cls):\n"
        "        return cls.__name__\n"
    )
    script = """
import os, signal
from meter_probe import Probe
assert Probe.twice(2) == Probe().twice(2) == 4
assert Probe.named() == Probe().named() == "Probe"
os.kill(os.getpid(), signal.SIGUSR1)
"""
    totals = metered_run(
        script, "meter_probe:Probe.twice,meter_probe:Probe.named", tmp_path, tmp_path
    )
    assert totals["meter_probe:Probe.twice"][0] == 2
    assert totals["meter_probe:Probe.named"][0] == 2


def test_without_the_meter_variables_the_hook_changes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MULTIQ_METER")}
    env["PYTHONPATH"] = str(SITE)
    script = "import colorsys, sys; print(colorsys.rgb_to_hsv.__module__, len(sys.meta_path))"
    bare = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True
    )
    del env["PYTHONPATH"]
    plain = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True
    )
    assert bare.stdout == plain.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_a_small_federation_is_metered_in_the_hub_and_the_agents() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "--meter", "hub.state:HubState._apply",
                "--meter", "agent.records:next_report",
                "--workloads", "20", "--paced", "40", "--rate", "100", "--nodes", "4",
            ]
        )  # fmt: skip
    assert code == 0
    figures = json.loads(out.getvalue())
    assert figures["paced"]["workloads"] == 40
    assert figures["cpu_ms_per_workload"]["hub"] > 0
    hub = figures["metered"]["hub"]["hub.state:HubState._apply"]
    agent = figures["metered"]["agent"]["agent.records:next_report"]
    # Each workload is created, offered and reported Running: a store event each.
    assert hub["calls_per_workload"] >= 3
    assert agent["calls_per_workload"] >= 1
    assert hub["cpu_us_per_call"] > 0 and agent["cpu_us_per_call"] > 0
