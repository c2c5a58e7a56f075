"""RBAC: what a request asks for, and whether the stored Roles and bindings allow it.

`request_attributes` turns a method and path into kube-apiserver's authorizer attributes
(apiserver's RequestInfoFactory: verb get/list/watch/create/update/patch/delete/
deletecollection, API group and version, resource, subresource, namespace, name — the name of
a list or watch comes from a `metadata.name=` field selector — or, for any other path, a
non-resource request whose verb is the lower-cased method).

`RbacAuthorizer` evaluates them against the ClusterRoleBindings, and the RoleBindings of the
request's namespace, whose subjects match the user (User by name, Group by membership,
ServiceAccount by `system:serviceaccount:NS:NAME`), and the rules of the Role or ClusterRole
they reference: verbs, apiGroups, resources (`*`, `resource/subresource`, `*/subresource`),
resourceNames and nonResourceURLs (exact or a `prefix*`), as rbac/v1 defines them. No
aggregation. `forbidden` renders kube-apiserver's 403 message. `BOOTSTRAP_POLICY` is the
subset of the default cluster roles and bindings a fresh kube-apiserver creates that kubesim
needs (cluster-admin for system:masters; discovery, basic-user and public-info-viewer for
everyone authenticated). Used by the middleware in `kubesim.apiserver.app`, the review
handlers in `kubesim.apiserver.reviews`, and `kubesim.cluster` (bootstrap).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.apiserver.authn import UserInfo
from kubesim.apiserver.store import Store
from kubesim.errors import ForbiddenError, qualified_resource
from kubesim.objects import JsonObject
from kubesim.resources import ResourceRegistry, ResourceType

__all__ = [
    "BOOTSTRAP_POLICY",
    "Decision",
    "RbacAuthorizer",
    "RequestAttributes",
    "forbidden",
    "request_attributes",
]

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_VERB_OF_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class RequestAttributes:
    """authorizer.Attributes: a resource request or a non-resource (path) request."""

    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def resource_with_subresource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _name_from_field_selector(selector: str) -> str:
    for term in selector.split(","):
        key, sep, value = term.partition("=")
        if sep and key.strip() == "metadata.name":
            return value.lstrip("=").strip()
    return ""


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> RequestAttributes:
    """What the request asks for, as kube-apiserver's RequestInfoFactory reads it."""
    parts = [p for p in path.split("/") if p]
    non_resource = RequestAttributes(verb=method.lower(), resource_request=False, path=path)
    if not parts or parts[0] not in ("api", "apis"):
        return non_resource
    if parts[0] == "api":
        if len(parts) < 3:
            return non_resource
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return non_resource
        group, version, rest = parts[1], parts[2], parts[3:]
    verb = ""
    if rest[0] == "watch":
        verb = "watch"
        rest = rest[1:]
        if not rest:
            return non_resource
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not verb:
        if method in ("GET", "HEAD"):
            verb = "get" if name else "list"
            watch = query.get("watch")
            if watch is not None and watch.lower() not in ("0", "false"):
                verb = "watch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = _VERB_OF_METHOD.get(method, method.lower())
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return RequestAttributes(
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _has(values: Iterable[str], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def _resource_matches(rule_resources: Iterable[str], combined: str, subresource: str) -> bool:
    for resource in rule_resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _url_matches(rule_urls: Iterable[str], path: str) -> bool:
    for url in rule_urls:
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule: Mapping[str, Any], attributes: RequestAttributes) -> bool:
    """rbac's RuleAllows for one PolicyRule."""
    if not _has(rule.get("verbs") or (), attributes.verb):
        return False
    if not attributes.resource_request:
        return _url_matches(rule.get("nonResourceURLs") or (), attributes.path)
    if not _has(rule.get("apiGroups") or (), attributes.api_group):
        return False
    if not _resource_matches(
        rule.get("resources") or (), attributes.resource_with_subresource, attributes.subresource
    ):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attributes.name in names


def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind = subject.get("kind", "")
    name = subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def _matching_subject(
    subjects: Iterable[Mapping[str, Any]], user: UserInfo, binding_namespace: str
) -> Mapping[str, Any] | None:
    for subject in subjects:
        kind = subject.get("kind")
        name = subject.get("name")
        if kind == "User" and name == user.name:
            return subject
        if kind == "Group" and name in user.groups:
            return subject
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding_namespace
            if user.name == f"system:serviceaccount:{namespace}:{name}":
                return subject
    return None


class RbacAuthorizer:
    """Decides requests from the Roles, ClusterRoles and bindings in one cluster's store."""

    def __init__(self, store: Store, types: ResourceRegistry) -> None:
        self.store = store
        self._roles = self._rbac(types, "roles")
        self._cluster_roles = self._rbac(types, "clusterroles")
        self._role_bindings = self._rbac(types, "rolebindings")
        self._cluster_role_bindings = self._rbac(types, "clusterrolebindings")

    @staticmethod
    def _rbac(types: ResourceRegistry, plural: str) -> ResourceType:
        resource = types.lookup("rbac.authorization.k8s.io", "v1", plural)
        assert resource is not None, plural
        return resource

    def _role_rules(self, role_ref: Mapping[str, Any], namespace: str) -> list[Mapping[str, Any]]:
        name = str(role_ref.get("name", ""))
        if role_ref.get("kind") == "ClusterRole":
            role = self.store.get(self._cluster_roles, "", name)
        else:
            role = self.store.get(self._roles, namespace, name) if namespace else None
        return list((role or {}).get("rules") or [])

    def _grants(
        self, user: UserInfo, namespace: str
    ) -> Iterator[tuple[str, list[Mapping[str, Any]]]]:
        """(description of the binding, its role's rules) for every binding naming the user."""
        for binding in self.store.list(self._cluster_role_bindings, None):
            subject = _matching_subject(binding.get("subjects") or (), user, "")
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") != "ClusterRole":
                continue
            yield (
                f'ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole '
                f'"{ref.get("name")}" to {_describe_subject(subject, "")}',
                self._role_rules(ref, ""),
            )
        if not namespace:
            return
        for binding in self.store.list(self._role_bindings, namespace):
            subject = _matching_subject(binding.get("subjects") or (), user, namespace)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            yield (
                f'RoleBinding "{binding["metadata"]["name"]}/{namespace}" of '
                f'{ref.get("kind")} "{ref.get("name")}" to {_describe_subject(subject, namespace)}',
                self._role_rules(ref, namespace),
            )

    def authorize(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        if user.is_master:
            return Decision(True)  # the privileged-group authorizer answers before RBAC
        namespace = attributes.namespace if attributes.resource_request else ""
        for source, rules in self._grants(user, namespace):
            if any(rule_allows(rule, attributes) for rule in rules):
                return Decision(True, f"RBAC: allowed by {source}")
        return Decision(False)

    def rules_for(self, user: UserInfo, namespace: str) -> list[Mapping[str, Any]]:
        """Every rule that applies to `user` in `namespace` (SelfSubjectRulesReview)."""
        if user.is_master:
            return list(BOOTSTRAP_POLICY.cluster_roles["cluster-admin"])
        return [rule for _, rules in self._grants(user, namespace) for rule in rules]


def forbidden(user: UserInfo, attributes: RequestAttributes) -> ForbiddenError:
    """kube-apiserver's 403 for a request the authorizer refused (responsewriters.Forbidden)."""
    if not attributes.resource_request:
        return ForbiddenError(
            f'forbidden: User "{user.name}" cannot {attributes.verb} path "{attributes.path}"'
        )
    what = (
        f'User "{user.name}" cannot {attributes.verb} resource '
        f'"{attributes.resource_with_subresource}" in API group "{attributes.api_group}"'
    )
    if attributes.namespace:
        what += f' in the namespace "{attributes.namespace}"'
    else:
        what += " at the cluster scope"
    qualified = qualified_resource(attributes.resource, attributes.api_group)
    subject = f'{qualified} "{attributes.name}"' if attributes.name else qualified
    return ForbiddenError(
        f"{subject} is forbidden: {what}",
        name=attributes.name or None,
        group=attributes.api_group,
        kind=attributes.resource,
    )


@dataclass(frozen=True)
class _BootstrapPolicy:
    cluster_roles: Mapping[str, list[JsonObject]]
    # binding name -> (cluster role, subjects as (kind, name))
    bindings: Mapping[str, tuple[str, tuple[tuple[str, str], ...]]]

    def objects(self) -> Iterator[tuple[str, JsonObject]]:
        """("clusterroles" | "clusterrolebindings", object) in creation order."""
        meta_extra = {
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        }
        for name, rules in self.cluster_roles.items():
            yield "clusterroles", {"metadata": {"name": name, **meta_extra}, "rules": rules}
        for name, (role, subjects) in self.bindings.items():
            yield (
                "clusterrolebindings",
                {
                    "metadata": {"name": name, **meta_extra},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}
                        for kind, subject in subjects
                    ],
                },
            )


_HEALTH_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]

BOOTSTRAP_POLICY = _BootstrapPolicy(
    cluster_roles={
        "cluster-admin": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
        "system:discovery": [
            {
                "nonResourceURLs": [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    *_HEALTH_URLS,
                    "/openapi",
                    "/openapi/*",
                ],
                "verbs": ["get"],
            }
        ],
        "system:basic-user": [
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            },
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
                "verbs": ["create"],
            },
        ],
        "system:public-info-viewer": [{"nonResourceURLs": _HEALTH_URLS, "verbs": ["get"]}],
    },
    bindings={
        "cluster-admin": ("cluster-admin", (("Group", "system:masters"),)),
        "system:discovery": ("system:discovery", (("Group", "system:authenticated"),)),
        "system:basic-user": ("system:basic-user", (("Group", "system:authenticated"),)),
        "system:public-info-viewer": (
            "system:public-info-viewer",
            (("Group", "system:authenticated"), ("Group", "system:unauthenticated")),
        ),
    },
)
