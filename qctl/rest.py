"""The hub's REST API for qctl's one-shot commands (get, describe, delete, submit): one request
at a time over the standard library's http.client, returning plain wire dicts.

A command that sends one or two requests and exits would spend most of its life importing an
asynchronous client; http.client costs a fraction of that (qctl's start-up is its throughput
when a shell loop submits hundreds of jobs). Streams (watch, logs) use qctl.client. Errors and
the rules for several hubs are the same as qctl.client's (qctl.errors, qctl.hubs), so a command
behaves the same whichever client it uses.

Called by: qctl.commands.resources, .apply, .submit, .queues and .completion.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import ssl  # (http.client imports it anyway: it costs qctl's start-up nothing)
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from api.tracecontext import TRACEPARENT_HEADER, generate, parse
from qctl.config import ResolvedContext
from qctl.errors import HubRequestError, QctlError
from qctl.hubs import PLAIN_HTTP_HINT, READS, HubRotation, tls_context, untrusted_certificate
from qctl.kinds import API_PREFIX, KindLike, collection_path, resource_path

__all__ = ["HubSession", "command_traceparent"]

_DRY_RUN = {"dryRun": "All"}
"""Kubernetes' query parameter: validate and answer as if done, change nothing."""


def command_traceparent(inherited: str | None) -> str:
    """The `traceparent` this command sends: an inherited one as it is (qctl records no span
    of its own, so the hub's spans hang from the caller's), else a new trace of random ids.
    A malformed inherited one is ignored."""
    parent = parse(inherited)
    return (parent or generate(os.urandom)).format()


class _UnreachableError(QctlError):
    """Nothing of the request reached this hub: another one may be tried."""


class _BrokenError(QctlError):
    """The connection broke after the request was (perhaps partly) sent."""


class HubSession:
    """A synchronous hub client. Each request has a connection of its own, closed after the
    reply: a command sends one or a few, and none is ever in doubt about a stale keep-alive."""

    def __init__(self, context: ResolvedContext, *, timeout: float = 30.0) -> None:
        self._hubs = HubRotation(context.servers)
        self._timeout = timeout
        self._certificate_authority = context.certificate_authority
        self._tls: ssl.SSLContext | None = None
        self._headers = {
            "Accept": "application/json",
            "User-Agent": "qctl",
            # One trace per command: the hub's spans of what it does (a submission, and the
            # workload's life after it) continue it. TRACEPARENT (the OpenTelemetry name for a
            # context handed down by the environment) makes it part of a caller's trace.
            TRACEPARENT_HEADER: command_traceparent(os.environ.get("TRACEPARENT")),
        }
        if context.token:
            self._headers["Authorization"] = f"Bearer {context.token}"

    @property
    def server(self) -> str:
        """The hub requests go to first: the one that answered last."""
        return self._hubs.server

    # --- plumbing ---------------------------------------------------------------------------

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context(self._certificate_authority)
        return self._tls

    def _connect(self, server: str) -> http.client.HTTPConnection:
        url = urlsplit(server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise QctlError(f"not a hub URL: {server!r} (use http(s)://HOST:PORT)")
        timeout = self._hubs.connect_timeout(self._timeout)
        connection = (
            http.client.HTTPSConnection(
                url.hostname, url.port, timeout=timeout, context=self._tls_context()
            )
            if url.scheme == "https"
            else http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        )
        try:
            connection.connect()
        except ssl.SSLCertVerificationError as exc:
            connection.close()
            raise QctlError(untrusted_certificate(server, exc.verify_message)) from exc
        except OSError as exc:  # refused, unreachable, name unknown, connect timeout, TLS
            connection.close()
            raise _UnreachableError(str(exc) or type(exc).__name__) from exc
        if connection.sock is not None:
            connection.sock.settimeout(self._timeout)
        return connection

    def _exchange(
        self, server: str, method: str, target: str, payload: bytes | None
    ) -> tuple[int, str, bytes]:
        """One request and its whole reply: (status, reason phrase, body)."""
        headers = {**self._headers, "Connection": "close"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        connection = self._connect(server)
        try:
            # The hub may answer before reading all of the body (413 for one too large) and
            # close: its reply is still there to read.
            with contextlib.suppress(OSError):
                connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.reason, response.read()
        except TimeoutError:
            raise
        except (OSError, http.client.HTTPException) as exc:
            detail = str(exc) or type(exc).__name__
            if urlsplit(server).scheme == "http" and isinstance(
                exc, http.client.RemoteDisconnected | ConnectionResetError
            ):
                detail += PLAIN_HTTP_HINT
            raise _BrokenError(detail) from exc
        finally:
            connection.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        target = path + (f"?{urlencode(params)}" if params else "")
        payload = None if body is None else json.dumps(body).encode()
        failures: list[str] = []
        for index in self._hubs.order():
            server = self._hubs.servers[index]
            try:
                status, phrase, raw = self._exchange(server, method, target, payload)
            except _UnreachableError as exc:
                failures.append(f"{server}: {exc}")  # nothing reached it: try the next
                continue
            except _BrokenError as exc:
                if method not in READS:
                    raise QctlError(
                        f"lost the hub at {server} during {method} {path}: it may or may not "
                        f"have been done ({exc}); look before trying again"
                    ) from exc
                failures.append(f"{server}: {exc}")
                continue
            except TimeoutError as exc:
                raise QctlError(f"the hub at {server} did not answer in time") from exc
            self._hubs.current = index
            text = raw.decode("utf-8", errors="replace")
            if status >= 400:
                raise HubRequestError.from_reply(status, phrase, text)
            try:
                result: dict[str, Any] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise QctlError(
                    f"the hub at {server} answered {method} {path} with no JSON"
                ) from exc
            return result
        raise self._hubs.unreachable(failures)

    # --- verbs ------------------------------------------------------------------------------

    def get(self, kind: KindLike, name: str, namespace: str | None) -> dict[str, Any]:
        return self.request("GET", resource_path(kind, namespace, name))

    def list(
        self,
        kind: KindLike,
        namespace: str | None,
        *,
        all_namespaces: bool = False,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        path = collection_path(kind, namespace, all_namespaces=all_namespaces)
        params = {"labelSelector": label_selector} if label_selector else None
        items: list[dict[str, Any]] = self.request("GET", path, params=params).get("items", [])
        return items

    def create(
        self, kind: KindLike, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """POST the object; with `dry_run`, the hub checks it and stores nothing."""
        namespace = (body.get("metadata") or {}).get("namespace")
        params = _DRY_RUN if dry_run else None
        return self.request("POST", resource_path(kind, namespace), body=body, params=params)

    def replace(
        self, kind: KindLike, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """PUT the object (a compare-and-swap when it carries its resourceVersion: a 409
        if another writer got there first); with `dry_run`, nothing is stored."""
        meta = body.get("metadata") or {}
        path = resource_path(kind, meta.get("namespace"), meta.get("name"))
        return self.request("PUT", path, body=body, params=_DRY_RUN if dry_run else None)

    def delete(self, kind: KindLike, name: str, namespace: str | None) -> dict[str, Any]:
        return self.request("DELETE", resource_path(kind, namespace, name))

    def submit(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str,
        cluster_set: str | None = None,
        queue: str | None = None,
    ) -> dict[str, Any]:
        params = {k: v for k, v in (("clusterSet", cluster_set), ("queue", queue)) if v}
        path = f"{API_PREFIX}/namespaces/{namespace}/submissions"
        return self.request("POST", path, body=body, params=params)
