"""The documentation's reference pages are generated from the code, and stay so: a page that
differs from what the code makes now fails here (regenerate with ``just docs-gen``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobscheduler.config import VARIABLES
from jobscheduler.reference import GENERATED, generate, http_api, stale_pages

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_generated_reference_page_is_what_the_code_makes_now() -> None:
    stale = stale_pages(DOCS)
    assert stale == [], f"stale: {', '.join(stale)}; regenerate them with `just docs-gen`"


def test_a_page_edited_by_hand_is_found_stale_and_regenerating_mends_it(tmp_path: Path) -> None:
    assert sorted(generate(tmp_path)) == sorted(GENERATED)
    page = tmp_path / "reference" / "configuration.md"
    page.write_text(page.read_text().replace("API_PORT", "API_PROT"))
    assert stale_pages(tmp_path) == ["reference/configuration.md"]
    assert generate(tmp_path) == ["reference/configuration.md"]
    assert stale_pages(tmp_path) == []


def test_the_configuration_page_has_every_variable_with_its_default_and_unit(
    tmp_path: Path,
) -> None:
    generate(tmp_path)
    text = (tmp_path / "reference" / "configuration.md").read_text()
    for variable in VARIABLES:
        assert f"| `{variable.name}` |" in text
    assert "| `SCHEDULER_TICK` | `500ms` | duration (500ms, 30s, 5m, 1h, 7d) |" in text
    assert "| `AUTH` | required (run-<role>), off (dev) | one of required, off |" in text


@pytest.fixture(scope="module")
def http_page() -> str:
    return http_api.render()


def test_the_http_page_has_every_operation_of_the_document(http_page: str) -> None:
    document = http_api.openapi_document()
    for path, item in document["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in http_page
    assert "`allTenants` | query | boolean" in http_page
    assert "### `GET /tenants`" in http_page


def test_the_http_page_says_what_the_client_returns_of_an_answer(http_page: str) -> None:
    attempts = http_page.split("### `GET /jobs/{job_id}/attempts`", 1)[1].split("\n### ", 1)[0]
    assert "`attempts` (required) | array of [Attempt](#attempt)" in attempts
    assert "*Python:* `Client.attempts()` — The job's attempt history, oldest first: the " in (
        attempts
    )
    assert "`attempts` array of the API's answer" in attempts


def test_the_cli_page_has_every_command_and_the_flags_of_its_actions(tmp_path: Path) -> None:
    generate(tmp_path)
    text = (tmp_path / "reference" / "cli.md").read_text()
    for heading in (
        "`jobscheduler dev`",
        "`jobscheduler jobs list`",
        "`jobscheduler cron preview`",
    ):
        assert heading in text
    assert "`--all-tenants`" in text
