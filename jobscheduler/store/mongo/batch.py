"""Batched conditional writes of the MongoDB store: chunking and outcome bookkeeping (pure).

A batch of transitions goes to the server as multi-statement ``update`` commands (pymongo's
``bulk_write``, unordered), one conditional statement per job, each also setting
:data:`BATCH_FIELD` to a value fresh for the batch. The command's reply only counts the
statements that matched, so the batch then reads its documents back by that value: a
document carries it exactly when its own statement applied (until another batch writes it
again; claims use a field of their own, :data:`CLAIM_FIELD`), and each job's outcome is known
again, as one ``findAndModify`` per job would have told -- for two commands per batch
instead of one per job.

The test stack's FerretDB v1.24 never answers a multi-statement ``update`` of 100 statements
or more, nor one of 15 statements of 1 KB each (about 16 KB), while it answers 99 small ones,
12 of 1 KB, or two of 10 KB (measured; a single statement of 70 KB is fine).
:func:`chunks` therefore keeps each command to :data:`MAX_STATEMENTS` statements and
:data:`MAX_CHUNK_BYTES` of statements, a larger statement alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final

import attrs
import bson

from jobscheduler.domain.model import Job
from jobscheduler.domain.states import Change

from .codec import chain

Document = dict[str, Any]

#: The document field a batch of transitions sets to its batch's mark (module docstring).
BATCH_FIELD: Final = "writeBatch"
#: The field a claim sets to its batch's mark: another field, so that a claim following a
#: transition at once (a retried or requeued job claimed again) cannot erase the mark the
#: transition's batch is about to read back.
CLAIM_FIELD: Final = "claimBatch"
#: Most statements in one multi-statement command (FerretDB hangs from 100 on).
MAX_STATEMENTS: Final = 50
#: Most bytes of encoded statements (filter + update) in one multi-statement command.
MAX_CHUNK_BYTES: Final = 8 * 1024


def new_mark() -> str:
    """A batch mark: random, so no two batches of any process share one."""
    return secrets.token_hex(8)


def marked(update: Document, mark: str, field: str = BATCH_FIELD) -> Document:
    """``update`` that also sets ``field`` (:data:`BATCH_FIELD`) to ``mark``."""
    return {**update, "$set": {**update.get("$set", {}), field: mark}}


def statement_size(query: Document, update: Document) -> int:
    """The encoded size of one update statement's filter and update documents."""
    return len(bson.encode(query)) + len(bson.encode(update))


def chunks(
    sizes: Sequence[int],
    *,
    max_statements: int = MAX_STATEMENTS,
    max_bytes: int = MAX_CHUNK_BYTES,
) -> list[range]:
    """Consecutive index ranges covering ``sizes`` (each statement's encoded size), each at
    most ``max_statements`` long and ``max_bytes`` in all; a statement larger than
    ``max_bytes`` gets a range of its own."""
    if max_statements < 1 or max_bytes < 1:
        raise ValueError("chunks: max_statements and max_bytes must be positive")
    ranges: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        full = i - start >= max_statements or total + size > max_bytes
        if i > start and full:
            ranges.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        ranges.append(range(start, len(sizes)))
    return ranges


@attrs.frozen
class Unit:
    """One statement of a batch: ``change``, which is ``first`` alone, or ``first`` then
    ``second`` chained into one conditional update (see :func:`.codec.chain`)."""

    change: Change
    first: Change
    second: Change | None = None


def plan(changes: Sequence[Change]) -> list[Unit]:
    """The statements for ``changes`` in order: two consecutive changes of one job that
    chain (an executor's pick then start) become one."""
    units: list[Unit] = []
    i = 0
    while i < len(changes):
        first = changes[i]
        second = changes[i + 1] if i + 1 < len(changes) else None
        chained = chain(first, second) if second is not None else None
        if chained is None:
            units.append(Unit(change=first, first=first))
            i += 1
        else:
            units.append(Unit(change=chained, first=first, second=second))
            i += 2
    return units


def distinct_jobs(units: Sequence[Unit]) -> bool:
    """Whether every statement names another job (a batch sends them all at once, so two
    statements of one job would race; such batches go one change at a time)."""
    return len({unit.change.job_id for unit in units}) == len(units)


def unit_results(unit: Unit, after: Job | None) -> list[Job | None]:
    """The results of the unit's changes, given the job after its statement (None: it did
    not apply). For a chained unit that applied, the first change's result is the state
    between the two: the second's fields as the first set them, its increments not yet
    added. A chained unit that did not apply answers only for the first change; the caller
    then tries the second alone, as it would have been."""
    if unit.second is None:
        return [after]
    if after is None:
        return [None]
    first, second = unit.first, unit.second
    before: dict[str, Any] = {f: first.set[f] for f in second.set}
    before.update({f: getattr(after, f) - n for f, n in second.inc.items()})
    return [attrs.evolve(after, **before), after]
