"""A workflow step's place in its workflow: the :class:`Step` a job carries when it is one.

A workflow is a set of ordinary jobs with dependencies (:mod:`jobscheduler.domain.workflows`
is its record). Each of its jobs holds, beside its ``workflow_id``, a :class:`Step`: its name
in the workflow and the ids of the jobs it is linked to, in both directions, so that

- the end of a step names the steps it may release (:attr:`Step.children`) without a query,
- a step names every job whose end it waits for (:attr:`Step.parents`, and the spawned
  children of the steps in :attr:`Step.after_children_of`).

Links hold job ids, not names: a job is read by its id in every store. Names are what users
write and see (``dependsOn``, ``ctx.parents["export"]``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

#: Most steps a workflow declares (``POST /workflows``); spawned children are not counted.
MAX_STEPS = 1000


class OnParentFailure(enum.StrEnum):
    """What becomes of a waiting step when a job it waits for ends in ``dlq`` or
    ``cancelled``."""

    #: It is cancelled too (and so, in turn, are the steps waiting for it).
    CANCEL = "cancel"
    #: It runs anyway once every job it waits for has ended (a clean-up step).
    RUN = "run"


def _ids(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value)


@attrs.frozen(kw_only=True)
class Step:
    """A job's place in its workflow (see the module docstring)."""

    #: Unique in the workflow; a spawned child's is ``<spawner's name>/<key>``.
    name: str
    #: The jobs this step waits for: it is released once every one has completed.
    parents: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    #: The jobs whose release this step's end may decide (those that wait for it, or, for a
    #: spawned child, those waiting for its spawner's children).
    children: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    #: The steps waiting for this step's spawned children (``afterChildrenOf`` naming it):
    #: the children it spawns get them as their ``children``.
    chords: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    #: Steps whose spawned children this step also waits for (each is among its parents).
    after_children_of: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    on_parent_failure: OnParentFailure = OnParentFailure.CANCEL
    #: A handler of this step has spawned children (``ctx.spawn``): its end looks them up.
    spawns: bool = False

    def to_json(self) -> dict[str, Any]:
        """How every store keeps it (and how it reads back: :meth:`from_json`)."""
        out: dict[str, Any] = {"name": self.name}
        for field, key in _LISTS.items():
            if value := getattr(self, field):
                out[key] = list(value)
        if self.on_parent_failure is not OnParentFailure.CANCEL:
            out["onParentFailure"] = self.on_parent_failure.value
        if self.spawns:
            out["spawns"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        return cls(
            name=str(data["name"]),
            **{field: data.get(key, ()) for field, key in _LISTS.items()},
            on_parent_failure=OnParentFailure(data.get("onParentFailure", "cancel")),
            spawns=bool(data.get("spawns", False)),
        )


_LISTS = {
    "parents": "parents",
    "children": "children",
    "chords": "chords",
    "after_children_of": "afterChildrenOf",
}
