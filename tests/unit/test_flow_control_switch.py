"""``FLOW_CONTROL``: on, off, or auto (on where the store's fair claim is indexed)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from jobscheduler.config import Settings
from jobscheduler.roles.scheduler.loop import flow_control_on
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
