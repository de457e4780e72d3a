"""What the API handlers read: the published state and fixed wiring, as FastAPI dependencies."""

import math
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Annotated, Any, Literal

from fastapi import Depends, HTTPException, Query, Request

from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation, TargetStatus, TunerState
from sglang_tuner.exporter.page import MetricsPage
from sglang_tuner.rule import Rule


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What the handlers read: the published state and fixed wiring."""

    state: TunerState
    metrics: MetricsPage
    rules: dict[str, Rule]
    settings: Settings
    clock: Callable[[], float] = time.time
    rendered: "RenderCache" = field(default_factory=lambda: RenderCache())
    # POST /-/reload: re-read the config; None when it worked, else why not (None: no file)
    reload: Callable[[], Awaitable[str | None]] | None = None


Rendered = tuple[bytes, str]  # body, media type


class RenderCache:
    """Answers rendered for the latest evaluation (and the next, while it is pre-rendered), as
    bytes: with 1,000 targets building
    one takes tens of ms, and clients poll far more often than the evaluation changes.

    The API runs in its own thread; the publisher pre-renders in the loop's. The evaluation and
    its answers are swapped together as one tuple, so a reader never sees a mix of two.
    """

    def __init__(self) -> None:
        # the published evaluation and the one being pre-rendered before it is published, held
        # weakly: an evaluation no longer published is freed (it holds every target's status,
        # signals and rule results), and its answers with it at the next call
        self._slots: tuple[tuple[weakref.ref[Evaluation], dict[object, Rendered]], ...] = ()
        self.default_read_at = -math.inf  # when the plain /advice answer was last asked for

    def get(self, ev: Evaluation, key: object, render: Callable[[], Rendered]) -> Rendered:
        """The answer for `key` on `ev`, rendered now if nobody has yet."""
        slots = tuple((r, a) for r, a in self._slots if r() is not None)
        answers = next((a for r, a in slots if r() is ev), None)
        if answers is None:
            answers = {}
            slots = (*slots[-1:], (weakref.ref(ev), answers))
        self._slots = slots
        found = answers.get(key)
        if found is None:
            found = answers[key] = render()
        return found


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


def require_target(ev: Evaluation, name: str) -> TargetStatus:
    """The target, or 404."""
    target = ev.targets.get(name)
    if target is None:
        raise HTTPException(404, f"Unknown target '{name}'{_did_you_mean(name, ev.targets)}")
    return target


def require_rule(ctx: ApiContext, rule_id: str) -> Rule:
    """The tuning rule, or 404."""
    rule = ctx.rules.get(rule_id)
    if rule is None:
        raise HTTPException(404, f"Unknown rule '{rule_id}'{_did_you_mean(rule_id, ctx.rules)}")
    return rule


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    close = get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


TEXT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {}}, "description": "JSON, or text with ?format=text"}
}
FormatQuery = Annotated[
    Literal["json", "text"] | None,
    Query(alias="format", description="text: a readable report (also via Accept: text/plain)"),
]
MAX_ACCEPT_CHARS = 2048  # longer Accept headers are cut (no browser sends more)
_QVALUE = re.compile(r"0(?:\.\d{0,3})?|1(?:\.0{0,3})?")  # RFC 9110 qvalue


def wants_text(request: Request, fmt: str | None) -> bool:
    """?format=text, or (without ?format) an Accept header preferring text/plain over JSON."""
    return fmt == "text" or (fmt is None and _prefers_text(request.headers.get("accept", "")))


def _prefers_text(accept: str) -> bool:
    """True when the Accept header gives text/plain (or text/*) a higher q than JSON."""
    kinds = {"text/plain": 0, "text/*": 0, "application/json": 1, "application/*": 1}
    best = [0.0, 0.0]
    for media, q in _media_ranges(accept[:MAX_ACCEPT_CHARS].lower()):
        if media in kinds:
            best[kinds[media]] = max(best[kinds[media]], q)
    return best[0] > best[1]


def _media_ranges(accept: str) -> list[tuple[str, float]]:
    """(media range, q) per comma-separated item; linear in the header (no backtracking)."""
    out = []
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q" and _QVALUE.fullmatch(value.strip()):
                q = float(value)
        out.append((media, q))
    return out
