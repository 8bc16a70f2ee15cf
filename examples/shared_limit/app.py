# examples/shared_limit/app.py
"""A service whose workers keep one deployment's rate limit together (docs/router.md shows it).

Run it with ``gunicorn app:app -w 4 -k uvicorn_worker.UvicornWorker``, and ``LIMIT_STORE`` set to a
Redis URL that every worker (and every replica of the service) reaches: the four workers, however many
requests each gets, send the deployment 600 requests a minute between them, not 600 each.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from pydantic import BaseModel, Field

from wrapper import AsyncRouter, Route
from wrapper.scale import AsyncScale


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """One router per worker, built in its event loop; its limit is kept in the store, with the others'."""
    route = Route(AsyncScale(), "llama-3-8b-instruct", requests_per_minute=600)
    async with AsyncRouter([route], limit_store=os.environ["LIMIT_STORE"]) as router:
        app.state.router = router
        yield


app = FastAPI(lifespan=lifespan)


class Prompt(BaseModel):
    prompt: str = Field(min_length=1)
    max_tokens: int = Field(default=64, ge=1)


@app.post("/complete")
async def complete(body: Prompt) -> dict[str, str | None]:
    """The completion of ``body.prompt``, on its turn of the shared limit."""
    completion = await app.state.router.complete(body.prompt, max_tokens=body.max_tokens)
    return {"text": completion.text, "finish_reason": completion.finish_reason}
