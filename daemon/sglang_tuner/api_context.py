"""What the API handlers read: the published state and fixed wiring, as FastAPI dependencies."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from prometheus_client.registry import CollectorRegistry

from .config import Settings
from .evaluation import Evaluation, TargetStatus, TunerState
from .rules.base import Rule


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What the handlers read: the published state and fixed wiring."""

    state: TunerState
    registry: CollectorRegistry
    rules: dict[str, Rule]
    settings: Settings
    clock: Callable[[], float] = time.time
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


def require_target(ev: Evaluation, name: str) -> TargetStatus:
    """The target, or 404."""
    target = ev.targets.get(name)
    if target is None:
        raise HTTPException(404, f"Unknown target '{name}'")
    return target


def require_rule(ctx: ApiContext, rule_id: str) -> Rule:
    """The tuning rule, or 404."""
    rule = ctx.rules.get(rule_id)
    if rule is None:
        raise HTTPException(404, f"Unknown rule '{rule_id}'")
    return rule
