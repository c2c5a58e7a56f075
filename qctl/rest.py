"""The hub's REST API for qctl's one-shot commands (get, describe, delete, submit, stop, …):
one request at a time, returning plain wire dicts.

A command that sends one or two requests and exits would spend most of its life importing an
HTTP client: the asynchronous one most, but even http.client brings the email parser and ssl
along. So a request here is HTTP/1.1 written on a socket (TLS only for an https hub, ssl
imported only then): one request per connection, `Connection: close`, the reply read to the
end of the connection, its body cut by Content-Length or decoded from chunks. qctl's start-up
is its throughput when a shell loop submits hundreds of jobs. Streams (watch, logs) use
qctl.client. Errors and the rules for several hubs are the same as qctl.client's (qctl.errors,
qctl.hubs), so a command behaves the same whichever client it uses.

Called by: qctl.commands.resources, .apply, .submit, .queues and .completion.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from api.tracecontext import TRACEPARENT_HEADER, generate, parse
from qctl.config import ResolvedContext
from qctl.errors import HubRequestError, QctlError
from qctl.hubs import PLAIN_HTTP_HINT, READS, HubRotation, tls_context, untrusted_certificate
from qctl.kinds import API_PREFIX, KindLike, collection_path, resource_path

if TYPE_CHECKING:
    import ssl

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

    def _connect(self, server: str) -> socket.socket:
        url = urlsplit(server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise QctlError(f"not a hub URL: {server!r} (use http(s)://HOST:PORT)")
        timeout = self._hubs.connect_timeout(self._timeout)
        port = url.port or (443 if url.scheme == "https" else 80)
        # An ASCII host name as bytes: resolving a str imports the IDNA codec.
        host: str | bytes = url.hostname
        if url.hostname.isascii():
            host = url.hostname.encode()
        try:
            sock = socket.create_connection((host, port), timeout=timeout)  # type: ignore[arg-type]
        except OSError as exc:  # refused, unreachable, name unknown, connect timeout
            raise _UnreachableError(str(exc) or type(exc).__name__) from exc
        if url.scheme == "https":
            sock = self._wrap_tls(server, sock, url.hostname)
        sock.settimeout(self._timeout)
        return sock

    def _wrap_tls(self, server: str, sock: socket.socket, hostname: str) -> socket.socket:
        import ssl  # noqa: PLC0415 - only an https hub needs it

        try:
            return self._tls_context().wrap_socket(sock, server_hostname=hostname)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise QctlError(untrusted_certificate(server, exc.verify_message)) from exc
        except OSError as exc:  # the TLS handshake failed
            sock.close()
            raise _UnreachableError(str(exc) or type(exc).__name__) from exc

    def _exchange(
        self, server: str, method: str, target: str, payload: bytes | None
    ) -> tuple[int, str, bytes]:
        """One request and its whole reply: (status, reason phrase, body)."""
        netloc = urlsplit(server).netloc.rpartition("@")[2]
        head = [f"{method} {target} HTTP/1.1", f"Host: {netloc}", "Connection: close"]
        head += [f"{name}: {value}" for name, value in self._headers.items()]
        if payload is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (payload or b"")
        sock = self._connect(server)
        try:
            # The hub may answer before reading all of the body (413 for one too large) and
            # close: its reply is still there to read.
            with contextlib.suppress(OSError):
                sock.sendall(request)
            received = b""
            while not _complete(received) and (chunk := sock.recv(65536)):
                received += chunk
        except TimeoutError:
            raise
        except OSError as exc:
            raise _BrokenError(_broken(server, str(exc) or type(exc).__name__, exc)) from exc
        finally:
            sock.close()
        return _parse_reply(server, received)

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


def _broken(server: str, detail: str, exc: BaseException | None = None) -> str:
    """What to say of a connection that broke; a plain-HTTP one the hub closed without a word
    may be talking to a TLS hub."""
    closed = exc is None or isinstance(exc, ConnectionResetError)
    if closed and urlsplit(server).scheme == "http":
        detail += PLAIN_HTTP_HINT
    return detail


def _complete(received: bytes) -> bool:
    """Whether a reply is all there (a TLS hub may close without a close_notify: reading on
    to the end would fail where the reply is whole)."""
    head, found, body = received.partition(b"\r\n\r\n")
    if not found:
        return False
    lowered = head.lower()
    marker = lowered.find(b"\r\ncontent-length:")
    if marker >= 0:
        value = lowered[marker + 17 :].split(b"\r\n", 1)[0].strip()
        return value.isdigit() and len(body) >= int(value)
    return b"chunked" in lowered and body.endswith(b"0\r\n\r\n")


def _parse_reply(server: str, raw: bytes) -> tuple[int, str, bytes]:
    """(status, reason phrase, body) of a whole HTTP/1.1 reply read to the connection's end."""
    if raw and not raw.startswith(b"HTTP/"):
        raise _BrokenError(_broken(server, "the hub answered something that is not HTTP"))
    head, found, body = raw.partition(b"\r\n\r\n")
    if not found:
        what = "closed the connection without a reply" if not raw else "sent a truncated reply"
        raise _BrokenError(_broken(server, f"the hub {what}"))
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code, _, phrase = rest.partition(" ")
    if not version.startswith("HTTP/") or not code.isdigit():
        raise _BrokenError(_broken(server, "the hub answered something that is not HTTP"))
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(server, body)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if len(body) < length:
            raise _BrokenError(_broken(server, "the hub sent a truncated reply"))
        body = body[:length]
    return int(code), phrase, body


def _dechunk(server: str, body: bytes) -> bytes:
    decoded: list[bytes] = []
    while True:
        size_line, found, body = body.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            size = -1
        if not found or size < 0 or len(body) < size:
            raise _BrokenError(_broken(server, "the hub sent a truncated reply"))
        if size == 0:
            return b"".join(decoded)
        decoded.append(body[:size])
        body = body[size + 2 :]
