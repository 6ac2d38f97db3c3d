"""The documentation site's reference pages, generated from the code: the HTTP API from the
app's ``/openapi.json`` (:mod:`.http_api`), the configuration from ``config.VARIABLES``
(:mod:`.configuration`), the command line from its argparse parsers (:mod:`.cli`) and the
Python API's page of mkdocstrings directives (:mod:`.python_api`).

``python -m jobscheduler.reference DOCS_DIR`` writes them under ``DOCS_DIR/reference/``
(``just docs-gen``); with ``--check`` it writes nothing and exits 1 naming each page that is
not what the code makes now (``just docs`` runs it before building, and a test does too).
"""

from ._pages import GENERATED as GENERATED
from ._pages import generate as generate
from ._pages import stale_pages as stale_pages
