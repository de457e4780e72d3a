"""scheduler_too_conservative and retractions_frequent."""

from helpers import evaluate, window_from
from sglang_tuner.rules.scheduling import RETRACTIONS_FREQUENT, SCHEDULER_TOO_CONSERVATIVE
from sglang_tuner.values import Confidence, Finding, NoData, Pass, ServerConfig

LOW_USAGE = window_from(token_usage="0.5x20", num_queue_reqs="40x20", num_running_reqs="60x20")


def test_scheduler_too_conservative_fires_when_usage_low_and_queue_nonempty():
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=ServerConfig(schedule_conservativeness=1.0)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 0.7"
    assert out.action.note == ""
    assert out.confidence is Confidence.HIGH


def test_scheduler_too_conservative_steps_down_to_floor():
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=ServerConfig(schedule_conservativeness=0.5)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 0.5 -> 0.3"


def test_scheduler_too_conservative_silent_at_the_guides_lowest_value():
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=ServerConfig(schedule_conservativeness=0.3)
    )
    assert isinstance(out, Pass)
    assert out.detail == "--schedule-conservativeness is already 0.3, the guide's lowest value"


def test_scheduler_too_conservative_batch_capped_suggests_max_running_requests():
    config = ServerConfig(schedule_conservativeness=1.0, max_running_requests=60)
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--max-running-requests 60 -> 120"


def test_scheduler_too_conservative_unknown_current_value_noted():
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=None, config_error="http_401")
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 0.7"
    assert out.action.note == "current value unknown (http_401); assumed SGLang's default 1"


def test_scheduler_too_conservative_silent_with_high_usage():
    view = window_from(token_usage="0.95x20", num_queue_reqs="40x20")
    assert isinstance(evaluate(SCHEDULER_TOO_CONSERVATIVE, view), Pass)


def test_scheduler_too_conservative_silent_with_empty_queue():
    view = window_from(token_usage="0.5x20", num_queue_reqs="0x20")
    assert isinstance(evaluate(SCHEDULER_TOO_CONSERVATIVE, view), Pass)


def test_scheduler_too_conservative_no_data_without_token_usage():
    view = window_from(num_queue_reqs="40x20")
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, view)
    assert isinstance(out, NoData) and "token_usage" in out.reason


def test_scheduler_too_conservative_low_confidence_on_half_window():
    view = window_from(token_usage="0.5x8", num_queue_reqs="40x8")
    wide = view.__class__(view.ts, view.columns, 300.0)
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, wide)
    assert isinstance(out, Finding) and out.confidence is Confidence.LOW


RETRACTING = window_from(retractions_per_minute="3x20", token_usage="0.97x20")


def test_retractions_frequent_fires_above_one_per_minute():
    out = evaluate(
        RETRACTIONS_FREQUENT, RETRACTING, config=ServerConfig(schedule_conservativeness=1.0)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 1.3"
    assert out.evidence.startswith("3.0 retractions/min over 1.7m")


def test_retractions_frequent_at_ceiling_suggests_fp8():
    out = evaluate(
        RETRACTIONS_FREQUENT, RETRACTING, config=ServerConfig(schedule_conservativeness=1.3)
    )
    assert isinstance(out, Finding)
    assert out.action.text.startswith("--schedule-conservativeness is already 1.3: free KV memory")


def test_retractions_frequent_silent_at_one_per_minute():
    view = window_from(retractions_per_minute="1x20", token_usage="0.97x20")
    assert isinstance(evaluate(RETRACTIONS_FREQUENT, view), Pass)


def test_retractions_frequent_silent_when_usage_low():
    view = window_from(retractions_per_minute="3x20", token_usage="0.5x20")
    assert isinstance(evaluate(RETRACTIONS_FREQUENT, view), Pass)


def test_retractions_frequent_no_data_points_to_log_file():
    out = evaluate(RETRACTIONS_FREQUENT, window_from(token_usage="0.97x20"))
    assert isinstance(out, NoData) and "log_file" in out.reason


def test_retractions_frequent_no_data_with_too_few_samples():
    out = evaluate(RETRACTIONS_FREQUENT, window_from(retractions_per_minute="3x2"))
    assert isinstance(out, NoData) and "2 of the 6" in out.reason


def test_scheduler_too_conservative_silent_when_retraction_bursts_in_window():
    # Usage dips right after a retraction burst: the pool overflows, it is not under-used.
    view = window_from(
        token_usage="0.5x20",
        num_queue_reqs="40x20",
        num_running_reqs="60x20",
        retractions_per_minute="0x16 30x4",
    )
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, view, config=ServerConfig(schedule_conservativeness=1.0)
    )
    assert isinstance(out, Pass)
    assert out.detail == "requests were retracted in 20% of samples: the pool overflows"
