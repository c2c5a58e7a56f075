"""What qctl's command line accepts: every verb, its flags and the function that runs it,
declared without importing that function's module.

Each verb is a `Verb`: its name, help, a function adding its arguments (plain argparse) and
the dotted name (`module:function`) of what runs it. qctl.main builds the whole parser from
this table and imports only the chosen verb's module, so `qctl --help` and `qctl get --help`
never import the hub's models or an HTTP client, and `qctl get` imports only what a table
of workloads needs. tests/qctl/test_light_imports.py keeps it that way.

Verbs that act on a kind (`stop clusterqueue NAME`, `create localqueue NAME`, `list workload`)
dispatch on the kind word through a table of `KindVerb` rows per verb (STOP_KINDS,
CREATE_KINDS, …): each row names its kind, aliases, flags and runner. Several commands share
`create` this way; each adds its rows only.

Add a verb: declare it here and write its `run(args, out) -> int` in a module of
qctl.commands. Called by: qctl.main, qctl.commands.completion (the words it completes).
"""

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, TextIO, cast

__all__ = [
    "COMPLETE",
    "CREATE_KINDS",
    "LIST_KINDS",
    "RESUME_KINDS",
    "SBATCH_DESCRIPTION",
    "SBATCH_USAGE",
    "STOP_KINDS",
    "VERBS",
    "KindVerb",
    "Runner",
    "Verb",
    "build_parser",
    "chosen_verb",
    "load_runner",
]

# qctl speaks English. argparse asks gettext for a translation of each of its messages (some
# seventy while parsers are built and help is printed), and gettext looks for a catalogue on
# disk every time: a file lookup per message and per language of $LANG, a tenth of what
# `qctl --help` costs. Its messages are taken as they are written.
argparse._ = str  # type: ignore[attr-defined]

Runner = Callable[[argparse.Namespace, TextIO], int]
"""What runs a verb: the parsed arguments and where to print; returns the exit code."""

VERSION = "0.1.0"
OUTPUTS = ("table", "wide", "json", "yaml")
COLOR_MODES = ("auto", "always", "never")
DEV_PORT = 8470


class Verb(NamedTuple):
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: str
    """`module:function` of the Runner, imported only when this verb is chosen."""
    description: str | None = None
    hidden: bool = False
    """Left out of `qctl --help` (the shell completion's `__complete`)."""


class KindVerb(NamedTuple):
    """One kind a verb acts on: `qctl VERB KIND …` (kubectl's and kueuectl's shape)."""

    kind: str
    aliases: tuple[str, ...]
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: str
    """`module:function` of the Runner, imported only when this kind is chosen."""


def _by_kind(
    rows: Sequence[KindVerb], dest: str = "kind"
) -> Callable[[argparse.ArgumentParser], None]:
    """A verb's arguments: a sub-command per row of its kind table."""

    def arguments(parser: argparse.ArgumentParser) -> None:
        kinds = parser.add_subparsers(dest=dest, metavar="KIND", required=True)
        for row in rows:
            sub = kinds.add_parser(
                row.kind,
                aliases=list(row.aliases),
                help=row.help,
                formatter_class=parser.formatter_class,
            )
            row.arguments(sub)
            sub.set_defaults(run=row.run)

    return arguments


def load_runner(dotted: str) -> Runner:
    """The Runner named `module:function`, importing its module now."""
    module_name, _, function = dotted.partition(":")
    return cast(Runner, getattr(importlib.import_module(module_name), function))


# --- shared flags -----------------------------------------------------------------------------


def connection_flags(
    parser: argparse.ArgumentParser, *, namespaced: bool = True, context_flag: str = "--context"
) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--server", help="hub URL, or several comma-separated (default: the current context)"
    )
    group.add_argument("--token", help="bearer token (default: the current context)")
    group.add_argument(context_flag, dest="context", help="a context of the qctl config file")
    group.add_argument(
        "--certificate-authority",
        metavar="FILE",
        help="PEM CA bundle to trust for an https hub (default: the context's, else the system's)",
    )
    if namespaced:
        group.add_argument("-n", "--namespace", help="namespace (default: the context's)")


def _filenames(parser: argparse.ArgumentParser, *, required: bool = True, help: str = "") -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        dest="filenames",
        required=required,
        metavar="FILE|DIR",
        help=help or None,
    )


# --- each verb's arguments ----------------------------------------------------------------------


def _get(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", help="workloads, clusters, queues, clustersets, cq, lq, rf, …")
    parser.add_argument("name", nargs="?")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    parser.add_argument("-w", "--watch", action="store_true", help="stream changes")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-l", "--selector", help="label selector, e.g. team=vision")
    parser.add_argument(
        "--kueue",
        nargs="?",
        const="v1beta2",
        choices=("v1beta1", "v1beta2"),
        help="with -o yaml|json: write queue kinds as Kueue's kueue.x-k8s.io objects",
    )
    connection_flags(parser)


def _type_and_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type")
    parser.add_argument("name")
    connection_flags(parser)


def _apply(parser: argparse.ArgumentParser) -> None:
    _filenames(parser)
    connection_flags(parser)


def _submit(parser: argparse.ArgumentParser) -> None:
    _filenames(parser)
    parser.add_argument("--cluster-set", help="run only on clusters of this ClusterSet")
    parser.add_argument("--queue", help="the LocalQueue (default: the job's queue label)")
    parser.add_argument("--wait", action="store_true", help="return once admitted on a cluster")
    parser.add_argument(
        "--follow", action="store_true", help="stream the logs until the workloads finish"
    )
    parser.add_argument("--color", choices=COLOR_MODES, default="auto")
    connection_flags(parser)


def _logs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD")
    parser.add_argument(
        "-l", "--selector", help="the workloads with these labels, e.g. team=vision"
    )
    parser.add_argument(
        "--prefix",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="prefix each line with [workload/pod/container] (default: with several workloads)",
    )
    parser.add_argument("-f", "--follow", action="store_true")
    parser.add_argument("--since", help="only lines newer than this, e.g. 5m")
    parser.add_argument("--tail", type=int, help="the last N lines of each container")
    parser.add_argument("--timestamps", action="store_true")
    parser.add_argument("--pod")
    parser.add_argument("--container")
    parser.add_argument("--color", choices=COLOR_MODES, default="auto")
    connection_flags(parser)


def _validate(parser: argparse.ArgumentParser) -> None:
    _filenames(
        parser,
        required=False,
        help="a file, a directory (searched recursively) or - for stdin; repeatable",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print errors only")


def _schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", nargs="?", help="kind name or short name, e.g. ClusterQueue or cq")


def _slurm_connection(parser: argparse.ArgumentParser) -> None:
    """The connection flags, long only: Slurm's verbs use -n, -p, -M, -u themselves."""
    group = parser.add_argument_group("connection")
    group.add_argument("--server", help="hub URL, or several comma-separated")
    group.add_argument("--token", help="bearer token (default: the current context)")
    group.add_argument("--context", help="a context of the qctl config file")
    group.add_argument("--namespace", help="namespace (default: the context's)")


SBATCH_USAGE = "qctl sbatch [OPTIONS] SCRIPT [ARGS…] | qctl sbatch [OPTIONS] --wrap CMD"
SBATCH_DESCRIPTION = (
    "Submit a batch script as sbatch does: #SBATCH lines, SBATCH_* variables and options\n"
    "(which win). Supported: -J -a -N -n --ntasks-per-node -c --mem --mem-per-cpu -G\n"
    "--gpus-per-node --gpus-per-task --gres -t -p -M -o -e -D --export -d -W -H -b\n"
    "--comment --parsable --wrap; anything else is an error naming it. qctl's own\n"
    "--server, --token, --context and --namespace go before the script."
)


def _sbatch(parser: argparse.ArgumentParser) -> None:
    parser.usage = SBATCH_USAGE
    parser.description = SBATCH_DESCRIPTION
    parser.add_argument("argv", nargs="*", help=argparse.SUPPRESS)
    # Every word after `sbatch` is sbatch's (argparse would read -n, -p… as qctl's): with no
    # prefix character, nothing is an option here. qctl.commands.sbatch_help answers -h/--help.
    parser.prefix_chars = "\0"


def _squeue(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-u", "--user", help="users, comma-separated")
    parser.add_argument("-t", "--states", help="states or codes (PD,R,…), or all")
    parser.add_argument("-j", "--jobs", help="job ids, comma-separated")
    parser.add_argument("-p", "--partition", help="partitions, comma-separated")
    parser.add_argument("-o", "--format", help="fields, e.g. '%%.18i %%.9P %%.8j %%T'")
    parser.add_argument("--start", action="store_true", help="pending jobs and when they begin")
    parser.add_argument("--noheader", action="store_true")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    _slurm_connection(parser)


def _scancel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobs", nargs="*", metavar="ID", help="N, N_IDX or N_[RANGE]")
    parser.add_argument("-u", "--user", help="every job of this user")
    parser.add_argument("-n", "--name", help="every job of this name")
    parser.add_argument("-t", "--states", help="only jobs in these states")
    parser.add_argument("-v", "--verbose", action="store_true")
    _slurm_connection(parser)


def _sacct(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-j", "--jobs", help="job ids, comma-separated")
    parser.add_argument("-u", "--user", help="users, comma-separated")
    parser.add_argument("-s", "--state", dest="states", help="states, comma-separated")
    parser.add_argument("-S", "--starttime", help="jobs that ended since (default: midnight)")
    parser.add_argument("-E", "--endtime", help="jobs submitted before")
    parser.add_argument(
        "-o", "--format", help="fields, e.g. JobID,JobName%%20,State,ExitCode,Elapsed,NodeList"
    )
    parser.add_argument("-n", "--noheader", action="store_true")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    _slurm_connection(parser)


def _scontrol(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("hold", "release"))
    parser.add_argument("jobs", nargs="+", metavar="ID")
    parser.add_argument("-v", "--verbose", action="store_true")
    _slurm_connection(parser)


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOBID", help="N, N_IDX: write its output files here")
    _slurm_connection(parser)


def _profile_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", required=True, help="the ApplicationProfile to expand")
    parser.add_argument(
        "--name", help="the Job's or JobSet's name (default: <profile>-<mode>-xxxxx)"
    )
    parser.add_argument("--cmd", help="the first container's command, split as a shell would")
    parser.add_argument(
        "--request",
        help="the first container's requests, e.g. cpu=2,memory=4Gi (over the template's)",
    )
    parser.add_argument("--localqueue", help="the LocalQueue (default: the template's)")
    parser.add_argument("--priority", help="a WorkloadPriorityClass")
    parser.add_argument("--time", help="maximum execution time, Slurm's format: 90, 1:30:00")
    parser.add_argument(
        "--pod-template-label", action="append", metavar="KEY=VALUE", help="repeatable"
    )
    parser.add_argument(
        "--pod-template-annotation", action="append", metavar="KEY=VALUE", help="repeatable"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print what the hub would submit; submit nothing"
    )
    parser.add_argument("-o", "--output", choices=("yaml", "json"))
    connection_flags(parser)


def _create_job(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parallelism", type=int)
    parser.add_argument("--completions", type=int)
    _profile_flags(parser)


def _create_jobset(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replicas", type=int, help="replicas of the template's Job")
    _profile_flags(parser)


def _create_slurm(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "qctl create slurm --profile P [--localqueue Q] -- [SBATCH OPTIONS] SCRIPT [ARGS]"
    )
    parser.add_argument("--profile", required=True, help="the ApplicationProfile to expand")
    parser.add_argument("--localqueue", help="the LocalQueue (sent as sbatch's --partition)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="after --: sbatch's words")
    connection_flags(parser)


def default_dev_state_dir() -> Path:
    """Where `qctl dev up` keeps its processes' state and logs."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "multiq" / "dev"


def _dev(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    def federation(p: argparse.ArgumentParser) -> None:
        p.add_argument("--clusters", type=int, default=2)
        p.add_argument("--nodes", type=int, default=4, help="nodes per cluster (8 CPU each)")
        p.add_argument("--runtime", choices=("process", "simulated"), default="process")
        p.add_argument("--port", type=int, default=DEV_PORT, help="the hub's port")
        p.add_argument(
            "--ha",
            type=int,
            default=0,
            metavar="N",
            help="run N hubs on a local etcd (one leads; they fail over) instead of one on SQLite",
        )

    formatter = parser.formatter_class
    up = verbs.add_parser(
        "up", help="start a local federation in the background", formatter_class=formatter
    )
    federation(up)
    up.add_argument("--state-dir", type=Path, default=default_dev_state_dir())
    up.set_defaults(run="qctl.commands.dev:run_up")
    down = verbs.add_parser("down", help="stop the local federation", formatter_class=formatter)
    down.add_argument("--state-dir", type=Path, default=default_dev_state_dir())
    down.set_defaults(run="qctl.commands.dev:run_down")
    demo = verbs.add_parser(
        "demo",
        help="bring up a federation, run the demo jobs, tear down",
        formatter_class=formatter,
    )
    federation(demo)
    demo.add_argument(
        "-f",
        "--filename",
        action="append",
        dest="filenames",
        help="jobs to submit (default: examples/demo)",
    )
    demo.add_argument("--keep", action="store_true", help="leave the federation running")
    demo.add_argument("--color", choices=COLOR_MODES, default="auto")
    demo.set_defaults(run="qctl.commands.dev:run_demo")


def _cluster(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    formatter = parser.formatter_class

    def member(p: argparse.ArgumentParser) -> None:
        p.add_argument("name", help="the member cluster's name in the fleet")
        p.add_argument("--kubeconfig", help="the member cluster's kubeconfig (default: kubectl's)")
        p.add_argument("--context", dest="kube_context", help="a context of that kubeconfig")
        # --context names the member cluster's kubeconfig context here, as kubectl's does.
        connection_flags(p, namespaced=False, context_flag="--hub-context")

    join = verbs.add_parser(
        "join",
        help="register a cluster at the hub and install its agent",
        formatter_class=formatter,
        description="Register NAME at the hub, mint its agent's token, install the agent into "
        "the cluster with kubectl, and wait until it is connected.",
    )
    member(join)
    join.add_argument(
        "--hub-url", help="where the agent reaches the hub (default: the URL qctl uses)"
    )
    join.add_argument("--image", default="multiq:latest", help="the agent's image")
    join.add_argument(
        "--metrics-port",
        type=int,
        default=8471,
        help="the agent's /metrics and /healthz port (pods sharing a host network need their own)",
    )
    join.add_argument(
        "--hub-certificate-authority",
        metavar="FILE",
        help="the CA the agent trusts for an https hub (default: qctl's own, if any)",
    )
    join.add_argument(
        "--timeout", default="120s", help="how long to wait for the agent to connect (0: no wait)"
    )
    join.set_defaults(run="qctl.commands.cluster:run_join")
    leave = verbs.add_parser(
        "leave",
        help="remove a cluster from the fleet and its agent from the cluster",
        formatter_class=formatter,
    )
    member(leave)
    leave.set_defaults(run="qctl.commands.cluster:run_leave")


# --- kueuectl's verbs: stop, resume, create, list -------------------------------------------

DRY_RUN = ("none", "client", "server")


def _dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        default="none",
        choices=DRY_RUN,
        help="client: print what would be sent; server: have the hub check it, change nothing",
    )


def _named(parser: argparse.ArgumentParser, *, namespaced: bool = False) -> None:
    parser.add_argument("name", metavar="NAME")
    connection_flags(parser, namespaced=namespaced)


def _stop_queue(namespaced: bool) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--keep-already-running",
            action="store_true",
            help="stop admitting only (stopPolicy Hold); without it admitted work is evicted "
            "too (HoldAndDrain)",
        )
        _dry_run(parser)
        _named(parser, namespaced=namespaced)

    return arguments


def _toggle(namespaced: bool) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        _dry_run(parser)
        _named(parser, namespaced=namespaced)

    return arguments


STOP_KINDS: tuple[KindVerb, ...] = (
    KindVerb(
        "clusterqueue",
        ("cq",),
        "stop admitting to a cluster queue, and evict what it admitted",
        _stop_queue(namespaced=False),
        "qctl.commands.queues:run_stop",
    ),
    KindVerb(
        "localqueue",
        ("lq",),
        "stop admitting from a local queue, and evict what it admitted",
        _stop_queue(namespaced=True),
        "qctl.commands.queues:run_stop",
    ),
    KindVerb(
        "workload",
        ("wl",),
        "take a workload off its cluster (spec.active=false) until resumed",
        _toggle(namespaced=True),
        "qctl.commands.queues:run_stop",
    ),
)

RESUME_KINDS: tuple[KindVerb, ...] = (
    KindVerb(
        "clusterqueue",
        ("cq",),
        "admit to a stopped cluster queue again",
        _toggle(namespaced=False),
        "qctl.commands.queues:run_resume",
    ),
    KindVerb(
        "localqueue",
        ("lq",),
        "admit from a stopped local queue again",
        _toggle(namespaced=True),
        "qctl.commands.queues:run_resume",
    ),
    KindVerb(
        "workload",
        ("wl",),
        "queue a stopped workload again (a new dispatch)",
        _toggle(namespaced=True),
        "qctl.commands.queues:run_resume",
    ),
)

QUOTA_HELP = 'FLAVOR:RESOURCE=VALUE;RESOURCE=VALUE[,FLAVOR:…], e.g. "default:cpu=9;memory=36Gi"'


def _create_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=("json", "yaml", "name"), help="print the object so"
    )
    _dry_run(parser)


def _create_cluster_queue(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--cohort", help="the cohort this cluster queue belongs to")
    parser.add_argument(
        "--queuing-strategy", choices=("StrictFIFO", "BestEffortFIFO"), default=None
    )
    parser.add_argument(
        "--namespace-selector",
        metavar="KEY=VALUE,…",
        help="the namespaces whose local queues may use it (default: every namespace)",
    )
    parser.add_argument(
        "--reclaim-within-cohort", choices=("Never", "LowerPriority", "Any"), default=None
    )
    parser.add_argument(
        "--preemption-within-cluster-queue",
        choices=("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
        default=None,
    )
    for flag in ("--nominal-quota", "--borrowing-limit", "--lending-limit"):
        parser.add_argument(flag, action="append", metavar="QUOTA", help=QUOTA_HELP)
    _create_output(parser)
    connection_flags(parser, namespaced=False)


def _create_local_queue(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument(
        "-c", "--clusterqueue", required=True, help="the cluster queue it submits to"
    )
    parser.add_argument(
        "-i",
        "--ignore-unknown-cq",
        action="store_true",
        help="create it even if the cluster queue does not exist (yet)",
    )
    _create_output(parser)
    connection_flags(parser)


# `qctl create KIND`: each command that creates something adds its rows here.
# `qctl create KIND …`: workloads from an ApplicationProfile (qctl.commands.create), and
# queues from kueuectl's flags (qctl.commands.queues).
CREATE_KINDS: tuple[KindVerb, ...] = (
    KindVerb(
        "job",
        (),
        "a Job from an ApplicationProfile's Job mode",
        _create_job,
        "qctl.commands.create:run_create",
    ),
    KindVerb(
        "jobset",
        (),
        "a JobSet from an ApplicationProfile's JobSet mode",
        _create_jobset,
        "qctl.commands.create:run_create",
    ),
    KindVerb(
        "slurm",
        (),
        "a batch script run in an ApplicationProfile's Slurm mode",
        _create_slurm,
        "qctl.commands.create:run_create_slurm",
    ),
    KindVerb(
        "clusterqueue",
        ("cq",),
        "create a cluster queue (kueuectl's flags)",
        _create_cluster_queue,
        "qctl.commands.queues:run_create_cluster_queue",
    ),
    KindVerb(
        "localqueue",
        ("lq",),
        "create a local queue on a cluster queue",
        _create_local_queue,
        "qctl.commands.queues:run_create_local_queue",
    ),
)


def _list_flags(
    *, namespaced: bool, clusterqueue: bool = False, localqueue: bool = False, status: bool = False
) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-l", "--selector", help="label selector, e.g. team=vision")
        if namespaced:
            parser.add_argument("-A", "--all-namespaces", action="store_true")
        if clusterqueue:
            parser.add_argument("-c", "--clusterqueue", help="only those of this cluster queue")
        if localqueue:
            parser.add_argument("-q", "--localqueue", help="only those of this local queue")
        if status:
            parser.add_argument(
                "--status",
                choices=("all", "pending", "admitted", "finished", "stopped"),
                default="all",
                help="only workloads in this state",
            )
        parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
        connection_flags(parser, namespaced=namespaced)

    return arguments


LIST_RUN = "qctl.commands.resources:run_list"


def _list_pods(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--for",
        dest="for_object",
        required=True,
        metavar="workload/NAME",
        help="the workload whose pods to count (the hub knows counts, not pod names)",
    )
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    connection_flags(parser)


LIST_KINDS: tuple[KindVerb, ...] = (
    KindVerb(
        "clusterqueue",
        ("cq", "clusterqueues"),
        "cluster queues: cohort, pending, admitted, active",
        _list_flags(namespaced=False),
        LIST_RUN,
    ),
    KindVerb(
        "localqueue",
        ("lq", "localqueues"),
        "local queues and their cluster queues",
        _list_flags(namespaced=True, clusterqueue=True),
        LIST_RUN,
    ),
    KindVerb(
        "workload",
        ("wl", "kwl", "workloads"),
        "workloads with their queues and state",
        _list_flags(namespaced=True, clusterqueue=True, localqueue=True, status=True),
        LIST_RUN,
    ),
    KindVerb(
        "resourceflavor",
        ("rf", "resourceflavors"),
        "resource flavors",
        _list_flags(namespaced=False),
        LIST_RUN,
    ),
    KindVerb(
        "pods",
        ("po", "pod"),
        "the pods of a workload, on whichever cluster runs them",
        _list_pods,
        LIST_RUN,
    ),
)


def _completion(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=("bash", "zsh"))


def _complete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    parser.prefix_chars = "\0"  # every word is the command line being completed


COMPLETE = Verb("__complete", "", _complete, "qctl.commands.completion:run_complete", hidden=True)
"""What the completion scripts run: qctl.main hands its words over as they are."""

# The verbs in the order `qctl --help` lists them. A verb whose `run` is empty takes it from
# its sub-verbs (`dev up|down|demo`).
VERBS: tuple[Verb, ...] = (
    Verb("submit", "submit jobs to the fleet", _submit, "qctl.commands.submit:run_submit"),
    Verb(
        "logs",
        "logs of every pod of workloads (by name or -l), any cluster",
        _logs,
        "qctl.commands.streams:run_logs",
    ),
    Verb("get", "list or show objects of one type", _get, "qctl.commands.resources:run_get"),
    Verb(
        "describe",
        "show one object in detail, with reasons",
        _type_and_name,
        "qctl.commands.resources:run_describe",
    ),
    Verb(
        "delete",
        "delete an object (a workload is cancelled)",
        _type_and_name,
        "qctl.commands.resources:run_delete",
    ),
    Verb("apply", "create or update objects from files", _apply, "qctl.commands.apply:run_apply"),
    Verb(
        "validate",
        "check manifests offline and print every error",
        _validate,
        "qctl.commands.validate:run",
        description="Validate MultiQ objects and upstream Job/JobSet manifests without a hub.",
    ),
    Verb(
        "schema",
        "print the JSON Schema of a kind, or list the kinds",
        _schema,
        "qctl.commands.schema:run",
    ),
    Verb("cluster", "join a cluster to the fleet, or take it out", _cluster, ""),
    Verb(
        "sbatch",
        "submit a Slurm batch script (Submitted batch job N)",
        _sbatch,
        "qctl.commands.sbatch_help:run",
    ),
    Verb("squeue", "Slurm jobs waiting and running", _squeue, "qctl.commands.slurm:run_squeue"),
    Verb("scancel", "cancel Slurm jobs", _scancel, "qctl.commands.slurm:run_scancel"),
    Verb(
        "sacct", "Slurm jobs' accounting, ended ones too", _sacct, "qctl.commands.slurm:run_sacct"
    ),
    Verb(
        "scontrol",
        "hold or release pending Slurm jobs",
        _scontrol,
        "qctl.commands.slurm:run_scontrol",
    ),
    Verb(
        "output",
        "write a Slurm job's output files from the hub",
        _output,
        "qctl.commands.slurm:run_output",
    ),
    Verb("stop", "stop a cluster queue, local queue or workload", _by_kind(STOP_KINDS), ""),
    Verb("resume", "resume a stopped queue or workload", _by_kind(RESUME_KINDS), ""),
    Verb(
        "create",
        "create a workload from a profile, or a queue from flags",
        _by_kind(CREATE_KINDS),
        "",
    ),
    Verb("list", "kueuectl's listings, with its filters", _by_kind(LIST_KINDS), ""),
    Verb(
        "completion",
        "print a bash or zsh completion script",
        _completion,
        "qctl.commands.completion:run_completion",
        description="Load it with `source <(qctl completion bash)` (or zsh), or save it where "
        "your shell loads completions from.",
    ),
    COMPLETE,
    Verb("dev", "a local federation on kubesim", _dev, ""),
)


def _terminal_width() -> int:
    """What shutil.get_terminal_size would say (COLUMNS, else the terminal's, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter given the terminal's width, because finding it out itself
    imports shutil (and with it bz2, lzma and zlib) for every parser and argument."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _terminal_width() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


def chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb a command line names: its first word that is not a flag (qctl's own flags
    take no value), if it is one of VERBS and comes before any --help or --version."""
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return None
        if not word.startswith("-"):
            return word if any(verb.name == word for verb in VERBS) else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With `only`, that verb alone is declared, with its flags;
    without (the top-level help, no verb, an unknown one), every verb is declared by name and
    help only: argparse spends more time declaring flags than qctl spends on a request."""
    parser = argparse.ArgumentParser(
        prog="qctl",
        description="MultiQ: submit, watch and manage batch work across a fleet of clusters.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"qctl {VERSION}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb in VERBS:
        if only is None and verb.hidden:
            continue
        if only is not None and verb.name != only:
            continue
        if verb.hidden:
            sub = subparsers.add_parser(verb.name, formatter_class=_Formatter)
        else:
            sub = subparsers.add_parser(
                verb.name, help=verb.help, description=verb.description, formatter_class=_Formatter
            )
        if only is not None:
            verb.arguments(sub)
        if verb.run:
            sub.set_defaults(run=verb.run)
    return parser
