"""One frozen settings object, built once from the environment at start-up.

Nothing else in the package reads ``os.environ``. Every variable has an explicit default and
unit; a malformed value raises :class:`~jobscheduler.errors.ConfigError` whose message names
the variable, and the CLI prints that one line and exits.
"""

from __future__ import annotations

from ._parsers import LOG_FORMATS, LOG_LEVELS, app_spec
from ._settings import DEFAULT_CLIENT_URL, ClientSettings, Settings
from ._variables import ENVIRONMENT_VARIABLES, VARIABLES, Variable

__all__ = [
    "DEFAULT_CLIENT_URL",
    "ENVIRONMENT_VARIABLES",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "VARIABLES",
    "ClientSettings",
    "Settings",
    "Variable",
    "app_spec",
]
