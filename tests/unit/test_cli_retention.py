"""``jobscheduler retention show|set|clear`` on the configured store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobscheduler.cli import main as cli


def run_cli(monkeypatch: pytest.MonkeyPatch, db: Path, *argv: str) -> int:
    monkeypatch.setenv("SQLITE_PATH", str(db))
    monkeypatch.delenv("MONGO_URI", raising=False)
    return cli.main(list(argv))


def test_set_show_and_clear_a_tenants_retention(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"
    assert run_cli(monkeypatch, db, "retention", "set", "acme", "completed=1d", "dlq=90d") == 0
    assert "retention of acme set to" in capsys.readouterr().out
    assert run_cli(monkeypatch, db, "retention", "show", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["defaults"] == {"cancelled": "7d", "completed": "7d", "dlq": "30d"}
    assert [(o["name"], o["retention"]) for o in shown["overrides"]] == [
        ("acme", {"completed": "1d", "dlq": "90d"})
    ]
    assert run_cli(monkeypatch, db, "retention", "clear", "acme") == 0
    capsys.readouterr()
    assert run_cli(monkeypatch, db, "retention", "show") == 0
    assert capsys.readouterr().out.strip() == "default   cancelled=7d completed=7d dlq=30d"


@pytest.mark.parametrize(
    "argv",
    [
        ("set", "acme", "completed"),
        ("set", "acme", "running=1d"),
        ("set", "acme", "completed=soon"),
        ("set", " ", "completed=1d"),
    ],
)
def test_a_bad_retention_is_refused_with_exit_code_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    assert run_cli(monkeypatch, tmp_path / "jobs.db", "retention", *argv) == 2
