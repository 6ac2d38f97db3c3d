"""The command line's reference page, read from its argparse parsers: every command (and
action) with its usage, what it does, and each argument with its default."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from jobscheduler.cli.main import build_parser

from ._markdown import page_top, table

#: Usage lines are wrapped at this width, whatever the terminal generating the page.
WIDTH = 88


def render() -> str:
    """The page."""
    top = build_parser()
    lines = [
        *page_top("Command line", "the argparse parsers of `jobscheduler.cli`"),
        f"`jobscheduler`: {top.description}",
        "",
        *table(
            ("command", "what it does"),
            [(f"[`{name}`](#{_anchor(name)})", helps) for name, helps in _commands(top)],
        ),
        "",
    ]
    for name, _ in _commands(top):
        command = _subparsers(build_parser(name))[name]
        lines += _parser(f"jobscheduler {name}", command, level=2)
    return "\n".join(lines).rstrip() + "\n"


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    action = _subparser_action(parser)
    assert action is not None
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    for name in action.choices:
        yield name, helps.get(name, "")


def _subparser_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = _subparser_action(parser)
    return dict(action.choices) if action is not None else {}


def _anchor(name: str) -> str:
    return f"jobscheduler-{name}"


def _parser(title: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    parser.prog = title
    lines = [f"{'#' * level} `{title}`", ""]
    if parser.description:
        lines += [parser.description[0].upper() + parser.description[1:] + ".", ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{_metavar(action)}`"
        if action.option_strings and action.nargs != 0:
            name += f" `{_metavar(action)}`"
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) else f"`{default}`"
        choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
        rows.append((name, (action.help or "") + choices, shown))
    if rows:
        lines += [*table(("argument", "meaning", "default"), rows), ""]
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for name, sub in _subparsers(parser).items():
        sub.description = sub.description or _help_of(parser, name)
        lines += _parser(f"{title} {name}", sub, level + 1)
    return lines


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    return action.dest.upper() if action.option_strings else action.dest


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    action = _subparser_action(parser)
    if action is None:
        return ""
    return next((c.help or "" for c in action._choices_actions if c.dest == name), "")
