"""A typed Python client of the jobscheduler HTTP API, blocking or async.

    from jobscheduler.client import Client

    with Client("http://127.0.0.1:8080") as jobs:
        job = jobs.create("noop", tenant_id="acme")
        print(jobs.wait(job["id"], timeout=30)["status"])

:class:`AsyncClient` has the same methods as coroutines and runs under trio and asyncio
(httpx through anyio). Errors are the project's exceptions (:mod:`jobscheduler.errors`).
"""

from ._async import AsyncClient as AsyncClient
from ._requests import job_body as job_body
from ._sync import Client as Client
from ._types import FINAL_STATUSES as FINAL_STATUSES
from ._types import MAX_BULK_IDS as MAX_BULK_IDS
from ._types import SORTS as SORTS
from ._types import BatchAnswer as BatchAnswer
from ._types import Job as Job
from ._types import Workflow as Workflow
