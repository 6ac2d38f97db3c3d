"""Request parsing besides the create rules: raw JSON bodies (``loads_json_body``: malformed
JSON and NaN/Infinity refused) and list queries (``parse_list_query``: tenant required,
status checked, limit capped with a default)."""

from __future__ import annotations

import pytest

from jobscheduler.domain.model import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, Status
from jobscheduler.domain.validation import loads_json_body, parse_list_query
from jobscheduler.errors import ValidationError

# ----------------------------------------------------------------------- JSON bodies


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"{'a': 1}", b"[1,]", b"\xff\xfe", b'{"a": 1} trailing', b"[" * 100_000],
    ids=["empty", "unclosed", "single-quotes", "trailing-comma", "bad-utf8", "garbage", "deep"],
)
def test_loads_json_body_rejects_malformed_json(data: bytes) -> None:
    with pytest.raises(ValidationError, match="malformed JSON"):
        loads_json_body(data)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_loads_json_body_rejects_non_standard_constants(constant: str) -> None:
    with pytest.raises(ValidationError, match=f"{constant} is not allowed"):
        loads_json_body(f'{{"priority": {constant}}}'.encode())


def test_loads_json_body_parses_valid_json() -> None:
    assert loads_json_body(b'{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}


# ----------------------------------------------------------------------- list queries


def test_list_query_requires_tenant_id() -> None:
    with pytest.raises(ValidationError, match="tenantId is required"):
        parse_list_query({})


@pytest.mark.parametrize("tenant", ["", "   "])
def test_list_query_rejects_blank_tenant_id(tenant: str) -> None:
    with pytest.raises(ValidationError, match="tenantId is required"):
        parse_list_query({"tenantId": tenant})


def test_list_query_rejects_overlong_tenant_id() -> None:
    with pytest.raises(ValidationError, match="longer than"):
        parse_list_query({"tenantId": "t" * 257})


def test_list_query_treats_operator_text_as_a_literal_tenant() -> None:
    assert parse_list_query({"tenantId": '{"$ne": null}'})[0] == '{"$ne": null}'


@pytest.mark.parametrize("status", ["done", "PENDING", "retrying", "*"])
def test_list_query_rejects_unknown_status(status: str) -> None:
    with pytest.raises(ValidationError, match="status: must be one of"):
        parse_list_query({"tenantId": "t", "status": status})


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_list_query_accepts_every_status(status: str) -> None:
    assert parse_list_query({"tenantId": "t", "status": status})[1] is Status(status)


def test_list_query_defaults() -> None:
    assert parse_list_query({"tenantId": "t"}) == ("t", None, DEFAULT_LIST_LIMIT)
    assert DEFAULT_LIST_LIMIT == 100


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        ("1", 1),
        ("50", 50),
        ("5000", 5000),
        ("5001", MAX_LIST_LIMIT),
        ("99999999999999999999", MAX_LIST_LIMIT),
        ("0", 100),
        ("-5", 100),
        ("abc", 100),
        ("2.5", 100),
        ("", 100),
    ],
)
def test_list_query_limit_is_capped_and_falls_back_to_default(raw: str, limit: int) -> None:
    assert parse_list_query({"tenantId": "t", "limit": raw})[2] == limit
