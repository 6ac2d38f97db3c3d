"""``jobscheduler keys create|list|revoke``: manage API keys straight in the configured store.

Like ``seed``, it works on the store itself (``--store sqlite`` at SQLITE_PATH, ``--store
mongo`` at MONGO_URI/MONGO_DB; default mongo when MONGO_URI is set), so the first admin key
can be made before any API runs. ``create`` prints the key once; only its hash is stored.
Every create and revoke is written to the audit trail (action ``cli keys create`` /
``cli keys revoke``). A revoke takes effect at once in the processes that did not cache the
key, and within KEY_CACHE_TTL (default 5 s) in API processes that did.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import trio

from jobscheduler._scopes import shielded
from jobscheduler.config import Settings
from jobscheduler.domain.audit import new_record
from jobscheduler.domain.keys import (
    ApiKey,
    Role,
    check_name,
    check_tenant,
    is_key_id,
    key_to_json,
    new_key,
)
from jobscheduler.errors import JobSchedulerError, ValidationError
from jobscheduler.store import JobStore

from .seed import store_for

T = TypeVar("T")

EPILOG = """\
Examples:
  jobscheduler keys create --tenant acme --role writer --name ci
  jobscheduler keys create --all-tenants --role admin --name ops
  jobscheduler keys list [--tenant acme] [--json]
  jobscheduler keys revoke 0123456789abcdef
"""


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        choices=("sqlite", "mongo"),
        default=None,
        help="the store to use (default: mongo if MONGO_URI is set, else sqlite at SQLITE_PATH)",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    sub = parser.add_subparsers(dest="keys_command", required=True)
    create = sub.add_parser("create", help="create a key and print it (once)")
    bound = create.add_mutually_exclusive_group(required=True)
    bound.add_argument("--tenant", metavar="TENANT", help="the tenant the key acts for")
    bound.add_argument("--all-tenants", action="store_true", help="an admin key for every tenant")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--name", default="", help="a label shown by `keys list`")
    add_store_option(create)
    listing = sub.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--tenant", metavar="TENANT", default=None)
    listing.add_argument("--json", action="store_true", help="one JSON array")
    add_store_option(listing)
    revoke = sub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id", metavar="ID")
    add_store_option(revoke)


def failed(exc: JobSchedulerError) -> int:
    """Say why on one line (stderr); the exit code: 2 for a bad argument (ValidationError),
    else 1."""
    print(f"jobscheduler: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, ValidationError) else 1


async def with_store(store: JobStore, fn: Callable[[JobStore], Awaitable[T]]) -> T:
    """Start ``store``, run ``fn`` on it, and close it however that ends."""
    await store.start()
    try:
        return await fn(store)
    finally:
        with shielded(5):
            await store.close()


async def append_cli_audit(
    store: JobStore, *, now: datetime, tenant: str | None, action: str, status: int, detail: str
) -> None:
    """Record in the audit log what an operator's command did to the store directly (no API
    key made the change, so the record names none)."""
    await store.append_audit(
        new_record(now=now, key_id=None, tenant=tenant, action=action, status=status, detail=detail)
    )


def open_store(args: argparse.Namespace) -> tuple[JobStore, str]:
    settings = Settings.from_env()
    kind: str = args.store or ("mongo" if "MONGO_URI" in settings.configured else "sqlite")
    return store_for(kind, settings)


def _table(keys: list[ApiKey]) -> str:
    lines = [f"{'id':<18}{'tenant':<20}{'role':<8}{'status':<22}name"]
    for key in keys:
        status = "active" if key.revoked_at is None else f"revoked {key.revoked_at:%Y-%m-%d %H:%M}"
        tenant = "*" if key.tenant is None else key.tenant
        lines.append(f"{key.id:<18}{tenant[:19]:<20}{key.role.value:<8}{status:<22}{key.name}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    store, where = open_store(args)
    now = datetime.now(UTC)
    try:
        if args.keys_command == "create":
            tenant = None if args.all_tenants else check_tenant(args.tenant, "--tenant")
            record, token = new_key(
                tenant=tenant, role=Role(args.role), name=check_name(args.name, "--name"), now=now
            )

            async def create(s: JobStore) -> None:
                await s.insert_key(record)
                await append_cli_audit(
                    s,
                    now=now,
                    tenant=tenant,
                    action="cli keys create",
                    status=201,
                    detail=f"key {record.id} created ({record.role.value})",
                )

            trio.run(with_store, store, create)
            print(
                f"created key {record.id} ({record.role.value}, tenant "
                f"{'*' if tenant is None else tenant}) in {where}",
                file=sys.stderr,
            )
            print("the key is shown only now; store it safely:", file=sys.stderr)
            print(token)
            return 0
        if args.keys_command == "list":
            keys = trio.run(with_store, store, lambda s: s.list_keys(args.tenant))
            if args.json:
                print(json.dumps([key_to_json(k) for k in keys], indent=2))
            else:
                print(_table(keys))
            return 0
        if args.keys_command == "revoke":
            if not is_key_id(args.key_id):
                raise ValidationError("ID: a key id is 16 hex characters (see `keys list`)")

            async def revoke(s: JobStore) -> ApiKey | None:
                key = await s.revoke_key(args.key_id, now)
                if key is not None:
                    await append_cli_audit(
                        s,
                        now=now,
                        tenant=key.tenant,
                        action="cli keys revoke",
                        status=200,
                        detail=f"key {key.id} revoked",
                    )
                return key

            revoked = trio.run(with_store, store, revoke)
            if revoked is None:
                print(f"jobscheduler: no key {args.key_id} in {where}", file=sys.stderr)
                return 1
            print(
                f"revoked key {revoked.id} (API processes stop accepting it within KEY_CACHE_TTL)"
            )
            return 0
    except JobSchedulerError as exc:
        return failed(exc)
    raise AssertionError(args.keys_command)
