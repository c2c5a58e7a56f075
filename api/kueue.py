"""Kueue's own objects, accepted as they are: `kueue.x-k8s.io` documents converted to MultiQ's
kinds on the way in, and MultiQ's queue kinds written back out as Kueue's.

Kueue users move over without rewriting their queue setups: a ResourceFlavor, ClusterQueue,
LocalQueue, Cohort, Topology or WorkloadPriorityClass of `kueue.x-k8s.io/v1beta1` or `v1beta2`
(Topology and Cohort also `v1alpha1`, where Kueue first served them) becomes the MultiQ kind of
the same name, field for field. The renames between Kueue's versions are applied
(`spec.cohort` → `cohortName`, the deprecated fungibility words `Borrow` and `Preempt` →
`MayStopSearch`).

MultiKueue maps onto the hub, which is MultiQ's MultiKueue:
- a MultiKueueConfig becomes a ClusterSet of the same clusters;
- an AdmissionCheck whose controller is `kueue.x-k8s.io/multikueue` becomes no object: a
  ClusterQueue that names it is dispatched through the hub to the config's clusters, which is a
  GlobalQueue named after the ClusterQueue routing it to that ClusterSet with Kueue's default
  dispatcher (AllAtOnce). It must be in the same batch of documents as the ClusterQueue (MultiQ
  keeps no AdmissionChecks);
- a MultiKueueCluster is a member cluster, whose agent dials the hub with a token rather than
  the hub holding its kubeconfig: it becomes a requirement that a MemberCluster of that name
  has joined (`qctl cluster join`), checked by `qctl apply`.

Whatever MultiQ has no equivalent for (other admission-check controllers, per-flavor admission
checks, concurrent admission, MultiKueue's automated quota, cluster profiles) is an error
naming the field, never dropped. Status is ignored on the way in, as a server ignores it on
create; server-owned metadata is dropped.

Out, `to_kueue` writes a MultiQ ResourceFlavor, ClusterQueue, LocalQueue, Cohort, Topology,
WorkloadPriorityClass or ClusterSet (with a cluster list) as Kueue's v1beta2 (or v1beta1), and
refuses a non-default MultiQ-only field by name, so a round trip is lossless where the shapes
match and loud where they do not.

Everything here works on plain documents (dicts); the result is then decoded by api.codec like
any other document. Called by: qctl validate / apply / get --kueue, tests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.errors import FieldError, ObjectInvalidError, Path
from api.meta import API_VERSION

__all__ = [
    "GROUP",
    "MULTIKUEUE_CONTROLLER",
    "Converted",
    "from_kueue",
    "is_kueue",
    "to_kueue",
]

GROUP = "kueue.x-k8s.io"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
DEFAULT_DISPATCHER = "AllAtOnce"
"""Kueue's default MultiKueue dispatcher nominates every cluster of the config at once."""

Doc = dict[str, Any]

# Which versions of which kinds are accepted: Kueue served Topology and Cohort (and
# MultiKueue's kinds) as v1alpha1 before v1beta1.
_VERSIONS: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": ("v1beta1", "v1beta2"),
    "ClusterQueue": ("v1beta1", "v1beta2"),
    "LocalQueue": ("v1beta1", "v1beta2"),
    "Cohort": ("v1alpha1", "v1beta1", "v1beta2"),
    "Topology": ("v1alpha1", "v1beta1", "v1beta2"),
    "WorkloadPriorityClass": ("v1beta1", "v1beta2"),
    "AdmissionCheck": ("v1beta1", "v1beta2"),
    "MultiKueueConfig": ("v1alpha1", "v1beta1", "v1beta2"),
    "MultiKueueCluster": ("v1alpha1", "v1beta1", "v1beta2"),
}

# Spec fields taken over unchanged (nested fields are then checked by MultiQ's own decoder,
# whose paths are the same), per kind. A spec field not listed, and not renamed below, is one
# MultiQ does not support.
_SAME_SPEC: dict[str, frozenset[str]] = {
    "ResourceFlavor": frozenset({"nodeLabels", "nodeTaints", "tolerations", "topologyName"}),
    "ClusterQueue": frozenset(
        {
            "resourceGroups",
            "cohortName",
            "queueingStrategy",
            "namespaceSelector",
            "flavorFungibility",
            "preemption",
            "stopPolicy",
            "fairSharing",
            "admissionScope",
        }
    ),
    "LocalQueue": frozenset({"clusterQueue", "stopPolicy", "fairSharing"}),
    "Cohort": frozenset({"parentName", "resourceGroups", "fairSharing"}),
    "Topology": frozenset({"levels"}),
}
# (kind, Kueue version, Kueue field) → MultiQ field, where older Kueue versions spelled a field
# differently.
_RENAMED_SPEC = {
    ("ClusterQueue", "v1beta1", "cohort"): "cohortName",
    ("Cohort", "v1alpha1", "parent"): "parentName",
}
_OLD_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
# Server-owned metadata: dropped on the way in, as `kubectl get -o yaml` output carries it.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def is_kueue(doc: Mapping[str, Any]) -> bool:
    """Whether a parsed document is one of Kueue's (group kueue.x-k8s.io)."""
    api_version = doc.get("apiVersion")
    return isinstance(api_version, str) and api_version.split("/")[0] == GROUP


@dataclass
class Converted:
    """What one Kueue document became.

    `objects` are MultiQ documents to decode and apply; `member_cluster` names a MemberCluster
    that must already have joined (from a MultiKueueCluster); `note` says in one line what was
    done, for `qctl validate` and `qctl apply` to print.
    """

    objects: list[Doc] = field(default_factory=list)
    member_cluster: str | None = None
    note: str = ""


@dataclass
class _MultiKueueCheck:
    name: str
    config: str


def from_kueue(docs: Sequence[Mapping[str, Any]]) -> list[Converted | ObjectInvalidError]:
    """Convert a batch of documents, one result per document in order: what it became, or
    every error it has (paths into the Kueue document). Documents of other groups pass
    through unchanged. A batch, because a ClusterQueue's admission checks are resolved
    against the AdmissionChecks beside it."""
    checks: dict[str, _MultiKueueCheck | ObjectInvalidError] = {}
    for doc in docs:
        if is_kueue(doc) and doc.get("kind") == "AdmissionCheck":
            name = _name(doc)
            checks[name] = _admission_check(doc)
    results: list[Converted | ObjectInvalidError] = []
    for doc in docs:
        if not is_kueue(doc):
            results.append(Converted(objects=[dict(doc)]))
            continue
        try:
            results.append(_convert(doc, checks))
        except ObjectInvalidError as exc:
            results.append(exc)
    return results


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, dict) else ""


def _invalid(doc: Mapping[str, Any], errors: Sequence[FieldError]) -> ObjectInvalidError:
    return ObjectInvalidError(str(doc.get("kind", "Object")), _name(doc), errors)


def _version(doc: Mapping[str, Any]) -> str:
    return str(doc.get("apiVersion", "")).partition("/")[2]


def _version_errors(doc: Mapping[str, Any]) -> list[FieldError]:
    kind = doc.get("kind")
    version = _version(doc)
    if not isinstance(kind, str) or kind not in _VERSIONS:
        known = sorted(_VERSIONS)
        return [FieldError.unsupported("kind", kind, [f"{k} (Kueue)" for k in known])]
    if version not in _VERSIONS[kind]:
        return [
            FieldError.unsupported(
                "apiVersion", doc.get("apiVersion"), [f"{GROUP}/{v}" for v in _VERSIONS[kind]]
            )
        ]
    return []


def _metadata(doc: Mapping[str, Any]) -> Doc:
    meta = copy.deepcopy(doc.get("metadata") or {})
    if not isinstance(meta, dict):
        return {}
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(_LAST_APPLIED, None)
        if not annotations:
            del meta["annotations"]
    return meta


def _ours(kind: str, meta: Doc, **body: Any) -> Doc:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, **body}


def _spec(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
    spec = doc.get("spec", {})
    if spec is None:
        return {}, []
    if not isinstance(spec, dict):
        return {}, [FieldError.invalid("spec", type(spec).__name__, "must be an object")]
    return copy.deepcopy(spec), []


def _unsupported(path: Path, why: str) -> FieldError:
    return FieldError.forbidden(path, f"MultiQ does not support this Kueue field: {why}")


def _convert(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    errors = _version_errors(doc)
    if errors:
        raise _invalid(doc, errors)
    kind = str(doc["kind"])
    converter = _CONVERTERS[kind]
    return converter(doc, checks)


def _queue_kind(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    """ResourceFlavor, ClusterQueue, LocalQueue, Cohort, Topology: spec field for field."""
    kind = str(doc["kind"])
    version = _version(doc)
    spec, errors = _spec(doc)
    out: dict[str, Any] = {}
    extra: list[Doc] = []
    checks_fields = ("admissionChecksStrategy",) + (
        ("admissionChecks",) if version == "v1beta1" else ()
    )
    for key, value in spec.items():
        path = Path("spec", key)
        renamed = _RENAMED_SPEC.get((kind, version, key))
        if key in _SAME_SPEC[kind] or renamed:
            out[renamed or key] = value
        elif kind == "ClusterQueue" and key in checks_fields:
            continue  # resolved below, with both spellings together
        elif kind == "ClusterQueue" and key == "concurrentAdmissionPolicy":
            errors.append(_unsupported(path, "a workload is admitted in one flavor at a time"))
        else:
            errors.append(_unsupported(path, "it has no MultiQ equivalent"))
    fungibility = out.get("flavorFungibility")
    if isinstance(fungibility, dict):
        for policy in ("whenCanBorrow", "whenCanPreempt"):
            word = fungibility.get(policy)
            if isinstance(word, str) and word in _OLD_FUNGIBILITY:
                fungibility[policy] = _OLD_FUNGIBILITY[word]
    if kind == "ClusterQueue":
        global_queue, check_errors = _dispatch_through_hub(doc, spec, checks)
        errors += check_errors
        if global_queue is not None:
            extra.append(global_queue)
    if errors:
        raise _invalid(doc, errors)
    body = _ours(kind, _metadata(doc), spec=out)
    note = f"{kind} {_name(doc)!r}: converted from {doc['apiVersion']}"
    if extra:
        note += f"; dispatched through the hub by GlobalQueue {_name(doc)!r}"
    return Converted(objects=[body, *extra], note=note)


def _dispatch_through_hub(
    doc: Mapping[str, Any], spec: Mapping[str, Any], checks: Mapping[str, Any]
) -> tuple[Doc | None, list[FieldError]]:
    """A ClusterQueue's admission checks: only one MultiKueue check, for every flavor, which
    becomes a GlobalQueue routing the ClusterQueue's work to the config's ClusterSet."""
    named: list[tuple[Path, str, Any]] = []
    plain = spec.get("admissionChecks") if _version(doc) == "v1beta1" else None
    if isinstance(plain, list):  # v1beta1: a list of names
        named += [
            (Path("spec", "admissionChecks").index(i), str(n), None) for i, n in enumerate(plain)
        ]
    strategy = spec.get("admissionChecksStrategy")
    if isinstance(strategy, dict):
        rules = strategy.get("admissionChecks") or []
        base = Path("spec", "admissionChecksStrategy", "admissionChecks")
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, dict):
                named.append((base.index(i), str(rule.get("name", "")), rule.get("onFlavors")))
    errors: list[FieldError] = []
    configs: list[str] = []
    for path, name, on_flavors in named:
        check = checks.get(name)
        if check is None:
            errors.append(
                FieldError.not_found(
                    path,
                    name,
                    "no AdmissionCheck of this name is among the documents given; MultiQ "
                    "keeps no AdmissionChecks, so give the MultiKueue one with this ClusterQueue",
                )
            )
        elif isinstance(check, ObjectInvalidError):
            errors.append(FieldError.invalid(path, name, f"the AdmissionCheck is refused: {check}"))
        elif on_flavors:
            errors.append(
                _unsupported(
                    path.child("onFlavors"),
                    "dispatch through the hub applies to the whole ClusterQueue, as Kueue's "
                    "MultiKueue check does",
                )
            )
        else:
            configs.append(check.config)
    if len(set(configs)) > 1:
        errors.append(
            FieldError.invalid(
                Path("spec", "admissionChecksStrategy"),
                ", ".join(configs),
                "a ClusterQueue is dispatched to one MultiKueueConfig (Kueue allows one "
                "MultiKueue check per ClusterQueue)",
            )
        )
    if errors or not configs:
        return None, errors
    name = _name(doc)
    global_queue = _ours(
        "GlobalQueue",
        {"name": name},
        spec={
            "clusterSet": configs[0],
            "clusterQueues": [name],
            "dispatchPolicy": {"type": DEFAULT_DISPATCHER},
        },
    )
    return global_queue, []


def _admission_check(doc: Mapping[str, Any]) -> _MultiKueueCheck | ObjectInvalidError:
    errors = _version_errors(doc)
    spec, spec_errors = _spec(doc)
    errors += spec_errors
    controller = spec.get("controllerName")
    if controller != MULTIKUEUE_CONTROLLER:
        errors.append(
            FieldError.unsupported(
                Path("spec", "controllerName"), controller, [MULTIKUEUE_CONTROLLER]
            )
        )
    params = spec.get("parameters")
    config = ""
    ppath = Path("spec", "parameters")
    if not isinstance(params, dict):
        errors.append(FieldError.required(ppath, "must name the MultiKueueConfig"))
    else:
        if params.get("apiGroup") != GROUP or params.get("kind") != "MultiKueueConfig":
            errors.append(
                FieldError.invalid(
                    ppath,
                    f"{params.get('apiGroup')}/{params.get('kind')}",
                    f"must refer to a {GROUP} MultiKueueConfig",
                )
            )
        config = str(params.get("name") or "")
        if not config:
            errors.append(FieldError.required(ppath.child("name")))
    for key in spec:
        if key not in ("controllerName", "parameters", "retryDelayMinutes"):
            errors.append(_unsupported(Path("spec", key), "it has no MultiQ equivalent"))
    if errors:
        return _invalid(doc, errors)
    return _MultiKueueCheck(_name(doc), config)


def _admission_check_doc(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    check = checks.get(_name(doc))
    if check is None:  # a document whose name was not a string
        check = _admission_check(doc)
    if isinstance(check, ObjectInvalidError):
        raise check
    return Converted(
        note=f"AdmissionCheck {check.name!r}: dispatch through the hub to ClusterSet "
        f"{check.config!r} (no object)"
    )


def _priority_class(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    errors = [
        _unsupported(Path(key), "it has no MultiQ equivalent")
        for key in doc
        if key not in ("apiVersion", "kind", "metadata", "value", "description")
    ]
    if errors:
        raise _invalid(doc, errors)
    body = _ours("WorkloadPriorityClass", _metadata(doc), value=doc.get("value"))
    if "description" in doc:
        body["description"] = doc["description"]
    return Converted(objects=[body], note=f"WorkloadPriorityClass {_name(doc)!r}: converted")


def _multikueue_config(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    spec, errors = _spec(doc)
    for key, value in spec.items():
        if key == "quotaManagement" and value not in (None, "Manual"):
            errors.append(
                _unsupported(
                    Path("spec", key), "the hub's fleet quota is set on a GlobalQueue instead"
                )
            )
        elif key not in ("clusters", "quotaManagement"):
            errors.append(_unsupported(Path("spec", key), "it has no MultiQ equivalent"))
    clusters = spec.get("clusters")
    if not isinstance(clusters, list) or not clusters:
        errors.append(FieldError.required(Path("spec", "clusters"), "must list the clusters"))
    if errors:
        raise _invalid(doc, errors)
    body = _ours("ClusterSet", _metadata(doc), spec={"clusters": clusters})
    return Converted(objects=[body], note=f"MultiKueueConfig {_name(doc)!r}: a ClusterSet")


def _multikueue_cluster(doc: Mapping[str, Any], checks: Mapping[str, Any]) -> Converted:
    spec, errors = _spec(doc)
    source = spec.get("clusterSource") if isinstance(spec.get("clusterSource"), dict) else spec
    if isinstance(source, dict) and source.get("clusterProfileRef"):
        where = "clusterSource" if source is not spec else None
        path = (
            Path("spec", where, "clusterProfileRef") if where else Path("spec", "clusterProfileRef")
        )
        errors.append(_unsupported(path, "join the cluster with `qctl cluster join`"))
    if errors:
        raise _invalid(doc, errors)
    name = _name(doc)
    return Converted(
        member_cluster=name,
        note=f"MultiKueueCluster {name!r}: MultiQ's agents dial the hub; the cluster joins "
        f"with `qctl cluster join {name} --kubeconfig FILE --context CONTEXT`",
    )


_CONVERTERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Converted]] = {
    "ResourceFlavor": _queue_kind,
    "ClusterQueue": _queue_kind,
    "LocalQueue": _queue_kind,
    "Cohort": _queue_kind,
    "Topology": _queue_kind,
    "WorkloadPriorityClass": _priority_class,
    "AdmissionCheck": _admission_check_doc,
    "MultiKueueConfig": _multikueue_config,
    "MultiKueueCluster": _multikueue_cluster,
}


# --- out: MultiQ → Kueue ------------------------------------------------------------------

# MultiQ-only fields of the queue kinds, with their defaults: a round trip through Kueue's
# shape would lose any other value, so it is refused by name.
_OURS_ONLY: dict[str, tuple[tuple[tuple[str, ...], object], ...]] = {
    "ClusterQueue": ((("spec", "preemption", "minAdmitSeconds"), 0),),
}


def to_kueue(doc: Mapping[str, Any], version: str = "v1beta2") -> Doc:
    """A MultiQ queue document written as Kueue's, or ObjectInvalidError naming what has no
    Kueue equivalent. Status is dropped (it is the server's); metadata is kept."""
    if version not in ("v1beta1", "v1beta2"):
        raise ValueError(f"Kueue version {version!r}: v1beta1 or v1beta2")
    kind = str(doc.get("kind", ""))
    errors: list[FieldError] = []
    meta = copy.deepcopy(doc.get("metadata") or {})
    api_version = f"{GROUP}/{version}"
    if kind in _SAME_SPEC:
        spec = copy.deepcopy(doc.get("spec") or {})
        for path, default in _OURS_ONLY.get(kind, ()):
            value = _get(doc, path)
            if value is not None and value != default:
                errors.append(
                    FieldError.forbidden(
                        Path(*path), f"has no Kueue equivalent (MultiQ-only; {value!r})"
                    )
                )
            _drop(spec, path[1:])
        for (owner, old_version, old), new in _RENAMED_SPEC.items():
            if owner == kind and old_version == version and new in spec:
                spec[old] = spec.pop(new)
        out: Doc = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}
    elif kind == "WorkloadPriorityClass":
        out = {"apiVersion": api_version, "kind": kind, "metadata": meta, "value": doc.get("value")}
        if doc.get("description"):
            out["description"] = doc["description"]
    elif kind == "ClusterSet":
        spec = doc.get("spec") or {}
        if spec.get("clusterSelector") is not None:
            errors.append(
                FieldError.forbidden(
                    Path("spec", "clusterSelector"),
                    "a MultiKueueConfig lists its clusters; a selector has no Kueue equivalent",
                )
            )
        out = {
            "apiVersion": api_version,
            "kind": "MultiKueueConfig",
            "metadata": meta,
            "spec": {"clusters": list(spec.get("clusters") or [])},
        }
    else:
        errors.append(
            FieldError.unsupported(
                "kind", kind, [*sorted(_SAME_SPEC), "WorkloadPriorityClass", "ClusterSet"]
            )
        )
        out = {}
    if errors:
        raise ObjectInvalidError(kind or "Object", _name(doc), errors)
    return out


def _get(doc: Mapping[str, Any], path: tuple[str, ...]) -> object:
    node: object = doc
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _drop(node: dict[str, Any], path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            return
        node = child
    node.pop(path[-1], None)
