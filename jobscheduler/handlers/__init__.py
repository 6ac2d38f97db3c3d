"""Handler registry, runners, app loading and the built-in handlers."""

from jobscheduler.errors import PermanentError as PermanentError

from .builtin import default_registry as default_registry
from .context import ChildOptions as ChildOptions
from .context import JobContext as JobContext
from .registry import Handler as Handler
from .registry import HandlerOptions as HandlerOptions
from .registry import HandlerRegistry as HandlerRegistry
