"""Free ports for the servers a test starts: never the same one twice from one process."""

from __future__ import annotations

import pytest

from jobscheduler.testing import ports


def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    picks = iter([25_000, 25_000, 25_000, 25_001])
    monkeypatch.setattr(ports._PICK, "randrange", lambda low, high: next(picks))
    monkeypatch.setattr(ports, "bindable", lambda port: True)
    monkeypatch.setattr(ports, "_GIVEN", set())
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 32_768)
    assert [ports.free_port(), ports.free_port()] == [25_000, 25_001]


def test_without_room_below_the_ephemeral_range_the_kernel_picks_and_is_not_repeated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ports, "_GIVEN", set())
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: ports.LOWEST)
    given = [ports.free_port() for _ in range(20)]
    assert len(set(given)) == 20
