"""Which of the submitter's environment variables `--export=ALL` (sbatch's default) carries
into a job: all but those that describe the submitter's machine or session rather than the job,
or must not leave it — PATH, HOME, PWD, OLDPWD, SHLVL, `_`, HOSTNAME, TERM*, DISPLAY, SHELL,
MAIL, TMPDIR, LS_COLORS, COLUMNS, LINES, the SSH_/XDG_/DBUS_/TMUX/KUBERNETES_/KUBECONFIG
variables, MultiQ's and qctl's own (they carry hub tokens), SLURM_* and SBATCH_* (Slurm sets
those itself), and any name that looks like a secret (TOKEN, SECRET, PASSWORD, PASSWD,
CREDENTIAL, or ending in _KEY).

Its own module, importing only `re`, because qctl sbatch filters what it sends with it before
anything else is loaded; the hub filters again (api.slurm.environment).

Pure. Called by: qctl sbatch, api.slurm.environment, hub.slurm, tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["exportable"]

_NOT_EXPORTED = frozenset(
    {
        "PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME", "DISPLAY", "SHELL", "MAIL",
        "TMPDIR", "LS_COLORS", "KUBECONFIG", "COLUMNS", "LINES",
    }
)  # fmt: skip
_NOT_EXPORTED_PREFIXES = (
    "SSH_", "XDG_", "DBUS_", "TMUX", "TERM", "KUBERNETES_", "MULTIQ_", "QCTL_", "SLURM_",
    "SBATCH_",
)  # fmt: skip
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def exportable(environment: Mapping[str, str]) -> dict[str, str]:
    """The submitter's variables that `--export=ALL` carries (see the module docstring)."""
    return {
        name: value
        for name, value in environment.items()
        if _ENV_NAME.match(name)
        and name not in _NOT_EXPORTED
        and not name.startswith(_NOT_EXPORTED_PREFIXES)
        and not _SECRET.search(name)
    }
