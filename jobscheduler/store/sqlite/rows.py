"""Records kept one per row, their columns declared once.

A :class:`Rows` lists a table's columns in order, each with the attribute of the record it
holds and how a value is stored and read back; the column list of a statement, the
parameters of a record and the record of a row all follow from it, so they cannot disagree
on the columns' order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Generic, TypeVar

import attrs

from .codec import from_millis, from_nullable_millis, to_millis, to_nullable_millis
from .conn import placeholders

R = TypeVar("R")


def _same(value: Any) -> Any:
    return value


def _attr_of(column: Column) -> str:
    return column.name


@attrs.frozen
class Column:
    """One column: its ``name``, the record's attribute it holds (``attr``; by default the
    same name), how a value is stored (``store``) and how a stored one is read (``load``)."""

    name: str
    attr: str = attrs.field(default=attrs.Factory(_attr_of, takes_self=True))
    store: Callable[[Any], Any] = _same
    load: Callable[[Any], Any] = _same


def millis_column(name: str, *, nullable: bool = False) -> Column:
    """A time, stored as integer milliseconds since the epoch (None stays None if
    ``nullable``)."""
    if nullable:
        return Column(name, store=to_nullable_millis, load=from_nullable_millis)
    return Column(name, store=to_millis, load=from_millis)


def enum_column(name: str, kind: type[Enum], *, nullable: bool = False) -> Column:
    """A member of ``kind``, stored as its value (None stays None if ``nullable``)."""
    if nullable:
        return Column(
            name,
            store=lambda member: None if member is None else member.value,
            load=lambda value: None if value is None else kind(value),
        )
    return Column(name, store=lambda member: member.value, load=kind)


class Rows(Generic[R]):
    """The ``columns`` of a table, in order, and the record type ``make`` builds (by keyword)
    from a row of them."""

    def __init__(self, make: Callable[..., R], *columns: Column) -> None:
        self._make = make
        self._columns = columns
        #: The columns' names, in order.
        self.names = tuple(column.name for column in columns)
        #: ``a, b, c``: the columns of a SELECT, an INSERT or a RETURNING.
        self.select = ", ".join(self.names)

    def insert(self, table: str, verb: str = "INSERT") -> str:
        """``<verb> INTO <table> (<columns>) VALUES (?, ...)``: a record's row."""
        return f"{verb} INTO {table} ({self.select}) VALUES ({placeholders(len(self.names))})"

    def params(self, record: R) -> tuple[Any, ...]:
        """The stored values of ``record``, in the columns' order."""
        return tuple(column.store(getattr(record, column.attr)) for column in self._columns)

    def load(self, row: Sequence[Any]) -> R:
        """The record of a row of the columns."""
        return self._make(
            **{
                column.attr: column.load(value)
                for column, value in zip(self._columns, row, strict=True)
            }
        )
