"""The installed `qctl` script leaves through `qctl.main.entry`, which skips the interpreter's
teardown: what a command printed must still reach a pipe whole, and its exit code must be the
command's. Each test runs the entry in a fresh interpreter, as the script does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENTRY = "import sys; sys.argv[0] = 'qctl'; from qctl.main import entry; entry()"
# The same command with the interpreter's ordinary teardown, to compare with.
ORDINARY = "import sys; sys.argv[0] = 'qctl'; from qctl.main import main; sys.exit(main())"


def run_entry(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "MULTIQ_CONFIG": str(tmp_path / "no-config.yaml"),
        "MULTIQ_SERVER": "http://127.0.0.1:9",  # discard: nothing listens there
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *argv],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_what_a_command_printed_reaches_a_pipe_whole(tmp_path: Path) -> None:
    # A pipe makes stdout block-buffered: without the flush, os._exit would drop the text.
    done = run_entry(tmp_path, "sbatch", "--help")
    assert done.returncode == 0, done.stderr
    ordinary = subprocess.run(
        [sys.executable, "-c", ORDINARY, "sbatch", "--help"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout == ordinary.stdout
    assert done.stdout.startswith("usage: qctl sbatch")
    assert done.stdout.endswith("go before the script.\n")


def test_argparse_help_and_usage_errors_leave_with_argparse_codes(tmp_path: Path) -> None:
    helped = run_entry(tmp_path, "--help")
    assert helped.returncode == 0
    assert "sbatch" in helped.stdout
    wrong = run_entry(tmp_path, "get", "workloads", "--no-such-flag")
    assert wrong.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in wrong.stderr


def test_a_failed_command_leaves_with_its_exit_code_and_one_line(tmp_path: Path) -> None:
    done = run_entry(tmp_path, "sbatch", "--wrap", "true")
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    environment = {**os.environ, "MULTIQ_CONFIG": str(tmp_path / "no-config.yaml")}
    # The reader takes one line and leaves; qctl's flush then meets a closed pipe.
    done = subprocess.run(
        f'{sys.executable} -c "{ENTRY}" --help | head -n 1',
        shell=True,
        check=False,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
