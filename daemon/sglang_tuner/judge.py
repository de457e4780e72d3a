"""Judge: every applicable tuning rule over one target's window. One failing rule never stops
the others; nothing here does I/O or reads the clock."""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from sglang_tuner.config.settings import RuleSettings, Settings
from sglang_tuner.model.advice import Finding, Health, NoData, Outcome, Severity
from sglang_tuner.model.server_config import PROFILES
from sglang_tuner.model.service_levels import (
    NO_LEVELS,
    AppliedLevels,
    ServiceLevels,
    applied_levels,
    measure,
)
from sglang_tuner.model.window import WindowView
from sglang_tuner.predict import MIN_GAIN
from sglang_tuner.rule import Rule, RuleInput, apply_rule, with_note
from sglang_tuner.rules.sglang.flags import spelling_note
from sglang_tuner.rules.workload import infer_profile
from sglang_tuner.target_state import TargetState

logger = logging.getLogger(__name__)
_DEFAULT_RULE_SETTINGS = RuleSettings()
# An unset profile until the traffic says: the guide's default (its examples are batch jobs).
DEFAULT_PROFILE = "offline"
INFERRED_NOTE = (
    "the workload profile was inferred from the traffic ({why}): a hint until `profile:` is set "
    "for this target"
)
# How an operator makes an inferred profile count (said with it in /advice and /targets).
HOW_TO_SET = (
    "set `profile:` on the target (offline, online, long_context or multi_turn; "
    "`check --profile`) to judge it as that"
)
# On an inferred profile, the rules only the other one wants still run, as hints on that
# condition: a wrong guess never silences the guide (an empty queue read as "online" would
# silence its "#queue-req is often 0").
OTHER_PROFILE = {"offline": "online", "online": "offline"}
IF_PROFILE = {
    "offline": "if this is a batch job",
    "online": "if this serves users online",
    "long_context": "if this serves long contexts",
    "multi_turn": "if this serves multi-turn chats",
}


# Not frozen, for speed: built 230,000 times a round at 10,000 targets, and a frozen dataclass's
# __init__ takes four times as long. Changed only while judged (`_as_hint`), never after.
@dataclass(slots=True)
class Judgement:
    """One rule judged for one target: health plus the rule's outcome or error."""

    rule: Rule
    health: Health
    severity: Severity
    outcome: Outcome | None = None
    error: str | None = None
    conditional: bool = False  # a hint conditioned on a guessed profile (`_as_hint`)

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
    profile: str = DEFAULT_PROFILE  # the profile the rules were judged for
    profile_inferred: str | None = None  # why, when it was inferred from the traffic
    service_levels: AppliedLevels = NO_LEVELS  # the levels of `profile`, each with its source
    # each objective's value over the window (objective -> median), read when a rule found
    # something: what the plan holds a change's predicted effects to
    measured: Mapping[str, float] = field(default_factory=dict)


def rule_settings(settings: Settings, rule_id: str) -> RuleSettings:
    """The user's overrides for one rule (defaults when none)."""
    return settings.rules.get(rule_id, _DEFAULT_RULE_SETTINGS)


def hold_for(settings: Settings, rule_id: str) -> float:
    """A rule's `for`: its own setting, else the global one."""
    held = rule_settings(settings, rule_id).hold_for_seconds
    return settings.hold_for_seconds if held is None else held


def keep_firing_for(settings: Settings, rule_id: str) -> float:
    """A rule's `keep_firing_for`: its own setting, else the global one."""
    kept = rule_settings(settings, rule_id).keep_firing_for_seconds
    return settings.keep_firing_for_seconds if kept is None else kept


def applicable_rules(rules: Sequence[Rule], settings: Settings, profile: str) -> list[Rule]:
    """Enabled rules that apply to the target's workload profile."""
    return [r for r in rules if rule_settings(settings, r.id).enabled and profile in r.profiles]


def is_due(
    target: TargetState, previous: TargetJudgement | None, now: float, interval_seconds: float
) -> bool:
    """Judge again: never judged, the interval has passed, or the target went up or down."""
    if previous is None or now - previous.ts >= interval_seconds or now < previous.ts:
        return True  # (a wall clock stepped back: judged again at once, not an interval later)
    return target.last is not None and target.last.is_up != previous.up


def judge_target(
    target: TargetState, rules: Sequence[Rule], settings: Settings, now: float
) -> TargetJudgement:
    """Judge every applicable rule for one target."""
    inputs: dict[float, RuleInput] = {}  # one per window span, shared by the rules in turn
    default_span = settings.window_seconds
    profile, why = _profile(target, target.window.view(now, default_span))
    legacy = target.spec.legacy_guide
    levels = _Levels(target.spec.service_levels, settings.profile_levels, why is not None)
    out = []
    for rule, judged_as in _rules_for(rules, settings, profile, why is not None):
        overrides = rule_settings(settings, rule.id)
        span = overrides.window_seconds or settings.window_seconds
        inp = inputs.get(span)
        if inp is None:
            view = target.window.view(now, span)
            inp = inputs[span] = _rule_input(target, view, settings, now, profile)
        inp.profile = judged_as
        inp.service_levels = levels.of(judged_as)
        inp.thresholds = _thresholds(rule, judged_as, overrides, legacy)
        inp.frequently_ratio = overrides.frequently_ratio or settings.frequently_ratio
        judgement = _judge(rule, target, inp, overrides)
        if why is not None and rule.profiles != PROFILES:
            _as_hint(judgement, why, judged_as, judged_as != profile)
        out.append(judgement)
    default = inputs.get(default_span)
    view = default.view if default else target.window.view(now, default_span)
    up = None if target.last is None else target.last.is_up
    inferred = None if why is None else f"{why}; {HOW_TO_SET}"
    found = any(j.finding is not None for j in out)
    measured = measure(view) if found else {}
    return TargetJudgement(
        now, up, view.count, tuple(out), profile, inferred, levels.of(profile), measured
    )


class _Levels:
    """A target's service levels per profile judged (its own, and the other one's when its
    profile was inferred), each resolved once per judgement."""

    __slots__ = ("_own", "_by_profile", "_inferred", "_resolved")

    def __init__(
        self, own: ServiceLevels | None, by_profile: Mapping[str, ServiceLevels], inferred: bool
    ) -> None:
        self._own, self._by_profile, self._inferred = own, by_profile, inferred
        self._resolved: dict[str, AppliedLevels] = {}

    def of(self, profile: str) -> AppliedLevels:
        """The levels a rule judged for `profile` reads."""
        found = self._resolved.get(profile)
        if found is None:
            found = self._resolved[profile] = _levels(
                profile, self._inferred, self._own, self._by_profile
            )
        return found


# (profile, inferred, a target's own levels, the settings' by identity) -> the levels: one copy
# shared by every target judged alike (most of a fleet sets none of its own). The settings'
# mapping is kept in the value, so an id is never reused while cached.
_LEVELS: dict[tuple[str, bool, ServiceLevels | None, int], tuple[object, AppliedLevels]] = {}


def _levels(
    profile: str, inferred: bool, own: ServiceLevels | None, by_profile: Mapping[str, ServiceLevels]
) -> AppliedLevels:
    key = (profile, inferred, own, id(by_profile))
    found = _LEVELS.get(key)
    if found is None or found[0] is not by_profile:
        if len(_LEVELS) > 4096:  # many targets with levels of their own, or many reloads
            _LEVELS.clear()
        found = _LEVELS[key] = (by_profile, applied_levels(profile, inferred, own, by_profile))
    return found[1]


def _rules_for(
    rules: Sequence[Rule], settings: Settings, profile: str, inferred: bool
) -> list[tuple[Rule, str]]:
    """Each enabled rule with the profile it is judged for: the target's; on an inferred
    profile, also the rules only the other profile wants, judged for that one."""
    other = OTHER_PROFILE.get(profile) if inferred else None
    out = []
    for rule in rules:
        if not rule_settings(settings, rule.id).enabled:
            continue
        if profile in rule.profiles:
            out.append((rule, profile))
        elif other is not None and other in rule.profiles:
            out.append((rule, other))
    return out


def _profile(target: TargetState, view: WindowView) -> tuple[str, str | None]:
    """The target's profile, and why when it was inferred (None: the operator set it)."""
    if target.spec.profile is not None:
        return target.spec.profile, None
    inferred = infer_profile(view)
    if inferred is None:
        return DEFAULT_PROFILE, "too little traffic yet to tell: the guide's default, offline"
    return inferred


def _as_hint(judgement: Judgement, why: str, profile: str, other: bool) -> None:
    """Advice only one profile wants, on a guessed profile: a hint conditioned on that profile
    ("if this is a batch job: ..."). For the profile the traffic did not suggest (`other`) it
    carries no machine value: nothing applies a change on a guess against the evidence."""
    finding = judgement.finding
    if finding is None:
        return
    note = INFERRED_NOTE.format(why=why)
    if other:
        note += f"; the traffic suggests otherwise: counts once `profile: {profile}` is set"
    action = finding.action
    condition = IF_PROFILE.get(profile, f"if this is a {profile} workload")
    text = f"{condition}: {action.text}"
    note = f"{action.note}; {note}" if action.note else note
    if other:
        action = replace(action, flag=None, current=None, suggested=None, companions=())
    finding.action = replace(action, text=text, note=note)
    judgement.severity = Severity.INFO
    judgement.conditional = True


def _rule_input(
    target: TargetState, view: WindowView, settings: Settings, now: float, profile: str
) -> RuleInput:
    """What the rules see of `target` over `view`; each rule's thresholds are set in turn."""
    last = target.last
    return RuleInput(
        view=view,
        config=target.config,
        profile=profile,
        thresholds=MappingProxyType({}),
        frequently_ratio=settings.frequently_ratio,
        min_samples=settings.min_samples,
        interval_seconds=settings.scrape_interval_seconds,
        now=now,
        config_error=target.config_error,
        error_reason=None if last is None else last.error_reason,  # up from the log: kept
        history=target.history,
        changes=tuple(target.changes.changes),
        crashes=target.crash_reports,
    )


# (rule, profile, legacy guide, overrides) by identity -> their thresholds: one read-only copy
# shared by every target judged alike, instead of a new dict per rule, target and judgement.
# The rule and the overrides are kept in the value, so an id is never reused while cached.
_THRESHOLDS: dict[tuple[int, str, bool, int], tuple[Rule, RuleSettings, Mapping[str, float]]] = {}


def _thresholds(
    rule: Rule, profile: str, overrides: RuleSettings, legacy: bool
) -> Mapping[str, float]:
    key = (id(rule), profile, legacy, id(overrides))
    found = _THRESHOLDS.get(key)
    if found is None or found[0] is not rule or found[1] is not overrides:
        if len(_THRESHOLDS) > 4096:  # settings reloaded many times
            _THRESHOLDS.clear()
        merged = MappingProxyType(rule.thresholds_for(profile, overrides.thresholds, legacy))
        found = _THRESHOLDS[key] = (rule, overrides, merged)
    return found[2]


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
    if isinstance(outcome, Finding):
        outcome = _spelled(outcome, inp)
    if isinstance(outcome, Finding) and not overrides.severity:
        if outcome.severity is not None:
            severity = outcome.severity  # the rule expects too little of this change to warn
        severity = _claimed(rule, outcome, severity)
    return Judgement(rule, health, severity, outcome)


def _spelled(finding: Finding, inp: RuleInput) -> Finding:
    """The finding, its action saying what older releases call a flag SGLang renamed, where
    the server's version is unknown (the advice names the newest spelling)."""
    version = inp.config.version if inp.config else None
    action = finding.action
    if version is not None:
        return finding
    notes = [
        n for a in (action, *action.companions) if a.flag and (n := spelling_note(a.flag, None))
    ]
    for note in dict.fromkeys(notes):
        action = with_note(action, note)
    return finding if action is finding.action else replace(finding, action=action)


def _claimed(rule: Rule, finding: Finding, severity: Severity) -> Severity:
    """A flag change's severity from its prediction for this server: without one (the model
    does not cover it: speculative decoding, a PD role, an unknown model or GPU, or a gain
    the window cannot show), or predicted to gain under `MIN_GAIN`, it is a hint whatever the
    rule's default. Crashes and out-of-memory fixes keep theirs."""
    action = finding.action
    if rule.stability or severity is Severity.INFO or action.flag is None:
        return severity
    prediction = action.prediction
    if prediction is None or prediction.gain is None or prediction.gain < MIN_GAIN:
        return Severity.INFO
    return severity
