"""A FastAPI app that enqueues a job on a request: ``send_email.enqueue_async(...)``.

    pip install 'jobscheduler[examples]'     # fastapi and uvicorn
    cd examples && uvicorn webapp:app --port 8000

``POST /signup`` stores a ``send-email`` job (through the scheduler's API at
``JOBSCHEDULER_URL``, with ``JOBSCHEDULER_API_KEY``) and answers once it is stored. A bad
address is refused before anything is sent, with the API's own message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from jobscheduler.errors import ValidationError
from myjobs import registry, send_email


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    await registry.connection.aclose()  # the handles' client of this event loop


app = FastAPI(lifespan=lifespan)


class Signup(BaseModel):
    email: str
    name: str = "there"


@app.post("/signup", status_code=202)
async def signup(form: Signup) -> dict[str, str]:
    try:
        job = await send_email.enqueue_async(
            {"to": form.email, "subject": "Welcome", "body": f"Hello {form.name}"},
            tenant_id="tenant-a",
            key=f"welcome-{form.email}",  # one welcome per address, however often posted
        )
    except ValidationError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return {"jobId": job["id"], "status": job["status"]}
