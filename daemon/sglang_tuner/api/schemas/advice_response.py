"""API response models: what /advice, /targets and /rules return (pydantic only at this edge)."""

from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from sglang_tuner.evaluation import RuleResult
from sglang_tuner.model.advice import Advice, Confidence, Health, NoData, Prediction, Severity
from sglang_tuner.model.next_change import Plan, Step
from sglang_tuner.model.service_levels import Level
from sglang_tuner.rule import Rule


def rfc3339(ts: float | None) -> str | None:
    """Unix seconds as an RFC 3339 UTC timestamp, e.g. '2026-11-22T09:00:00Z'."""
    if ts is None:
        return None
    return (
        datetime.fromtimestamp(ts, timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def api_path(*parts: str) -> str:
    """An API path from raw segments, each URL-quoted ('/advice/gpu-a/queue_empty')."""
    return "/" + "/".join(quote(p, safe=":") for p in parts)


class FromAttributes(BaseModel):
    """Base for models read straight off a dataclass of the same field names."""

    model_config = ConfigDict(from_attributes=True)


class PredictionOut(FromAttributes):
    """What the server model predicts the change does on this server, or why it cannot."""

    objective: str = Field(
        description="What is predicted: 'tok/s', 'TTFT p99' or 'ITL p50'; 'crashes' for a crash "
        "fix; a revert (tuning_regression) names the metric it undoes (e.g. 'ITL p99')"
    )
    gain: float | None = Field(
        description="Relative improvement (0.38: 38 % more tok/s or 38 % less latency); "
        "None: no prediction (see basis)"
    )
    low: float | None = Field(None, description="Low end of the predicted gain")
    high: float | None = Field(None, description="High end of the predicted gain")
    basis: str = Field("", description="Why: what binds, what was fitted, or why none")
    text: str = Field("", description="e.g. '+38 % tok/s (+25 to +50 %): the KV pool binds ...'")

    @classmethod
    def from_prediction(cls, p: Prediction | None) -> "PredictionOut | None":
        """The API view of a `Prediction` (None stays None)."""
        if p is None:
            return None
        return cls(
            objective=p.objective, gain=p.gain, low=p.low, high=p.high, basis=p.basis,
            text=p.text(),
        )  # fmt: skip


class ActionOut(FromAttributes):
    """The change to make; `text` is ready to read, the other fields are for tools."""

    text: str = Field(description="e.g. '--schedule-conservativeness 1 -> 0.3'")
    flag: str | None = Field(None, description="The SGLang flag to change, if a flag change")
    current: str | None = Field(None, description="Its current value, from /server_info")
    suggested: str | None = Field(None, description="The value to set")
    note: str = Field("", description="Caveat, e.g. why the current value had to be assumed")
    expected: str = Field("", description="What the change should move, by how much, and why")
    companions: list["ActionOut"] = Field(
        default_factory=list, description="Flags changed in the same restart"
    )
    prediction: PredictionOut | None = Field(
        None, description="The server model's predicted effect of this change on this server"
    )

    @field_validator("prediction", mode="before")
    @classmethod
    def _prediction(cls, value: object) -> object:
        return PredictionOut.from_prediction(value) if isinstance(value, Prediction) else value

    @model_serializer(mode="wrap")
    def _without_absent_prediction(self, handler: SerializerFunctionWrapHandler) -> Any:
        """`prediction` only where the rule made one (client-side advice has none)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("prediction") is None:
            data.pop("prediction", None)
        return data


class AdviceOut(BaseModel):
    """One pending or firing piece of tuning advice for one SGLang server."""

    target: str
    rule: str
    severity: Severity
    state: Literal["pending", "firing"]
    since: str = Field(description="When the condition started holding (RFC 3339, UTC)")
    since_ts: float = Field(description="The same instant in Unix seconds")
    summary: str
    evidence: str = Field(description="The window numbers that triggered the advice")
    action: ActionOut
    source: str = Field(description="Section of SGLang's hyperparameter tuning guide")
    confidence: Confidence
    condition_ratio: float | None = Field(None, description="Share of samples where it held")
    labels: dict[str, str] = Field(default_factory=dict)
    links: dict[str, str] = Field(description="Related API paths: advice, target, rule")

    @classmethod
    def from_advice(cls, a: Advice) -> "AdviceOut":
        """The API view of one `Advice`."""
        return cls(
            **{k: getattr(a, k) for k in ("target", "rule", "severity", "state", "summary")},
            since=rfc3339(a.since) or "",
            since_ts=a.since,
            evidence=a.evidence,
            action=ActionOut.model_validate(a.action),
            source=a.source,
            confidence=a.confidence,
            condition_ratio=a.condition_ratio,
            labels=dict(a.labels),
            links=_links(a.target, a.rule),
        )


def _links(target: str, rule: str) -> dict[str, str]:
    return {
        "advice": api_path("advice", target, rule),
        "target": api_path("targets", target),
        "rule": api_path("rules", rule),
    }


class NoDataOut(BaseModel):
    """A rule that could not judge a target yet, and when to ask again."""

    target: str
    rule: str | None = Field(description="None when the whole target could not be evaluated")
    reason: str
    retry_after_seconds: float

    @classmethod
    def from_result(cls, r: RuleResult) -> "NoDataOut | None":
        """The no-data answer carried by a result, or None when it has one of another kind."""
        if isinstance(r.outcome, NoData):
            nd = r.outcome
            return cls(
                target=r.target,
                rule=r.rule,
                reason=nd.reason,
                retry_after_seconds=nd.retry_after_seconds,
            )
        if r.health == Health.NO_DATA:
            return cls(target=r.target, rule=r.rule, reason="no data", retry_after_seconds=0.0)
        return None


class RuleErrorOut(BaseModel):
    """A rule whose evaluation failed (health `err`)."""

    target: str
    rule: str
    error: str


class StepOut(BaseModel):
    """One change of a plan."""

    rule: str
    severity: Severity
    summary: str
    action: ActionOut
    trade: str = Field(
        "", description="The broken service level it is for, and what it trades for it"
    )


class HeldOut(BaseModel):
    """A finding held back by the plan, and why."""

    rule: str
    severity: Severity
    action: ActionOut
    reason: str


class ServiceLevelOut(BaseModel):
    """One service level a plan held its changes to, and the window's value of it."""

    objective: str = Field(description="TTFT p99, ITL p50, ITL p99, or tok/s")
    level: str = Field(description="The level in words, e.g. 'ITL p50 ≤ 30 ms'")
    bound: float = Field(description="Seconds at most (a latency), or tokens/s at least")
    source: str = Field(
        description="set (in the settings), default (the profile's built-in level), or "
        "inferred (the profile's level, the profile inferred from the traffic)"
    )
    now: float | None = Field(None, description="The window's median (None: not measured)")
    met: bool | None = Field(None, description="Does the value now meet it (None: unknown)")

    @classmethod
    def from_level(cls, level: Level, now: float | None) -> "ServiceLevelOut":
        """The API view of one level, with its value now."""
        met = None if now is None else level.met_by(now)
        return cls(
            objective=level.objective, level=level.text(), bound=level.bound,
            source=level.source, now=now, met=met,
        )  # fmt: skip


class PlanOut(BaseModel):
    """One target's plan: change one thing at a time, the most urgent first."""

    target: str
    next: StepOut | None = Field(
        description="The change to make now (None: nothing to change, or only hints that hold "
        "on a guessed profile, listed in `after`)"
    )
    after: list[StepOut] = Field(description="Then look at these, in order")
    held: list[HeldOut] = Field(description="Not offered, each with the reason")
    service_levels: list[ServiceLevelOut] = Field(
        default_factory=list,
        description="The service levels its changes were held to (a zero floor, no floor, "
        "left out)",
    )

    @classmethod
    def from_plan(cls, plan: Plan) -> "PlanOut":
        """The API view of one `Plan`."""
        return cls(
            target=plan.target,
            next=_step(plan.next) if plan.next else None,
            after=[_step(s) for s in plan.after],
            service_levels=[
                ServiceLevelOut.from_level(level, plan.measured.get(level.objective))
                for level in plan.service_levels.levels
                if level.bound > 0
            ],
            held=[
                HeldOut(
                    rule=h.rule,
                    severity=h.severity,
                    action=ActionOut.model_validate(h.action),
                    reason=h.reason,
                )
                for h in plan.held
            ],
        )


def _step(step: Step) -> StepOut:
    return StepOut(
        rule=step.rule,
        severity=step.severity,
        summary=step.summary,
        action=ActionOut.model_validate(step.action),
        trade=step.trade,
    )


class AdviceList(BaseModel):
    """Advice, plus what could not be judged and why: never a silent empty list."""

    plans: list[PlanOut] = Field(
        default_factory=list, description="Per target with advice: the next change first"
    )
    last_change: dict[str, str] = Field(
        default_factory=dict, description="Per target: its latest recorded change and verdict"
    )
    inferred_profiles: dict[str, str] = Field(
        default_factory=dict,
        description="Per target with no configured profile: the one inferred, and why",
    )
    data: list[AdviceOut]
    count: int
    no_data: list[NoDataOut] = Field(
        default_factory=list,
        description="Why rules could not judge (for one target, or with ?no_data=full)",
    )
    no_data_counts: dict[str, int] = Field(
        default_factory=dict, description="Per target: how many rules could not judge it"
    )
    errors: list[RuleErrorOut] = Field(default_factory=list)
    evaluated_at: str | None = Field(None, description="RFC 3339; None before the first round")
    evaluated_at_ts: float | None = None


class RuleResultOut(BaseModel):
    """One tuning rule judged for one target: health, alert state, and the advice or reason."""

    target: str
    rule: str
    severity: Severity
    health: Health | None = Field(description="None when the rule was not evaluated")
    state: str = Field(description="inactive, pending or firing")
    summary: str
    source: str
    advice: AdviceOut | None = None
    no_data: NoDataOut | None = None
    error: str | None = None
    condition_ratio: float | None = None
    note: str = ""
    evaluated_at: str | None = None

    @classmethod
    def from_result(
        cls,
        target: str,
        rule: Rule,
        r: RuleResult | None,
        advice: Advice | None,
        evaluated_at: float | None,
    ) -> "RuleResultOut":
        """The rule, its latest result for `target` and its advice (either may be missing)."""
        return cls(
            target=target,
            rule=rule.id,
            severity=r.severity if r else rule.severity,
            health=r.health if r else None,
            state=advice.state if advice else (r.state if r else "inactive"),
            summary=rule.summary,
            source=rule.source,
            advice=AdviceOut.from_advice(advice) if advice else None,
            no_data=NoDataOut.from_result(r) if r else None,
            error=r.error if r else None,
            condition_ratio=r.condition_ratio if r else None,
            note="" if r else "not evaluated for this target (disabled, or not for its profile)",
            evaluated_at=rfc3339(evaluated_at),
        )


class StatusOut(BaseModel):
    """Liveness / readiness answer."""

    status: str
    detail: str | None = None  # why not ready, or why degraded
