"""Plan: one target's findings become one ordered plan — the next change, and why the rest wait.

The guide says to change one thing at a time. Findings are ranked by precedence: a crash or
out-of-memory first, then by severity, the guide's advice before ours, the larger gain the
server model predicts for this server, and the guide's order.
The first is the next change, unless it is a hint conditioned on a profile the traffic only
suggests ("if this is a batch job: ..."): the tool does not know that it applies, so it follows
the next change, and where only such hints stand there is none. A finding that would move a
flag the other way of a higher-ranked one, change a flag a higher-ranked one already changes,
set a value this server crashed with, or repeat a crash fix already in place while its crash
goes on, is held back with the reason; the others follow the next change, in order.

Every change is held to the target's service levels: one predicted to break a level that holds
today (the value now times one plus its predicted effect), to take a broken one further past
than its cost guard, or to cost more tokens/s than it gains, waits with that trade stated. A
change meant to meet a broken level the operator set may trade tokens/s down to its floor.
"""

from collections.abc import Mapping, Sequence

from sglang_tuner.changes.record import FLAGS, Change
from sglang_tuner.changes.verdict import HURT
from sglang_tuner.judge import Judgement, TargetJudgement
from sglang_tuner.model.advice import (
    COST_GUARDS,
    TOKENS,
    Action,
    Finding,
    Prediction,
    Severity,
    worse_by,
)
from sglang_tuner.model.flags import FLAG_FIELDS, FlagHistory
from sglang_tuner.model.next_change import Asked, Held, Plan, Step
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.service_levels import SET, AppliedLevels, Level
from sglang_tuner.predict import MIN_GAIN
from sglang_tuner.rule import Rule
from sglang_tuner.rules.sglang.defaults import is_default
from sglang_tuner.rules.sglang.flags import accepts_flag, accepts_value, flag_replacement, has_flag

# How much more often the condition must hold before advice that hurt is given again.
STRONGER_BY = 0.2

_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def asked_of(plan: Plan, judgement: TargetJudgement) -> Asked:
    """The flag values `plan` suggests, for attributing a later restart to its advice, and the
    costs each step stated (its verdict is then `traded`, not `hurt`, on them)."""
    flags = {f: (v, s.rule) for s in reversed(plan.steps) for f, v in s.action.flags().items()}
    ratios = {
        j.rule.id: j.finding.condition_ratio
        for j in judgement.judgements
        if j.finding is not None and j.finding.condition_ratio is not None
    }
    stated = {
        s.rule: tuple(s.action.prediction.costs())
        for s in plan.steps
        if s.action.prediction is not None and s.action.prediction.costs()
    }
    return Asked(flags, ratios, stated)


def precedence(j: Judgement, order: Mapping[str, int]) -> tuple[int, int, int, float, int]:
    """Crash and OOM first; then severity; the guide's advice before ours; the larger predicted
    gain on the profile's objective first (none predicted counts as none); the guide's order."""
    rule = j.rule
    return (
        0 if rule.stability else 1,
        _SEVERITY_RANK[j.severity],
        1 if rule.ours else 0,
        -predicted_gain(j),
        order.get(rule.id, len(order)),
    )


def predicted_gain(j: Judgement) -> float:
    """The server model's predicted gain of the judgement's change (0 when none)."""
    finding = j.finding
    prediction = finding.action.prediction if finding is not None else None
    return prediction.gain if prediction is not None and prediction.gain is not None else 0.0


def plan_target(
    target: str,
    judgement: TargetJudgement,
    history: FlagHistory,
    order: Mapping[str, int],
    changes: Sequence[Change] = (),
    config: ServerConfig | None = None,
) -> Plan:
    """The plan for one target from its latest judgement, its flags' history, its changes, and
    its config (a flag or value its SGLang version lacks, or already defaults to, waits)."""
    findings = [j for j in judgement.judgements if j.finding is not None]
    findings.sort(key=lambda j: precedence(j, order))
    binding = _pool_binds(findings)
    levels = _Objectives(judgement.service_levels, judgement.measured)
    kept: list[Step] = []
    held: list[Held] = []
    for j in findings:
        assert j.finding is not None
        action = j.finding.action
        reason = (
            _breaks_a_level(j, levels)
            or _costs_more_than_it_gains(action, levels)
            or _shrinks_a_binding_pool(j, action, binding)
            or _not_in_version(action, config)
            or _crashed_before(action, history)
            or _did_not_stop(j, changes, config)
            or _hurt_before(j.rule.id, j.finding, changes)
            or _undoes_latest(j.rule, action, changes)
            or _back_to_a_left_choice(j.rule.id, action, changes)
            or _conflict(action, kept)
        )
        if reason:
            held.append(Held(j.rule.id, j.severity, action, reason))
        else:
            kept.append(Step(j.rule.id, j.severity, action, j.rule.summary, levels.trade(action)))
    conditional = {j.rule.id for j in findings if j.conditional}
    first = next((s for s in kept if s.rule not in conditional), None)
    after = tuple(s for s in kept if s is not first)
    return Plan(target, first, after, tuple(held), levels.levels, levels.measured)


class _Objectives:
    """A target's service levels and each objective's value now: what a change's predicted
    effects are held to."""

    def __init__(self, levels: AppliedLevels, measured: Mapping[str, float]) -> None:
        self.levels, self.measured = levels, measured

    def level(self, objective: str) -> tuple[Level, float] | None:
        """The objective's level and its value now (None without either)."""
        level, now = self.levels.of(objective), self.measured.get(objective)
        return None if level is None or now is None else (level, now)

    def broken_goal(self, prediction: Prediction) -> tuple[Level, float] | None:
        """The broken level a change is meant to meet (None when its objective's level holds,
        or is unknown, or the change gains nothing on it)."""
        found = self.level(prediction.objective)
        if found is None or found[0].met_by(found[1]) or (prediction.gain or 0.0) <= 0:
            return None
        return found

    def trade(self, action: Action) -> str:
        """Which broken level the change is for and what it trades for it, said in advance
        ('' when it is for none, or gains under `MIN_GAIN` on it)."""
        prediction = action.prediction
        goal = None if prediction is None else self.broken_goal(prediction)
        if prediction is None or goal is None or (prediction.gain or 0.0) < MIN_GAIN:
            return ""
        level, now = goal
        then = now * (1 + predicted_changes(prediction)[prediction.objective][0])
        said = (
            f"for {level.text()} ({level.source}; {level.value_text(now)} now, predicted "
            f"{level.value_text(then)})"
        )
        costs = prediction.costs()
        if costs:
            said += "; trades " + ", ".join(self._trade(o, c) for o, c in costs.items())
        return said

    def _trade(self, objective: str, change: float) -> str:
        found = self.level(objective)
        if found is None:
            return f"{objective} {change:+.0%}"
        level, now = found
        moved = f"{objective} {level.value_text(now)} -> {level.value_text(now * (1 + change))}"
        return moved if level.bound <= 0 else f"{moved} (its level {level.text()})"


def predicted_changes(prediction: Prediction) -> dict[str, tuple[float, float, float]]:
    """Every objective the change moves, as the metric's relative change (change, low, high):
    its effects, and its own objective from its gain where the effects leave it out."""
    changes = dict(prediction.effects)
    gain = prediction.gain
    if gain is not None and prediction.objective not in changes:
        sign = 1.0 if prediction.objective == TOKENS else -1.0  # a latency's gain is a fall
        low, high = prediction.low, prediction.high
        bounds = sorted(sign * (gain if b is None else b) for b in (low, high))
        changes[prediction.objective] = (sign * gain, bounds[0], bounds[1])
    return changes


def _breaks_a_level(j: Judgement, objectives: _Objectives) -> str:
    """Why a change waits that is predicted to break a service level holding today, or to take
    one broken already further past than its cost guard allows ('' when it is not): shown with
    the trade, never the next change. Within its guard, a broken level does not hold a change
    (two broken levels would hold each other's fix). A crash fix is never held for a level: a
    server that does not stay up meets none."""
    finding = j.finding
    prediction = None if finding is None else finding.action.prediction
    if j.rule.stability or prediction is None or prediction.gain is None:
        return ""
    unbounded = _unbounded_past(prediction, objectives)
    if unbounded:
        return unbounded
    for objective, (change, low, high) in predicted_changes(prediction).items():
        found = objectives.level(objective)
        if found is None or objective == prediction.objective:
            continue
        level, now = found
        way = _way_past(level, now, change)
        if not way:
            continue
        then = now * (1 + change)
        lo, hi = sorted((now * (1 + low), now * (1 + high)))
        return (
            f"would {way}: {level.value_text(now)} now, "
            f"predicted {level.value_text(then)} ({level.value_text(lo)} to "
            f"{level.value_text(hi)}), for {prediction.objective} {_gain_text(prediction)}; "
            "apply it only where that trade is wanted"
        )
    return ""


def _unbounded_past(prediction: Prediction, objectives: _Objectives) -> str:
    """Why a change waits that leaves an objective with a level growing for as long as the
    load lasts ('' when none): no level holds against that."""
    for objective in prediction.unbounded:
        level = objectives.levels.of(objective)
        if level is not None and objective != prediction.objective:
            return (
                f"would take {objective} past {level.text()} ({level.source}): predicted to "
                f"grow for as long as the load lasts, for {prediction.objective} "
                f"{_gain_text(prediction)}; apply it only where that trade is wanted"
            )
    return ""


def _way_past(level: Level, now: float, change: float) -> str:
    """How a relative `change` of the objective's metric from `now` goes past `level` ('' when
    it does not): it breaks a level that holds, or takes a broken one further past than the
    objective's cost guard."""
    if level.met_by(now):
        return "" if level.met_by(now * (1 + change)) else f"break {level.text()} ({level.source})"
    guard = COST_GUARDS.get(level.objective, 1.0)
    if worse_by(level.objective, change) <= guard:
        return ""
    return (
        f"take {level.objective} further past its level ({level.bound_text()}, {level.source}) "
        f"by more than its {guard:.0%} guard"
    )


# Rules whose finding says the KV pool binds the server: requests retracted from a full pool.
POOL_BINDS = ("retractions_frequent", "kv_cache_pressure", "kv_pool_exhausted")


def _pool_binds(findings: Sequence[Judgement]) -> str:
    """The rule whose finding says the KV pool binds this server ('' when none does)."""
    return next((j.rule.id for j in findings if j.rule.id in POOL_BINDS), "")


def _shrinks_a_binding_pool(j: Judgement, action: Action, binding: str) -> str:
    """Why a change that lowers --mem-fraction-static (itself, or a companion paying for
    something else) waits while the pool binds the server ('' when it need not): a smaller pool
    retracts more. A crash fix is never held for it: a server that does not start has no pool."""
    if not binding or j.rule.stability or j.rule.id == binding:
        return ""
    for move in _moves(action):
        if _field(move.flag) == "mem_fraction_static" and direction(move) < 0:
            return (
                f"it lowers {move.flag} ({move.current} -> {move.suggested}) while the KV pool "
                f"binds this server ({binding}): a smaller pool retracts more"
            )
    return ""


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


def _did_not_stop(j: Judgement, changes: Sequence[Change], config: ServerConfig | None) -> str:
    """Why a crash fix waits that is in place already while its rule still fires ('' when it
    is not): every value it sets runs today, or (config unknown, as in a crash loop) was the
    flag's latest recorded change; applying it again would not stop the crash either."""
    finding = j.finding
    if not j.rule.stability or finding is None:
        return ""
    moves = [m for m in _moves(finding.action) if m.suggested is not None]
    places = [_in_place(m, changes, config) for m in moves]
    if not places or not all(places):
        return ""
    return (
        f"{'; '.join(places)}, and {j.rule.id} still fires ({finding.evidence}): that fix did "
        "not stop the crash"
    )


def _in_place(move: Action, changes: Sequence[Change], config: ServerConfig | None) -> str:
    """How the move's value is in place already ('' when it is not)."""
    flag, value = move.flag or "", move.suggested or ""
    if config is not None:
        running = getattr(config, _field(flag), None)
        same = running is not None and _same_value(_text(running), value)
        return f"{flag} is already {value}" if same else ""
    latest = next((c for c in reversed(changes) if flag in c.after), None)
    if latest is None or not _same_value(latest.after[flag], value):
        return ""
    return f"{flag} {latest.before[flag]} -> {latest.after[flag]} was applied"


def _same_value(a: str, b: str) -> bool:
    x, y = _number(a), _number(b)
    return a == b if x is None or y is None else x == y


def _costs_more_than_it_gains(action: Action, objectives: _Objectives) -> str:
    """Why a change predicted to cost more tokens/s than it gains on its own objective waits
    ('' when it does not): shown with its trade, never the next change. Its other costs (a
    latency traded for another, or for tokens/s) are stated in its `expected` and judged as a
    trade; tokens/s lost past the guard for less gained is the harm that stops it. A change
    meeting a broken level the operator set may trade tokens/s down to the floor
    (`min_tokens_per_s`, held by `_breaks_a_level`): the level says latency is worth it."""
    prediction = action.prediction
    if prediction is None or prediction.gain is None or prediction.objective == TOKENS:
        return ""
    goal = objectives.broken_goal(prediction)
    if goal is not None and goal[0].source == SET:
        return ""
    costs = prediction.costs()
    lost = worse_by(TOKENS, costs.get(TOKENS, 0.0))
    if lost <= max(prediction.gain, 0.0):
        return ""
    said = ", ".join(f"{o} {c:+.0%}" for o, c in costs.items())
    if prediction.gain <= 0:  # its own objective moves the wrong way too: a cost, not a gain
        return (
            f"predicted to cost {said} and {prediction.objective} {_gain_text(prediction)}: "
            f"it gains on no objective predicted; apply it only where what its evidence names "
            f"is worth that cost"
        )
    return (
        f"predicted to cost {said} for {prediction.objective} {_gain_text(prediction)}: more "
        f"than it gains; apply it only where that trade is wanted"
    )


def _gain_text(prediction: Prediction) -> str:
    gain = prediction.gain or 0.0
    return f"{gain:+.0%}" if prediction.objective == TOKENS else f"{-gain:+.0%}"


def _not_in_version(action: Action, config: ServerConfig | None) -> str:
    """Why this SGLang version cannot take the change ('' when it can, or when unknown)."""
    version = config.version if config else None
    if config is None or version is None:
        return ""
    for move in _moves(action):
        flag, value = move.flag or "", move.suggested or ""
        if accepts_flag(flag, version) is None:
            continue  # not a flag the version table knows: nothing to say
        if not has_flag(flag, version):
            instead = flag_replacement(flag, version)
            return f"SGLang {version} has no {flag}" + (f" ({instead})" if instead else "")
        if accepts_value(flag, value, version) is False:
            return f"SGLang {version}'s {flag} does not take {value}"
        if move.current is None and is_default(flag, _typed(value), config, None):
            return f"{flag} {value} is already SGLang {version}'s default"
    return ""


def _typed(text: str) -> float | str:
    number = _number(text)
    return text if number is None else (int(number) if number == int(number) else number)


def _hurt_before(rule: str, finding: Finding, changes: Sequence[Change]) -> str:
    """Why advice that asked for a change which hurt waits ('' when it need not): it moves the
    same flag the same way again, and its condition does not hold clearly more often than then."""
    for change in reversed(changes):
        if change.rule != rule or change.verdict is None or change.verdict.verdict != HURT:
            continue
        for move in _moves(finding.action):
            flag = move.flag or ""
            if flag not in change.after or _way(change, flag) * direction(move) <= 0:
                continue
            then, now = change.asked_ratio or 1.0, finding.condition_ratio or 0.0
            if now < min(1.0, then + STRONGER_BY) or now <= then:
                return (
                    f"it asked for {flag} {change.before[flag]} -> {change.after[flag]}, which "
                    f"hurt ({change.verdict.reason}); held until its evidence is clearly "
                    f"stronger (condition held in {now:.0%} of samples, {then:.0%} then)"
                )
    return ""


def _undoes_latest(rule: Rule, action: Action, changes: Sequence[Change]) -> str:
    """Why advice that would set a flag back to its value before the latest change, or move a
    number back the way that change came, waits ('' when it need not): the change has not been
    judged to hurt (then `tuning_regression` undoes it), and flipping back and forth costs a
    restart each time (an emptied prefix cache with it). A cap set to stop retractions and a
    raise that fills the pool again alternate for ever otherwise: each is right on the window
    the other left. A crash's fix is never held by it."""
    latest = next((c for c in reversed(changes) if c.kind == FLAGS), None)
    if latest is None or rule.id == "tuning_regression" or rule.stability:
        return ""
    if latest.verdict is not None and latest.verdict.verdict == HURT:
        return ""
    for move in _moves(action):
        flag = move.flag or ""
        if flag not in latest.before:
            continue
        back = move.suggested == latest.before[flag] or direction(move) * _way(latest, flag) < 0
        if back:
            asked = f", asked by {latest.rule}" if latest.rule else ""
            judged = latest.verdict.verdict if latest.verdict is not None else "not judged yet"
            what = "undo" if move.suggested == latest.before[flag] else "move back the way of"
            return (
                f"it would {what} the latest change, {flag} {latest.before[flag]} -> "
                f"{latest.after[flag]}{asked} ({judged}); held until a verdict says that "
                "change hurt"
            )
    return ""


def _back_to_a_left_choice(rule: str, action: Action, changes: Sequence[Change]) -> str:
    """Why advice that would set a choice flag (a policy, a backend: not a number) back to a
    value an earlier change left, judged and not hurt, waits ('' when it need not): whatever
    came after, the history already tried the other way (lpm -> fcfs -> lpm ... one restart and
    an emptied prefix cache each time)."""
    if rule == "tuning_regression":
        return ""
    for move in _moves(action):
        flag, value = move.flag or "", move.suggested
        if value is None or _number(value) is not None:
            continue
        for change in reversed(changes):
            verdict = change.verdict.verdict if change.verdict is not None else None
            if change.kind != FLAGS or change.before.get(flag) != value or verdict in (None, HURT):
                continue
            return (
                f"the history already left {flag} {value} for {change.after.get(flag)} "
                f"({verdict}); not sent back"
            )
    return ""


def _way(change: Change, flag: str) -> int:
    """+1 when the change raised the flag, -1 when it lowered it, 0 otherwise."""
    return direction(Action("", flag, change.before.get(flag), change.after.get(flag)))


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
