"""The change record of one server: flags before -> after, and the verdict once it is warm.

A change is a difference in a tuning flag between two `/server_info` reads around a restart
(or a restart with the same flags: recorded, not judged). The window before the restart is
summarized at once; the window after it is gathered once the server is warm (the first
`warmup_seconds` skipped) over the same length, then compared (`verdict.compare`). Pure.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sglang_tuner.changes.verdict import (
    LOAD_SIGNALS,
    MetricVerdict,
    SignalSummary,
    Verdict,
    WindowSummary,
    compare,
    metrics_for,
    summarize,
)
from sglang_tuner.model import signals as s
from sglang_tuner.model.flag_transforms import max_running_flag
from sglang_tuner.model.flags import CHANGE_FLAGS, MAX_RUNNING_REQUESTS
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.window import Window

FLAGS = "flags"  # the tuning flags changed: judged
RESTART = "restart"  # same flags, new process: recorded only
MAX_KEPT = 20  # changes kept per target
UNSET = "unset"  # a flag the launch command does not set (SGLang's default applies)


@dataclass(frozen=True, slots=True)
class Change:
    """One restart of one server and what it changed; the verdict once the after-window is in."""

    target: str
    at: float  # the first good scrape after the restart
    kind: str  # FLAGS or RESTART
    before: Mapping[str, str]  # changed flags only, command-line spelling
    after: Mapping[str, str]
    rule: str | None  # the advice that asked for exactly these values, if any
    profile: str
    before_window: WindowSummary
    due: float  # when the after-window is complete
    after_window: WindowSummary | None = None
    verdict: Verdict | None = None
    asked_ratio: float | None = None  # the asking advice's condition ratio, for ping-pong checks
    warm_seconds: float = 60.0  # skipped after the restart before the after-window starts
    stated: tuple[str, ...] = ()  # objectives the asking advice said it would cost (a trade)

    @property
    def revert(self) -> dict[str, str]:
        """The flag values to go back to."""
        return {flag: value for flag, value in self.before.items() if flag != "version"}


def change_from_dict(data: Mapping[str, Any]) -> Change:
    """A change back from `dataclasses.asdict` (the store keeps them as JSON)."""
    fields = dict(data)
    fields["before_window"] = _summary(data["before_window"])
    fields["after_window"] = _summary(data["after_window"]) if data.get("after_window") else None
    verdict = data.get("verdict")
    if verdict:
        metrics = tuple(MetricVerdict(**m) for m in verdict["metrics"])
        judged_on = tuple(verdict.get("judged_on", ()))
        fields["verdict"] = Verdict(
            verdict["verdict"], verdict["reason"], metrics, verdict["method"], judged_on
        )
    fields["stated"] = tuple(data.get("stated", ()))
    return Change(**fields)


def _summary(data: Mapping[str, Any]) -> WindowSummary:
    stats = {k: SignalSummary(**v) for k, v in data["signals"].items()}
    values = {k: tuple(v) for k, v in data["values"].items()}
    return WindowSummary(data["start"], data["end"], stats, values)


def flag_values(config: ServerConfig) -> dict[str, str]:
    """The change-relevant flags of a config, as text in the flags' own units, as an operator
    types them and the advice asks for them (unset ones left out): the config is in flag units
    already (`model/flag_transforms.read_config`), `--max-running-requests` as typed."""
    out = {}
    for field, flag in {**CHANGE_FLAGS, "version": "version"}.items():  # an upgrade too
        value = getattr(config, field) if flag != MAX_RUNNING_REQUESTS else max_running_flag(config)
        if value is not None:
            out[flag] = f"{value:g}" if isinstance(value, float) else str(value).lower()
    return out


_FIELD_OF = {flag: field for field, flag in {**CHANGE_FLAGS, "version": "version"}.items()}


def reported(old: ServerConfig, flag: str, new: ServerConfig) -> bool:
    """Whether both reads say something of `flag`: a value, or its setting reported as unset
    (`/server_info` and the launch line's `ServerArgs` name every argument, null where the
    command left it out). A read that never named it (the startup summary alone, a crash
    line's 'Current value') does not know it: that is no change from or to 'unset'."""
    field = _FIELD_OF.get(flag, flag)
    return all(
        getattr(config, field, None) is not None or any(k.startswith(field) for k in config.raw)
        for config in (old, new)
    )


def attribute(after: Mapping[str, str], asked: Mapping[str, tuple[str, str]]) -> str | None:
    """The rule whose suggested values are all in `after` (`asked`: flag -> (value, rule))."""
    rules: dict[str, bool] = {}
    for flag, (value, rule) in asked.items():
        rules[rule] = rules.get(rule, True) and _same(after.get(flag), value)
    matched = [rule for rule, ok in rules.items() if ok]
    return matched[0] if matched else None


def _same(a: str | None, b: str) -> bool:
    try:
        return a is not None and float(a) == float(b)
    except ValueError:
        return a == b


class ChangeLog:
    """The changes of one server, newest last; `record` at a restart, `verify` as scrapes come."""

    def __init__(
        self,
        target: str,
        profile: str,
        window_seconds: float,
        warmup_seconds: float,
        verifies: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.target, self.profile = target, profile
        self.verifies = verifies or {}  # rule id -> the metrics that judge its changes
        self.window_seconds, self.warmup_seconds = window_seconds, warmup_seconds
        self.changes: list[Change] = []
        self.verdicts: Counter[str] = Counter()  # judged changes by verdict (monotonic)

    def restore(self, changes: list[Change]) -> None:
        """Take back changes saved before a daemon restart (verdict counts included)."""
        self.changes = changes[-MAX_KEPT:]
        self.verdicts = Counter(c.verdict.verdict for c in self.changes if c.verdict)

    def record(
        self,
        old: ServerConfig,
        new: ServerConfig,
        window: Window,
        restarted_at: float,
        asked: Mapping[str, tuple[str, str]] | None = None,
        asked_ratio: Mapping[str, float] | None = None,
        asked_stated: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Change:
        """A restart seen between two config reads; the window still holds the time before.
        `asked_stated`: per rule, the costs its advice stated (a trade, judged as one)."""
        old_flags, new_flags = flag_values(old), flag_values(new)
        keys = {k for k in old_flags.keys() | new_flags.keys() if reported(old, k, new)}
        changed = sorted(k for k in keys if old_flags.get(k) != new_flags.get(k))
        before = summarize(window.view(restarted_at - 1e-6, self.window_seconds), self._names())
        warm = warm_seconds(before, self.warmup_seconds, self.window_seconds)
        after = {k: new_flags.get(k, UNSET) for k in changed}
        rule = attribute(after, asked or {}) if changed else None
        change = Change(
            target=self.target, at=restarted_at, kind=FLAGS if changed else RESTART,
            before={k: old_flags.get(k, UNSET) for k in changed}, after=after, rule=rule,
            profile=self.profile, before_window=before,
            due=restarted_at + warm + max(before.seconds, 0.0),
            asked_ratio=(asked_ratio or {}).get(rule) if rule else None, warm_seconds=warm,
            stated=tuple((asked_stated or {}).get(rule, ())) if rule else (),
        )  # fmt: skip
        self.changes = [*self.changes, change][-MAX_KEPT:]
        return change

    def verify(
        self,
        window: Window,
        now: float,
        min_samples: int,
        resolution: Mapping[str, Sequence[float]] | None = None,
    ) -> Change | None:
        """Judge the latest flag change once its warm after-window is complete (else None);
        a same-flags restart (a crash) after it does not keep it from its verdict.
        `resolution`: the histogram bounds each latency quantile is read from."""
        at = next(
            (i for i in reversed(range(len(self.changes))) if self.changes[i].kind == FLAGS), None
        )
        if at is None:
            return None
        change = self.changes[at]
        if change.verdict is not None or now < change.due:
            return None
        span = change.due - change.at - change.warm_seconds
        view = window.view(change.due, span)
        after = summarize(view, self._names())
        primary = self.verifies.get(change.rule or "", ())
        verdict = compare(
            change.before_window, after, self.profile, min_samples=min_samples, primary=primary,
            stated=change.stated, resolution=resolution,
        )  # fmt: skip
        judged = replace(change, after_window=after, verdict=verdict)
        self.changes[at] = judged
        self.verdicts[verdict.verdict] += 1
        return judged

    def _names(self) -> tuple[str, ...]:
        return (*metrics_for(self.profile), *LOAD_SIGNALS, *SERVICE_SIGNALS)


# A restarted server is warm once the requests it admitted first have finished, twice over:
# their service time is end-to-end latency minus queue wait (both p50, from the window before).
SERVICE_SIGNALS = (s.E2E_P50_SECONDS, s.QUEUE_TIME_P50_SECONDS)
WARM_SERVICE_TIMES = 2.0


def warm_seconds(before: WindowSummary, minimum: float, longest: float) -> float:
    """How long to skip after a restart: `minimum`, or two service times of the requests, but
    never more than one window."""
    e2e, queue = (before.signals.get(n) for n in SERVICE_SIGNALS)
    if e2e is None:
        return minimum
    service = max(0.0, e2e.mean - (queue.mean if queue is not None else 0.0))
    return min(max(minimum, WARM_SERVICE_TIMES * service), max(minimum, longest))
