"""The /advice report: advice, no-data reasons and errors picked from an evaluation.

Shared by the API and the CLI (`check`, `demo`), so a terminal and `curl` show the same answer.
"""

from dataclasses import dataclass

from sglang_tuner.api.schemas.advice_response import (
    AdviceList,
    AdviceOut,
    NoDataOut,
    PlanOut,
    RuleErrorOut,
    rfc3339,
)
from sglang_tuner.api.schemas.changes import ChangeOut, change_line
from sglang_tuner.evaluation import Evaluation, TargetStatus
from sglang_tuner.model.advice import Advice, Health, NoData, Severity
from sglang_tuner.rules import ALL_RULES

_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class AdviceFilter:
    """Which advice to show (None: all), and whether to list every no-data reason."""

    severity: Severity | None = None
    state: str | None = None
    rule: str | None = None
    full_no_data: bool = False  # False: a count per target (the reasons are at /advice/{target})


# Within a severity, the guide's own order (the catalogue's): the first check an expert makes.
_RULE_ORDER = {rule.id: i for i, rule in enumerate(ALL_RULES)}


def advice_rank(a: Advice) -> tuple[int, bool, str, int, str]:
    """Most severe first, firing before pending, then per target in the guide's order."""
    order = _RULE_ORDER.get(a.rule, len(_RULE_ORDER))
    return (_SEVERITY_ORDER[a.severity], a.state != "firing", a.target, order, a.rule)


def select_advice(
    ev: Evaluation, f: AdviceFilter, target: str | None, retry_seconds: float
) -> AdviceList:
    """The /advice answer: filtered advice (most severe first), no-data reasons and errors.

    `target` None means every target; `retry_seconds` is the retry hint for a target that
    could not be evaluated at all (down, or not scraped yet).
    """
    severity, state, rule = f.severity, f.state, f.rule
    advice = [
        a
        for a in ev.advice
        if target in (None, a.target)
        and severity in (None, a.severity)
        and state in (None, a.state)
        and rule in (None, a.rule)
    ]
    advice.sort(key=advice_rank)
    no_data: list[NoDataOut] = []
    errors: list[RuleErrorOut] = []
    counts: dict[str, int] = {}
    reasons = f.full_no_data or target is not None  # else only counted (10,000 targets' worth)
    for name in sorted(ev.targets.keys() | ev.results.keys()):
        if target in (None, name):
            found = _explain(
                ev, name, severity, retry_seconds, no_data if reasons else None, errors
            )
            if found:
                counts[name] = found
    data = [AdviceOut.from_advice(a) for a in advice]
    plans = [
        PlanOut.from_plan(p)
        for name, p in sorted(ev.plans.items())
        if target in (None, name) and (p.next is not None or p.after or p.held)
    ]
    last = {
        name: change_line(ChangeOut.from_change(cs[-1]))
        for name, cs in sorted(ev.changes.items())
        if target in (None, name) and cs
    }
    inferred = {
        name: f"{t.profile} (inferred: {t.profile_inferred})"
        for name, t in sorted(ev.targets.items())
        if target in (None, name) and t.profile_inferred
    }
    return AdviceList(
        plans=plans,
        last_change=last,
        inferred_profiles=inferred,
        data=data,
        count=len(data),
        no_data=no_data,
        no_data_counts=counts,
        errors=errors,
        evaluated_at=rfc3339(ev.ts),
        evaluated_at_ts=ev.ts,
    )


def _explain(
    ev: Evaluation,
    name: str,
    severity: Severity | None,
    retry: float,
    no_data: list[NoDataOut] | None,
    errors: list[RuleErrorOut],
) -> int:
    """Why `name` gives no advice, the whole target or rule by rule: appended to `no_data`
    (None: only counted), errors to `errors`. Returns the number of no-data reasons."""
    results = ev.results.get(name, ())
    whole = _target_no_data(ev.targets.get(name), bool(results), retry)
    found = 0 if whole is None else 1
    if whole is not None and no_data is not None:
        no_data.append(whole)
    for r in sorted(results, key=lambda r: r.rule):
        if r.health == Health.OK or (severity is not None and r.severity != severity):
            continue  # the common case, kept cheap: /advice must stay fast at 10,000 targets
        # a down target's rules all say "down": only their errors are worth a line
        if whole is None and (isinstance(r.outcome, NoData) or r.health == Health.NO_DATA):
            found += 1
            reason = NoDataOut.from_result(r) if no_data is not None else None
            if reason is not None and no_data is not None:
                no_data.append(reason)
        elif r.health == Health.ERR:
            errors.append(RuleErrorOut(target=name, rule=r.rule, error=r.error or "error"))
    return found


def _target_no_data(t: TargetStatus | None, has_results: bool, retry: float) -> NoDataOut | None:
    """Why a whole target gives no (fresh) advice: down, never scraped, or not yet evaluated."""
    if t is None:
        return None
    if t.up is False:
        why = ": ".join(filter(None, [t.error_reason, t.error])) or "unknown error"
        reason = f"last scrape failed ({why}); rules that need a live server are not judged"
    elif t.up is None:
        reason = "waiting for the first scrape"
    elif not has_results:
        reason = "not evaluated yet"
    else:
        return None
    return NoDataOut(target=t.name, rule=None, reason=reason, retry_after_seconds=retry)
