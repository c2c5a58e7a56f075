"""Create-only resources that are answers, not stored objects: access reviews, token requests.

* `authorization.k8s.io/v1`: SelfSubjectAccessReview (what `kubectl auth can-i` posts, for the
  impersonated user under `--as`), SubjectAccessReview, LocalSubjectAccessReview and
  SelfSubjectRulesReview (`kubectl auth can-i --list`), decided by the cluster's
  `RbacAuthorizer`;
* `authentication.k8s.io/v1`: SelfSubjectReview (`kubectl auth whoami`) and TokenReview;
* the `serviceaccounts/token` subresource (TokenRequest), minting a token with the cluster's
  `TokenIssuer` (default lifetime 1 h, at least 10 min, optionally bound to a pod).

Each answers 201 with the request echoed and its `status` filled in, as kube-apiserver does.
Dispatched from `kubesim.apiserver.handlers`; the requesting user is the one the
authentication middleware (`kubesim.apiserver.app`) stored on the request.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from kubesim.apiserver.authn import UserInfo
from kubesim.apiserver.context import ApiContext, Target, json_response, request_user
from kubesim.apiserver.rbac import RequestAttributes
from kubesim.apiserver.validation import decode_body
from kubesim.errors import BadRequestError, KubeSimError, NotFoundError
from kubesim.objects import JsonObject, format_time, now

__all__ = ["REVIEW_RESOURCES", "create_review", "create_token"]

_DEFAULT_TOKEN_SECONDS = 3600
_MIN_TOKEN_SECONDS = 600


def _attributes(
    spec: Mapping[str, Any], namespace_override: str | None = None
) -> RequestAttributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return RequestAttributes(
            verb=str(resource.get("verb", "")),
            resource_request=True,
            api_group=str(resource.get("group", "")),
            api_version=str(resource.get("version", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            namespace=namespace_override or str(resource.get("namespace", "")),
            name=str(resource.get("name", "")),
        )
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(non_resource, dict):
        return RequestAttributes(
            verb=str(non_resource.get("verb", "")),
            resource_request=False,
            path=str(non_resource.get("path", "")),
        )
    raise BadRequestError("exactly one of nonResourceAttributes or resourceAttributes must be set")


def _access_status(ctx: ApiContext, user: UserInfo, attributes: RequestAttributes) -> JsonObject:
    decision = ctx.authorizer.authorize(user, attributes)
    status: JsonObject = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def _self_access(ctx: ApiContext, user: UserInfo, body: JsonObject, _: Target) -> JsonObject:
    return _access_status(ctx, user, _attributes(body.get("spec") or {}))


def _subject(spec: Mapping[str, Any]) -> UserInfo:
    extra = spec.get("extra") or {}
    return UserInfo(
        str(spec.get("user", "")),
        uid=str(spec.get("uid", "")),
        groups=tuple(str(g) for g in spec.get("groups") or ()),
        extra={str(k): tuple(str(x) for x in v) for k, v in extra.items()},
    )


def _subject_access(ctx: ApiContext, _: UserInfo, body: JsonObject, __: Target) -> JsonObject:
    spec = body.get("spec") or {}
    return _access_status(ctx, _subject(spec), _attributes(spec))


def _local_subject_access(
    ctx: ApiContext, _: UserInfo, body: JsonObject, target: Target
) -> JsonObject:
    spec = body.get("spec") or {}
    namespace = target.namespace or ""
    wanted = (spec.get("resourceAttributes") or {}).get("namespace")
    if wanted and wanted != namespace:
        raise BadRequestError(
            f"spec.resourceAttributes.namespace must match namespace: {namespace}"
        )
    return _access_status(ctx, _subject(spec), _attributes(spec, namespace_override=namespace))


def _self_rules(ctx: ApiContext, user: UserInfo, body: JsonObject, _: Target) -> JsonObject:
    namespace = str((body.get("spec") or {}).get("namespace", ""))
    resource_rules: list[JsonObject] = []
    non_resource_rules: list[JsonObject] = []
    for rule in ctx.authorizer.rules_for(user, namespace):
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": list(rule["verbs"]), "nonResourceURLs": list(rule["nonResourceURLs"])}
            )
        else:
            entry = {k: list(rule[k]) for k in ("verbs", "apiGroups", "resources") if k in rule}
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(entry)
    return {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }


def _self_subject(_: ApiContext, user: UserInfo, __: JsonObject, ___: Target) -> JsonObject:
    return {"userInfo": user.as_json()}


def _token_review(ctx: ApiContext, _: UserInfo, body: JsonObject, __: Target) -> JsonObject:
    token = str((body.get("spec") or {}).get("token", ""))
    try:
        reviewed = ctx.authenticate_token(token)
    except KubeSimError:
        return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    return {"authenticated": True, "user": reviewed.as_json(), "audiences": list(ctx.audiences)}


Answer = Callable[[ApiContext, UserInfo, JsonObject, Target], JsonObject]

REVIEW_RESOURCES: dict[tuple[str, str], Answer] = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"): _self_access,
    ("authorization.k8s.io", "subjectaccessreviews"): _subject_access,
    ("authorization.k8s.io", "localsubjectaccessreviews"): _local_subject_access,
    ("authorization.k8s.io", "selfsubjectrulesreviews"): _self_rules,
    ("authentication.k8s.io", "selfsubjectreviews"): _self_subject,
    ("authentication.k8s.io", "tokenreviews"): _token_review,
}


async def _body(request: web.Request) -> JsonObject:
    body, _ = decode_body(await request.read(), request.headers.get("Content-Type", ""))
    if not isinstance(body, dict):
        raise BadRequestError("the body of the request must be a JSON object")
    return body


async def create_review(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    answer = REVIEW_RESOURCES[target.resource.key]
    body = await _body(request)
    body["apiVersion"] = target.resource.api_version
    body["kind"] = target.resource.kind
    body.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    body.setdefault("spec", {})
    body["status"] = answer(ctx, request_user(request), body, target)
    return json_response(body, status=201)


async def create_token(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    """POST serviceaccounts/NAME/token: a TokenRequest answered with a signed token."""
    assert target.name is not None
    namespace = target.namespace or ""
    body = await _body(request)
    account = ctx.registry.get(ctx.types.core("serviceaccounts"), namespace, target.name)
    spec = body.setdefault("spec", {})
    seconds = int(spec.get("expirationSeconds") or _DEFAULT_TOKEN_SECONDS)
    if seconds < _MIN_TOKEN_SECONDS:
        raise BadRequestError(
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes"
        )
    spec["expirationSeconds"] = seconds
    spec["audiences"] = list(spec.get("audiences") or ctx.audiences)
    bound = spec.get("boundObjectRef")
    pod = None
    if isinstance(bound, dict) and bound.get("kind") == "Pod":
        pod = ctx.registry.find(ctx.types.core("pods"), namespace, str(bound.get("name", "")))
        if pod is None or (bound.get("uid") and bound["uid"] != pod["metadata"]["uid"]):
            raise NotFoundError.of("pods", "", str(bound.get("name", "")))
        bound["uid"] = pod["metadata"]["uid"]
    moment = now()
    token, expires = ctx.tokens.issue(
        account,
        now=int(moment.timestamp()),
        expiration_seconds=seconds,
        audiences=tuple(spec["audiences"]),
        bound_pod=pod,
    )
    body["apiVersion"] = "authentication.k8s.io/v1"
    body["kind"] = "TokenRequest"
    body["metadata"] = {
        "name": target.name,
        "namespace": namespace,
        "creationTimestamp": format_time(moment),
    }
    body["status"] = {
        "token": token,
        "expirationTimestamp": format_time(dt.datetime.fromtimestamp(expires, dt.UTC)),
    }
    return json_response(body, status=201)
