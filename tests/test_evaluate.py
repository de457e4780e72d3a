"""Running rules over targets: health apart from state, one bad rule never stops the rest."""

from sglang_tuner.config import load_settings
from sglang_tuner.evaluate import evaluate_target
from sglang_tuner.rules.base import Action, Finding, NoData, Pass, Rule, Severity
from sglang_tuner.sources import Snapshot
from sglang_tuner.state import Health, TargetStatus
from sglang_tuner.window import Window


def _broken(_inp):
    raise ZeroDivisionError("division by zero")


QUEUED = Rule(
    id="queued",
    severity=Severity.WARNING,
    summary="queue is non-empty",
    action="do something",
    source="test",
    signals=("q",),
    when=lambda r, _t: r["q"] > 0,
    suggest=lambda _i: Action("drain the queue"),
)
BROKEN = Rule(
    id="broken", severity=Severity.INFO, summary="s", action="a", source="t",
    check=_broken, suggest=lambda _i: Action("x"),
)  # fmt: skip
ONLINE_ONLY = Rule(
    id="online_only", severity=Severity.INFO, summary="s", action="a", source="t",
    profiles=("online",), check=lambda _i: Pass(), suggest=lambda _i: Action("x"),
)  # fmt: skip
DOWN_OK = Rule(
    id="down_ok", severity=Severity.INFO, summary="s", action="a", source="t", needs_up=False,
    check=lambda i: Pass(detail=str(i.error_reason)), suggest=lambda _i: Action("x"),
)  # fmt: skip
RULES = (QUEUED, BROKEN, ONLINE_ONLY, DOWN_OK)


def _window(values: list[float]) -> Window:
    window = Window(100)
    for k, v in enumerate(values):
        window.append(Snapshot("t", float(k * 5), {"q": v}))
    return window


def _status(**kw) -> TargetStatus:
    return TargetStatus(**{"name": "t", "url": "http://t", "profile": "offline", "up": True, **kw})


def test_evaluate_target_rule_error_is_contained_and_reported_as_err():
    settings = load_settings(None, {"min_samples": 3})
    results = {
        r.rule.id: r for r in evaluate_target(_status(), _window([1] * 10), RULES, settings, 45.0)
    }
    assert results["broken"].health is Health.ERR
    assert "ZeroDivisionError" in (results["broken"].error or "")
    assert results["queued"].health is Health.OK
    assert isinstance(results["queued"].outcome, Finding)


def test_evaluate_target_skips_rules_for_other_profiles_and_disabled_rules():
    settings = load_settings(None, {"rules": {"queued": {"enabled": False}}})
    ids = {r.rule.id for r in evaluate_target(_status(), _window([1]), RULES, settings, 0.0)}
    assert ids == {"broken", "down_ok"}


def test_evaluate_target_down_target_gives_no_data_except_rules_judged_while_down():
    settings = load_settings(None, {"min_samples": 3})
    status = _status(up=False, error_reason="http_404_metrics_disabled", error="404")
    results = {
        r.rule.id: r for r in evaluate_target(status, _window([1] * 10), RULES, settings, 45.0)
    }
    assert results["queued"].health is Health.NO_DATA
    assert "target is down" in results["queued"].outcome.reason
    assert results["down_ok"].outcome.detail == "http_404_metrics_disabled"


def test_evaluate_target_not_enough_samples_is_no_data_with_retry():
    settings = load_settings(None, {"min_samples": 6})
    result = next(r for r in evaluate_target(_status(), _window([1, 1]), RULES, settings, 5.0))
    assert isinstance(result.outcome, NoData)
    assert result.outcome.reason == "window has 2 of the 6 samples needed"
    assert result.outcome.retry_after_seconds == 20.0


def test_evaluate_target_applies_rule_overrides():
    settings = load_settings(
        None,
        {"min_samples": 3, "rules": {"queued": {"frequently_ratio": 0.9, "severity": "critical"}}},
    )
    values = [1, 1, 1, 0, 0, 1, 1, 1, 1, 1]  # held in 80%
    result = evaluate_target(_status(), _window(values), (QUEUED,), settings, 45.0)[0]
    assert result.severity is Severity.CRITICAL
    assert isinstance(result.outcome, Pass) and result.outcome.condition_ratio == 0.8
