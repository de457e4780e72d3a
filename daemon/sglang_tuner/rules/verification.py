"""Change verification: a change of tuning flags that made the server worse is undone first."""

from dataclasses import replace
from datetime import datetime, timezone

from sglang_tuner.changes.record import FLAGS, UNSET, Change, flag_values
from sglang_tuner.changes.verdict import HURT, MetricVerdict, metrics_for, primary_for
from sglang_tuner.model import signals as s
from sglang_tuner.model.advice import (
    ITL_P99,
    Action,
    Confidence,
    Finding,
    Outcome,
    Pass,
    Prediction,
    Severity,
)
from sglang_tuner.predict.server_model import (
    CRASHES,
    FLOOR,
    ITL,
    SPREAD,
    THROUGHPUT,
    TTFT,
    no_prediction,
    objective,
)
from sglang_tuner.rule import Rule, RuleInput, predicted

SOURCE = (
    "ours: sglang-tuner checks every applied change (the guide: 'test performance after each "
    "configuration change')"
)


def _latest_judged(changes: tuple[Change, ...]) -> Change | None:
    judged = [c for c in changes if c.kind == FLAGS and c.verdict is not None]
    return judged[-1] if judged else None


def _still_running(change: Change, inp: RuleInput) -> bool:
    """The server still runs the values the change set (nobody reverted it since). Changes
    stored by earlier builds hold `--max-running-requests` per DP rank: under DP attention
    they read as undone, so no revert is ever built from per-rank values."""
    current = flag_values(inp.config) if inp.config else {}
    return all(current.get(flag) == value for flag, value in change.after.items())


def _effect(m: MetricVerdict) -> str:
    if m.effect_ratio is None or m.low is None or m.high is None:
        return f"{m.metric} {m.verdict}"
    pct = (m.effect_ratio - 1) * 100
    return f"{m.metric} {pct:+.0f}% [{(m.low - 1) * 100:+.0f}%, {(m.high - 1) * 100:+.0f}%]"


def _moved(change: Change) -> str:
    return ", ".join(f"{f} {change.before[f]} -> {v}" for f, v in change.after.items())


def revert_action(change: Change) -> Action:
    """Back to the values before the change (every flag it moved, in one restart; the record
    keeps them in the flags' own units), predicted to undo the regression it measured."""
    moves = [_back(flag, change.after[flag], value) for flag, value in change.revert.items()]
    head, rest = moves[0], tuple(moves[1:])
    text = "revert: " + ", ".join(m.text for m in moves)
    expected = "The metrics back where they were before the change."
    action = Action(text, head.flag, head.current, head.suggested, "", expected, rest)
    return predicted(action, predict_revert(change))


def _back(flag: str, now: str, before: str) -> Action:
    """One flag back to its value before the change; a flag that was not set then is removed
    from the launch command (no machine value: "unset" is nothing SGLang's argparse takes)."""
    if before == UNSET:
        return Action(f"{flag} {now} -> unset (remove {flag}: SGLang's own default)", flag, now)
    return Action(f"{flag} {now} -> {before}", flag, now, before)


# A verdict's metric as a prediction's objective; token usage is left out (higher is better,
# and a prediction on anything but tok/s reads as a fall).
OBJECTIVES = {
    s.GEN_THROUGHPUT: THROUGHPUT, s.TTFT_P99_SECONDS: TTFT, s.ITL_P50_SECONDS: ITL,
    s.TTFT_P50_SECONDS: "TTFT p50", s.ITL_P99_SECONDS: "ITL p99",
    s.RETRACTIONS_PER_MINUTE: "retractions/min", s.RESTARTS: CRASHES,
}  # fmt: skip


def predict_revert(change: Change) -> Prediction:
    """The regression the verdict measured, undone: on the worst of the metrics that decided
    it (the profile's objective first), the gain back from after to before, its range from the
    verdict's interval (else +-30 %, at least 2 points). Its effects: every objective the
    verdict measured, back from after to before (tokens/s, TTFT p99, ITL p50 and p99), the
    others than its own said in the basis in their units."""
    verdict = change.verdict
    if verdict is None:
        return no_prediction(change.profile, "the change has no verdict")
    judged_on = verdict.judged_on or primary_for(change.profile)
    hurt = [m for m in verdict.metrics if m.verdict == HURT]
    found = [(m, p) for m in hurt if (p := _undone(m, change.profile)) is not None]
    decided = [(m, p) for m, p in found if m.metric in judged_on] or found
    if not decided:
        return no_prediction(change.profile, f"no measured regression to undo ({verdict.reason})")
    first = objective(change.profile)
    _, best = min(decided, key=lambda mp: (mp[1].objective != first, -(mp[1].gain or 0.0)))
    basis = f"{best.basis} of {_moved(change)} (verdict {verdict.reason})"
    back = [m for m in verdict.metrics if m.metric in GIVEN_BACK and _measured(m)]
    others = [_back_text(m) for m in back if GIVEN_BACK[m.metric] != best.objective]
    if others:
        basis += "; back with it: " + ", ".join(others)
    effects = {GIVEN_BACK[m.metric]: _given_back(m) for m in back}
    return replace(best, basis=basis, effects=effects)


# The objectives a revert states it gives back, from every metric its verdict measured.
GIVEN_BACK = {
    s.GEN_THROUGHPUT: THROUGHPUT, s.TTFT_P99_SECONDS: TTFT, s.ITL_P50_SECONDS: ITL,
    s.ITL_P99_SECONDS: ITL_P99,
}  # fmt: skip


def _measured(m: MetricVerdict) -> bool:
    return m.before is not None and m.after is not None and min(m.before, m.after) > 0


def _given_back(m: MetricVerdict) -> tuple[float, float, float]:
    """The metric's own change going back from after to before (ITL p50 60 -> 40 ms is -33 %),
    its range from the verdict's interval of after / before, else +-30 % (at least 2 points)."""
    assert m.before is not None and m.after is not None
    change = m.before / m.after - 1
    if m.low is not None and m.high is not None and min(m.low, m.high) > 0:
        low, high = sorted((1 / m.high - 1, 1 / m.low - 1))
        return change, min(low, change), max(high, change)
    spread = max(FLOOR, SPREAD * abs(change))
    return change, change - spread, change + spread


def _back_text(m: MetricVerdict) -> str:
    """'ITL p99 120 -> 80 ms': the metric from after back to before, in its unit."""
    assert m.before is not None and m.after is not None
    name = GIVEN_BACK[m.metric]
    if m.metric == s.GEN_THROUGHPUT:
        return f"{name} {m.after:,.0f} -> {m.before:,.0f}"
    if m.metric == s.TTFT_P99_SECONDS:
        return f"{name} {m.after:.2f} -> {m.before:.2f} s"
    return f"{name} {m.after * 1e3:.0f} -> {m.before * 1e3:.0f} ms"


def _undone(m: MetricVerdict, profile: str) -> Prediction | None:
    """Going back from `after` to `before` on one metric: tok/s 100 -> 80 undone is +25 %;
    TTFT p99 1 s -> 1.5 s undone is a 33 % fall, gain +0.33. None without an objective for the
    metric or without both means."""
    name = OBJECTIVES.get(m.metric)
    if name is None or m.before is None or m.after is None or min(m.before, m.after) <= 0:
        return None
    better = metrics_for(profile).get(m.metric, -1)

    def gain(ratio: float) -> float:
        return better * (1 / ratio - 1)

    ratio = m.after / m.before
    if m.low is not None and m.high is not None and min(m.low, m.high) > 0:
        low, high = sorted((gain(m.low), gain(m.high)))
    else:
        spread = max(FLOOR, SPREAD * abs(gain(ratio)))
        low, high = gain(ratio) - spread, gain(ratio) + spread
    return Prediction(
        name, gain(ratio), low, high, f"undoes the measured {(ratio - 1) * 100:+.0f} % {name}"
    )


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
    moved = _moved(change)
    asked = f", asked by {change.rule}" if change.rule else ", not asked by any advice"
    worse = "; ".join(_effect(m) for m in change.verdict.metrics if m.verdict == HURT)
    evidence = f"after {moved} ({when}{asked}): {worse}"
    return Finding(evidence, revert_action(change), Confidence.HIGH)


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
