"""The project's exceptions: one root, and every leaf also a builtin exception."""

from __future__ import annotations

import inspect

import pytest

from jobscheduler import errors

CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, BaseException) and cls.__module__ == errors.__name__
]


def test_the_module_holds_the_root_and_its_leaves() -> None:
    assert errors.JobSchedulerError in CLASSES
    assert len(CLASSES) > 10


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_exception_derives_from_the_root_and_a_builtin(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.JobSchedulerError)
    if cls is errors.JobSchedulerError:
        return
    builtins = [
        base
        for base in cls.__mro__
        if base.__module__ == "builtins" and base not in (Exception, BaseException, object)
    ]
    assert builtins, f"{cls.__name__} inherits no builtin exception but Exception"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_exception_says_in_one_line_what_it_means(cls: type[BaseException]) -> None:
    doc = (cls.__doc__ or "").strip()
    assert doc, f"{cls.__name__} has no docstring"
    assert "\n" not in doc, f"{cls.__name__}'s docstring is longer than one line"
