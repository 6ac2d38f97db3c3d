"""Job stores: the ports (one protocol per role, and JobStore, their union) and their
adapters (``memory``, ``sqlite``, ``mongo``)."""

from .base import AttemptLog as AttemptLog
from .base import CronLedger as CronLedger
from .base import JobRecords as JobRecords
from .base import JobStore as JobStore
from .base import Reporting as Reporting
from .base import StoreLifecycle as StoreLifecycle
from .base import Tenancy as Tenancy
from .base import Transitions as Transitions
from .base import WorkerPresence as WorkerPresence
from .upkeep import Upkeep as Upkeep
from .workflows import WorkflowRecords as WorkflowRecords
