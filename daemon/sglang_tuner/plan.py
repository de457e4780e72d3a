"""Plan: one target's findings become one ordered plan — the next change, and why the rest wait.

The guide says to change one thing at a time. Findings are ranked by precedence: a crash or
out-of-memory first, then by severity, the guide's advice before ours, and the guide's order.
The first is the next change. A finding that would move a flag the other way of a higher-ranked
one, change a flag a higher-ranked one already changes, or set a value this server crashed with,
is held back with the reason; the others follow the next change, in order.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .judge import Judgement, TargetJudgement
from .values import FLAG_FIELDS, Action, FlagHistory, Severity

_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True, slots=True)
class Step:
    """One finding's change, as the plan orders it."""

    rule: str
    severity: Severity
    action: Action
    summary: str


@dataclass(frozen=True, slots=True)
class Held:
    """A finding held back: its change is not offered, and `reason` says why."""

    rule: str
    severity: Severity
    action: Action
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    """The next change for one target, what to look at after it, and what is held back."""

    target: str
    next: Step | None = None
    after: tuple[Step, ...] = ()
    held: tuple[Held, ...] = ()

    @property
    def advised(self) -> frozenset[str]:
        """Rules whose advice stands (the next change and those after it)."""
        steps = (self.next, *self.after) if self.next else self.after
        return frozenset(s.rule for s in steps)


def precedence(j: Judgement, order: Mapping[str, int]) -> tuple[int, int, int, int]:
    """Crash and OOM first; then severity; the guide's advice before ours; the guide's order."""
    rule = j.rule
    return (
        0 if rule.stability else 1,
        _SEVERITY_RANK[j.severity],
        1 if rule.ours else 0,
        order.get(rule.id, len(order)),
    )


def plan_target(
    target: str, judgement: TargetJudgement, history: FlagHistory, order: Mapping[str, int]
) -> Plan:
    """The plan for one target from its latest judgement and its flags' history."""
    findings = [j for j in judgement.judgements if j.finding is not None]
    findings.sort(key=lambda j: precedence(j, order))
    kept: list[Step] = []
    held: list[Held] = []
    for j in findings:
        assert j.finding is not None
        action = j.finding.action
        reason = _crashed_before(action, history) or _conflict(action, kept)
        if reason:
            held.append(Held(j.rule.id, j.severity, action, reason))
        else:
            kept.append(Step(j.rule.id, j.severity, action, j.rule.summary))
    return Plan(target, kept[0] if kept else None, tuple(kept[1:]), tuple(held))


def direction(action: Action) -> int:
    """+1 raises the flag, -1 lowers it, 0 sets a value (or the direction is unknown)."""
    suggested, current = action.suggested or "", action.current
    if suggested[:1] in "+-" and suggested[1:2].isdigit():
        return 1 if suggested[0] == "+" else -1
    try:
        new, old = float(suggested), float(current or "")
    except ValueError:
        return 0
    return (new > old) - (new < old)


def _moves(action: Action) -> Sequence[Action]:
    return [a for a in (action, *action.companions) if a.flag]


def _field(flag: str | None) -> str:
    return FLAG_FIELDS.get(flag or "", flag or "")


def _crashed_before(action: Action, history: FlagHistory) -> str:
    """Why the change would repeat a crash of this server ('' when it would not)."""
    for move in _moves(action):
        value = _number(move.suggested)
        if move.flag is None or value is None:
            continue
        failed = history.crashes_with(move.flag, value)
        if failed is not None:
            what = failed.crash or "a crash"
            return f"{move.flag} {_text(failed.value)} crashed this server before ({what})"
    return ""


def _conflict(action: Action, kept: Sequence[Step]) -> str:
    """Why the change waits for one ranked above it on the same flag ('' when it does not)."""
    for move in _moves(action):
        for step in kept:
            for other in _moves(step.action):
                if _field(other.flag) != _field(move.flag):
                    continue
                way = direction(move) * direction(other)
                if way < 0:
                    return f"{step.rule} moves {other.flag} the other way first ({other.text})"
                return f"{step.rule} already changes {other.flag} ({other.text})"
    return ""


def _text(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def _number(text: str | None) -> float | None:
    try:
        return float(text or "")
    except ValueError:
        return None
