"""The tuning-rule contract: a rule is data plus one pure function; judging it does no I/O.

The judge step (`judge.py`) runs the common preamble from the rule's data before calling
`check`: the target must be up (`needs_up`), the window must hold `min_samples` scrapes
(`needs_window`), every signal in `requires` must be present, and a server in a PD-disaggregated
pair must play one of the rule's `roles`. `check` then decides.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sglang_tuner.changes.record import Change
from sglang_tuner.model.advice import (
    Action,
    Confidence,
    Finding,
    NoData,
    Outcome,
    Pass,
    Prediction,
    Severity,
)
from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.server_config import DISAGGREGATION_MODES, PROFILES, ServerConfig
from sglang_tuner.model.service_levels import NO_LEVELS, AppliedLevels
from sglang_tuner.model.window import Frequency, WindowView


@dataclass(slots=True)
class RuleInput:
    """Everything a rule may look at: the window, the server's flags, profile, service levels
    and thresholds.

    Read-only to rules, and not frozen: the judge builds one per target and window span and
    sets `thresholds` and `frequently_ratio` for each rule in turn (one per rule was 230,000
    per round at 10,000 targets). A rule reads it while it judges and keeps nothing of it."""

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
    history: FlagHistory = field(default_factory=FlagHistory)  # this server's flag outcomes
    changes: tuple[Change, ...] = ()  # this server's recorded restarts, newest last
    crashes: tuple[CrashReport, ...] = ()  # the log's latest crashes in words, newest last
    service_levels: AppliedLevels = NO_LEVELS  # the levels for `profile` (set by the judge)


Check = Callable[[RuleInput], Outcome]


@dataclass(frozen=True)
class Rule:
    """One piece of the tuning guide: identity, text, thresholds, and the one function `check`."""

    id: str
    severity: Severity
    summary: str
    action: str
    source: str
    check: Check
    signals: tuple[str, ...] = ()  # every canonical signal the rule reads
    requires: tuple[str, ...] = ()  # signals without which it cannot judge (NoData)
    thresholds: Mapping[str, float] = field(default_factory=dict)
    profile_thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    legacy_thresholds: Mapping[str, float] = field(default_factory=dict)  # older guide's values
    profiles: tuple[str, ...] = PROFILES
    # The `disaggregation_mode`s (from /server_info) it applies to: a prefill server never
    # decodes, a decode server never prefills; on the other role it is skipped with a reason.
    roles: tuple[str, ...] = DISAGGREGATION_MODES
    needs_up: bool = True  # False: also judged while scrapes fail (crash loops, startup facts)
    needs_window: bool = True  # False: judges config or events, not min_samples scrapes
    stability: bool = False  # a crash or out-of-memory: its change comes before any other
    ours: bool = False  # not in the guide: our own advice (`source` says why)
    # The metrics its change is meant to improve: they decide the verdict on that change
    # (default: the profile's, throughput offline, p99 TTFT and ITL online).
    verifies: tuple[str, ...] = ()
    # What applying its advice did in the closed-loop benchmark (bench/closed_loop.py), or how
    # its severity is graded per server (predict/server_model.py): the claim behind the severity.
    measured: str = ""
    # Where each threshold comes from: "guide <seed>: ..." or "ours: <reason>".
    provenance: Mapping[str, str] = field(default_factory=dict)

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


def apply_rule(rule: Rule, inp: RuleInput) -> Outcome:
    """The rule's outcome: the preamble its data asks for, then its `check`."""
    return preamble(rule, inp) or rule.check(inp)


def preamble(rule: Rule, inp: RuleInput) -> NoData | None:
    """The checks every rule's data asks for, before its `check` runs."""
    skipped = not_for_role(rule, inp)
    if skipped is not None:
        return skipped
    if rule.needs_window:
        short = not_enough_samples(inp)
        if short is not None:
            return short
    for signal in rule.requires:
        if inp.view.present(signal) == 0:
            return NoData(
                f"signal {signal} is not exposed by this server", 5 * inp.interval_seconds
            )
    return None


# `Rule.roles` of rules about one phase: decoding (batch size, CUDA graphs, generation
# throughput) never happens on a prefill server, chunked prefill and prefix reuse never on a
# decode server (its radix cache is off by default: 0.5.23 `pd_disaggregation_hook.py`).
DECODING_ROLES = ("null", "decode")
PREFILLING_ROLES = ("null", "prefill")
# A role is re-read with /server_info (every 5 min by default): ask again about then.
ROLE_RETRY_SECONDS = 300.0


def not_for_role(rule: Rule, inp: RuleInput) -> NoData | None:
    """NoData when /server_info says the server plays a PD role the rule does not apply to."""
    mode = inp.config.disaggregation_mode if inp.config is not None else None
    if mode is None or mode in rule.roles:
        return None
    does = "decode" if mode == "prefill" else "prefill"
    wanted = " or ".join("non-disaggregated" if r == "null" else r for r in rule.roles)
    return NoData(
        f"skipped: this is a {mode} server (disaggregation_mode {mode}: it does not {does}); "
        f"the rule applies to {wanted} servers",
        ROLE_RETRY_SECONDS,
    )


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


def idle(inp: RuleInput, what: str = "the server was idle in every sample") -> NoData:
    """NoData for a "frequently" rule whose gate let no sample through."""
    return NoData(what, inp.view.window_seconds / 2)


def judged(
    freq: Frequency,
    inp: RuleInput,
    evidence: str | tuple[str, ...],
    action: Action | Callable[[RuleInput], Action],
) -> Outcome:
    """Finding when the condition held frequently, else Pass (with the ratio it reached).

    `evidence`: the text, or the signals whose medians `frequently_evidence` reports; `action`:
    the action or the function making it. Both are only made for a Finding: most judgements
    pass, and their text was a seventh of judging."""
    if not freq.held:
        return Pass(freq.ratio, freq.considered)
    text = evidence if isinstance(evidence, str) else frequently_evidence(freq, inp, evidence)
    act = action if isinstance(action, Action) else action(inp)
    return Finding(text, act, confidence_for(inp), freq.ratio, freq.considered)


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


def frequently_evidence(freq: Frequency, inp: RuleInput, signals: tuple[str, ...]) -> str:
    """'condition held in 83% of 60 samples over 5m; token_usage p50 0.41, ...'."""
    stats = ", ".join(f"{s} p50 {format_value(inp.view.quantile(s, 0.5))}" for s in signals)
    span = format_duration(inp.view.window_seconds)
    head = f"condition held in {freq.ratio:.0%} of {freq.considered} samples over {span}"
    return f"{head}; {stats}" if stats else head


NOT_SAID = "neither /server_info nor the log's launch line said it"


def config_unknown(inp: RuleInput) -> str:
    """Why the server's flags are unknown: the reading's error, else that nothing said them."""
    return inp.config_error or NOT_SAID


def unknown_current(inp: RuleInput, default: str | None) -> str:
    """The note saying why the current value is unknown and which default was assumed."""
    why = config_unknown(inp)
    assumed = f"; assumed SGLang's default {default}" if default is not None else ""
    return f"current value unknown ({why}){assumed}"


def flag_action(
    flag: str,
    current: float | int | None,
    suggested: float | int,
    inp: RuleInput,
    default: float | int | None = None,
) -> Action:
    """`--flag current -> suggested`, saying when the current value had to be assumed."""
    shown = current if current is not None else default
    note = "" if current is not None else unknown_current(inp, _num(default))
    cur_text = "?" if shown is None else f"{shown:g}"
    current_out = None if shown is None else f"{shown:g}"
    return Action(f"{flag} {cur_text} -> {suggested:g}", flag, current_out, f"{suggested:g}", note)


def choice_action(
    flag: str, current: str | None, suggested: str, inp: RuleInput, default: str | None = None
) -> Action:
    """`--flag current -> suggested` for a string-valued flag (policy, backend, dtype)."""
    shown = current if current is not None else default
    note = "" if current is not None else unknown_current(inp, default)
    return Action(f"{flag} {shown or '?'} -> {suggested}", flag, shown, suggested, note)


def with_note(action: Action, extra: str) -> Action:
    """The action with `extra` appended to its note."""
    return replace(action, note=f"{action.note}; {extra}" if action.note else extra)


def with_expected(action: Action, expected: str) -> Action:
    """The action, saying what it should move, by about how much, on what basis."""
    return replace(action, expected=expected)


def predicted(action: Action, prediction: Prediction) -> Action:
    """The action carrying the server model's prediction, its text leading `expected`."""
    text = prediction.text()
    expected = f"{text}. {action.expected}" if action.expected else text
    return replace(action, prediction=prediction, expected=expected)


def _num(value: float | int | None) -> str | None:
    return None if value is None else f"{value:g}"
