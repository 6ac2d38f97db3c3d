"""``FLOW_CONTROL``: on, off, or auto (on where the store's fair claim is indexed); a
leader without it says which declared limits it does not enforce."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest

from jobscheduler.config import Settings
from jobscheduler.domain.flow import LimitOverride, Limits
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.roles.scheduler.mode import flow_control_on, warn_unenforced_limits
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_settings


class UnindexedFairClaims:
    """A store whose fair claim is not served from indexes (as MongoDB's)."""

    def __init__(self, inner: JobStore) -> None:
        self._inner = inner
        self.fair_claims_indexed = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@pytest.mark.parametrize(
    ("wanted", "indexed", "on"),
    [(None, True, True), (None, False, False), (True, False, True), (False, True, False)],
)
async def test_flow_control_is_on_when_asked_or_when_auto_finds_the_fair_claim_indexed(
    tmp_path: Path, store: JobStore, wanted: bool | None, indexed: bool, on: bool
) -> None:
    settings: Settings = attrs.evolve(make_settings(tmp_path), flow_control=wanted)
    chosen = store if indexed else UnindexedFairClaims(store)
    deps = DepsFactory(settings=settings, store=store)(store=chosen)  # type: ignore[arg-type]
    assert flow_control_on(deps) is on


def test_flow_control_defaults_to_auto() -> None:
    assert attrs.fields_dict(Settings)["flow_control"].default is None


async def _send(ctx: JobContext) -> None:
    return None


async def test_a_leader_without_flow_control_names_the_types_whose_limits_it_ignores(
    tmp_path: Path, store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    settings: Settings = attrs.evolve(make_settings(tmp_path), flow_control=False)
    caplog.set_level(logging.WARNING, logger="jobscheduler.roles.scheduler.mode")
    await warn_unenforced_limits(DepsFactory(settings=settings, store=store)())
    assert caplog.records == []  # nothing declared, nothing to say
    registry = default_registry()
    registry.register("mail", _send, rate_limit="10/s")
    await store.put_limit_override(
        LimitOverride(tenant_id="a", job_type="noop", limits=Limits.of(concurrency=1))
    )
    await warn_unenforced_limits(DepsFactory(settings=settings, store=store)(registry=registry))
    (record,) = caplog.records
    assert "limits are not enforced" in record.getMessage()
    assert record.job_types == ["mail", "noop"]  # type: ignore[attr-defined]
