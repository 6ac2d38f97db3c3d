"""The HTTP API: :func:`create_app` builds the Quart-Trio app from the roles' dependencies and
:func:`run_api` serves it. :mod:`.app` holds the factory, the error mapping and the create
routes; each other module registers one group of routes (``cron``, ``listing``, ``manage``,
``occurrences``, ``overview``, ``tenancy``) or declares their schemas (``schemas*``)."""

from .app import MAX_BODY_BYTES as MAX_BODY_BYTES
from .app import RETRY_AFTER_SECONDS as RETRY_AFTER_SECONDS
from .app import create_app as create_app
from .app import error_response as error_response
from .app import run_api as run_api
