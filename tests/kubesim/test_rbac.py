"""Service-account tokens, RBAC and access reviews, judged by kube-apiserver's answers.

The allow/deny table runs the authorizer over objects in a real cluster's store; the rest
goes through the wire: TokenRequest, a token over the HTTPS port (kubernetes_asyncio and the
real kubectl), 401 and 403 bodies, impersonation, `kubectl auth can-i` and `auth whoami`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.apiserver.authn import UserInfo, service_account_user
from kubesim.apiserver.rbac import RequestAttributes, request_attributes
from kubesim.cluster import Cluster
from kubesim.errors import UnauthorizedError
from kubesim.kubeconfig import write_token_kubeconfig
from tests.kubesim.conftest import Kubectl, manifest

RBAC = "rbac.authorization.k8s.io"


def _rbac(cluster: Cluster, plural: str, body: dict[str, Any], namespace: str = "") -> None:
    resource = cluster.types.lookup(RBAC, "v1", plural)
    assert resource is not None
    cluster.registry.create(resource, body, namespace=namespace)


def _grant(cluster: Cluster) -> None:
    """The policy the table below is judged against."""
    if cluster.get("namespaces", "", "team") is None:
        cluster.registry.create(cluster.types.core("namespaces"), {"metadata": {"name": "team"}})
    _rbac(
        cluster,
        "roles",
        {
            "metadata": {"name": "pod-reader"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                 "resourceNames": ["settings"]},
            ],
        },
        namespace="team",
    )  # fmt: skip
    _rbac(
        cluster,
        "rolebindings",
        {
            "metadata": {"name": "bot-reads"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}],
        },
        namespace="team",
    )
    _rbac(
        cluster,
        "clusterroles",
        {
            "metadata": {"name": "job-status"},
            "rules": [
                {"apiGroups": ["batch"], "resources": ["*/status"], "verbs": ["*"]},
                {"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]},
            ],
        },
    )
    _rbac(
        cluster,
        "clusterrolebindings",
        {
            "metadata": {"name": "ops-job-status"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "job-status"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ops"}],
        },
    )
    _rbac(
        cluster,
        "rolebindings",
        {
            "metadata": {"name": "view-jobs-status-in-team"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "job-status"},
            "subjects": [{"kind": "User", "name": "alice"}],
        },
        namespace="team",
    )


def _resource(verb: str, resource: str, namespace: str = "", **more: str) -> RequestAttributes:
    return RequestAttributes(
        verb=verb, resource_request=True, resource=resource, namespace=namespace, **more
    )


def _path(verb: str, path: str) -> RequestAttributes:
    return RequestAttributes(verb=verb, resource_request=False, path=path)


BOT = service_account_user("team", "bot")
OPS = service_account_user("ops", "runner")
ALICE = UserInfo("alice", groups=("system:authenticated",))

TABLE = [
    ("a role's verbs and resources", BOT, _resource("list", "pods", "team"), True),
    ("a verb the role lacks", BOT, _resource("delete", "pods", "team", name="p"), False),
    ("a Role only counts in its namespace", BOT, _resource("list", "pods", "other"), False),
    ("a subresource named in the role", BOT, _resource("get", "pods", "team", subresource="log",
                                                       name="p"), True),
    ("a subresource not named", BOT, _resource("create", "pods", "team", subresource="eviction",
                                               name="p"), False),
    ("resourceNames allow the named object", BOT, _resource("get", "configmaps", "team",
                                                            name="settings"), True),
    ("resourceNames refuse any other", BOT, _resource("get", "configmaps", "team", name="x"),
     False),
    ("resourceNames refuse a list", BOT, _resource("list", "configmaps", "team"), False),
    ("*/status in a group, by group membership", OPS, _resource("patch", "jobs", "a",
                                                                api_group="batch",
                                                                subresource="status"), True),
    ("*/status is not the object itself", OPS, _resource("patch", "jobs", "a", api_group="batch"),
     False),
    ("another API group", OPS, _resource("patch", "deployments", "a", api_group="apps",
                                         subresource="status"), False),
    ("a nonResourceURL", OPS, _path("get", "/metrics"), True),
    ("a nonResourceURL prefix", OPS, _path("get", "/logs/kubelet"), True),
    ("a path outside the prefix", OPS, _path("get", "/logsx"), False),
    ("discovery for everyone authenticated", BOT, _path("get", "/apis/apps/v1"), True),
    ("a ClusterRole bound by a RoleBinding, in its namespace", ALICE,
     _resource("get", "jobs", "team", api_group="batch", subresource="status"), True),
    ("... and nowhere else", ALICE,
     _resource("get", "jobs", "prod", api_group="batch", subresource="status"), False),
    ("self reviews for everyone authenticated", BOT,
     _resource("create", "selfsubjectaccessreviews", api_group="authorization.k8s.io"), True),
]  # fmt: skip


@pytest.mark.parametrize(("why", "user", "attributes", "allowed"), TABLE, ids=[t[0] for t in TABLE])
async def test_rbac_decides_as_kube_apiserver(
    cluster: Cluster, why: str, user: Any, attributes: RequestAttributes, allowed: bool
) -> None:
    _grant(cluster)
    assert cluster.api.authorizer.authorize(user, attributes).allowed is allowed, why


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/a/pods", {}, ("list", "", "pods", "", "a", "")),
        ("GET", "/api/v1/namespaces/a/pods", {"watch": "1"}, ("watch", "", "pods", "", "a", "")),
        ("GET", "/api/v1/watch/namespaces/a/pods/p", {}, ("watch", "", "pods", "", "a", "p")),
        ("GET", "/api/v1/namespaces/a/pods/p/log", {}, ("get", "", "pods", "log", "a", "p")),
        ("DELETE", "/apis/batch/v1/namespaces/a/jobs", {}, ("deletecollection", "batch", "jobs",
                                                             "", "a", "")),
        ("PATCH", "/api/v1/nodes/n1/status", {}, ("patch", "", "nodes", "status", "", "n1")),
        ("GET", "/api/v1/namespaces/a", {}, ("get", "", "namespaces", "", "a", "a")),
        ("PUT", "/api/v1/namespaces/a/finalize", {}, ("update", "", "namespaces", "finalize", "a",
                                                      "a")),
        ("GET", "/api/v1/pods", {"fieldSelector": "metadata.name=p"}, ("list", "", "pods", "", "",
                                                                       "p")),
    ],
)  # fmt: skip
def test_request_attributes_are_read_from_the_path_as_the_apiserver_does(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    got = request_attributes(method, path, query)
    assert got.resource_request
    assert (
        got.verb,
        got.api_group,
        got.resource,
        got.subresource,
        got.namespace,
        got.name,
    ) == expected


def test_a_path_outside_the_resource_tree_is_a_non_resource_request() -> None:
    got = request_attributes("GET", "/apis/apps/v1", {})
    assert (got.resource_request, got.verb, got.path) == (False, "get", "/apis/apps/v1")


async def _token(core: client.CoreV1Api, namespace: str, name: str) -> str:
    answer = await core.create_namespaced_service_account_token(
        name, namespace, manifest({"spec": {"expirationSeconds": 3600}})
    )
    token: str = answer.status.token
    return token


@pytest.fixture
async def bot(core: client.CoreV1Api, cluster: Cluster) -> str:
    """A service account `bot` in `team` that may read pods there; its token."""
    _grant(cluster)
    await core.create_namespaced_service_account("team", manifest({"metadata": {"name": "bot"}}))
    return await _token(core, "team", "bot")


@pytest.fixture
async def as_bot(cluster: Cluster, bot: str, tmp_path: Path) -> AsyncIterator[client.CoreV1Api]:
    """kubernetes_asyncio holding bot's token, over the cluster's HTTPS port."""
    assert cluster.tls is not None
    path = tmp_path / "kubeconfig"
    write_token_kubeconfig(path, "bot", cluster.https_url, cluster.tls.ca_cert, bot, "team")
    api = await config.new_client_from_config(config_file=str(path))
    try:
        yield client.CoreV1Api(api)
    finally:
        await api.close()


async def test_a_service_account_token_lists_what_its_role_allows(
    as_bot: client.CoreV1Api, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map("team", manifest({"metadata": {"name": "settings"}}))
    assert (await as_bot.list_namespaced_pod("team")).items == []
    settings = await as_bot.read_namespaced_config_map("settings", "team")
    assert settings.metadata.name == "settings"


async def test_a_denied_request_is_kube_apiservers_403(as_bot: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await as_bot.list_namespaced_pod("kube-system")
    assert caught.value.status == 403
    body = _status(caught.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods is forbidden: User "system:serviceaccount:team:bot" cannot list resource "pods" '
        'in API group "" in the namespace "kube-system"'
    )
    assert body["details"] == {"group": "", "kind": "pods"}
    with pytest.raises(ApiException) as named:
        await as_bot.read_namespaced_secret("s", "team")
    assert _status(named.value)["message"] == (
        'secrets "s" is forbidden: User "system:serviceaccount:team:bot" cannot get resource '
        '"secrets" in API group "" in the namespace "team"'
    )
    with pytest.raises(ApiException) as cluster_scoped:
        await as_bot.list_node()
    assert _status(cluster_scoped.value)["message"].endswith(
        'cannot list resource "nodes" in API group "" at the cluster scope'
    )


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body or b"{}")
    return body


async def test_an_unknown_or_tampered_token_is_401(cluster: Cluster, bot: str) -> None:
    assert cluster.tls is not None
    header, payload, signature = bot.split(".")
    forged = f"{header}.{payload}.{signature[::-1]}"
    for token in ("not-a-token", forged):
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                cluster.url + "/api/v1/namespaces/team/pods",
                headers={"Authorization": f"Bearer {token}"},
            ) as response,
        ):
            assert response.status == 401
            assert (await response.json())["reason"] == "Unauthorized"


async def test_a_token_outlives_no_deleted_service_account(
    as_bot: client.CoreV1Api, core: client.CoreV1Api
) -> None:
    await core.delete_namespaced_service_account("bot", "team")
    with pytest.raises(ApiException) as caught:
        await as_bot.list_namespaced_pod("team")
    assert caught.value.status == 401


async def test_kubectl_auth_can_i_answers_for_the_admin_and_for_a_service_account(
    kubectl: Kubectl, bot: str
) -> None:
    assert (await kubectl("auth", "can-i", "delete", "nodes")).stdout.strip() == "yes"
    as_bot = ("--as", "system:serviceaccount:team:bot", "-n", "team")
    assert (await kubectl("auth", "can-i", "list", "pods", *as_bot)).stdout.strip() == "yes"
    assert (await kubectl("auth", "can-i", "get", "pods/log", *as_bot)).stdout.strip() == "yes"
    denied = await kubectl("auth", "can-i", "delete", "pods", *as_bot, check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    elsewhere = await kubectl(
        "auth", "can-i", "list", "pods", "--as", "system:serviceaccount:team:bot",
        "-n", "kube-system", check=False,
    )  # fmt: skip
    assert elsewhere.stdout.strip() == "no"


async def test_kubectl_auth_whoami_names_the_impersonated_service_account(
    kubectl: Kubectl, bot: str
) -> None:
    who = await kubectl("auth", "whoami", "--as", "system:serviceaccount:team:bot", "-o", "json")
    info = who.json()["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:team:bot"
    assert "system:serviceaccounts:team" in info["groups"]


async def test_kubectl_with_a_created_token_over_https_gets_the_real_403(
    kubectl: Kubectl, cluster: Cluster, bot: str
) -> None:
    assert cluster.tls is not None
    token = (await kubectl("create", "token", "bot", "-n", "team")).stdout.strip()
    over_tls = (
        f"--server={cluster.https_url}",
        f"--certificate-authority={cluster.tls.ca_cert}",
        f"--token={token}",
    )
    listed = await kubectl("get", "pods", "-n", "team", *over_tls)
    assert "No resources found" in listed.stderr
    denied = await kubectl("get", "pods", "-n", "kube-system", *over_tls, check=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:team:bot" '
        'cannot list resource "pods" in API group "" in the namespace "kube-system"'
    )
    impersonating = await kubectl("get", "pods", "--as", "root", *over_tls, check=False)
    assert 'cannot impersonate resource "users"' in impersonating.stderr


async def test_a_subject_access_review_answers_for_another_user(
    api_client: client.ApiClient, bot: str
) -> None:
    reviews = client.AuthorizationV1Api(api_client)
    answer = await reviews.create_subject_access_review(
        manifest(
            {
                "spec": {
                    "user": "system:serviceaccount:team:bot",
                    "groups": ["system:serviceaccounts"],
                    "resourceAttributes": {"namespace": "team", "verb": "get", "resource": "pods"},
                }
            }
        )
    )
    assert answer.status.allowed is True
    assert answer.status.reason == (
        'RBAC: allowed by RoleBinding "bot-reads/team" of Role "pod-reader" to '
        'ServiceAccount "bot/team"'
    )


async def test_a_token_bound_to_a_pod_dies_with_the_pod(
    core: client.CoreV1Api, cluster: Cluster, bot: str
) -> None:
    await core.create_namespaced_pod(
        "team",
        manifest(
            {
                "metadata": {"name": "holder"},
                "spec": {"serviceAccountName": "bot", "containers": [{"name": "m", "image": "x"}]},
            }
        ),
    )
    answer = await core.create_namespaced_service_account_token(
        "bot", "team", manifest({"spec": {"boundObjectRef": {"kind": "Pod", "name": "holder"}}})
    )
    token = answer.status.token
    assert cluster.api.authenticate_token(token).name == "system:serviceaccount:team:bot"
    await core.delete_namespaced_pod("holder", "team", grace_period_seconds=0)
    with pytest.raises(UnauthorizedError):
        cluster.api.authenticate_token(token)


async def test_kubectl_shows_bindings_with_their_role_and_subjects(
    kubectl: Kubectl, bot: str
) -> None:
    shown = (await kubectl("get", "rolebindings", "-n", "team", "-o", "wide")).stdout
    header, *rows = shown.splitlines()
    assert header.split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["bot-reads"][1] == "Role/pod-reader"
    # A RoleBinding's ServiceAccount subject may leave its namespace out; kubectl prints it so.
    assert cells["bot-reads"][-1] == "/bot"
    roles = (await kubectl("get", "clusterroles")).stdout.splitlines()
    assert roles[0].split() == ["NAME", "CREATED", "AT"]
    assert any(line.startswith("cluster-admin ") for line in roles)


async def test_kubectl_create_generators_post_protobuf_that_kubesim_reads(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    await kubectl("create", "namespace", "gen")
    await kubectl("create", "configmap", "cm", "-n", "gen", "--from-literal=level=3")
    await kubectl("create", "secret", "generic", "s", "-n", "gen", "--from-literal=pw=hunter2")
    await kubectl("create", "serviceaccount", "robot", "-n", "gen")
    await kubectl("create", "clusterrole", "reader", "--verb=get,list", "--resource=pods,nodes")
    await kubectl(
        "create", "clusterrolebinding", "robot-reads", "--clusterrole=reader",
        "--serviceaccount=gen:robot", "--group=ops",
    )  # fmt: skip
    assert (cluster.get("configmaps", "gen", "cm") or {})["data"] == {"level": "3"}
    assert (cluster.get("secrets", "gen", "s") or {})["data"] == {"pw": "aHVudGVyMg=="}
    role = cluster.registry.get(cluster.types.core("clusterroles"), "", "reader")
    assert role["rules"] == [{"verbs": ["get", "list"], "apiGroups": [""],
                              "resources": ["pods", "nodes"]}]  # fmt: skip
    binding = cluster.registry.get(cluster.types.core("clusterrolebindings"), "", "robot-reads")
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("Group", "ops"),
        ("ServiceAccount", "robot"),
    ]
    yes = await kubectl("auth", "can-i", "list", "nodes", "--as", "system:serviceaccount:gen:robot")
    assert yes.stdout.strip() == "yes"
