"""The built-in handlers: the seed's noop, log-message, flaky, slow, http (webhooks), and
start-workflow (a workflow per run: :mod:`.workflow_job`)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from jobscheduler.errors import HandlerError, ValidationError

from .context import JobContext
from .http import http_handler, validate_http
from .registry import HandlerRegistry
from .workflow_job import START_WORKFLOW, start_workflow, workflow_validator

if TYPE_CHECKING:
    from jobscheduler.config import Settings

MAX_SLEEP_MS = 24 * 3600 * 1000
MAX_MESSAGE_LENGTH = 10_000


async def noop(ctx: JobContext) -> None:
    """Does nothing, successfully."""
    await trio.lowlevel.checkpoint()


def validate_log_message(payload: Mapping[str, Any]) -> None:
    message = payload.get("message")
    if not isinstance(message, str) or not message:
        raise ValidationError("payload.message: log-message needs a non-empty string message")
    if len(message) > MAX_MESSAGE_LENGTH:
        raise ValidationError(f"payload.message: longer than {MAX_MESSAGE_LENGTH} characters")


async def log_message(ctx: JobContext) -> None:
    """Logs ``payload.message`` at INFO."""
    ctx.logger.info("log-message: %s", ctx.payload["message"])
    await trio.lowlevel.checkpoint()


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def validate_flaky(payload: Mapping[str, Any]) -> None:
    if "failRate" in payload:
        rate = payload["failRate"]
        if not _number(rate) or not math.isfinite(rate) or not 0 <= rate <= 1:
            raise ValidationError("payload.failRate: must be a number between 0 and 1")


async def flaky(ctx: JobContext) -> None:
    """Fails with probability ``payload.failRate`` (default 0.5): exercises retry and DLQ."""
    rate = float(ctx.payload.get("failRate", 0.5))
    await trio.lowlevel.checkpoint()
    if random.random() < rate:
        raise HandlerError(f"flaky: simulated failure (failRate={rate})")


def validate_slow(payload: Mapping[str, Any]) -> None:
    if "sleepMs" in payload:
        ms = payload["sleepMs"]
        if isinstance(ms, float) and ms.is_integer():
            ms = int(ms)
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_SLEEP_MS:
            raise ValidationError(
                f"payload.sleepMs: must be an integer between 0 and {MAX_SLEEP_MS}"
            )


async def slow(ctx: JobContext) -> dict[str, int]:
    """Sleeps ``payload.sleepMs`` milliseconds (default 1000); its result says how long."""
    slept = int(ctx.payload.get("sleepMs", 1000))
    await trio.sleep(slept / 1000)
    return {"sleptMs": slept}


def register_builtins(
    registry: HandlerRegistry, settings: Settings | None = None
) -> HandlerRegistry:
    """Add the built-in handlers; ``settings`` configures ``http`` (HTTP_ALLOWLIST, ...)."""
    registry.register("noop", noop)
    registry.register("log-message", log_message, validate=validate_log_message)
    registry.register("flaky", flaky, validate=validate_flaky)
    registry.register("slow", slow, validate=validate_slow)
    registry.register("http", http_handler(settings).run, validate=validate_http)
    registry.register(START_WORKFLOW, start_workflow, validate=workflow_validator(registry))
    return registry


def default_registry(settings: Settings | None = None) -> HandlerRegistry:
    """A registry holding the built-in handlers; add your own with ``register``.

    ``settings`` configures the ``http`` handler; without them it allows no internal
    address and follows no redirect."""
    return register_builtins(HandlerRegistry(), settings)
