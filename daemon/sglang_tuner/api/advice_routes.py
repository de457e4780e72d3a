"""The /advice routes: answers rendered once per evaluation, as JSON or a text report."""

import gzip
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from sglang_tuner.api.advice_report import AdviceFilter, select_advice
from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.api.context import (
    TEXT_RESPONSES,
    ApiContext,
    ContextDep,
    EvaluationDep,
    FormatQuery,
    Rendered,
    require_rule,
    require_target,
    wants_text,
)
from sglang_tuner.api.schemas.advice_response import AdviceList, RuleResultOut
from sglang_tuner.evaluation import Evaluation
from sglang_tuner.model.advice import Severity


def advice_filter(
    severity: Annotated[Severity | None, Query(description="Only this severity")] = None,
    state: Annotated[
        Literal["pending", "firing"] | None, Query(description="Only this alert state")
    ] = None,
    rule: Annotated[str | None, Query(description="Only this tuning rule")] = None,
    no_data: Annotated[
        Literal["count", "full"], Query(description="full: every no-data reason (default: counts)")
    ] = "count",
) -> AdviceFilter:
    """The query filters of /advice."""
    return AdviceFilter(severity, state, rule, no_data == "full")


FilterDep = Annotated[AdviceFilter, Depends(advice_filter)]
_PLAIN = AdviceFilter()  # the plain /advice: no filter
TargetQuery = Annotated[str | None, Query(description="Only this target")]
router = APIRouter()


@router.get("/advice", response_model=AdviceList, responses=TEXT_RESPONSES, tags=["advice"])
def list_advice(
    request: Request,
    ev: EvaluationDep,
    ctx: ContextDep,
    f: FilterDep,
    target: TargetQuery = None,
    fmt: FormatQuery = None,
) -> Response:
    """Every target's plan and pending and firing advice, with how many rules have no data."""
    if target is not None:
        require_target(ev, target)
    if f.rule is not None:
        require_rule(ctx, f.rule)
    return _advice_response(request, ev, ctx, f, target, fmt)


@router.get("/advice/{target}/{rule}", tags=["advice"])
def read_rule_advice(
    request: Request, target: str, rule: str, ev: EvaluationDep, ctx: ContextDep
) -> Response:
    """One tuning rule for one target: health, state, advice or the reason there is none (a
    target whose name holds a `/`, sent as `%2F`, arrives here split: its advice)."""
    joined = f"{target}/{rule}"
    if target not in ev.targets and joined in ev.targets:
        return _advice_response(request, ev, ctx, _PLAIN, joined, None)
    out = _rule_result(target, rule, ev, ctx)
    return Response(out.model_dump_json(), media_type="application/json")


@router.get(
    "/advice/{target:path}", response_model=AdviceList, responses=TEXT_RESPONSES, tags=["advice"]
)
def read_target_advice(
    request: Request,
    target: str,
    ev: EvaluationDep,
    ctx: ContextDep,
    f: FilterDep,
    fmt: FormatQuery = None,
) -> Response:
    """One target's plan and pending and firing advice, with what has no data and why (any
    name, `/` included, percent-encoded in the path)."""
    if target not in ev.targets and "/" in target:  # a name with `/`, then a rule id
        name, rule = target.rsplit("/", 1)
        if name in ev.targets:
            out = _rule_result(name, rule, ev, ctx)
            return Response(out.model_dump_json(), media_type="application/json")
    require_target(ev, target)
    if f.rule is not None:
        require_rule(ctx, f.rule)
    return _advice_response(request, ev, ctx, f, target, fmt)


def _rule_result(target: str, rule: str, ev: Evaluation, ctx: ApiContext) -> RuleResultOut:
    """One tuning rule for one target: health, state, advice or the reason there is none."""
    require_target(ev, target)
    known = require_rule(ctx, rule)
    result = next((r for r in ev.results.get(target, ()) if r.rule == rule), None)
    advice = next((a for a in ev.advice if (a.target, a.rule) == (target, rule)), None)
    return RuleResultOut.from_result(target, known, result, advice, ev.ts)


def _advice_response(
    request: Request,
    ev: Evaluation,
    ctx: ApiContext,
    f: AdviceFilter,
    target: str | None,
    fmt: str | None,
) -> Response:
    """The /advice answer, rendered once per evaluation and filter (see `advice_cache`), and
    gzipped once for clients that accept it (1,000 targets' advice: 1.3 MB, 70 KB gzipped)."""
    as_text = wants_text(request, fmt)
    if target is None and not as_text and f == _PLAIN:
        ctx.rendered.default_read_at = ctx.clock()
    body, media_type = _rendered(ctx, ev, f, target, as_text)
    if len(body) < GZIP_MIN_BYTES or "gzip" not in request.headers.get("accept-encoding", ""):
        return Response(body, media_type=media_type, headers=VARY)
    packed = _gzipped(ctx, ev, ("advice.gz", f, target, as_text), body, media_type)
    return Response(packed, media_type=media_type, headers={**VARY, "Content-Encoding": "gzip"})


def _gzipped(ctx: ApiContext, ev: Evaluation, key: object, body: bytes, media_type: str) -> bytes:
    packed, _ = ctx.rendered.get(ev, key, lambda: (gzip.compress(body, 6), media_type))
    return packed


GZIP_MIN_BYTES = 1024  # smaller answers are sent as they are
VARY = {"Vary": "Accept-Encoding"}


def _rendered(
    ctx: ApiContext, ev: Evaluation, f: AdviceFilter, target: str | None, as_text: bool
) -> Rendered:
    def render() -> Rendered:
        out = select_advice(ev, f, target, ctx.settings.scrape_interval_seconds)
        if as_text:
            return advice_text(out).encode(), "text/plain; charset=utf-8"
        return json_in_pieces(out), "application/json"

    return ctx.rendered.get(ev, ("advice", f, target, as_text), render)


_LISTS = ("plans", "data", "no_data", "errors")


def json_in_pieces(out: AdviceList) -> bytes:
    """`out.model_dump_json()`, built item by item: one call over 10,000 targets' advice holds
    the GIL for its whole length, and the API thread (`/healthz` too) waits that long; between
    two items it can run."""
    body = out.model_copy(update=dict.fromkeys(_LISTS, [])).model_dump_json().encode()
    for name in _LISTS:
        items = b",".join(item.model_dump_json().encode() for item in getattr(out, name))
        empty = b'"' + name.encode() + b'":[]'
        body = body.replace(empty, empty[:-1] + items + b"]", 1)
    return body


# The plain answer is pre-rendered while somebody has read it this recently; after that the next
# request renders it (tens of ms at 1,000 targets) and pre-rendering starts again.
PRERENDER_WHILE_READ_SECONDS = 300.0


def prerender(ctx: ApiContext, ev: Evaluation) -> None:
    """Render the plain /advice answer, and gzip it, as each evaluation is published: no
    request waits (with 10,000 targets gzipping it alone takes tens of ms). Only while it is
    read: at 1,000 targets rendering an answer nobody asks for was 7 % of the daemon's CPU."""
    if ctx.clock() - ctx.rendered.default_read_at > PRERENDER_WHILE_READ_SECONDS:
        return
    body, media_type = _rendered(ctx, ev, _PLAIN, None, False)
    if len(body) >= GZIP_MIN_BYTES:
        _gzipped(ctx, ev, ("advice.gz", _PLAIN, None, False), body, media_type)
