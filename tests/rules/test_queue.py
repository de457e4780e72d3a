"""queue_empty and queue_too_long."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.rules.queue import QUEUE_EMPTY, QUEUE_TOO_LONG


def test_queue_empty_fires_when_queue_zero_while_running():
    view = window_from(num_queue_reqs="0x20", num_running_reqs="12x20", request_rate="3x20")
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, Finding)
    assert out.action.text == (
        "client: submit requests faster / raise client concurrency (running batch p50 12)"
    )
    assert out.condition_ratio == 1.0
    assert "num_queue_reqs p50 0.00" in out.evidence


def test_queue_empty_silent_with_standing_queue():
    view = window_from(num_queue_reqs="300x20", num_running_reqs="200x20")
    assert isinstance(evaluate(QUEUE_EMPTY, view), Pass)


def test_queue_empty_silent_below_frequently_ratio():
    view = window_from(num_queue_reqs="0x8 300x12", num_running_reqs="200x20")
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, Pass) and out.condition_ratio == 0.4


def test_queue_empty_no_data_when_idle():
    view = window_from(num_queue_reqs="0x20", num_running_reqs="0x20")
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, NoData) and "idle" in out.reason


def test_queue_empty_no_data_with_too_few_samples():
    view = window_from(num_queue_reqs="0x3", num_running_reqs="5x3")
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, NoData)
    assert out.reason == "window has 3 of the 6 samples needed"
    assert out.retry_after_seconds == 15.0


def test_queue_empty_no_data_when_signal_missing():
    view = window_from(num_running_reqs="5x10")
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, NoData) and "num_queue_reqs" in out.reason


def test_queue_empty_is_offline_only():
    assert QUEUE_EMPTY.profiles == ("offline",)


def test_queue_too_long_fires_above_2000():
    view = window_from(num_queue_reqs="2500x20", num_running_reqs="256x20")
    out = evaluate(QUEUE_TOO_LONG, view)
    assert isinstance(out, Finding)
    assert out.action.text == (
        "client: slow request submission until #queue-req stays under 2000, "
        "or add data-parallel replicas behind the SGLang router"
    )


def test_queue_too_long_silent_in_healthy_range():
    view = window_from(num_queue_reqs="1500x20")
    assert isinstance(evaluate(QUEUE_TOO_LONG, view), Pass)


def test_queue_too_long_legacy_guide_fires_above_1000():
    view = window_from(num_queue_reqs="1500x20")
    out = evaluate(QUEUE_TOO_LONG, view, legacy=True)
    assert isinstance(out, Finding)
    assert "under 1000" in out.action.text


def test_queue_too_long_ignores_missing_samples():
    view = window_from(num_queue_reqs="_x10 2500x10")
    out = evaluate(QUEUE_TOO_LONG, view)
    assert isinstance(out, Finding) and out.samples == 10


def test_queue_empty_silent_while_decode_runs_without_cuda_graphs():
    view = window_from(
        num_queue_reqs="0x10", num_running_reqs="600x10", cuda_graph_false_ratio="0.9x10"
    )
    out = evaluate(QUEUE_EMPTY, view)
    assert isinstance(out, Pass) and "not a slow client" in out.detail


def test_queue_empty_silent_while_the_kv_pool_is_full():
    view = window_from(num_queue_reqs="0x10", num_running_reqs="2x10", token_usage="1.0x10")
    assert isinstance(evaluate(QUEUE_EMPTY, view), Pass)
