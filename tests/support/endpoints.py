"""Where a cluster's roles find MongoDB, Kafka and etcd.

By default (:meth:`Servers.from_env`, the shared ``scripts/deps.sh up`` servers) MONGO_URI,
KAFKA_BROKERS and ETCD_ENDPOINTS from the environment, defaulting to 127.0.0.1; the fault
suite passes its private instances (tests/support/servers.py).
"""

from __future__ import annotations

import os

import attrs

DEFAULT_MONGO_URI = "mongodb://127.0.0.1:27017"
DEFAULT_KAFKA_BROKERS = "127.0.0.1:9092"
DEFAULT_ETCD_ENDPOINTS = "127.0.0.1:2379"


def mongo_uri() -> str:
    return os.environ.get("MONGO_URI") or DEFAULT_MONGO_URI


def kafka_brokers() -> str:
    return os.environ.get("KAFKA_BROKERS") or DEFAULT_KAFKA_BROKERS


def etcd_endpoints() -> list[str]:
    endpoints = os.environ.get("ETCD_ENDPOINTS") or DEFAULT_ETCD_ENDPOINTS
    return [e.strip() for e in endpoints.split(",") if e.strip()]


def etcd_endpoint() -> str:
    return etcd_endpoints()[0].removeprefix("http://")


@attrs.frozen(kw_only=True)
class Servers:
    """Where a cluster's roles find MongoDB, Kafka and etcd."""

    mongo_uri: str
    kafka_brokers: str
    etcd_endpoint: str
    #: Where the tests' own checks read the store, when not where the roles do (the fault
    #: suite's roles go through a proxy a scenario may break).
    check_mongo_uri: str | None = None

    @classmethod
    def from_env(cls) -> Servers:
        return cls(
            mongo_uri=mongo_uri(), kafka_brokers=kafka_brokers(), etcd_endpoint=etcd_endpoint()
        )
