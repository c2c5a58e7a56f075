"""Which changes an update may make to a pod's spec — kube-apiserver's pod update rules.

A pod's spec is immutable but for a few fields: container and init container images,
`activeDeadlineSeconds`, tolerations (additions only: an existing one may change only its
`tolerationSeconds`) and `terminationGracePeriodSeconds` (to 1 from a negative value). Scheduling
gates may only be removed, never added. While a pod is still gated (the *old* spec has
gates), its scheduling directives may be made stricter: keys added to `nodeSelector`
(existing ones neither changed nor removed), and required node affinity given terms when it
had none, or its existing terms given more match expressions and fields (the number of terms
unchanged) — this is how a controller such as Kueue's topology ungater places a gated pod.
Anything else is a 422 with the apiserver's "pod updates may not change fields other than"
message. The diff that message carries is a plain per-field rendering, not Go's cmp.Diff.

Values inside messages are rendered as the apiserver does for its internal types: JSON, map
keys sorted, struct fields under their Go names.

Called by `kubesim.apiserver.registry.update` for pods (not the status subresource; not the
controllers' own writes, which never change the spec this way).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.apiserver.defaults import default_pod_spec
from kubesim.errors import Cause
from kubesim.objects import JsonObject

__all__ = ["pod_update_causes"]

_UPDATABLE = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    )
)
_TERMS_PATH = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def _go_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _go_term(term: JsonObject | None) -> JsonObject:
    def requirements(items: list[JsonObject] | None) -> list[JsonObject] | None:
        if not items:
            return None
        return [
            {"Key": r.get("key", ""), "Operator": r.get("operator", ""), "Values": r.get("values")}
            for r in items
        ]

    term = term or {}
    return {
        "MatchExpressions": requirements(term.get("matchExpressions")),
        "MatchFields": requirements(term.get("matchFields")),
    }


def _gate_causes(new: JsonObject, old: JsonObject) -> list[Cause]:
    known = {g.get("name") for g in old.get("schedulingGates") or []}
    return [
        Cause(
            f"spec.schedulingGates[{index}].name",
            "FieldValueForbidden",
            f"Forbidden: only deletion is allowed, but found new scheduling gate "
            f"'{gate.get('name')}'",
        )
        for index, gate in enumerate(new.get("schedulingGates") or [])
        if gate.get("name") not in known
    ]


def _toleration_causes(new: JsonObject, old: JsonObject) -> list[Cause]:
    def without_seconds(toleration: JsonObject) -> JsonObject:
        return {k: v for k, v in toleration.items() if k != "tolerationSeconds"}

    remaining = [without_seconds(t) for t in new.get("tolerations") or []]
    for toleration in old.get("tolerations") or []:
        if without_seconds(toleration) not in remaining:
            return [
                Cause(
                    "spec.tolerations",
                    "FieldValueForbidden",
                    "Forbidden: existing toleration can not be modified except its "
                    "tolerationSeconds",
                )
            ]
    return []


def _selector_causes(new: JsonObject, old: JsonObject) -> list[Cause]:
    new_selector = new.get("nodeSelector") or {}
    for key, value in (old.get("nodeSelector") or {}).items():
        if new_selector.get(key) != value:
            return [
                Cause(
                    "spec.nodeSelector",
                    "FieldValueInvalid",
                    f"Invalid value: {_go_json(new_selector)}: only additions to "
                    "spec.nodeSelector are allowed (no mutations or deletions)",
                )
            ]
    return []


def _required_terms(spec: JsonObject) -> list[JsonObject] | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def _only_additions(new_term: JsonObject, old_term: JsonObject) -> bool:
    """An old term's requirements come first and unchanged in the new term. An empty term
    may not gain any (it matches nothing; kube-apiserver keeps it that way)."""
    fields = ("matchExpressions", "matchFields")
    if not any(old_term.get(f) for f in fields):
        return not any(new_term.get(f) for f in fields)
    for field in fields:
        old_items = old_term.get(field) or []
        if (new_term.get(field) or [])[: len(old_items)] != old_items:
            return False
    return True


def _affinity_causes(new: JsonObject, old: JsonObject) -> list[Cause]:
    old_terms = _required_terms(old)
    if not old_terms:
        return []  # no required terms before: any may be set
    new_terms = _required_terms(new) or []
    if len(new_terms) != len(old_terms):
        shown = _go_json([_go_term(t) for t in new_terms] or None)
        return [
            Cause(
                f"{_TERMS_PATH}.nodeSelectorTerms",
                "FieldValueInvalid",
                f"Invalid value: {shown}: no additions/deletions to non-empty "
                "NodeSelectorTerms list are allowed",
            )
        ]
    return [
        Cause(
            f"{_TERMS_PATH}.nodeSelectorTerms[{index}]",
            "FieldValueInvalid",
            f"Invalid value: {_go_json(_go_term(new_term))}: only additions are allowed "
            "(no mutations or deletions)",
        )
        for index, (new_term, old_term) in enumerate(zip(new_terms, old_terms, strict=True))
        if not _only_additions(new_term, old_term)
    ]


def _munged(new: JsonObject, old: JsonObject, gated: bool) -> JsonObject:
    """`new` with what an update may change put back as in `old`: what is left must equal
    `old`."""
    spec = copy.deepcopy(new)
    default_pod_spec(spec, default_restart_policy="restartPolicy" in old)
    for field in ("containers", "initContainers"):
        old_containers = old.get(field) or []
        for index, container in enumerate(spec.get(field) or []):
            if index < len(old_containers) and "image" in old_containers[index]:
                container["image"] = old_containers[index]["image"]
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if field in old:
            spec[field] = old[field]
        else:
            spec.pop(field, None)
    old_grace = old.get("terminationGracePeriodSeconds")
    if (
        isinstance(old_grace, int)
        and old_grace < 0
        and spec.get("terminationGracePeriodSeconds") == 1
    ):
        spec["terminationGracePeriodSeconds"] = old_grace
    if gated:
        if "nodeSelector" in old:
            spec["nodeSelector"] = old["nodeSelector"]
        else:
            spec.pop("nodeSelector", None)
        affinity = dict(spec.get("affinity") or {})
        old_node_affinity = (old.get("affinity") or {}).get("nodeAffinity")
        if old_node_affinity is None:
            affinity.pop("nodeAffinity", None)
        else:
            affinity["nodeAffinity"] = old_node_affinity
        if affinity or "affinity" in old:
            spec["affinity"] = affinity
        else:
            spec.pop("affinity", None)
    return spec


def _empty(value: Any) -> bool:
    return value in (None, {}, [], "")


def _diff(old: JsonObject, new: JsonObject) -> str:
    lines = ["  core.PodSpec{"]
    for field in sorted(set(old) | set(new)):
        before, after = old.get(field), new.get(field)
        if before == after or (_empty(before) and _empty(after)):
            continue
        if not _empty(before):
            lines.append(f"- \t{field}: {_go_json(before)},")
        if not _empty(after):
            lines.append(f"+ \t{field}: {_go_json(after)},")
    lines.append("  }")
    return "\n".join(lines) + "\n"


def pod_update_causes(new_pod: JsonObject, old_pod: JsonObject) -> list[Cause]:
    """Why updating `old_pod` to `new_pod` is refused (empty when it may be)."""
    new, old = new_pod.get("spec") or {}, old_pod.get("spec") or {}
    if new == old:
        return []
    if len(new.get("containers") or []) != len(old.get("containers") or []) or len(
        new.get("initContainers") or []
    ) != len(old.get("initContainers") or []):
        return [
            Cause(
                "spec.containers",
                "FieldValueForbidden",
                "Forbidden: pod updates may not add or remove containers",
            )
        ]
    causes = _toleration_causes(new, old) + _gate_causes(new, old)
    gated = bool(old.get("schedulingGates"))
    if gated:
        causes += _selector_causes(new, old) + _affinity_causes(new, old)
    munged = _munged(new, old, gated)
    relevant = {k: v for k, v in old.items() if not _empty(v)}
    if {k: v for k, v in munged.items() if not _empty(v)} != relevant:
        causes.append(
            Cause(
                "spec",
                "FieldValueForbidden",
                f"Forbidden: pod updates may not change fields other than {_UPDATABLE}\n"
                + _diff(old, munged),
            )
        )
    return causes
