"""Shell completion: `qctl completion bash|zsh` prints a script, and the script asks qctl
itself what may come next (`qctl __complete WORD… CURRENT`, one candidate a line).

What comes next is read from qctl's own parser (qctl.cli), so completion knows every verb,
kind, flag and flag value the command line accepts and never drifts from it. Names of objects
— `qctl describe workload <TAB>`, `qctl stop cq <TAB>`, `--clusterqueue <TAB>` — come from
the hub: one list request over qctl.rest with a short timeout, using the connection flags
already typed (or the context); a hub that does not answer completes nothing, silently.

Called by: qctl.main (`__complete` goes straight here, past argparse, which would eat a `--`
being completed), and the shell through the scripts below.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

from qctl.cli import build_parser

__all__ = ["BASH_SCRIPT", "ZSH_SCRIPT", "candidates", "run_complete", "run_completion"]

HUB_TIMEOUT_SECONDS = 2.0

BASH_SCRIPT = r"""# qctl completion for bash: source <(qctl completion bash)
_qctl_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local IFS=$'\n'
    local words=("${COMP_WORDS[@]:1:COMP_CWORD}")
    # A word bash split at '=' (--flag=value): complete the value alone.
    if [[ $cur == "=" ]]; then cur=""; words+=(""); fi
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${words[@]}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _qctl_complete qctl kubectl-qctl
"""

ZSH_SCRIPT = r"""#compdef qctl kubectl-qctl
# qctl completion for zsh: source <(qctl completion zsh)
_qctl_complete() {
    local -a candidates
    candidates=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    compadd -a candidates
}
if (( $+functions[compdef] )); then
    compdef _qctl_complete qctl kubectl-qctl
fi
"""

# Verbs whose positionals are TYPE then NAME of any kind.
_TYPE_THEN_NAME = frozenset({"get", "describe", "delete"})
_KIND_WORDS = {"cq": "ClusterQueue", "lq": "LocalQueue", "wl": "Workload"}
# Flags whose value is the name of an object of a kind.
_NAMED_BY_FLAG = {"clusterqueue": "ClusterQueue", "localqueue": "LocalQueue"}


def run_completion(args: argparse.Namespace, out: TextIO) -> int:
    out.write(BASH_SCRIPT if args.shell == "bash" else ZSH_SCRIPT)
    return 0


def run_complete(args: argparse.Namespace, out: TextIO) -> int:
    words = list(args.words) or [""]
    out.writelines(f"{word}\n" for word in candidates(words))
    return 0


def _subcommands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return parser._option_string_actions.get(flag)


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]


class _Typed:
    """What the words before the one being completed say."""

    def __init__(self, words: Sequence[str]) -> None:
        self.parser = build_parser(words[0] if words else None)
        self.path: list[str] = []
        self.positionals: list[str] = []
        self.flags: dict[str, str] = {}
        self.pending: argparse.Action | None = None
        node = self.parser
        for word in words:
            if word == "=" and self.pending is not None:
                continue  # bash splits `--flag=value` at '=': the value follows
            if self.pending is not None:
                self.flags[self.pending.dest] = word
                self.pending = None
                continue
            if word.startswith("-") and word != "-":
                flag, eq, value = word.partition("=")
                action = _option(node, flag)
                if action is not None and action.nargs != 0:
                    if eq:
                        self.flags[action.dest] = value
                    else:
                        self.pending = action
                continue
            sub = _subcommands(node)
            if sub is not None and word in sub.choices:
                node = sub.choices[word]
                self.path.append(word)
                continue
            self.positionals.append(word)
        self.node = node


def candidates(words: Sequence[str]) -> list[str]:
    """What may stand in place of the last word (a prefix of it), given the ones before."""
    *before, current = words
    typed = _Typed(before)
    flag, eq, value = current.partition("=")
    if current.startswith("--") and eq:
        action = _option(typed.node, flag)
        found = _values(typed, action) if action is not None else []
        return [f"{flag}={v}" for v in found if v.startswith(value)]
    if typed.pending is not None:
        found = _values(typed, typed.pending)
    elif current.startswith("-"):
        found = sorted(s for a in typed.node._actions for s in a.option_strings)
    else:
        sub = _subcommands(typed.node)
        if sub is not None:
            found = [name for name in sub.choices if not name.startswith("_")]
        else:
            found = _positional_values(typed)
    return [c for c in found if c.startswith(current)]


def _values(typed: _Typed, action: argparse.Action) -> list[str]:
    if action.choices is not None:
        return [str(c) for c in action.choices]
    kind = _NAMED_BY_FLAG.get(action.dest)
    return _names(typed, kind) if kind else []


def _positional_values(typed: _Typed) -> list[str]:
    index = len(typed.positionals)
    positionals = _positionals(typed.node)
    if index < len(positionals) and positionals[index].choices is not None:
        return [str(c) for c in positionals[index].choices or ()]
    verb = typed.path[0] if typed.path else ""
    if verb in _TYPE_THEN_NAME:
        if index == 0:
            return _kind_words()
        if index == 1:
            return _names(typed, typed.positionals[0])
        return []
    if verb == "logs" and index == 0:
        return _names(typed, "Workload")
    if verb in ("stop", "resume") and len(typed.path) == 2 and index == 0:
        return _names(typed, _KIND_WORDS.get(typed.path[1], typed.path[1]))
    return []


def _kind_words() -> list[str]:
    from qctl.kinds import SERVED_KINDS  # noqa: PLC0415 - only where a type is completed

    words = {k.plural() for k in SERVED_KINDS}
    words |= {"workload", "cluster", "clusters", "queue", "queues", "clusterqueue", "localqueue"}
    words |= {s for k in SERVED_KINDS for s in k.SHORT_NAMES}
    return sorted(words)


def _names(typed: _Typed, kind_word: str) -> list[str]:
    """Names of the objects of a kind, from the hub (nothing if it cannot say, quickly)."""
    from qctl.config import resolve  # noqa: PLC0415 - only names need a hub
    from qctl.errors import QctlError  # noqa: PLC0415
    from qctl.kinds import resolve_kind  # noqa: PLC0415
    from qctl.rest import HubSession  # noqa: PLC0415

    flags = typed.flags
    try:
        kind = resolve_kind(kind_word)
        context = resolve(
            server=flags.get("server"),
            token=flags.get("token"),
            context=flags.get("context"),
            namespace=flags.get("namespace"),
            certificate_authority=flags.get("certificate_authority"),
        )
        items = HubSession(context, timeout=HUB_TIMEOUT_SECONDS).list(
            kind, context.namespace, all_namespaces=False
        )
    except (QctlError, OSError):
        return []
    return sorted(str((item.get("metadata") or {}).get("name", "")) for item in items)
