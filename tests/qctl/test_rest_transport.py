"""qctl's one-shot requests are HTTP/1.1 written on a socket: what the hub's replies may look
like on the wire — a Content-Length body, chunks, a reply cut short, a connection closed
without a word — each served by a real listening socket and read by a real HubSession."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from qctl.config import ResolvedContext
from qctl.errors import HubRequestError, QctlError
from qctl.rest import HubSession


class OneReplyServer:
    """Answers every connection with the same bytes, after reading the request's head."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                received = b""
                while b"\r\n\r\n" not in received and (chunk := conn.recv(65536)):
                    received += chunk
                self.requests.append(received)
                conn.sendall(self.reply)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[list[OneReplyServer]]:
    servers: list[OneReplyServer] = []
    yield servers
    for server in servers:
        server.close()


def session(server: OneReplyServer) -> HubSession:
    return HubSession(ResolvedContext(server.url, "t0ken", "default", "test"), timeout=5)


def start(serve: list[OneReplyServer], reply: bytes) -> OneReplyServer:
    server = OneReplyServer(reply)
    serve.append(server)
    return server


def test_a_reply_with_content_length_is_read_and_the_request_is_http_1_1(
    serve: list[OneReplyServer],
) -> None:
    body = b'{"items": [{"metadata": {"name": "a"}}]}'
    server = start(
        serve, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"junk"
    )
    assert session(server).request("GET", "/x", params={"labelSelector": "a=b"}) == {
        "items": [{"metadata": {"name": "a"}}]
    }
    head = server.requests[0].decode()
    assert head.startswith("GET /x?labelSelector=a%3Db HTTP/1.1\r\n")
    assert f"Host: {server.url.removeprefix('http://')}\r\n" in head
    assert "Authorization: Bearer t0ken\r\n" in head and "Connection: close\r\n" in head


def test_a_chunked_reply_is_put_together(serve: list[OneReplyServer]) -> None:
    server = start(
        serve,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"a":\r\n3;x=y\r\n 1}\r\n0\r\n\r\n',
    )
    assert session(server).request("GET", "/x") == {"a": 1}


def test_an_error_status_is_the_hubs_message(serve: list[OneReplyServer]) -> None:
    body = b'{"kind": "Status", "reason": "NotFound", "message": "clusterqueues \\"x\\" not found"}'
    server = start(
        serve, b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    with pytest.raises(HubRequestError) as raised:
        session(server).request("GET", "/x")
    assert (raised.value.status, str(raised.value)) == (404, 'clusterqueues "x" not found')


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", "truncated reply"),
        (b"", "closed the connection without a reply (if the hub serves TLS"),
        (b"\x15\x03\x01\x00\x02\x02\x50", "not HTTP (if the hub serves TLS, use an https"),
    ],
    ids=["cut-short", "closed", "tls-alert"],
)
def test_a_broken_reply_to_a_write_says_it_may_have_been_done(
    serve: list[OneReplyServer], reply: bytes, said: str
) -> None:
    server = start(serve, reply)
    with pytest.raises(QctlError) as raised:
        session(server).request("POST", "/x", body={"a": 1})
    message = str(raised.value)
    assert message.startswith(f"lost the hub at {server.url} during POST /x: it may or may not")
    assert said in message
    assert server.requests[0].endswith(b"\r\n\r\n") or b"Content-Length: 8" in server.requests[0]
