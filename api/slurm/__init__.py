"""MultiQ's Slurm-compatible mode, the pure part: sbatch options, job arrays, units and
filename patterns, read exactly as Slurm 22.05 reads them (shared/reference/slurm.md and
anchors.md §3). Who turns them into work: the hub; who reads them first, to fail fast: qctl."""
