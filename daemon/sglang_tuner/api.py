"""The HTTP API: advice, targets and tuning rules read from the latest evaluation, and /metrics."""

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client.registry import CollectorRegistry

from . import __version__
from .advice_report import AdviceFilter, select_advice
from .apidocs import mount_docs
from .config import Settings
from .exporter import health_score, render_metrics, with_advice_state
from .rules.base import Rule, Severity
from .schemas import AdviceList, RuleResultOut, StatusOut, advice_text
from .schemas_inventory import RuleList, RuleOut, TargetList, TargetOut
from .state import Evaluation, TargetStatus, TunerState

logger = logging.getLogger(__name__)

_TEXT: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {}}, "description": "JSON, or text with ?format=text"}
}
_LINKS = ("/advice", "/advice?format=text", "/targets", "/rules", "/metrics", "/docs")
_LANDING = (
    "<!doctype html><html><head><title>sglang-tuner</title></head><body>"
    "<h1>sglang-tuner {version}</h1><p>Tuning advice for SGLang servers, from SGLang's "
    "hyperparameter tuning guide.</p><ul>"
    + "".join(f'<li><a href="{p}">{p}</a></li>' for p in _LINKS)
    + "</ul></body></html>"
)
# A media range and its q-value (RFC 9110 qvalue grammar); no q means 1.
_MEDIA_RANGE = re.compile(r"([^\s,;]+)[^,]*?(?:;\s*q=(0(?:\.\d*)?|1(?:\.0*)?))?\s*(?:,|$)")


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What the handlers read: the published state and fixed wiring."""

    state: TunerState
    registry: CollectorRegistry
    rules: dict[str, Rule]
    settings: Settings
    clock: Callable[[], float]
    # Rendered /advice answers for the latest evaluation only: with 1,000 targets building one
    # takes tens of ms, and clients poll far more often than the evaluation changes.
    advice_cache: dict[tuple[object, ...], tuple[bytes, str]] = field(default_factory=dict)


def get_context(request: Request) -> ApiContext:
    """The app's `ApiContext`."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


ContextDep = Annotated[ApiContext, Depends(get_context)]


def get_state(ctx: ContextDep) -> TunerState:
    """The daemon state the loop publishes to."""
    return ctx.state


StateDep = Annotated[TunerState, Depends(get_state)]


def get_evaluation(state: StateDep) -> Evaluation:
    """The evaluation published when the request arrived: one consistent view per request."""
    return state.latest()


EvaluationDep = Annotated[Evaluation, Depends(get_evaluation)]


def advice_filter(
    severity: Annotated[Severity | None, Query(description="Only this severity")] = None,
    state: Annotated[
        Literal["pending", "firing"] | None, Query(description="Only this alert state")
    ] = None,
) -> AdviceFilter:
    """The `severity` and `state` query filters of /advice."""
    return AdviceFilter(severity, state)


FilterDep = Annotated[AdviceFilter, Depends(advice_filter)]
TargetQuery = Annotated[str | None, Query(description="Only this target")]
FormatQuery = Annotated[
    Literal["json", "text"] | None,
    Query(alias="format", description="text: a readable report (also via Accept: text/plain)"),
]
router = APIRouter()


@router.get("/advice", response_model=AdviceList, responses=_TEXT, tags=["advice"])
def list_advice(
    request: Request,
    ev: EvaluationDep,
    ctx: ContextDep,
    f: FilterDep,
    target: TargetQuery = None,
    fmt: FormatQuery = None,
) -> Response:
    """Pending and firing advice for every target, with what has no data and why."""
    if target is not None:
        _require_target(ev, target)
    return _advice_response(request, ev, ctx, f, target, fmt)


@router.get("/advice/{target}", response_model=AdviceList, responses=_TEXT, tags=["advice"])
def read_target_advice(
    request: Request,
    target: str,
    ev: EvaluationDep,
    ctx: ContextDep,
    f: FilterDep,
    fmt: FormatQuery = None,
) -> Response:
    """Pending and firing advice for one target, with what has no data and why."""
    _require_target(ev, target)
    return _advice_response(request, ev, ctx, f, target, fmt)


@router.get("/advice/{target}/{rule}", tags=["advice"])
def read_rule_advice(target: str, rule: str, ev: EvaluationDep, ctx: ContextDep) -> RuleResultOut:
    """One tuning rule for one target: health, state, advice or the reason there is none."""
    _require_target(ev, target)
    known = _require_rule(ctx, rule)
    result = next((r for r in ev.results.get(target, ()) if r.rule == rule), None)
    advice = next((a for a in ev.advice if (a.target, a.rule) == (target, rule)), None)
    return RuleResultOut.from_result(target, known, result, advice, ev.ts)


@router.get("/targets", tags=["targets"])
def list_targets(ev: EvaluationDep, ctx: ContextDep) -> TargetList:
    """Every watched SGLang server: up, last scrape, error, version and key server args."""
    now = ctx.clock()
    data = [_target_out(ev, t, now) for t in ev.targets.values()]
    return TargetList(data=data, count=len(data))


@router.get("/targets/{target}", tags=["targets"])
def read_target(target: str, ev: EvaluationDep, ctx: ContextDep) -> TargetOut:
    """One watched SGLang server."""
    return _target_out(ev, _require_target(ev, target), ctx.clock())


@router.get("/rules", tags=["rules"])
def list_rules(ctx: ContextDep) -> RuleList:
    """The tuning-rule catalogue with thresholds and the config's overrides."""
    data = [RuleOut.from_rule(rule, ctx.settings) for rule in ctx.rules.values()]
    return RuleList(data=data, count=len(data))


@router.get("/rules/{rule}", tags=["rules"])
def read_rule(rule: str, ctx: ContextDep) -> RuleOut:
    """One tuning rule."""
    return RuleOut.from_rule(_require_rule(ctx, rule), ctx.settings)


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
    """200 once every target has been scraped and evaluated once; 503 before."""
    if ev.is_ready:
        return StatusOut(status="ready")
    waiting = sum(t.up is None for t in ev.targets.values())
    detail = f"waiting for the first scrape of {waiting} target(s)" if waiting else ""
    body = StatusOut(status="not ready", detail=detail or "no evaluation has finished yet")
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, tags=["daemon"])
def metrics(ctx: ContextDep) -> Response:
    """Our self-metrics and tuning-health metrics, Prometheus text format 0.0.4."""
    body, content_type = render_metrics(ctx.registry)
    return Response(body, media_type=content_type)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def landing() -> HTMLResponse:
    """A landing page linking the endpoints."""
    return HTMLResponse(_LANDING.format(version=__version__))


def create_app(
    state: TunerState,
    registry: CollectorRegistry,
    *,
    rules: Sequence[Rule],
    settings: Settings,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The API over `state`; `/metrics` serves `registry` (register a `TunerCollector` there)."""
    app = FastAPI(
        title="sglang-tuner",
        version=__version__,
        description="Tuning advice for running SGLang servers, from SGLang's own tuning guide: "
        "evidence from a window of scrapes and the exact flag change.",
        docs_url=None,  # mount_docs serves /docs and /redoc without a CDN
        redoc_url=None,
    )
    mount_docs(app)
    ctx = ApiContext(state, registry, {r.id: r for r in rules}, settings, clock)
    app.state.ctx = ctx

    def prerender(ev: Evaluation) -> None:
        """Render the plain /advice answer as each evaluation is published: no request waits."""
        _rendered(ctx, ev, AdviceFilter(), None, False)

    state.subscribe(prerender)
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.middleware("http")(_contain_errors)
    return app


def _target_out(ev: Evaluation, t: TargetStatus, now: float) -> TargetOut:
    results = with_advice_state(ev.results.get(t.name, ()), ev.advice)
    score = None if t.up is None else health_score(t, results)
    return TargetOut.from_status(t, results, score, now)


def _require_target(ev: Evaluation, name: str) -> TargetStatus:
    target = ev.targets.get(name)
    if target is None:
        raise HTTPException(404, f"Unknown target '{name}'")
    return target


def _require_rule(ctx: ApiContext, rule_id: str) -> Rule:
    rule = ctx.rules.get(rule_id)
    if rule is None:
        raise HTTPException(404, f"Unknown rule '{rule_id}'")
    return rule


def _advice_response(
    request: Request,
    ev: Evaluation,
    ctx: ApiContext,
    f: AdviceFilter,
    target: str | None,
    fmt: str | None,
) -> Response:
    """The /advice answer, rendered once per evaluation and filter (see `advice_cache`)."""
    as_text = fmt == "text" or (fmt is None and _prefers_text(request.headers.get("accept", "")))
    body, media_type = _rendered(ctx, ev, f, target, as_text)
    return Response(body, media_type=media_type)


def _rendered(
    ctx: ApiContext, ev: Evaluation, f: AdviceFilter, target: str | None, as_text: bool
) -> tuple[bytes, str]:
    key = (id(ev), ev.ts, target, f.severity, f.state, as_text)
    cached = ctx.advice_cache.get(key)
    if cached is None:
        if ctx.advice_cache and next(iter(ctx.advice_cache))[:2] != key[:2]:
            ctx.advice_cache.clear()  # a newer evaluation was published
        out = select_advice(ev, f, target, ctx.settings.scrape_interval_seconds)
        if as_text:
            cached = (advice_text(out).encode(), "text/plain; charset=utf-8")
        else:
            cached = (out.model_dump_json().encode(), "application/json")
        ctx.advice_cache[key] = cached
    return cached


def _prefers_text(accept: str) -> bool:
    """True when the Accept header gives text/plain (or text/*) a higher q than JSON."""
    kinds = {"text/plain": 0, "text/*": 0, "application/json": 1, "application/*": 1}
    best = [0.0, 0.0]
    for media, q in _MEDIA_RANGE.findall(accept.lower()):
        if media in kinds:
            best[kinds[media]] = max(best[kinds[media]], float(q or 1))
    return best[0] > best[1]


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
