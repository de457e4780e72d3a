"""The tuning-rule model: a rule is data plus pure functions; evaluating it does no I/O."""

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ..sources import ServerConfig
from ..window import Row, WindowView, is_frequent


class Severity(StrEnum):
    """How urgent the advice is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Confidence(StrEnum):
    """How much data backs a finding (VPA-style: grows with the share of the window observed)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


PROFILES: tuple[str, ...] = ("offline", "online", "long_context", "multi_turn")


@dataclass(frozen=True, slots=True)
class Action:
    """The change to make: `flag current -> suggested`, or a non-flag instruction in `text`."""

    text: str
    flag: str | None = None
    current: str | None = None
    suggested: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """The rule's condition holds: advice with its evidence."""

    evidence: str
    action: Action
    confidence: Confidence
    condition_ratio: float | None = None
    samples: int = 0


@dataclass(frozen=True, slots=True)
class NoData:
    """The rule could not be judged; `reason` says why and when to ask again."""

    reason: str
    retry_after_seconds: float


@dataclass(frozen=True, slots=True)
class Pass:
    """Evaluated, condition not met."""

    condition_ratio: float | None = None
    samples: int = 0
    detail: str = ""


Outcome = Finding | NoData | Pass


@dataclass(frozen=True, slots=True)
class RuleInput:
    """Everything a rule may look at: the window, the server's flags, profile and thresholds."""

    view: WindowView
    config: ServerConfig | None
    profile: str
    thresholds: Mapping[str, float]
    frequently_ratio: float
    min_samples: int
    interval_seconds: float
    now: float
    config_error: str | None = None  # why `config` is missing (e.g. /server_info needs an API key)
    error_reason: str | None = None  # the latest scrape's failure reason, when it failed


@dataclass(frozen=True)
class Rule:
    """One piece of the tuning guide.

    Most rules are "frequently" rules: `when(row, thresholds)` is a per-sample condition over
    `signals`, and the rule fires when it held in ≥ `frequently_ratio` of the considered samples
    (samples where `gate` holds, e.g. "the server is busy"). Rules that judge one startup fact or
    an event count give `check` instead.
    """

    id: str
    severity: Severity
    summary: str
    action: str
    source: str
    suggest: Callable[[RuleInput], Action]
    signals: tuple[str, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    profile_thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    legacy_thresholds: Mapping[str, float] = field(default_factory=dict)  # older guide's values
    profiles: tuple[str, ...] = PROFILES
    when: Callable[[Row, Mapping[str, float]], bool] | None = None
    gate: Callable[[Row, Mapping[str, float]], bool] | None = None
    gate_reason: str = "the server was idle in every sample"
    check: Callable[[RuleInput], Outcome] | None = None
    evidence_signals: tuple[str, ...] = ()
    needs_up: bool = True  # False: also judged while scrapes fail (e.g. metrics_disabled)
    # A window-level veto for "frequently" rules: a reason not to advise despite the condition.
    unless: Callable[[RuleInput], str | None] | None = None

    def thresholds_for(
        self, profile: str, overrides: Mapping[str, float] | None = None, legacy: bool = False
    ) -> dict[str, float]:
        """Defaults, then the older guide's values if asked, the profile's, the user's overrides."""
        merged = dict(self.thresholds)
        if legacy:
            merged.update(self.legacy_thresholds)
        merged.update(self.profile_thresholds.get(profile, {}))
        merged.update(overrides or {})
        return merged

    def evaluate(self, inp: RuleInput) -> Outcome:
        """Judge the rule over the window (pure: no I/O, no clock)."""
        if self.check is not None:
            return self.check(inp)
        return _evaluate_frequently(self, inp)


def _evaluate_frequently(rule: Rule, inp: RuleInput) -> Outcome:
    """The standard path: fraction of samples where `when` held, against `frequently_ratio`."""
    view, th = inp.view, inp.thresholds
    missing = not_enough_samples(inp)
    if missing is not None:
        return missing
    for signal in rule.signals:
        if view.present(signal) == 0:
            return NoData(
                f"signal {signal} is not exposed by this server", 5 * inp.interval_seconds
            )
    when = rule.when or (lambda _r, _t: False)
    rule_gate = rule.gate
    gate = (lambda r: rule_gate(r, th)) if rule_gate else None
    ratio, considered = view.fraction(lambda r: when(r, th), rule.signals, gate)
    if considered == 0:
        return NoData(rule.gate_reason, inp.view.window_seconds / 2)
    if not is_frequent(ratio, inp.frequently_ratio):
        return Pass(ratio, considered)
    veto = rule.unless(inp) if rule.unless else None
    if veto is not None:
        return Pass(ratio, considered, veto)
    evidence = frequently_evidence(ratio, considered, inp, rule.evidence_signals or rule.signals)
    return Finding(evidence, rule.suggest(inp), confidence_for(inp), ratio, considered)


def not_enough_samples(inp: RuleInput) -> NoData | None:
    """NoData while the window holds fewer than `min_samples` scrapes."""
    n = inp.view.count
    if n >= inp.min_samples:
        return None
    wait = (inp.min_samples - n) * inp.interval_seconds
    return NoData(f"window has {n} of the {inp.min_samples} samples needed", wait)


def confidence_for(inp: RuleInput) -> Confidence:
    """Low with under half a window of samples, high with nearly a full one."""
    expected = max(1.0, inp.view.window_seconds / inp.interval_seconds)
    share = inp.view.count / expected
    if share < 0.5:
        return Confidence.LOW
    return Confidence.MEDIUM if share < 0.9 else Confidence.HIGH


def format_duration(seconds: float) -> str:
    """90 -> '1.5m', 300 -> '5m', 45 -> '45s'."""
    if seconds >= 60:
        minutes = seconds / 60
        return f"{minutes:g}m" if minutes == int(minutes) else f"{minutes:.1f}m"
    return f"{seconds:.0f}s"


def format_value(value: float | None) -> str:
    """Compact number for evidence text."""
    if value is None:
        return "n/a"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.0f}"


def frequently_evidence(
    ratio: float, considered: int, inp: RuleInput, signals: tuple[str, ...]
) -> str:
    """'condition held in 83% of 60 samples over 5m; token_usage p50 0.41, ...'."""
    stats = ", ".join(f"{s} p50 {format_value(inp.view.quantile(s, 0.5))}" for s in signals)
    span = format_duration(inp.view.window_seconds)
    head = f"condition held in {ratio:.0%} of {considered} samples over {span}"
    return f"{head}; {stats}" if stats else head


def flag_action(
    flag: str,
    current: float | int | None,
    suggested: float | int,
    inp: RuleInput,
    default: float | int | None = None,
) -> Action:
    """`--flag current -> suggested`, saying when the current value had to be assumed."""
    note = ""
    shown = current
    if current is None:
        why = inp.config_error or "/server_info did not report it"
        shown = default
        assumed = f"; assumed SGLang's default {default:g}" if default is not None else ""
        note = f"current value unknown ({why}){assumed}"
    cur_text = "?" if shown is None else f"{shown:g}"
    return Action(
        f"{flag} {cur_text} -> {suggested:g}",
        flag,
        None if shown is None else f"{shown:g}",
        f"{suggested:g}",
        note,
    )


def choice_action(
    flag: str, current: str | None, suggested: str, inp: RuleInput, default: str | None = None
) -> Action:
    """`--flag current -> suggested` for a string-valued flag (policy, backend, dtype)."""
    note = ""
    shown = current
    if current is None:
        why = inp.config_error or "/server_info did not report it"
        shown = default
        assumed = f"; assumed SGLang's default {default}" if default is not None else ""
        note = f"current value unknown ({why}){assumed}"
    return Action(f"{flag} {shown or '?'} -> {suggested}", flag, shown, suggested, note)


def version_at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    """'0.5.14.post2' >= (0, 5, 14) -> True; None when the version is unknown or unparsable."""
    if not version:
        return None
    parts: list[int] = []
    for piece in version.lstrip("v").split("."):
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) >= minimum if parts else None
