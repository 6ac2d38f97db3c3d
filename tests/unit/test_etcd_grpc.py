"""The etcd elector's pure parts: endpoints into one gRPC target, and which failed calls
ran out of time or met a server too busy to answer (the campaign re-issues those)."""

from __future__ import annotations

import grpc
import pytest

from jobscheduler.election.etcd_grpc import channel_target, deadline_exceeded, server_busy
from jobscheduler.errors import ConfigError, ElectionError


@pytest.mark.parametrize(
    ("endpoints", "target"),
    [
        (["127.0.0.1:2379"], "127.0.0.1:2379"),
        (["http://127.0.0.1:2379/"], "127.0.0.1:2379"),
        ("http://10.0.0.1:2379,10.0.0.2:2379", "ipv4:10.0.0.1:2379,10.0.0.2:2379"),
        (["etcd-0:2379", "etcd-1:2379"], "etcd-0:2379"),
    ],
)
def test_etcd_endpoints_become_one_grpc_target(endpoints: list[str] | str, target: str) -> None:
    assert channel_target(endpoints) == target


class _FailedCall(grpc.RpcError, grpc.Call):
    """A finished gRPC call as the stubs raise it (only what the elector reads)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    ("code", "details", "expired"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True),
        # etcd's server context carries the client's deadline and can expire first.
        (grpc.StatusCode.UNKNOWN, "context deadline exceeded", True),
        (grpc.StatusCode.UNKNOWN, "etcdserver: request timed out", False),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", False),
    ],
)
def test_etcd_campaign_knows_a_call_that_ran_out_of_time(
    code: grpc.StatusCode, details: str, expired: bool
) -> None:
    call = _FailedCall(code, details)
    error = ElectionError(f"etcd Campaign failed: {code.name}: {details}")
    error.__cause__ = call
    assert deadline_exceeded(error) is expired


@pytest.mark.parametrize(
    ("code", "details", "busy"),
    [
        (grpc.StatusCode.UNKNOWN, "etcdserver: request timed out", True),
        (grpc.StatusCode.UNKNOWN, "etcdserver: leader changed", True),
        (grpc.StatusCode.UNKNOWN, "etcdserver: too many requests", True),
        (grpc.StatusCode.UNKNOWN, "context deadline exceeded", False),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", False),
    ],
)
def test_etcd_campaign_knows_a_server_too_busy_to_answer(
    code: grpc.StatusCode, details: str, busy: bool
) -> None:
    call = _FailedCall(code, details)
    error = ElectionError(f"etcd Campaign failed: {code.name}: {details}")
    error.__cause__ = call
    assert server_busy(error) is busy


@pytest.mark.parametrize("endpoints", [[], [""], ["https://127.0.0.1:2379"]])
def test_etcd_rejects_unusable_endpoints(endpoints: list[str]) -> None:
    with pytest.raises(ConfigError):
        channel_target(endpoints)
