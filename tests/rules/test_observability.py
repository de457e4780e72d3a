"""metrics_disabled, metrics_only_first_rank and stale_metrics."""

from helpers import evaluate, window_from
from sglang_tuner.rules.observability import (
    METRICS_DISABLED,
    METRICS_ONLY_FIRST_RANK,
    STALE_METRICS,
)
from sglang_tuner.values import Confidence, Finding, NoData, Pass, ServerConfig

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


def test_stale_metrics_fires_on_nothing_running_with_a_queue():
    view = window_from(num_running_reqs="0x20", num_queue_reqs="50x20")
    out = evaluate(STALE_METRICS, view)
    assert isinstance(out, Finding)
    assert out.evidence == (
        "nothing running while requests wait in 100% of 20 samples over 1.7m; "
        "last #running-req 0, #queue-req 50"
    )
    assert out.action.text.startswith(
        "the server looks stuck: check its log and GET /health_generate"
    )


def test_stale_metrics_fires_on_frozen_gauges_without_generation():
    view = window_from(
        num_running_reqs="12x20",
        num_queue_reqs="0x20",
        generation_tokens_rate="0x20",
        num_used_tokens="5000x20",
    )
    out = evaluate(STALE_METRICS, view)
    assert isinstance(out, Finding)
    assert out.condition_ratio == 0.95
    assert out.evidence.startswith("#running-req and #token frozen with no token generated")


def test_stale_metrics_silent_on_long_generations_with_moving_gauges():
    used = " ".join(str(1000 + 100 * k) for k in range(20))
    view = window_from(
        num_running_reqs="12x20",
        num_queue_reqs="0x20",
        generation_tokens_rate="0x20",
        num_used_tokens=used,
    )
    assert isinstance(evaluate(STALE_METRICS, view), Pass)


def test_stale_metrics_silent_when_healthy_or_idle():
    busy = window_from(
        num_running_reqs="12x20", num_queue_reqs="3x20", generation_tokens_rate="900x20"
    )
    idle = window_from(
        num_running_reqs="0x20", num_queue_reqs="0x20", generation_tokens_rate="0x20"
    )
    assert isinstance(evaluate(STALE_METRICS, busy), Pass)
    assert isinstance(evaluate(STALE_METRICS, idle), Pass)


def test_stale_metrics_no_data():
    assert isinstance(evaluate(STALE_METRICS, window_from(token_usage="0.5x20")), NoData)
    assert isinstance(
        evaluate(STALE_METRICS, window_from(num_running_reqs="0x2", num_queue_reqs="9x2")), NoData
    )
