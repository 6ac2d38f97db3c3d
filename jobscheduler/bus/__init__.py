"""Message buses: the port and its adapters."""

from .base import Bus as Bus
from .base import DeadLetter as DeadLetter
from .base import Delivery as Delivery
from .base import Subscription as Subscription
from .base import WakeUp as WakeUp
