"""The HTTP API: :func:`create_app` builds the Quart-Trio app from the roles' dependencies and
:func:`run_api` serves it. :mod:`.app` holds the factory, the error mapping and the create
routes; :mod:`.routes` registers the other groups of routes, one module per resource,
:mod:`.schemas` declares their shapes for :mod:`.route_table`, and :mod:`.ui` is the dashboard.
Authentication (:mod:`.auth`), tenancy (:mod:`.tenancy`, :mod:`.quotas`) and bounded store
calls (:mod:`.bounded`) sit beside them; :mod:`.serving` runs an ASGI app on hypercorn."""

from .app import MAX_BODY_BYTES as MAX_BODY_BYTES
from .app import RETRY_AFTER_SECONDS as RETRY_AFTER_SECONDS
from .app import create_app as create_app
from .app import error_response as error_response
from .app import run_api as run_api
