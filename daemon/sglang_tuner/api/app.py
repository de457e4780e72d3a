"""The HTTP API: advice, targets and tuning rules read from the latest evaluation, and /metrics."""

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)

from sglang_tuner import __version__
from sglang_tuner.api import advice_routes as api_advice
from sglang_tuner.api import changes as api_changes
from sglang_tuner.api import lifecycle as api_lifecycle
from sglang_tuner.api.context import (
    ApiContext,
    ContextDep,
    EvaluationDep,
    require_rule,
    require_target,
)
from sglang_tuner.api.docs import mount_docs
from sglang_tuner.api.head import HeadAsGet
from sglang_tuner.api.runbook import runbook_text
from sglang_tuner.api.schemas.advice_response import StatusOut
from sglang_tuner.api.schemas.inventory import QueryOut, RuleList, RuleOut, TargetList, TargetOut
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation, TargetStatus, TunerState
from sglang_tuner.exporter.collector import METRICS_CONTENT_TYPE, health_score
from sglang_tuner.exporter.page import MetricsPage, wants_gzip
from sglang_tuner.rule import Rule

logger = logging.getLogger(__name__)

_LINKS = ("/advice", "/advice?format=text", "/changes", "/targets", "/rules", "/metrics", "/docs")
_LANDING = (
    "<!doctype html><html><head><title>sglang-tuner</title></head><body>"
    "<h1>sglang-tuner {version}</h1><p>Tuning advice for SGLang servers, from SGLang's "
    "hyperparameter tuning guide.</p><ul>"
    + "".join(f'<li><a href="{p}">{p}</a></li>' for p in _LINKS)
    + "</ul></body></html>"
)
router = APIRouter()


@router.get("/targets", tags=["targets"])
def list_targets(ev: EvaluationDep, ctx: ContextDep) -> TargetList:
    """Every watched SGLang server: up, last scrape, error, version and key server args; in
    Prometheus mode also each query of the rounds, with its errors and warnings."""
    now = ctx.clock()
    data = [_target_out(ev, t, now) for t in ev.targets.values()]
    shard = {"index": ev.shard[0], "count": ev.shard[1]}
    queries = [QueryOut.from_status(q) for q in ev.queries]
    return TargetList(data=data, count=len(data), shard=shard, queries=queries)


@router.get("/targets/{target:path}", tags=["targets"])
def read_target(target: str, ev: EvaluationDep, ctx: ContextDep) -> TargetOut:
    """One watched SGLang server."""
    return _target_out(ev, require_target(ev, target), ctx.clock())


@router.get("/rules", tags=["rules"])
def list_rules(ctx: ContextDep) -> RuleList:
    """The tuning-rule catalogue with thresholds and the config's overrides."""
    data = [RuleOut.from_rule(rule, ctx.settings) for rule in ctx.rules.values()]
    return RuleList(data=data, count=len(data))


@router.get("/rules/{rule}", tags=["rules"])
def read_rule(rule: str, ctx: ContextDep) -> RuleOut:
    """One tuning rule."""
    return RuleOut.from_rule(require_rule(ctx, rule), ctx.settings)


@router.get("/runbook/{name}", response_class=PlainTextResponse, tags=["rules"])
def read_runbook(name: str, ctx: ContextDep) -> PlainTextResponse:
    """What an alert means and what to do: a tuning rule's section of docs/rules.md, or a
    daemon-health alert's runbook (the alerts' runbook_url points here)."""
    text = runbook_text(name, ctx.rules)
    if text is None:
        raise HTTPException(404, f"No runbook for '{name}'")
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


@router.get("/healthz", response_model_exclude_none=True, tags=["daemon"])
def healthz() -> StatusOut:
    """200 while the process runs."""
    return StatusOut(status="ok")


@router.get(
    "/readyz",
    response_model=StatusOut,
    response_model_exclude_none=True,
    responses={503: {"model": StatusOut}},
    tags=["daemon"],
)
def readyz(ev: EvaluationDep) -> StatusOut | JSONResponse:
    """200 once every target has been scraped and evaluated once (`degraded` while state
    cannot be saved: it lives in memory only); 503 before."""
    if ev.is_ready:
        if failing := ev.failing_tasks():
            return StatusOut(status="degraded", detail="; ".join(failing)[:2000])
        if ev.database.error:
            return StatusOut(status="degraded", detail=ev.database.error)
        if ev.database.recreated:
            return StatusOut(status="ready", detail=ev.database.recreated)
        return StatusOut(status="ready")
    waiting = sum(t.up is None for t in ev.targets.values())
    detail = f"waiting for the first scrape of {waiting} target(s)" if waiting else ""
    detail = ev.source_problem() or detail
    body = StatusOut(status="not ready", detail=detail or "no evaluation has finished yet")
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, tags=["daemon"])
def metrics(ctx: ContextDep, request: Request) -> Response:
    """Our self-metrics and tuning-health metrics, Prometheus text format 0.0.4; gzip when the
    request's Accept-Encoding allows it (Prometheus asks for it on every scrape)."""
    gzip = wants_gzip(request.headers.get("accept-encoding", ""))
    headers = {"Vary": "Accept-Encoding"} | ({"Content-Encoding": "gzip"} if gzip else {})
    pieces = ctx.metrics.pieces(gzip)  # sent in turn: the page is shared, never copied
    headers["Content-Length"] = str(sum(map(len, pieces)))
    return StreamingResponse(iter(pieces), media_type=METRICS_CONTENT_TYPE, headers=headers)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def landing() -> HTMLResponse:
    """A landing page linking the endpoints."""
    return HTMLResponse(_LANDING.format(version=__version__))


def create_app(
    state: TunerState,
    metrics: MetricsPage,
    *,
    rules: Sequence[Rule],
    settings: Settings,
    clock: Callable[[], float] = time.time,
    reload: Callable[[], Awaitable[str | None]] | None = None,
) -> FastAPI:
    """The API over `state`; `/metrics` serves `metrics` (a page over the same state)."""
    app = FastAPI(
        title="sglang-tuner",
        version=__version__,
        description="Tuning advice for running SGLang servers, from SGLang's own tuning guide: "
        "evidence from a window of scrapes and the exact flag change.",
        docs_url=None,  # mount_docs serves /docs and /redoc without a CDN
        redoc_url=None,
    )
    mount_docs(app)
    ctx = ApiContext(state, metrics, {r.id: r for r in rules}, settings, clock, reload=reload)
    app.state.ctx = ctx

    state.subscribe(lambda ev: api_advice.prerender(ctx, ev))
    app.include_router(api_advice.router)
    app.include_router(api_changes.router)
    app.include_router(router)
    app.include_router(api_lifecycle.router)
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.middleware("http")(_contain_errors)
    app.add_middleware(HeadAsGet)
    return app


def _target_out(ev: Evaluation, t: TargetStatus, now: float) -> TargetOut:
    results = list(ev.results.get(t.name, ()))
    score = None if t.up is None else health_score(t, results)
    return TargetOut.from_status(t, results, score, now)


async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with one readable line per problem instead of pydantic's error objects."""
    problems = [
        f"{e['loc'][0]} parameter '{'.'.join(map(str, e['loc'][1:]))}': {e['msg']}"
        for e in exc.errors()
    ]
    return JSONResponse({"detail": "; ".join(problems)}, status_code=422)


async def _contain_errors(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """A bug answers 500 'internal error'; the traceback goes to our log, never to the client."""
    try:
        return await call_next(request)
    except Exception:
        logger.exception("unhandled error serving %s %s", request.method, request.url.path)
        return JSONResponse({"detail": "internal error"}, status_code=500)
