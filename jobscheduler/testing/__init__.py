"""Support for testing jobscheduler and the code around it, shared by the project's tests
and its tools (``bench``).

It sits at the top of the package beside the tools: it may import any of the package, and
nothing of the package below it imports it. Nothing here needs pytest.
"""

from .metrics import metric_samples as metric_samples
from .metrics import metric_value as metric_value
from .ports import free_port as free_port
