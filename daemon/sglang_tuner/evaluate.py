"""Run every tuning rule over every target's window; one failing rule never stops the others."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from .config import RuleSettings, Settings
from .rules.base import Finding, NoData, Outcome, Rule, RuleInput, Severity
from .state import Health, TargetStatus
from .window import Window, WindowView

logger = logging.getLogger(__name__)
_DEFAULT_RULE_SETTINGS = RuleSettings()


@dataclass(frozen=True, slots=True)
class RuleEvaluation:
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


def rule_settings(settings: Settings, rule: Rule) -> RuleSettings:
    """The user's overrides for one rule (defaults when none)."""
    return settings.rules.get(rule.id, _DEFAULT_RULE_SETTINGS)


def applicable_rules(rules: Sequence[Rule], settings: Settings, profile: str) -> list[Rule]:
    """Enabled rules that apply to the target's workload profile."""
    return [r for r in rules if rule_settings(settings, r).enabled and profile in r.profiles]


def evaluate_target(
    target: TargetStatus,
    window: Window,
    rules: Sequence[Rule],
    settings: Settings,
    now: float,
    legacy: bool = False,
) -> list[RuleEvaluation]:
    """Judge every applicable rule for one target (pure apart from logging)."""
    views: dict[float, WindowView] = {}
    out = []
    for rule in applicable_rules(rules, settings, target.profile):
        overrides = rule_settings(settings, rule)
        span = overrides.window_seconds or settings.window_seconds
        if span not in views:
            views[span] = window.view(now, span)
        inp = _rule_input(rule, target, views[span], settings, overrides, now, legacy)
        out.append(_judge(rule, target, inp, overrides))
    return out


def _rule_input(
    rule: Rule,
    target: TargetStatus,
    view: WindowView,
    settings: Settings,
    overrides: RuleSettings,
    now: float,
    legacy: bool,
) -> RuleInput:
    return RuleInput(
        view=view,
        config=target.config,
        profile=target.profile,
        thresholds=rule.thresholds_for(target.profile, overrides.thresholds, legacy),
        frequently_ratio=overrides.frequently_ratio or settings.frequently_ratio,
        min_samples=settings.min_samples,
        interval_seconds=settings.scrape_interval_seconds,
        now=now,
        config_error=target.config_error,
        error_reason=None if target.up else target.error_reason,
    )


def _judge(
    rule: Rule, target: TargetStatus, inp: RuleInput, overrides: RuleSettings
) -> RuleEvaluation:
    severity = Severity(overrides.severity) if overrides.severity else rule.severity
    if rule.needs_up and target.up is False:
        reason = f"target is down ({target.error or target.error_reason})"
        return RuleEvaluation(rule, Health.NO_DATA, severity, NoData(reason, inp.interval_seconds))
    try:
        outcome = rule.evaluate(inp)
    except Exception as exc:  # a rule bug must not take the other rules down with it
        logger.exception("tuning rule %s failed on target %s", rule.id, target.name)
        return RuleEvaluation(rule, Health.ERR, severity, None, f"{type(exc).__name__}: {exc}")
    health = Health.NO_DATA if isinstance(outcome, NoData) else Health.OK
    return RuleEvaluation(rule, health, severity, outcome)
