"""The HTTP API: :func:`create_app` builds the Quart-Trio app from the roles' dependencies and
:func:`run_api` serves it. :mod:`.route_table` declares every route (the declarations are in
:mod:`.schemas`), :mod:`.errors` maps every error to its status, :mod:`.routes` holds the
views, one module per resource, and :mod:`.ui` is the dashboard. Authentication
(:mod:`.auth`, :mod:`.session`), tenancy (:mod:`.tenancy`, :mod:`.quotas`), the audit trail
(:mod:`.audit`) and bounded store calls (:mod:`.bounded`) sit beside them, wired in by
:mod:`.hooks`; :mod:`.serving` runs an ASGI app on hypercorn."""

from .app import create_app as create_app
from .app import run_api as run_api
from .errors import MAX_BODY_BYTES as MAX_BODY_BYTES
from .errors import RETRY_AFTER_SECONDS as RETRY_AFTER_SECONDS
from .replies import error_response as error_response
