"""Judge: every applicable tuning rule over one target's window. One failing rule never stops
the others; nothing here does I/O or reads the clock."""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .config import RuleSettings, Settings
from .rules.base import Rule, RuleInput, apply_rule
from .target_state import TargetState
from .values import Finding, Health, NoData, Outcome, Severity
from .window import WindowView

logger = logging.getLogger(__name__)
_DEFAULT_RULE_SETTINGS = RuleSettings()


@dataclass(frozen=True, slots=True)
class Judgement:
    """One rule judged for one target: health plus the rule's outcome or error."""

    rule: Rule
    health: Health
    severity: Severity
    outcome: Outcome | None = None
    error: str | None = None

    @property
    def finding(self) -> Finding | None:
        """The finding when the rule's condition holds."""
        return self.outcome if isinstance(self.outcome, Finding) else None


@dataclass(frozen=True, slots=True)
class TargetJudgement:
    """Every rule judged for one target at `ts`, with what the judge saw."""

    ts: float
    up: bool | None  # the latest scrape's outcome when judged
    samples: int  # samples in the default window
    judgements: tuple[Judgement, ...]


def rule_settings(settings: Settings, rule_id: str) -> RuleSettings:
    """The user's overrides for one rule (defaults when none)."""
    return settings.rules.get(rule_id, _DEFAULT_RULE_SETTINGS)


def applicable_rules(rules: Sequence[Rule], settings: Settings, profile: str) -> list[Rule]:
    """Enabled rules that apply to the target's workload profile."""
    return [r for r in rules if rule_settings(settings, r.id).enabled and profile in r.profiles]


def is_due(
    target: TargetState, previous: TargetJudgement | None, now: float, interval_seconds: float
) -> bool:
    """Judge again: never judged, the interval has passed, or the target went up or down."""
    if previous is None or now - previous.ts >= interval_seconds:
        return True
    return target.last is not None and target.last.is_up != previous.up


def judge_target(
    target: TargetState, rules: Sequence[Rule], settings: Settings, now: float
) -> TargetJudgement:
    """Judge every applicable rule for one target."""
    views: dict[float, WindowView] = {}
    out = []
    for rule in applicable_rules(rules, settings, target.spec.profile):
        overrides = rule_settings(settings, rule.id)
        span = overrides.window_seconds or settings.window_seconds
        if span not in views:
            views[span] = target.window.view(now, span)
        inp = _rule_input(rule, target, views[span], settings, overrides, now)
        out.append(_judge(rule, target, inp, overrides))
    default_span = settings.window_seconds
    samples = (views.get(default_span) or target.window.view(now, default_span)).count
    up = None if target.last is None else target.last.is_up
    return TargetJudgement(now, up, samples, tuple(out))


def _rule_input(
    rule: Rule,
    target: TargetState,
    view: WindowView,
    settings: Settings,
    overrides: RuleSettings,
    now: float,
) -> RuleInput:
    last = target.last
    return RuleInput(
        view=view,
        config=target.config,
        profile=target.spec.profile,
        thresholds=_thresholds(rule, target.spec.profile, overrides, target.spec.legacy_guide),
        frequently_ratio=overrides.frequently_ratio or settings.frequently_ratio,
        min_samples=settings.min_samples,
        interval_seconds=settings.scrape_interval_seconds,
        now=now,
        config_error=target.config_error,
        error_reason=None if last is None or last.is_up else last.error_reason,
        history=target.history,
        changes=tuple(target.changes.changes),
    )


# (rule id, profile, legacy guide, overrides) -> (the rule, its thresholds): one read-only copy
# shared by every target judged alike, instead of a new dict per rule, target and judgement.
_THRESHOLDS: dict[
    tuple[str, str, bool, tuple[tuple[str, float], ...]], tuple[Rule, Mapping[str, float]]
] = {}


def _thresholds(
    rule: Rule, profile: str, overrides: RuleSettings, legacy: bool
) -> Mapping[str, float]:
    key = (rule.id, profile, legacy, tuple(overrides.thresholds.items()))
    found = _THRESHOLDS.get(key)
    if found is None or found[0] is not rule:  # another rule of that id (a reload, a test)
        if len(_THRESHOLDS) > 4096:
            _THRESHOLDS.clear()
        merged = MappingProxyType(rule.thresholds_for(profile, overrides.thresholds, legacy))
        found = _THRESHOLDS[key] = (rule, merged)
    return found[1]


def _judge(rule: Rule, target: TargetState, inp: RuleInput, overrides: RuleSettings) -> Judgement:
    severity = Severity(overrides.severity) if overrides.severity else rule.severity
    last = target.last
    if rule.needs_up and last is not None and not last.is_up:
        reason = f"target is down ({last.error or last.error_reason})"
        return Judgement(rule, Health.NO_DATA, severity, NoData(reason, inp.interval_seconds))
    try:
        outcome = apply_rule(rule, inp)
    except Exception as exc:  # a rule bug must not take the other rules down with it
        logger.exception("tuning rule %s failed on target %s", rule.id, target.name)
        return Judgement(rule, Health.ERR, severity, None, f"{type(exc).__name__}: {exc}")
    health = Health.NO_DATA if isinstance(outcome, NoData) else Health.OK
    if isinstance(outcome, Finding) and outcome.severity is not None and not overrides.severity:
        severity = outcome.severity  # the rule expects too little of this change to warn
    return Judgement(rule, health, severity, outcome)
