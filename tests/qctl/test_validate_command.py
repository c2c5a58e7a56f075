"""`qctl validate` accepts the examples, and every broken variant of an example (one rule
broken at a time) fails with a non-zero exit and the exact file, document and field path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from qctl.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path; `[n]` indexes lists; value DELETE removes the key."""
    parts = path.replace("[", ".[").split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        del node[last]
    elif last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value


DELETE = object()

# (file, document index, [(path, value), …], expected error after "<file>: document N (…): ")
BROKEN_VARIANTS = [
    pytest.param(
        "flavors.yaml",
        1,
        [("spec.nodeTaints[0].effect", "Sometimes")],
        'spec.nodeTaints[0].effect: Unsupported value: "Sometimes": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"',
        id="a_flavor_taint_with_an_unknown_effect",
    ),
    pytest.param(
        "flavors.yaml",
        2,
        [("spec.nodeLabels", {})],
        "spec.nodeLabels: Required value: at least one nodeLabel is required when "
        "topologyName is set",
        id="a_topology_flavor_without_node_labels",
    ),
    pytest.param(
        "flavors.yaml",
        3,
        [("spec.levels[0].nodeLabel", "kubernetes.io/hostname")],
        'spec.levels[0].nodeLabel: Invalid value: "kubernetes.io/hostname": '
        "kubernetes.io/hostname can only be used as the lowest topology level",
        id="hostname_above_the_lowest_topology_level",
    ),
    pytest.param(
        "queues.yaml",
        2,
        [("spec.resourceGroups[1].flavors[0].resources[0].nominalQuota", "-1")],
        "spec.resourceGroups[1].flavors[0].resources[0].nominalQuota: Invalid value: "
        '"-1": must be greater than or equal to 0',
        id="a_negative_nominal_quota",
    ),
    pytest.param(
        "queues.yaml",
        2,
        [("spec.cohortName", DELETE), ("spec.preemption", {})],
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Forbidden: "
        "must be nil when cohort is empty",
        id="a_borrowing_limit_without_a_cohort",
    ),
    pytest.param(
        "queues.yaml",
        2,
        [("spec.preemption.reclaimWithinCohort", "Never")],
        'spec.preemption.borrowWithinCohort.policy: Invalid value: "LowerPriority": '
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        id="borrow_within_cohort_without_reclaim",
    ),
    pytest.param(
        "queues.yaml",
        2,
        [("spec.resourceGroups[1].coveredResources", ["cpu"])],
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu": a resource '
        "belongs to one resource group; already covered in resourceGroups[0]",
        id="a_resource_in_two_groups",
    ),
    pytest.param(
        "queues.yaml",
        3,
        [("spec.flavorFungibility.whenCanBorrow", "MayStopSearch")],
        "spec.flavorFungibility.preference: Forbidden: only takes effect when "
        "whenCanBorrow and whenCanPreempt are both TryNextFlavor",
        id="a_fungibility_preference_without_try_next_flavor",
    ),
    pytest.param(
        "queues.yaml",
        1,
        [("spec.parentName", "ml")],
        'spec.parentName: Invalid value: "ml": a cohort cannot be its own parent',
        id="a_cohort_that_is_its_own_parent",
    ),
    pytest.param(
        "queues.yaml",
        4,
        [("spec.clusterQueue", DELETE)],
        "spec.clusterQueue: Required value",
        id="a_local_queue_without_a_cluster_queue",
    ),
    pytest.param(
        "queues.yaml",
        6,
        [("value", "high")],
        'value: Invalid value: "high": Input should be a valid integer',
        id="a_priority_class_with_a_word_for_a_value",
    ),
    pytest.param(
        "federation.yaml",
        0,
        [("spec.tokenRef.file", "east/token")],
        'spec.tokenRef: Invalid value: "": exactly one of secretName or file must be set',
        id="a_member_cluster_with_two_token_sources",
    ),
    pytest.param(
        "federation.yaml",
        3,
        [("spec.clusterSelector", {})],
        'spec: Invalid value: "": exactly one of clusters or clusterSelector must be set',
        id="a_cluster_set_with_a_list_and_a_selector",
    ),
    pytest.param(
        "federation.yaml",
        6,
        [("spec.dispatchPolicy.incremental.stepSize", 0)],
        "spec.dispatchPolicy.incremental.stepSize: Invalid value: 0: must be greater "
        "than or equal to 1",
        id="an_incremental_dispatch_of_zero_clusters",
    ),
    pytest.param(
        "federation.yaml",
        4,
        [("spec.namespaces", [])],
        "spec.namespaces: Required value: a tenant owns namespaces",
        id="a_tenant_without_namespaces",
    ),
    pytest.param(
        "profile.yaml",
        0,
        [("spec.supportedModes[1].name", "Job")],
        'spec.supportedModes[1].name: Duplicate value: "Job"',
        id="a_profile_with_a_mode_twice",
    ),
    pytest.param(
        "indexed-job.yaml",
        0,
        [("spec.template.spec.restartPolicy", "Always")],
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported '
        'values: "OnFailure", "Never"',
        id="a_job_whose_pods_restart_always",
    ),
    pytest.param(
        "indexed-job.yaml",
        0,
        [("spec.completions", DELETE)],
        "spec.completions: Required value: when completion mode is Indexed",
        id="an_indexed_job_without_completions",
    ),
    pytest.param(
        "jobset-training.yaml",
        0,
        [("spec.replicatedJobs[1].name", "driver")],
        'spec.replicatedJobs[1].name: Duplicate value: "driver"',
        id="a_jobset_with_two_roles_of_one_name",
    ),
    pytest.param(
        "jobset-training.yaml",
        0,
        [("spec.successPolicy.targetReplicatedJobs", ["trainers"])],
        'spec.successPolicy.targetReplicatedJobs[0]: Not found: "trainers": does not '
        "appear in spec.replicatedJobs",
        id="a_jobset_success_policy_naming_a_missing_role",
    ),
    pytest.param(
        "profile.yaml",
        2,
        [("template.spec.template.spec.containers", [])],
        "template.spec.template.spec.containers: Required value",
        id="a_job_template_without_containers",
    ),
    pytest.param(
        "profile.yaml",
        1,
        [("spec.containerVolumeMounts[0].name", "scratch")],
        'spec.containerVolumeMounts[0].name: Not found: "scratch": no volume of that name',
        id="a_mount_of_a_missing_volume",
    ),
]


def _kind_and_name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata", {})
    return f"{doc['kind']} {meta.get('name', '')!r}"


def test_the_examples_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(EXAMPLES)]) == 0
    assert capsys.readouterr().out.strip().endswith("object(s) valid")


@pytest.mark.parametrize(("file", "index", "changes", "expected"), BROKEN_VARIANTS)
def test_a_broken_variant_of_an_example_fails_with_the_exact_field_path(
    file: str,
    index: int,
    changes: list[tuple[str, Any]],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / file).read_text()))
    for path, value in changes:
        _set(docs[index], path, value)
    target = tmp_path / file
    target.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    code = main(["validate", "-q", "-f", str(target)])

    out = capsys.readouterr()
    assert code == 1
    assert f"{target}: document {index} ({_kind_and_name(docs[index])}): {expected}\n" in out.out
    assert out.err.startswith("error: ")


def test_every_error_of_a_file_is_printed_before_exiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "queues.yaml").read_text()))
    _set(docs[2], "spec.queueingStrategy", "Random")
    _set(docs[3], "spec.stopPolicy", "Pause")
    (tmp_path / "q.yaml").write_text(yaml.safe_dump_all(docs))

    assert main(["validate", "-q", "-f", str(tmp_path)]) == 1

    out = capsys.readouterr()
    assert out.out.count("\n") == 2
    assert "error: 2 error(s) in 2 of" in out.err


def test_invalid_yaml_is_reported_with_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ClusterQueue\nmetadata: [\n")
    assert main(["validate", "-f", str(bad)]) == 1
    assert capsys.readouterr().out.startswith(f"{bad}: invalid YAML at line 3")


def test_a_missing_file_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", "/nonexistent/q.yaml"]) == 1
    assert capsys.readouterr().err == "error: /nonexistent/q.yaml: no such file or directory\n"


def test_validate_without_files_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 2
    assert "needs at least one -f" in capsys.readouterr().err


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def test_the_installed_qctl_script_exits_non_zero_on_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "cq.yaml"
    bad.write_text("apiVersion: multiq.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: A}\n")
    result = subprocess.run(
        [str(_venv_bin() / "qctl"), "validate", "-f", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert 'metadata.name: Invalid value: "A"' in result.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_finds_qctl_as_a_plugin(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{_venv_bin()}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["kubectl", "qctl", "validate", "-f", str(EXAMPLES / "queues.yaml")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "object(s) valid" in result.stdout
