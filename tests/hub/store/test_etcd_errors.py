"""How etcd's gRPC failures become store errors: a call that did not complete is Unavailable
(the caller may try again, reads on another member), anything else a StoreError."""

from __future__ import annotations

import pytest
from aetcd import rpc

from hub.store.base import StoreError, Unavailable
from hub.store.etcd import _translate


def _rpc_error(code: rpc.StatusCode, details: str) -> rpc.AioRpcError:
    # (No metadata: the translation reads only the code and the details.)
    return rpc.AioRpcError(code, None, None, details=details)


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (rpc.StatusCode.UNAVAILABLE, "connection refused"),
        (rpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
        (rpc.StatusCode.CANCELLED, "Cancelled"),
        # etcd's own deadline, sent as UNKNOWN: a linearizable read that found no leader in
        # time, as when the member that led died (etcd-io/etcd#8809).
        (rpc.StatusCode.UNKNOWN, "context deadline exceeded"),
        (rpc.StatusCode.UNKNOWN, "context canceled"),
    ],
)
def test_a_call_that_did_not_complete_is_unavailable(code: rpc.StatusCode, details: str) -> None:
    error = _translate(_rpc_error(code, details))
    assert isinstance(error, Unavailable)
    assert details in str(error)


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (rpc.StatusCode.UNKNOWN, "etcdserver: some other failure"),
        (rpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided"),
        (rpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded"),
    ],
)
def test_a_refusal_is_a_store_error_not_unavailable(code: rpc.StatusCode, details: str) -> None:
    error = _translate(_rpc_error(code, details))
    assert type(error) is StoreError
    assert details in str(error)
