"""Support for testing jobscheduler and the code around it, shared by the project's tests
and its tools (``bench``): a job factory, a supervisor of server subprocesses, a reader of
Prometheus metrics, free ports and admin keys.

It sits at the top of the package beside the tools: it may import any of the package, and
nothing of the package below it imports it. Nothing here needs pytest.
"""

from .jobs import DEFAULT_TIME as DEFAULT_TIME
from .jobs import JobFactory as JobFactory
from .jobs import make_job as make_job
from .keys import insert_admin_key as insert_admin_key
from .metrics import metric_samples as metric_samples
from .metrics import metric_value as metric_value
from .ports import bindable as bindable
from .ports import free_port as free_port
from .process import READY_LINE as READY_LINE
from .process import STARTUP_TIMEOUT as STARTUP_TIMEOUT
from .process import STOP_TIMEOUT as STOP_TIMEOUT
from .process import TAIL_LINES as TAIL_LINES
from .process import ProcessFailed as ProcessFailed
from .process import ServerProcess as ServerProcess
from .process import at_normal_priority as at_normal_priority
from .process import stop_all as stop_all
