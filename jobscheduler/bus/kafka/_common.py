"""What the Kafka adapter's modules share: error translation, bounds, loggers."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException

from jobscheduler.errors import BusError
from jobscheduler.observability.logthrottle import ThrottlingFilter

#: librdkafka's own log lines (connection failures, ...) are routed here.
rdkafka_log = logging.getLogger("jobscheduler.bus.kafka.librdkafka")

#: Longest single blocking hop while waiting for deliveries, flushes or admin futures.
HOP = 0.25
#: Extra time granted past ``message.timeout.ms`` before a publish gives up on its
#: delivery reports (librdkafka reports every message by then, success or failure).
DELIVERY_GRACE = 5.0
#: Bound on flushing the producer at close and on committing + closing a consumer.
CLOSE_TIMEOUT = 10.0


def bus_error(what: str, exc: BaseException) -> BusError:
    """Translate a confluent-kafka failure into the project's error, at the edge."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return BusError(f"{what}: {err.name()} ({err.str()})")
    return BusError(f"{what}: {exc}")


# Hundreds of identical connection failures a minute while a broker is down: one line per
# facility and client per interval, with a count.
rdkafka_log.addFilter(ThrottlingFilter())
