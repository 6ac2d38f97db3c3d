"""Leader electors: the port and its adapters."""

from .base import Elector as Elector
from .base import Term as Term
from .base import lead as lead
