"""`POST /-/reload`: off unless enabled (`--web.enable-lifecycle`, as Prometheus keeps it),
behind basic auth when the web config sets users (the front guards every path), and rate-limited:
one reload at a time, a burst of RELOAD_BURST then one a second (each re-reads and re-validates
both files in the loop's thread: eight clients in a loop once cost 54 % of the scrapes)."""

import asyncio
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sglang_tuner.api.context import ContextDep
from sglang_tuner.api.schemas.advice_response import StatusOut

RELOAD_BURST = 3
RELOADS_PER_SECOND = 1.0
router = APIRouter()


class ReloadLimiter:
    """A token bucket, and a lock so that reloads never overlap (one per app)."""

    def __init__(self) -> None:
        self._tokens = float(RELOAD_BURST)
        self._at = time.monotonic()
        self.busy = asyncio.Lock()

    def take(self) -> float:
        """0 when a reload may start now, else the seconds to wait."""
        now = time.monotonic()
        self._tokens = min(RELOAD_BURST, self._tokens + (now - self._at) * RELOADS_PER_SECOND)
        self._at = now
        if self.busy.locked() or self._tokens < 1:
            return max(1.0, (1 - self._tokens) / RELOADS_PER_SECOND)
        self._tokens -= 1
        return 0.0


def _limiter(request: Request) -> ReloadLimiter:
    """This app's limiter, made on first use."""
    limiter = getattr(request.app.state, "reload_limiter", None)
    if limiter is None:
        limiter = request.app.state.reload_limiter = ReloadLimiter()
    return limiter


def _refused(status: int, detail: str, **headers: str) -> JSONResponse:
    body = StatusOut(status="not reloaded", detail=detail)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers or None)


@router.post("/-/reload", tags=["daemon"], response_model=StatusOut)
async def reload_config(ctx: ContextDep, request: Request) -> StatusOut | JSONResponse:
    """Re-read the config file and the web config, as SIGHUP does (the Prometheus Operator's
    config reloader calls this), when the daemon runs with `--web.enable-lifecycle`. 200 when
    applied; 500 with the problems when either file is invalid, the running configuration
    kept; 400 when the daemon was started without a file; 403 when not enabled; 429 while
    reloads come faster than one a second."""
    if not ctx.settings.web_enable_lifecycle:
        return _refused(403, "the lifecycle API is off: start with --web.enable-lifecycle "
                        "(or web_enable_lifecycle: true), or send SIGHUP")  # fmt: skip
    if ctx.reload is None:
        return _refused(400, "started without --config: no file to read")
    limiter = _limiter(request)
    wait = limiter.take()
    if wait:
        retry = {"Retry-After": str(round(wait))}
        return _refused(429, "a reload is running or came too soon", **retry)
    async with limiter.busy:
        problem = await ctx.reload()
    if problem is not None:
        return _refused(500, problem)
    return StatusOut(status="reloaded")
