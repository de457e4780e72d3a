"""Judging rules over targets: health apart from state, one bad rule never stops the rest."""

from sglang_tuner.config.loading import load_settings
from sglang_tuner.judge import is_due, judge_target
from sglang_tuner.model.advice import Action, Confidence, Finding, Health, NoData, Pass, Severity
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.model.window import frequently
from sglang_tuner.rule import Rule
from sglang_tuner.target_state import TargetState


def _broken(_inp):
    raise ZeroDivisionError("division by zero")


def _queued(inp):
    freq = frequently(inp.view, lambda r: r["q"] > 0, ("q",), inp.frequently_ratio)
    if not freq.held:
        return Pass(freq.ratio, freq.considered)
    return Finding(
        "queued", Action("drain the queue"), Confidence.HIGH, freq.ratio, freq.considered
    )


QUEUED = Rule(
    id="queued", severity=Severity.WARNING, summary="queue is non-empty", action="do something",
    source="test", check=_queued, signals=("q",), requires=("q",),
)  # fmt: skip
BROKEN = Rule(
    id="broken", severity=Severity.INFO, summary="s", action="a", source="t", check=_broken
)  # fmt: skip
ONLINE_ONLY = Rule(
    id="online_only", severity=Severity.INFO, summary="s", action="a", source="t",
    profiles=("online",), check=lambda _i: Pass(),
)  # fmt: skip
DOWN_OK = Rule(
    id="down_ok", severity=Severity.INFO, summary="s", action="a", source="t", needs_up=False,
    check=lambda i: Pass(detail=str(i.error_reason)),
)  # fmt: skip
RULES = (QUEUED, BROKEN, ONLINE_ONLY, DOWN_OK)


def _target(
    values: list[float], up: bool = True, profile: str | None = None, **failure
) -> TargetState:
    """A target whose window holds `values` of signal `q`, 5 s apart; the last scrape `up`."""
    target = TargetState(TargetSpec("t", "http://t", profile=profile), 100)
    for k, v in enumerate(values):
        target.window.append(Snapshot("t", float(k * 5), {"q": v}))
    ts = float(max(0, len(values) - 1) * 5)
    snapshot = Snapshot("t", ts, {}) if up else None
    target.last = ScrapeResult("t", ts, 0.01, snapshot, **failure)
    return target


def evaluate_target(target, _unused, rules, settings, now):
    return judge_target(target, rules, settings, now).judgements


def test_judge_target_rule_error_is_contained_and_reported_as_err():
    settings = load_settings(None, {"min_samples": 3})
    results = {
        r.rule.id: r for r in evaluate_target(_target([1] * 10), None, RULES, settings, 45.0)
    }
    assert results["broken"].health is Health.ERR
    assert "ZeroDivisionError" in (results["broken"].error or "")
    assert results["queued"].health is Health.OK
    assert isinstance(results["queued"].outcome, Finding)


def test_judge_target_skips_rules_for_other_profiles_and_disabled_rules():
    settings = load_settings(None, {"rules": {"queued": {"enabled": False}}})
    target = _target([1], profile="offline")
    ids = {r.rule.id for r in evaluate_target(target, None, RULES, settings, 0.0)}
    assert ids == {"broken", "down_ok"}
    # on an inferred profile the other profile's rule still runs (as a hint, when it fires)
    ids = {r.rule.id for r in evaluate_target(_target([1]), None, RULES, settings, 0.0)}
    assert ids == {"broken", "down_ok", "online_only"}


def test_judge_target_down_target_gives_no_data_except_rules_judged_while_down():
    settings = load_settings(None, {"min_samples": 3})
    target = _target([1] * 10, up=False, error_reason="http_404_metrics_disabled", error="404")
    results = {r.rule.id: r for r in evaluate_target(target, None, RULES, settings, 45.0)}
    assert results["queued"].health is Health.NO_DATA
    assert "target is down" in results["queued"].outcome.reason
    assert results["down_ok"].outcome.detail == "http_404_metrics_disabled"


def test_judge_target_not_enough_samples_is_no_data_with_retry():
    settings = load_settings(None, {"min_samples": 6})
    result = next(r for r in evaluate_target(_target([1, 1]), None, RULES, settings, 5.0))
    assert isinstance(result.outcome, NoData)
    assert result.outcome.reason == "window has 2 of the 6 samples needed"
    assert result.outcome.retry_after_seconds == 20.0


def test_judge_target_applies_rule_overrides():
    settings = load_settings(
        None,
        {"min_samples": 3, "rules": {"queued": {"frequently_ratio": 0.9, "severity": "critical"}}},
    )
    values = [1, 1, 1, 0, 0, 1, 1, 1, 1, 1]  # held in 80%
    result = evaluate_target(_target(values), None, (QUEUED,), settings, 45.0)[0]
    assert result.severity is Severity.CRITICAL
    assert isinstance(result.outcome, Pass) and result.outcome.condition_ratio == 0.8


def test_judge_target_counts_samples_in_the_default_window():
    settings = load_settings(None, {"min_samples": 3, "window_seconds": 20.0})
    judgement = judge_target(_target([1] * 10), RULES, settings, 45.0)
    assert judgement.samples == 4  # 25 < ts <= 45: 30, 35, 40 and 45
    assert judgement.up is True


def test_is_due_after_the_interval_or_when_the_target_goes_up_or_down():
    settings = load_settings(None, {"min_samples": 3})
    target = _target([1] * 10)
    judged = judge_target(target, RULES, settings, 45.0)
    assert is_due(target, None, 45.0, 15.0)
    assert not is_due(target, judged, 50.0, 15.0)
    assert is_due(target, judged, 60.0, 15.0)
    down = _target([1] * 10, up=False, error_reason="timeout", error="slow")
    assert is_due(down, judged, 50.0, 15.0)
    assert is_due(target, judged, 40.0, 15.0)  # the wall clock stepped back: judged at once


def _over_limit(inp):
    q = inp.view.last("q")
    return (
        Finding("over", Action("lower q"), Confidence.HIGH)
        if q > inp.thresholds["limit"]
        else Pass()
    )


def test_judge_target_thresholds_follow_overrides_and_the_rule_judged() -> None:
    # thresholds are shared between targets judged alike: a reload with a new override, or
    # another rule of the same id, must still see its own
    rule = Rule(id="limit", severity=Severity.INFO, summary="s", action="a", source="t",
                check=_over_limit, thresholds={"limit": 5.0})  # fmt: skip
    target = _target([6.0] * 10)
    fired = [
        isinstance(judge_target(target, (r,), load_settings(None, raw), 45.0).judgements[0]
                   .outcome, Finding)
        for r, raw in (
            (rule, {"min_samples": 3}),
            (rule, {"min_samples": 3, "rules": {"limit": {"thresholds": {"limit": 8.0}}}}),
            (rule, {"min_samples": 3}),
            (Rule(**{**rule.__dict__, "thresholds": {"limit": 7.0}}), {"min_samples": 3}),
        )
    ]  # fmt: skip
    assert fired == [True, False, True, False]


def test_judge_infers_the_profile_and_makes_single_profile_advice_a_hint():
    from sglang_tuner.model.advice import Severity
    from sglang_tuner.model.scrape import ScrapeResult, Snapshot
    from sglang_tuner.model.target_spec import TargetSpec
    from sglang_tuner.rules.queue import QUEUE_TOO_LONG
    from sglang_tuner.target_state import TargetState

    state = TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 100)  # no profile set
    for i in range(20):
        values = {"num_queue_reqs": 3000.0, "num_running_reqs": 200.0}
        state.ingest(ScrapeResult("gpu-a", i * 5.0, 0.01, Snapshot("gpu-a", i * 5.0, values)))
    judged = judge_target(state, [QUEUE_TOO_LONG], load_settings(None), 100.0)
    assert judged.profile == "offline" and "backlog" in (judged.profile_inferred or "")
    # queue_too_long applies to every profile: its advice stays a warning
    assert judged.judgements[0].severity is Severity.WARNING


def test_judge_advice_only_online_wants_is_a_hint_on_an_inferred_profile():
    from sglang_tuner.rules.latency import BATCH_TOO_LARGE_FOR_LATENCY

    state = TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 100)  # no profile set
    for i in range(20):
        values = {"num_queue_reqs": 0.0, "num_running_reqs": 400.0, "itl_p50_seconds": 0.2}
        state.ingest(ScrapeResult("gpu-a", i * 5.0, 0.01, Snapshot("gpu-a", i * 5.0, values)))
    judged = judge_target(state, [BATCH_TOO_LARGE_FOR_LATENCY], load_settings(None), 100.0)
    assert judged.profile == "online"
    (judgement,) = judged.judgements
    assert judgement.finding is not None and judgement.severity is Severity.INFO
    assert "inferred from the traffic" in judgement.finding.action.note


def _served_as_they_arrive(profile: str | None = None) -> TargetState:
    """SGLang's tuning-guide picture of a client too slow: requests running, the queue empty."""
    state = TargetState(TargetSpec("gpu-a", "http://gpu-a:30000", profile=profile), 100)
    for i in range(20):
        values = {"num_queue_reqs": 0.0, "num_running_reqs": 40.0, "token_usage": 0.3}
        state.ingest(ScrapeResult("gpu-a", i * 5.0, 0.01, Snapshot("gpu-a", i * 5.0, values)))
    return state


def test_an_inferred_online_profile_keeps_the_guides_empty_queue_advice_as_a_batch_job_hint():
    from sglang_tuner.rules.queue import QUEUE_EMPTY

    judged = judge_target(_served_as_they_arrive(), [QUEUE_EMPTY], load_settings(None), 100.0)
    assert judged.profile == "online"
    assert "set `profile:` on the target" in (judged.profile_inferred or "")
    (judgement,) = judged.judgements
    assert judgement.finding is not None and judgement.severity is Severity.INFO
    action = judgement.finding.action
    assert action.text.startswith("if this is a batch job: client: submit requests faster")
    assert "counts once `profile: offline` is set" in action.note
    assert action.flag is None and action.suggested is None


def test_a_configured_profile_judges_only_its_own_rules_as_advice():
    from sglang_tuner.rules.queue import QUEUE_EMPTY

    online = _served_as_they_arrive("online")
    assert judge_target(online, [QUEUE_EMPTY], load_settings(None), 100.0).judgements == ()
    offline = judge_target(
        _served_as_they_arrive("offline"), [QUEUE_EMPTY], load_settings(None), 100.0
    )
    (judgement,) = offline.judgements
    assert offline.profile_inferred is None and judgement.severity is Severity.INFO
    assert judgement.finding.action.text.startswith("client: submit requests faster")


def _flag_change(prediction):
    def check(inp):
        action = Action("--x 1 -> 2", "--x", "1", "2", prediction=prediction)
        return Finding("e", action, Confidence.HIGH, 1.0, inp.view.count)

    return Rule(
        id="flagged", severity=Severity.WARNING, summary="s", action="a", source="t",
        check=check, signals=("q",), requires=("q",),
    )  # fmt: skip


def test_a_flag_change_without_a_prediction_for_this_server_is_a_hint():
    from sglang_tuner.model.advice import Prediction

    settings = load_settings(None, {"min_samples": 3})
    target = _target([1.0] * 10)
    cases = [
        (None, Severity.INFO),  # nothing predicted
        (Prediction("tok/s", None, basis="speculative decoding"), Severity.INFO),
        (Prediction("tok/s", 0.02, 0.0, 0.04), Severity.INFO),  # too little to warn
        (Prediction("tok/s", 0.30, 0.2, 0.4), Severity.WARNING),
    ]
    for prediction, severity in cases:
        (judged,) = judge_target(target, (_flag_change(prediction),), settings, 45.0).judgements
        assert judged.severity is severity, prediction


def _graph_raise(_inp):
    action = Action("--cuda-graph-max-bs-decode 48 -> 96", "--cuda-graph-max-bs-decode", "48", "96")
    return Finding("e", action, Confidence.HIGH, 1.0, 10)


def test_a_renamed_flag_on_a_server_of_unknown_version_says_what_older_releases_take():
    settings = load_settings(None, {"min_samples": 3})
    rule = Rule(
        id="graphs", severity=Severity.INFO, summary="s", action="a", source="t",
        check=_graph_raise, signals=("q",), requires=("q",),
    )  # fmt: skip
    (judged,) = judge_target(_target([1.0] * 10), (rule,), settings, 45.0).judgements
    assert judged.finding is not None
    note = judged.finding.action.note
    assert "version is unknown" in note and "older releases take --cuda-graph-max-bs" in note
    assert "from 0.5.14" in note
