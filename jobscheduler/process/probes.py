"""Readiness probes of the production dependencies a role talks to besides its store.

Each probe opens its own small client (so it tests the dependency, not the state of the
role's busy connection), asks for something trivial with the driver's own timeout, and runs
that call in an abandonable thread under a one-token limiter: a hung dependency costs at
most one stuck thread per probe, and ``/readyz`` still answers within its deadline (see
:mod:`jobscheduler.observability.health`). Imported by the process assembly (``app.py``) only.
"""

from __future__ import annotations

from typing import Any

import trio

from jobscheduler.observability.health import ReadinessCheck


class _Probe:
    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._limiter = trio.CapacityLimiter(1)
        self._client: Any = None

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _ask(self, client: Any, timeout: float) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        if self._client is None:
            self._client = self._make_client()
        self._ask(self._client, self._timeout)

    async def __call__(self) -> None:
        await trio.to_thread.run_sync(self._run, limiter=self._limiter, abandon_on_cancel=True)


class _KafkaProbe(_Probe):
    def __init__(self, brokers: str, timeout: float) -> None:
        super().__init__(timeout)
        self._brokers = brokers

    def _make_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(
            {
                "bootstrap.servers": self._brokers,
                "socket.timeout.ms": max(10, int(self._timeout * 1000)),
                # The probe's verdict is /readyz's answer; librdkafka's own connection-refused
                # lines would only repeat it on stderr every few seconds.
                "log_level": 0,
            }
        )

    def _ask(self, client: Any, timeout: float) -> None:
        from confluent_kafka import KafkaException

        try:
            metadata = client.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise RuntimeError(f"kafka: {exc.args[0] if exc.args else exc}") from None
        if not metadata.brokers:
            raise RuntimeError("kafka: no broker in the cluster metadata")


class _EtcdProbe(_Probe):
    def __init__(self, endpoints: tuple[str, ...], timeout: float) -> None:
        super().__init__(timeout)
        from jobscheduler.election.etcd_grpc import channel_target

        self._target = channel_target(endpoints)

    def _make_client(self) -> Any:
        import grpc

        from jobscheduler._etcdpb import rpc_pb2_grpc

        return rpc_pb2_grpc.KVStub(grpc.insecure_channel(self._target))

    def _ask(self, client: Any, timeout: float) -> None:
        import grpc

        from jobscheduler._etcdpb import rpc_pb2

        try:
            client.Range(rpc_pb2.RangeRequest(key=b"\0", count_only=True), timeout=timeout)
        except grpc.RpcError as exc:
            raise RuntimeError(f"etcd: {exc.code().name}") from None


def kafka_probe(brokers: str, *, timeout: float) -> ReadinessCheck:
    """Ready when a Kafka broker answers a metadata request within ``timeout`` seconds."""
    return _KafkaProbe(brokers, timeout)


def etcd_probe(endpoints: tuple[str, ...], *, timeout: float) -> ReadinessCheck:
    """Ready when etcd answers a (count-only) range request within ``timeout`` seconds."""
    return _EtcdProbe(endpoints, timeout)
