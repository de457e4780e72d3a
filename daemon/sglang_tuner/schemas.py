"""API response models: what /advice, /targets and /rules return (pydantic only at this edge)."""

from datetime import UTC, datetime
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from .evaluation import RuleResult
from .rules.base import Rule
from .values import Advice, Confidence, Health, NoData, Severity


def rfc3339(ts: float | None) -> str | None:
    """Unix seconds as an RFC 3339 UTC timestamp, e.g. '2026-11-22T09:00:00Z'."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def api_path(*parts: str) -> str:
    """An API path from raw segments, each URL-quoted ('/advice/gpu-a/queue_empty')."""
    return "/" + "/".join(quote(p, safe=":") for p in parts)


class FromAttributes(BaseModel):
    """Base for models read straight off a dataclass of the same field names."""

    model_config = ConfigDict(from_attributes=True)


class ActionOut(FromAttributes):
    """The change to make; `text` is ready to read, the other fields are for tools."""

    text: str = Field(description="e.g. '--schedule-conservativeness 1 -> 0.3'")
    flag: str | None = Field(None, description="The SGLang flag to change, if a flag change")
    current: str | None = Field(None, description="Its current value, from /server_info")
    suggested: str | None = Field(None, description="The value to set")
    note: str = Field("", description="Caveat, e.g. why the current value had to be assumed")


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


class AdviceList(BaseModel):
    """Advice, plus what could not be judged and why: never a silent empty list."""

    data: list[AdviceOut]
    count: int
    no_data: list[NoDataOut] = Field(default_factory=list)
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
    detail: str | None = None  # why not ready


def advice_text(out: AdviceList) -> str:
    """`/advice` as a fixed-width text report: one block per advice, then what has no data."""
    when = out.evaluated_at or "never (no evaluation has finished yet)"
    head = f"{out.count} advice, {len(out.no_data)} no data, {len(out.errors)} error(s)"
    lines = [f"sglang-tuner advice, evaluated {when}: {head}", ""]
    for a in out.data:
        lines += [
            f"{a.target}  {a.rule}",
            f"  {a.severity.upper()} {a.state} since {a.since}, {a.confidence} confidence",
            f"  summary:  {a.summary}",
            f"  evidence: {a.evidence}",
            f"  action:   {a.action.text}",
            *([f"  note:     {a.action.note}"] if a.action.note else []),
            f"  source:   {a.source}",
            "",
        ]
    if not out.data:
        lines += ["No advice is pending or firing.", ""]
    rows = [(n.target, n.rule or "(target)", _retry(n)) for n in out.no_data]
    lines += _table("no data (why nothing could be judged yet):", rows)
    lines += _table("errors:", [(e.target, e.rule, e.error) for e in out.errors])
    return "\n".join(lines).rstrip() + "\n"


def _retry(n: NoDataOut) -> str:
    return f"{n.reason} (retry in {n.retry_after_seconds:g}s)"


def _table(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    """A titled three-column block whose first two columns are padded to a common width."""
    if not rows:
        return []
    w1, w2 = (max(len(r[i]) for r in rows) for i in (0, 1))
    return [title, *(f"  {a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows), ""]
