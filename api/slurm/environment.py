"""What a Slurm batch job sees inside its pod: the SLURM_* variables Slurm 22.05 sets (the 32
of a plain job, 38 for an array task — shared/reference/slurm.md), SLURMD_NODENAME,
ENVIRONMENT=BATCH, and the submitter's environment as `--export` says.

Three sources, so every value means what it means in Slurm:
- known when the job is submitted (ids, name, partition, sizes, the submitter): plain env
  values, computed here by `batch_environment`;
- known only where the pod lands: the node (`spec.nodeName`, SLURMD_NODENAME) and the member
  cluster (the agent's `multiq.dev/cluster` pod annotation, SLURM_CLUSTER_NAME), through the
  downward API;
- known only inside the pod: its index among the job's nodes (JOB_COMPLETION_INDEX of the
  Indexed Job: SLURM_NODEID, SLURM_PROCID, SLURM_GTIDS) and the script's pid
  (SLURM_TASK_PID), set by `PROLOGUE`, the small POSIX shell program that is the container's
  command: it exports them, writes the script (carried in MULTIQ_SLURM_SCRIPT) to a file and
  `exec`s it, so the script's pid is the shell's and its stdout/stderr are the pod's log.
  Its files are named by the shell's pid, not by mktemp (a pod of a 1,000-task array runs the
  prologue once, and every program it starts costs; chmod is the one left): where pods share
  a /tmp and pids (kubesim's process runtime), a file of that name is a dead process's and
  is removed first (a test, not a program, when there is none); then created with
  noclobber (`set -C`), so a file someone slips in meanwhile is an error, never written
  through.

`--export`: ALL (the default) copies the submitter's environment except what describes the
submitter's machine or session rather than the job, or must not leave it (`exportable`):
PATH, HOME, PWD, OLDPWD, SHLVL, `_`, HOSTNAME, TERM*, DISPLAY, SHELL, MAIL, TMPDIR, LS_COLORS,
the SSH_/XDG_/DBUS_/TMUX/KUBERNETES_/KUBECONFIG variables, MultiQ's and qctl's own (they carry
hub tokens), SLURM_* and SBATCH_* (Slurm sets those itself), and any name that looks like a
secret (TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, or ending in _KEY) — api.slurm.export.
NONE: only what the job sets, plus SLURM_EXPORT_ENV=NONE and SLURM_GET_USER_ENV=1 as Slurm
sets them. Named variables take the submitter's value; NAME=value sets one.

Pure. Called by: api.slurm.work (the Job's container), tests (which run PROLOGUE in a shell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from api.slurm.export import exportable
from api.slurm.ids import TaskIds
from api.slurm.options import SbatchOptions
from api.slurm.patterns import default_output

__all__ = [
    "CLUSTER_ANNOTATION",
    "PROLOGUE",
    "SCRIPT_VARIABLE",
    "SLURM_CONF",
    "STDERR_MARK",
    "BatchContext",
    "batch_environment",
    "exportable",
    "repeated_count",
    "separate_error_file",
    "split_streams",
]

CLUSTER_ANNOTATION = "multiq.dev/cluster"
"""The member cluster's name, which the agent puts on every pod template it creates."""
SCRIPT_VARIABLE = "MULTIQ_SLURM_SCRIPT"
SLURM_CONF = "/etc/slurm/slurm.conf"
"""There is no slurm.conf in a MultiQ pod; the variable is set where Slurm's would be."""
RPC_VERSION_AND_SELECT_PLUGIN = "9728:109"
"""The last two fields of SLURM_WORKING_CLUSTER as Slurm 22.05 writes them."""

STDERR_MARK = "--- multiq: the script's stderr follows (sbatch --error) 5c0f6e2a ---"
"""With `--error` naming a file of its own, the pod log is the script's stdout, then a line
holding this mark (readable in `qctl logs`; the token makes a script printing it by chance
unlikely), then its stderr (`split_streams`)."""

PROLOGUE = r"""
i=${JOB_COMPLETION_INDEX:-0}
tpn=${MULTIQ_SLURM_TASKS_PER_NODE:-1}
first=$((i * tpn))
gtids=$first
t=1
while [ "$t" -lt "$tpn" ]; do gtids="$gtids,$((first + t))"; t=$((t + 1)); done
export SLURM_NODEID="$i" SLURM_PROCID="$first" SLURM_GTIDS="$gtids" SLURM_LOCALID=0
export SLURMD_NODENAME="${SLURMD_NODENAME:-$(hostname)}"
export SLURM_TOPOLOGY_ADDR="$SLURMD_NODENAME"
if [ -z "${MULTIQ_SLURM_NODELIST:-}" ]; then MULTIQ_SLURM_NODELIST="$SLURMD_NODENAME"; fi
export SLURM_JOB_NODELIST="$MULTIQ_SLURM_NODELIST" SLURM_NODELIST="$MULTIQ_SLURM_NODELIST"
export SLURM_CLUSTER_NAME="${SLURM_CLUSTER_NAME:-unknown}"
export SLURM_WORKING_CLUSTER="$SLURM_CLUSTER_NAME:$MULTIQ_SLURM_CONTROLLER"
export TMPDIR="${TMPDIR:-/tmp}"
if [ -n "${MULTIQ_SLURM_CHDIR:-}" ]; then
  mkdir -p "$MULTIQ_SLURM_CHDIR" && cd "$MULTIQ_SLURM_CHDIR" || exit 1
fi
script="$TMPDIR/slurm_script.$$"
err="$TMPDIR/slurm_stderr.$$"
for f in "$script" "$err"; do if [ -e "$f" ] || [ -L "$f" ]; then rm -f "$f"; fi; done
set -C
printf '%s\n' "$MULTIQ_SLURM_SCRIPT" > "$script" && chmod 700 "$script" || exit 1
separate="${MULTIQ_SLURM_STDERR:-}"
unset MULTIQ_SLURM_SCRIPT MULTIQ_SLURM_TASKS_PER_NODE MULTIQ_SLURM_NODELIST \
  MULTIQ_SLURM_CONTROLLER MULTIQ_SLURM_CHDIR MULTIQ_SLURM_STDERR i tpn first gtids t f
if [ -z "$separate" ]; then
  export SLURM_TASK_PID=$$
  exec "$script" "$@"
fi
sh -c 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$@"' slurm_script "$script" "$@" 2>"$err" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
rc=0
wait "$child" || rc=$?
while kill -0 "$child" 2>/dev/null; do rc=0; wait "$child" || rc=$?; done
printf '\n%s\n' "$STDERR_MARK"
cat "$err"
exit "$rc"
""".strip().replace("$STDERR_MARK", STDERR_MARK)
"""The container's command (`sh -c PROLOGUE slurm_script ARGS…`); see the module docstring."""


@dataclass(frozen=True, slots=True)
class BatchContext:
    """What the job's environment needs beyond its options: who submitted it, from where, and
    where it runs."""

    job_name: str
    partition: str
    user: str
    uid: int
    gid: int
    submit_host: str
    submit_dir: str
    nice: int
    controller: str
    """`host:port` of the hub, standing where Slurm names its controller."""
    submitter_environment: Mapping[str, str]
    nodelist: str | None = None
    """SLURM_JOB_NODELIST of a multi-node job (its pods' hostnames); None: the pod's node."""


def repeated_count(value: int, nodes: int) -> str:
    """Slurm's per-node count: `4` on one node, `4(x2)` for the same on two."""
    return str(value) if nodes == 1 else f"{value}(x{nodes})"


def batch_environment(
    options: SbatchOptions, ids: TaskIds, context: BatchContext
) -> dict[str, str]:
    """Every variable with a value known at submission, in order: what `--export` carries
    first, then what Slurm sets (which wins over a same-named exported one)."""
    env: dict[str, str] = {}
    export = options.export
    submitted = context.submitter_environment
    if export.all:
        env.update(exportable(submitted))
    for name in export.names:
        if name in submitted:
            env[name] = submitted[name]
    env.update(export.values)
    if not export.all:
        env["SLURM_EXPORT_ENV"] = "NONE"
        env["SLURM_GET_USER_ENV"] = "1"
    nodes = options.nodes
    cpus = options.cpus_per_node
    slurm = {
        "SLURM_CONF": SLURM_CONF,
        "SLURM_CPUS_ON_NODE": str(cpus),
        "SLURM_CPUS_PER_TASK": str(options.cpus_per_task),
        "SLURM_JOBID": str(ids.job_id),
        "SLURM_JOB_ID": str(ids.job_id),
        "SLURM_JOB_CPUS_PER_NODE": repeated_count(cpus, nodes),
        "SLURM_JOB_GID": str(context.gid),
        "SLURM_JOB_UID": str(context.uid),
        "SLURM_JOB_USER": context.user,
        "SLURM_JOB_NAME": context.job_name,
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_JOB_PARTITION": context.partition,
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_NPROCS": str(options.tasks),
        "SLURM_NTASKS": str(options.tasks),
        "SLURM_PRIO_PROCESS": str(context.nice),
        "SLURM_SUBMIT_DIR": context.submit_dir,
        "SLURM_SUBMIT_HOST": context.submit_host,
        "SLURM_TASKS_PER_NODE": repeated_count(options.tasks_per_node, nodes),
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "ENVIRONMENT": "BATCH",
    }
    if options.mem_per_node_mib is not None:
        slurm["SLURM_MEM_PER_NODE"] = str(options.mem_per_node_mib)
    elif options.mem_per_cpu_mib is not None:
        slurm["SLURM_MEM_PER_CPU"] = str(options.mem_per_cpu_mib)
    if options.array is not None and ids.array_job_id is not None:
        array = options.array
        slurm |= {
            "SLURM_ARRAY_JOB_ID": str(ids.array_job_id),
            "SLURM_ARRAY_TASK_ID": str(ids.array_task_id),
            "SLURM_ARRAY_TASK_COUNT": str(array.count),
            "SLURM_ARRAY_TASK_MIN": str(array.min),
            "SLURM_ARRAY_TASK_MAX": str(array.max),
            "SLURM_ARRAY_TASK_STEP": str(array.step),
        }
    env.update(slurm)
    env["MULTIQ_SLURM_TASKS_PER_NODE"] = str(options.tasks_per_node)
    env["MULTIQ_SLURM_CONTROLLER"] = f"{context.controller}:{RPC_VERSION_AND_SELECT_PLUGIN}"
    if context.nodelist is not None:
        env["MULTIQ_SLURM_NODELIST"] = context.nodelist
    if options.chdir is not None:
        env["MULTIQ_SLURM_CHDIR"] = options.chdir
    if separate_error_file(options):
        env["MULTIQ_SLURM_STDERR"] = "1"
    return env


def separate_error_file(options: SbatchOptions) -> bool:
    """Whether stderr goes to a file of its own: `--error` names one other than `--output`'s
    (Slurm's default for both is the same file)."""
    if options.error is None:
        return False
    return options.error != (options.output or default_output(options.array is not None))


def split_streams(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """A task's log lines as its stdout and its stderr: with `--error` naming a file of its
    own, what follows the PROLOGUE's last mark line is stderr (the line before the mark is
    the empty one the prologue adds, in case stdout did not end with a newline: a partial
    last line of stdout is kept, the added empty line dropped). Without a mark, all of it is
    stdout (`--error` unset: both go to the `--output` file, as in Slurm)."""
    for at in range(len(lines) - 1, -1, -1):
        if lines[at] == STDERR_MARK:
            stdout = list(lines[:at])
            if stdout and stdout[-1] == "":
                stdout.pop()
            return stdout, list(lines[at + 1 :])
    return list(lines), []
