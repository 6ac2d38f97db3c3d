"""Keys (format, hashing), the authenticator's cache, the token bucket, and the CLI's
``keys``/``audit`` commands and AUTH defaults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from jobscheduler.api.auth import Authenticator
from jobscheduler.api.quotas import TokenBucket
from jobscheduler.cli import main as cli
from jobscheduler.config import Settings
from jobscheduler.domain.keys import ApiKey, Principal, Role, hash_secret, new_key, parse_token
from jobscheduler.errors import StoreError, Unauthorized, ValidationError
from jobscheduler.store.sqlite import SQLiteJobStore
from tests.support.stores import started

from .conftest import BASE, DepsFactory


def test_a_new_key_has_a_public_id_and_256_random_bits_stored_only_as_a_hash() -> None:
    record, token = new_key(tenant="acme", role=Role.WRITER, now=BASE)
    parsed = parse_token(token)
    assert parsed is not None
    key_id, secret = parsed
    assert key_id == record.id
    assert len(secret) == 43  # 32 bytes, URL-safe base64
    assert record.secret_hash == hash_secret(secret) != secret
    assert record.matches(secret)
    assert not record.matches(secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert secret not in repr(record)


def test_only_admin_keys_may_span_every_tenant() -> None:
    with pytest.raises(ValidationError):
        new_key(tenant=None, role=Role.WRITER, now=BASE)


@pytest.mark.parametrize(
    "token",
    ["", "jsk_", "jsk_0123_" + "A" * 43, "jsk_0123456789ABCDEF_" + "A" * 43, "x" * 65],
)
def test_malformed_tokens_do_not_parse(token: str) -> None:
    assert parse_token(token) is None


class CountingStore:
    def __init__(self, key: ApiKey | None) -> None:
        self.key = key
        self.lookups = 0

    async def get_key(self, key_id: str) -> ApiKey | None:
        self.lookups += 1
        return self.key if self.key is not None and self.key.id == key_id else None


async def test_lookups_are_cached_for_the_ttl_and_a_revoke_elsewhere_holds_after_it(
    mock_clock: MockClock,
) -> None:
    record, token = new_key(tenant="acme", role=Role.READER, now=BASE)
    store = CountingStore(record)
    auth = Authenticator(store, ttl=5.0, timer=lambda: mock_clock.current_time())
    principal = await auth.authenticate([f"Bearer {token}"])
    assert (principal.key_id, principal.tenant, principal.role) == (
        record.id,
        "acme",
        Role.READER,
    )
    for _ in range(10):
        await auth.authenticate([f"Bearer {token}"])
    assert store.lookups == 1
    # Revoked by another process: still accepted from the cache until the TTL passes.
    store.key = ApiKey(
        id=record.id,
        secret_hash=record.secret_hash,
        tenant="acme",
        role=Role.READER,
        created_at=BASE,
        revoked_at=BASE,
    )
    await auth.authenticate([f"Bearer {token}"])
    mock_clock.jump(5.0)
    with pytest.raises(Unauthorized):
        await auth.authenticate([f"Bearer {token}"])


async def test_forget_makes_a_revoke_in_this_process_immediate(mock_clock: MockClock) -> None:
    record, token = new_key(tenant="acme", role=Role.READER, now=BASE)
    store = CountingStore(record)
    auth = Authenticator(store, ttl=60.0, timer=lambda: mock_clock.current_time())
    await auth.authenticate([f"Bearer {token}"])
    store.key = None
    auth.forget(record.id)
    with pytest.raises(Unauthorized):
        await auth.authenticate([f"Bearer {token}"])


class GatedStore:
    """A store whose key reads wait for ``gate`` and then answer (or fail)."""

    def __init__(self, key: ApiKey) -> None:
        self.key = key
        self.gate = trio.Event()
        self.lookups = 0
        self.fail = False

    async def get_key(self, key_id: str) -> ApiKey | None:
        self.lookups += 1
        await self.gate.wait()
        if self.fail:
            raise StoreError("job store did not answer within 2s")
        return self.key


def behind_a_gate() -> tuple[ApiKey, str, GatedStore, Authenticator]:
    """A writer key of ``acme`` and its token, a :class:`GatedStore` holding it, and an
    authenticator (5 s cache) over that store."""
    record, token = new_key(tenant="acme", role=Role.WRITER, now=BASE)
    store = GatedStore(record)
    return record, token, store, Authenticator(store, ttl=5.0)


async def all_at_once(store: GatedStore, call: Callable[[], Awaitable[None]], times: int) -> None:
    """Start ``call`` ``times`` over while ``store`` holds its reads, then let them through."""
    async with trio.open_nursery() as nursery:
        for _ in range(times):
            nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        store.gate.set()


async def test_concurrent_misses_of_one_key_share_a_single_store_read() -> None:
    record, token, store, auth = behind_a_gate()
    principals: list[Principal] = []

    async def call() -> None:
        principals.append(await auth.authenticate([f"Bearer {token}"]))

    await all_at_once(store, call, 20)
    assert store.lookups == 1
    assert [p.key_id for p in principals] == [record.id] * 20


async def test_a_failed_shared_read_fails_its_waiters_and_the_next_request_reads_again() -> None:
    record, token, store, auth = behind_a_gate()
    store.fail = True
    errors: list[str] = []

    async def call() -> None:
        try:
            await auth.authenticate([f"Bearer {token}"])
        except StoreError as exc:
            errors.append(str(exc))

    await all_at_once(store, call, 5)
    assert store.lookups == 1
    assert len(errors) == 5  # a 503 each, not a 401
    store.fail = False  # the store is back: a failure was not cached
    assert (await auth.authenticate([f"Bearer {token}"])).key_id == record.id
    assert store.lookups == 2


async def test_a_waiter_reads_itself_when_the_reading_request_is_cancelled() -> None:
    record, token, store, auth = behind_a_gate()
    got: list[Principal] = []

    async def waiter() -> None:
        got.append(await auth.authenticate([f"Bearer {token}"]))

    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as first:
            async with trio.open_nursery() as inner:
                inner.start_soon(auth.authenticate, [f"Bearer {token}"])  # reads
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(waiter)  # waits for that read
                await trio.testing.wait_all_tasks_blocked()
                assert store.lookups == 1
                first.cancel()  # the reading request's client went away
        await trio.testing.wait_all_tasks_blocked()
        store.gate.set()
    assert [p.key_id for p in got] == [record.id]
    assert store.lookups == 2


def test_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket(rate=2.0, burst=4.0, tokens=4.0, updated=0.0)
    assert bucket.take(4, 0.0) == 0.0
    assert bucket.take(1, 0.0) == pytest.approx(0.5)
    assert bucket.take(1, 0.5) == 0.0
    assert bucket.take(3, 100.0) == 0.0  # capped at the burst, not 200 tokens
    assert bucket.take(2, 100.0) == pytest.approx(0.5)
    assert bucket.take(5, 100.0) == pytest.approx(2.0)  # larger than the burst


# ----------------------------------------------------------------------- CLI


def run_cli(monkeypatch: pytest.MonkeyPatch, db: Path, *argv: str) -> int:
    monkeypatch.setenv("SQLITE_PATH", str(db))
    monkeypatch.delenv("MONGO_URI", raising=False)
    return cli.main(list(argv))


async def test_keys_cli_creates_lists_and_revokes_with_audit_records(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"

    def cli_run(*argv: str) -> int:
        return run_cli(monkeypatch, db, *argv)

    code = await trio.to_thread.run_sync(
        cli_run, "keys", "create", "--tenant", "acme", "--role", "writer", "--name", "ci"
    )
    assert code == 0
    token = capsys.readouterr().out.strip()
    parsed = parse_token(token)
    assert parsed is not None
    assert await trio.to_thread.run_sync(cli_run, "keys", "list") == 0
    listing = capsys.readouterr().out
    assert parsed[0] in listing
    assert "acme" in listing
    assert "active" in listing
    assert parsed[1] not in listing
    assert await trio.to_thread.run_sync(cli_run, "keys", "revoke", parsed[0]) == 0
    assert await trio.to_thread.run_sync(cli_run, "keys", "revoke", "f" * 16) == 1
    assert await trio.to_thread.run_sync(cli_run, "audit", "--tenant", "acme") == 0
    out = capsys.readouterr().out
    assert "cli keys create" in out
    assert "cli keys revoke" in out
    async with started(SQLiteJobStore(db)) as store:
        stored = await store.get_key(parsed[0])
    assert stored is not None
    assert stored.revoked


def test_keys_cli_rejects_a_bad_tenant_and_a_bad_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "jobs.db"
    assert run_cli(monkeypatch, db, "keys", "create", "--tenant", " ", "--role", "reader") == 2
    assert run_cli(monkeypatch, db, "keys", "revoke", "nope") == 2
    assert run_cli(monkeypatch, db, "audit", "--limit", "0") == 2


def test_auth_defaults_required_for_roles_and_off_for_dev() -> None:
    assert cli.auth_mode(Settings.from_env({}), "api").auth == "required"
    assert cli.auth_mode(Settings.from_env({}), "dev").auth == "off"
    assert cli.auth_mode(Settings.from_env({"AUTH": "required"}), "dev").auth == "required"
    assert cli.auth_mode(Settings.from_env({"AUTH": "off"}), "api").auth == "off"


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("127.0.0.1", False),
        ("::1", False),
        ("localhost", False),
        ("0.0.0.0", True),
        ("10.1.2.3", True),
        ("example.org", True),
    ],
)
def test_dev_refuses_auth_off_on_a_non_loopback_host(host: str, refused: bool) -> None:
    settings = cli.auth_mode(Settings.from_env({"API_HOST": host}), "dev")
    assert (cli.dev_auth_problem(settings) is not None) is refused
    required = cli.auth_mode(Settings.from_env({"API_HOST": host, "AUTH": "required"}), "dev")
    assert cli.dev_auth_problem(required) is None


def test_dev_with_auth_off_on_a_public_host_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("API_HOST", "0.0.0.0")
    monkeypatch.delenv("AUTH", raising=False)
    assert cli.main(["dev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "AUTH=off" in err


async def test_the_reaper_prunes_audit_records_past_the_retention(
    make_deps: DepsFactory,
) -> None:
    from jobscheduler.clock import ManualClock
    from jobscheduler.domain.audit import AuditQuery, new_record
    from jobscheduler.roles.reaper.sweeps import Reaper

    clock = ManualClock(BASE)
    deps = make_deps(clock=clock, settings=attrs.evolve(make_deps.settings, audit_retention=3600.0))
    old = new_record(now=BASE, key_id=None, tenant="t", action="POST /jobs", status=201)
    await deps.store.append_audit(old)
    clock.advance(1800)
    recent = new_record(now=clock.now(), key_id=None, tenant="t", action="POST /jobs", status=201)
    await deps.store.append_audit(recent)
    clock.advance(1801)
    assert await Reaper(deps).prune_audit() == 1
    assert [r.id for r in await deps.store.list_audit(AuditQuery())] == [recent.id]


async def test_a_stalled_count_leaves_the_last_one_standing_after_half_a_second(
    autojump_clock: MockClock,
) -> None:
    from jobscheduler.api.quotas import COUNT_REFRESH, Quotas
    from jobscheduler.errors import QuotaExceeded

    counts = [5]
    stalled = trio.Event()

    async def count(tenant: str) -> int:
        if stalled.is_set():
            await trio.sleep_forever()
        return counts[0]

    quotas = Quotas(
        count_unfinished=count,
        max_unfinished=6,
        create_rate=0,
        create_burst=1,
        on_reject=lambda reason: None,
    )
    await quotas.admit_creates(who="k", tenant="t", count=1)  # 5 + 1 = 6: at the limit
    stalled.set()
    await trio.sleep(COUNT_REFRESH)
    started = trio.current_time()
    with pytest.raises(QuotaExceeded):
        # The last count (5 read + 1 admitted) stands: 6 + 1 is over the limit.
        await quotas.admit_creates(who="k", tenant="t", count=1)
    assert trio.current_time() - started == pytest.approx(0.5)
