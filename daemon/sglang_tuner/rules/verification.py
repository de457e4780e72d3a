"""Change verification: a change of tuning flags that made the server worse is undone first."""

from datetime import datetime, timezone

from sglang_tuner.changes.record import FLAGS, Change, flag_values
from sglang_tuner.changes.verdict import HURT, MetricVerdict
from sglang_tuner.model.advice import Action, Confidence, Finding, Outcome, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.base import Rule, RuleInput
from sglang_tuner.rules.units import ranks_per_flag

SOURCE = (
    "ours: sglang-tuner checks every applied change (the guide: 'test performance after each "
    "configuration change')"
)


def _latest_judged(changes: tuple[Change, ...]) -> Change | None:
    judged = [c for c in changes if c.kind == FLAGS and c.verdict is not None]
    return judged[-1] if judged else None


def _still_running(change: Change, inp: RuleInput) -> bool:
    """The server still runs the values the change set (nobody reverted it since)."""
    current = flag_values(inp.config) if inp.config else {}
    return all(current.get(flag) == value for flag, value in change.after.items())


def _effect(m: MetricVerdict) -> str:
    if m.effect_ratio is None or m.low is None or m.high is None:
        return f"{m.metric} {m.verdict}"
    pct = (m.effect_ratio - 1) * 100
    return f"{m.metric} {pct:+.0f}% [{(m.low - 1) * 100:+.0f}%, {(m.high - 1) * 100:+.0f}%]"


def revert_action(change: Change, config: ServerConfig | None = None) -> Action:
    """Back to the values before the change (every flag it moved, in one restart), in the
    flags' own units: the change record keeps --max-running-requests per DP rank."""
    moves = []
    for flag, value in change.revert.items():
        after = _flag_unit(flag, change.after[flag], config)
        before = _flag_unit(flag, value, config)
        moves.append(Action(f"{flag} {after} -> {before}", flag, after, before))
    head, rest = moves[0], tuple(moves[1:])
    text = "revert: " + ", ".join(m.text for m in moves)
    expected = "the metrics back where they were before the change"
    return Action(text, head.flag, head.current, head.suggested, "", expected, rest)


def _check_regression(inp: RuleInput) -> Outcome:
    """The latest change of tuning flags was judged `hurt` (the same metrics before and after,
    warm) and the server still runs its values."""
    change = _latest_judged(inp.changes)
    if change is None or change.verdict is None:
        return Pass(detail="no judged change of tuning flags")
    if change.verdict.verdict != HURT or not change.revert:
        return Pass(detail=f"the latest change: {change.verdict.verdict}")
    if not _still_running(change, inp):
        return Pass(detail="the change has been undone since")
    # both settings hurt something: no ping-pong (a revert is known by its rule, or by setting
    # back what the change before it moved, when no advice was matched to it)
    if change.rule == "tuning_regression" or _undid_previous(change, inp.changes):
        return Pass(detail=(
            f"the latest change was itself a revert and hurt too ({change.verdict.reason}): "
            "each setting costs something; choose by what matters most"
        ))  # fmt: skip
    when = datetime.fromtimestamp(change.at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    moved = ", ".join(f"{f} {change.before[f]} -> {v}" for f, v in change.after.items())
    asked = f", asked by {change.rule}" if change.rule else ", not asked by any advice"
    worse = "; ".join(_effect(m) for m in change.verdict.metrics if m.verdict == HURT)
    evidence = f"after {moved} ({when}{asked}): {worse}"
    return Finding(evidence, revert_action(change, inp.config), Confidence.HIGH)


def _undid_previous(change: Change, changes: tuple[Change, ...]) -> bool:
    """The change set back exactly the flags the change of flags before it had moved."""
    flagged = [c for c in changes if c.kind == FLAGS]
    index = next((i for i, c in enumerate(flagged) if c is change), 0)
    if index == 0:
        return False
    previous = flagged[index - 1]
    return dict(previous.before) == dict(change.after) and dict(previous.after) == dict(
        change.before
    )


def _flag_unit(flag: str, value: str, config: ServerConfig | None) -> str:
    """A recorded value as the flag takes it (per-rank request limits times the DP ranks)."""
    ranks = ranks_per_flag(config)
    if flag != "--max-running-requests" or ranks == 1 or not value.isdigit():
        return value
    return str(int(value) * ranks)


TUNING_REGRESSION = Rule(
    id="tuning_regression",
    severity=Severity.WARNING,
    summary="The latest change of tuning flags made this server worse.",
    action="Revert the change to the flag values it replaced.",
    source=SOURCE,
    check=_check_regression,
    needs_up=False,
    needs_window=False,
    stability=True,  # undo harm before anything else
    ours=True,
)
