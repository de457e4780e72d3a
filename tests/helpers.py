"""Test helpers: windows from compact series notation, and rule inputs around them.

Series notation: space-separated values; `VxN` repeats V N times; `_` is a missing sample
(`_x5` five of them). `window_from(step_seconds=15, token_usage="0.8x20", num_queue_reqs="5x20")`.
"""

from collections.abc import Mapping, Sequence

from sglang_tuner.changes import Change
from sglang_tuner.rules.base import Rule, RuleInput, apply_rule
from sglang_tuner.values import FlagHistory, Outcome, ServerConfig, Snapshot
from sglang_tuner.window import Window, WindowView

_DEFAULT_CONFIG = ServerConfig()


def parse_series(text: str | Sequence[float | None]) -> list[float | None]:
    """'0.5x3 _ 1' -> [0.5, 0.5, 0.5, None, 1.0]; a list passes through."""
    if not isinstance(text, str):
        return list(text)
    out: list[float | None] = []
    for token in text.split():
        value, _, count = token.partition("x")
        out.extend([None if value == "_" else float(value)] * (int(count) if count else 1))
    return out


def window_from(
    step_seconds: float = 5.0, start: float = 0.0, **series: str | Sequence[float | None]
) -> WindowView:
    """A WindowView holding the series as snapshots `step_seconds` apart, through `Window`."""
    columns = {name: parse_series(text) for name, text in series.items()}
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"series lengths differ: { {k: len(v) for k, v in columns.items()} }")
    count = lengths.pop() if lengths else 0
    window = Window(count + 2)
    for k in range(count):
        values = {name: v[k] for name, v in columns.items() if v[k] is not None}
        window.append(Snapshot("t", start + k * step_seconds, values))  # type: ignore[arg-type]
    now = start + max(0, count - 1) * step_seconds
    return window.view(now, max(1, count) * step_seconds)


def rule_input(
    rule: Rule,
    view: WindowView,
    config: ServerConfig | None = _DEFAULT_CONFIG,
    profile: str = "offline",
    thresholds: Mapping[str, float] | None = None,
    legacy: bool = False,
    frequently_ratio: float = 0.5,
    min_samples: int = 6,
    interval_seconds: float = 5.0,
    now: float | None = None,
    config_error: str | None = None,
    error_reason: str | None = None,
    changes: tuple[Change, ...] = (),
    history: FlagHistory | None = None,
) -> RuleInput:
    """A RuleInput with the rule's own thresholds for the profile unless given."""
    return RuleInput(
        view=view,
        config=config,
        profile=profile,
        thresholds=thresholds
        if thresholds is not None
        else rule.thresholds_for(profile, legacy=legacy),
        frequently_ratio=frequently_ratio,
        min_samples=min_samples,
        interval_seconds=interval_seconds,
        now=now if now is not None else (view.ts[-1] if view.ts else 0.0),
        config_error=config_error,
        error_reason=error_reason,
        changes=changes,
        history=history or FlagHistory(),
    )


def evaluate(rule: Rule, view: WindowView, **kwargs: object) -> Outcome:
    """The rule's outcome (its preamble, then its check) for `rule_input(rule, view, **kwargs)`."""
    return apply_rule(rule, rule_input(rule, view, **kwargs))  # type: ignore[arg-type]
