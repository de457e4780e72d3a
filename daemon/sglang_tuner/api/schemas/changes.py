"""API response models for /changes: every restart seen, and whether its new flags helped."""

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

from sglang_tuner.api.schemas.advice_response import rfc3339
from sglang_tuner.changes.bootstrap import METHOD
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import MetricVerdict


class MetricOut(BaseModel):
    """One metric before and after the change."""

    metric: str
    verdict: str = Field(description="helped, traded, no_change, hurt or inconclusive")
    effect_ratio: float | None = Field(description="after / before, means")
    interval: list[float] | None = Field(description="90 % interval of the ratio")
    before: float | None
    after: float | None

    @classmethod
    def from_metric(cls, m: MetricVerdict) -> "MetricOut":
        """The API view of one metric's verdict."""
        interval = [m.low, m.high] if m.low is not None and m.high is not None else None
        return cls(
            metric=m.metric, verdict=m.verdict, effect_ratio=m.effect_ratio, interval=interval,
            before=m.before, after=m.after,
        )  # fmt: skip


class ChangeOut(BaseModel):
    """One restart of one server: flags before -> after, and the verdict once it is in."""

    target: str
    at: str = Field(description="When the server came back (RFC 3339)")
    at_ts: float
    kind: str = Field(description="flags (judged) or restart (same flags: recorded only)")
    before: dict[str, str]
    after: dict[str, str]
    asked_by: str | None = Field(description="The advice (rule id) that asked for these values")
    verdict: str = Field(description="helped, traded, no_change, hurt, inconclusive, or pending")
    reason: str
    metrics: list[MetricOut]
    method: str
    revert: dict[str, str] = Field(description="The values to go back to if it hurt")
    judged_at: str | None = Field(description="When the after-window was complete")

    @classmethod
    def from_change(cls, c: Change) -> "ChangeOut":
        """The API view of one change."""
        v = c.verdict
        pending = "pending" if c.kind == "flags" else "not judged (same flags)"
        return cls(
            target=c.target, at=rfc3339(c.at) or "", at_ts=c.at, kind=c.kind,
            before=dict(c.before), after=dict(c.after), asked_by=c.rule,
            verdict=v.verdict if v else ("pending" if c.kind == "flags" else "restart"),
            reason=v.reason if v else pending,
            metrics=[MetricOut.from_metric(m) for m in v.metrics] if v else [],
            method=v.method if v else METHOD, revert=c.revert,
            judged_at=rfc3339(c.due) if v else None,
        )  # fmt: skip


class ChangeList(BaseModel):
    """Changes, newest first."""

    data: list[ChangeOut]
    count: int


def change_list(changes: Mapping[str, Iterable[Change]], target: str | None) -> ChangeList:
    """Every recorded change (of one target if given), newest first."""
    picked = [c for name, cs in changes.items() if target in (None, name) for c in cs]
    data = [ChangeOut.from_change(c) for c in sorted(picked, key=lambda c: -c.at)]
    return ChangeList(data=data, count=len(data))


def change_line(c: ChangeOut) -> str:
    """One change on one line: what moved, who asked, and the verdict."""
    moved = ", ".join(f"{f} {c.before[f]} -> {v}" for f, v in c.after.items()) or "same flags"
    asked = f", asked by {c.asked_by}" if c.asked_by else ""
    effects = [
        f"{m.metric} {(m.effect_ratio - 1) * 100:+.0f}%"
        for m in c.metrics
        if m.effect_ratio is not None and m.verdict in ("helped", "hurt")
    ]
    detail = f" ({'; '.join(effects)})" if effects else f" ({c.reason})"
    return f"{c.at}  {moved}{asked}: {c.verdict}{detail}"


def changes_text(out: ChangeList) -> str:
    """/changes as text: one line per change, grouped by target."""
    if not out.data:
        return "No restart has been seen yet.\n"
    lines: list[str] = []
    for target in sorted({c.target for c in out.data}):
        lines += [f"== {target}", *(change_line(c) for c in out.data if c.target == target), ""]
    return "\n".join(lines)
