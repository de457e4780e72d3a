"""Response models and the /advice report: conversions a user reads in JSON and text."""

from sglang_tuner.api.advice_report import AdviceFilter, select_advice
from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.api.schemas.advice_response import (
    AdviceList,
    AdviceOut,
    NoDataOut,
    api_path,
    rfc3339,
)
from sglang_tuner.api.schemas.inventory import RuleOut
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation, RuleResult, TargetStatus
from sglang_tuner.model.advice import Action, Advice, Confidence, Health, NoData, Pass, Severity
from sglang_tuner.rules import ALL_RULES

NOW = 1_795_000_000.0


def test_rfc3339_formats_utc_and_keeps_none() -> None:
    assert rfc3339(NOW) == "2026-11-18T11:06:40Z"
    assert rfc3339(None) is None


def test_api_path_quotes_segments_but_keeps_host_port() -> None:
    assert (
        api_path("advice", "10.0.0.1:30000", "queue_empty") == "/advice/10.0.0.1:30000/queue_empty"
    )
    assert api_path("targets", "a b/c") == "/targets/a%20b%2Fc"


def test_advice_out_keeps_action_note_and_labels() -> None:
    action = Action("--mem-fraction-static ? -> 0.85", "--mem-fraction-static", None, "0.85", "n")
    advice = Advice(
        "gpu-a", "mem_fraction_too_low", Severity.WARNING, "firing", NOW, "s", "e", action,
        "src", Confidence.LOW, None, {"team": "ml"},
    )  # fmt: skip
    out = AdviceOut.from_advice(advice)
    assert out.action.current is None and out.action.note == "n"
    assert out.labels == {"team": "ml"} and out.since == "2026-11-18T11:06:40Z"


def test_no_data_out_from_result_only_for_no_data() -> None:
    nd = RuleResult("t", "r", Severity.INFO, Health.NO_DATA, NoData("idle in every sample", 150.0))
    ok = RuleResult("t", "r", Severity.INFO, Health.OK, Pass(0.2, 60))
    out = NoDataOut.from_result(nd)
    assert out is not None and (out.reason, out.retry_after_seconds) == (
        "idle in every sample",
        150,
    )
    assert NoDataOut.from_result(ok) is None


def test_advice_text_before_first_evaluation_says_so() -> None:
    text = advice_text(AdviceList(data=[], count=0))
    assert "evaluated never (no evaluation has finished yet)" in text
    assert "No advice is pending or firing." in text


def test_select_advice_never_evaluated_target_explains_wait() -> None:
    ev = Evaluation(targets={"gpu-a": TargetStatus("gpu-a", "http://a", "offline")})
    out = select_advice(ev, AdviceFilter(full_no_data=True), None, 5.0)
    assert [(n.target, n.rule, n.reason) for n in out.no_data] == [
        ("gpu-a", None, "waiting for the first scrape")
    ]


def test_select_advice_up_target_without_results_not_evaluated_yet() -> None:
    ev = Evaluation(
        ts=NOW, targets={"gpu-a": TargetStatus("gpu-a", "http://a", "offline", up=True)}
    )
    out = select_advice(ev, AdviceFilter(full_no_data=True), None, 5.0)
    assert [n.reason for n in out.no_data] == ["not evaluated yet"]


def test_rule_out_serves_every_catalogue_rule() -> None:
    settings = Settings()
    for rule in ALL_RULES:
        out = RuleOut.from_rule(rule, settings)
        assert out.enabled and out.overrides == {}
        assert set(out.effective.thresholds) == set(rule.profiles)
        assert out.model_dump_json()
