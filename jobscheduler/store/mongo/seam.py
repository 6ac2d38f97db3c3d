"""What the seam mixins of :class:`~jobscheduler.store.mongo.store.MongoJobStore` use of its
connection (:class:`~jobscheduler.store.mongo.conn.MongoConnection` provides all of it).

The seam modules (:mod:`.attempts`, :mod:`.ledger`, :mod:`.query`, :mod:`.tenancy`,
:mod:`.workers`) cannot import the connection module, which imports them for their indexes;
their mixins subclass :class:`MongoSeam` instead, which names, for the type checker only, the
client, the collections and the thread plumbing every call goes through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from pymongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    DuplicateKeyError,
    NetworkTimeout,
    PyMongoError,
    ServerSelectionTimeoutError,
)
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from jobscheduler.errors import StoreError

from .codec import Document

if TYPE_CHECKING:
    from contextlib import _AsyncGeneratorContextManager

    from pymongo import MongoClient
    from pymongo.collection import Collection
    from pymongo.database import Database

    from jobscheduler.domain.model import Job

T = TypeVar("T")


class MongoSeam:
    """The connection's attributes a seam mixin uses (see the module docstring)."""

    if TYPE_CHECKING:  # provided by MongoConnection
        _client: MongoClient[Document] | None
        _database: str
        _attempts: Collection[Document] | None

        def _collection(self) -> Collection[Document]: ...

        def _counts(self) -> Collection[Document]: ...

        def _ends(self) -> Collection[Document]: ...

        def _count_inserted(self, stored: Iterable[Job]) -> None: ...

        async def _call(self, fn: Callable[[], T], what: str, *, read: bool = False) -> T: ...

        def _conditional_write(self) -> _AsyncGeneratorContextManager[None]:
            """Runs a conditional write alone where the server's own are not atomic."""

    def _durable(self, name: str) -> Collection[Document]:
        """The collection ``name`` in the store's database (:func:`durable_collection`).
        Raises StoreError before the store is started."""
        if self._client is None:
            raise StoreError("MongoDB store is not started")
        return durable_collection(self._client.get_database(self._database), name)

    async def _insert_new(self, name: str, doc: Document, what: str) -> None:
        """Insert ``doc`` into the collection ``name`` (the call ``insert_<what>``); a taken
        id is a StoreError ("<what> id clash")."""
        collection = self._durable(name)

        def op() -> None:
            try:
                collection.insert_one(doc)
            except DuplicateKeyError as exc:
                raise StoreError(f"{what} id clash: {exc}") from None

        await self._call(op, f"insert_{what}")


def durable_collection(database: Database[Document], name: str) -> Collection[Document]:
    """``name`` with the store's durability: majority, journaled writes; majority reads."""
    return database.get_collection(
        name,
        write_concern=WriteConcern(w="majority", j=True),
        read_concern=ReadConcern("majority"),
    )


#: Errors after which a write may or may not have been applied.
_OUTCOME_UNKNOWN = (AutoReconnect, NetworkTimeout, ConnectionFailure)


def outcome_unknown(exc: PyMongoError) -> bool:
    """A network failure during a write; not a server-selection timeout (nothing was sent,
    and retrying would only wait for another timeout)."""
    return isinstance(exc, _OUTCOME_UNKNOWN) and not isinstance(exc, ServerSelectionTimeoutError)
