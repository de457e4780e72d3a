"""metrics_disabled, metrics_only_first_rank and stale_metrics."""

import pytest
from helpers import evaluate, window_from
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.observability import (
    METRICS_DISABLED,
    METRICS_ONLY_FIRST_RANK,
    STALE_METRICS,
)

EMPTY = window_from()


def test_metrics_disabled_fires_on_404_without_any_sample():
    out = evaluate(METRICS_DISABLED, EMPTY, error_reason="http_404_metrics_disabled")
    assert isinstance(out, Finding)
    assert out.action.text == (
        "add --enable-metrics to the SGLang launch command (then /metrics is served)"
    )
    assert out.action.flag == "--enable-metrics"
    assert out.confidence is Confidence.HIGH
    assert METRICS_DISABLED.needs_up is False


def test_metrics_disabled_no_data_on_other_scrape_failures():
    out = evaluate(METRICS_DISABLED, EMPTY, error_reason="timeout")
    assert isinstance(out, NoData) and "timeout" in out.reason


@pytest.mark.parametrize("reason", ["http_404", "not_sglang", "own_exporter"])
def test_metrics_disabled_no_data_when_the_target_is_no_sglang_server(reason):
    out = evaluate(METRICS_DISABLED, EMPTY, error_reason=reason)
    assert isinstance(out, NoData)
    assert out.reason == f"the target URL leads to no SGLang server ({reason})"


def test_metrics_disabled_silent_when_scrapes_succeed():
    assert isinstance(evaluate(METRICS_DISABLED, window_from(num_running_reqs="1x3")), Pass)


DP4 = ServerConfig(dp_size=4, enable_dp_attention=True, enable_metrics_for_all_schedulers=False)


def test_metrics_only_first_rank_fires_when_ranks_missing():
    out = evaluate(METRICS_ONLY_FIRST_RANK, window_from(num_dp_ranks="1x10"), config=DP4)
    assert isinstance(out, Finding)
    assert out.action.text == (
        "add --enable-metrics-for-all-schedulers so every DP rank exports its scheduler metrics"
    )
    assert (out.action.current, out.action.suggested) == ("false", "true")
    assert out.evidence == (
        "--dp-size 4 with DP attention, but only 1 rank(s) export scheduler metrics"
    )


def test_metrics_only_first_rank_silent_when_all_ranks_report():
    assert isinstance(
        evaluate(METRICS_ONLY_FIRST_RANK, window_from(num_dp_ranks="4x10"), config=DP4), Pass
    )
    config = ServerConfig(dp_size=4, enable_metrics_for_all_schedulers=True)
    assert isinstance(
        evaluate(METRICS_ONLY_FIRST_RANK, window_from(num_dp_ranks="1x10"), config=config), Pass
    )
    assert isinstance(
        evaluate(
            METRICS_ONLY_FIRST_RANK,
            window_from(num_dp_ranks="1x10"),
            config=ServerConfig(dp_size=1),
        ),
        Pass,
    )


def test_metrics_only_first_rank_no_data():
    out = evaluate(METRICS_ONLY_FIRST_RANK, EMPTY, config=DP4)
    assert isinstance(out, NoData)
    out = evaluate(
        METRICS_ONLY_FIRST_RANK,
        window_from(num_dp_ranks="1x10"),
        config=None,
        config_error="http_401",
    )
    assert isinstance(out, NoData) and "http_401" in out.reason


def _stuck(n: int = 40, **series: str):
    """n samples 5 s apart in which nothing finishes, unless `series` says otherwise."""
    base = {
        "num_running_reqs": f"12x{n}",
        "num_queue_reqs": f"30x{n}",
        "request_rate": f"0x{n}",
        "prompt_tokens_rate": f"0x{n}",
        "generation_tokens_rate": f"0x{n}",
    }
    return window_from(**(base | series))


def test_stale_metrics_fires_when_nothing_finishes_for_minutes_of_work():
    out = evaluate(STALE_METRICS, _stuck(), min_samples=6)
    assert isinstance(out, Finding)
    assert out.evidence == (
        "no request finished and no token was counted for 3.2m while requests ran or waited in "
        "100% of 40 samples; last #running-req 12, #queue-req 30"
    )
    assert out.action.text.startswith("the server looks stuck: check its log and GET /health_")
    assert "restart the server only if" in STALE_METRICS.action


def test_stale_metrics_fires_on_nothing_running_with_a_queue():
    out = evaluate(STALE_METRICS, _stuck(num_running_reqs="0x40", num_queue_reqs="50x40"))
    assert isinstance(out, Finding)


def test_stale_metrics_is_a_warning_not_a_critical_restart_order():
    assert STALE_METRICS.severity == "warning" and STALE_METRICS.ours


def test_stale_metrics_silent_on_an_embedding_server_that_generates_no_tokens():
    # embedding and scoring servers finish requests and count prompt tokens, never output tokens
    view = _stuck(prompt_tokens_rate="5000x40", request_rate="20x40")
    assert isinstance(evaluate(STALE_METRICS, view), Pass)


def test_stale_metrics_silent_on_slow_decoding_that_still_finishes_requests():
    # gauges refresh only every 40 decode steps: slow steps freeze them, yet requests finish
    view = _stuck(request_rate="0x30 0.2 0x9", generation_tokens_rate="0x30 400 0x9")
    assert isinstance(evaluate(STALE_METRICS, view), Pass)


def test_stale_metrics_waits_for_three_minutes_without_progress():
    assert isinstance(evaluate(STALE_METRICS, _stuck(n=20)), Pass)


def test_stale_metrics_silent_when_idle():
    idle = _stuck(num_running_reqs="0x40", num_queue_reqs="0x40")
    assert isinstance(evaluate(STALE_METRICS, idle), Pass)


def test_stale_metrics_no_data():
    assert isinstance(evaluate(STALE_METRICS, window_from(token_usage="0.5x20")), NoData)
    assert isinstance(
        evaluate(STALE_METRICS, window_from(num_running_reqs="0x2", num_queue_reqs="9x2")), NoData
    )


def test_metrics_disabled_is_a_hint_when_the_log_gives_the_load():
    from sglang_tuner.model.advice import Severity

    view = window_from(num_queue_reqs="3x10", num_running_reqs="40x10", token_usage="0.5x10")
    out = evaluate(METRICS_DISABLED, view, error_reason="http_404_metrics_disabled")
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    assert "only the latency rules" in out.evidence
