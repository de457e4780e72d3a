"""scheduler_too_conservative and retractions_frequent."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.scheduling import RETRACTIONS_FREQUENT, SCHEDULER_TOO_CONSERVATIVE

LOW_USAGE = window_from(token_usage="0.5x20", num_queue_reqs="40x20", num_running_reqs="60x20")


def test_scheduler_too_conservative_fires_when_usage_low_and_queue_nonempty():
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=ServerConfig(schedule_conservativeness=1.0)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 0.3"  # usage 0.5: to the floor
    assert out.action.note == ""
    assert out.confidence is Confidence.HIGH
    assert "token usage from p50 0.50 to about 0.9" in out.action.expected
    # no generation throughput in the window: no server model, so no prediction and a hint
    assert out.action.prediction is not None and out.action.prediction.gain is None
    assert out.action.expected.startswith("no prediction: nothing decoded")
    assert out.severity is Severity.INFO


def test_scheduler_too_conservative_not_when_prefill_batches_are_cut_at_one_size():
    # the Prefill batch lines at the largest #new-token: a token budget cuts the batches
    # (SGLang's PrefillAdder), which the conservativeness does not change
    config = ServerConfig(schedule_conservativeness=1.0)
    cut = window_from(
        token_usage="0.5x20", num_queue_reqs="40x20", num_running_reqs="60x20",
        prefill_full_ratio="1x20",
    )  # fmt: skip
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, cut, config=config)
    assert isinstance(out, Pass) and "prefill token budget" in out.detail
    mixed = window_from(
        token_usage="0.5x20", num_queue_reqs="40x20", num_running_reqs="60x20",
        prefill_full_ratio="0.3x20",
    )  # fmt: skip
    assert isinstance(evaluate(SCHEDULER_TOO_CONSERVATIVE, mixed, config=config), Finding)

    # u = 0.8, T = 0.9: reservations x 0.8 * 0.1 / (0.9 * 0.2) = 0.444
    view = window_from(token_usage="0.8x20", num_queue_reqs="40x20", num_running_reqs="60x20")
    config = ServerConfig(schedule_conservativeness=1.0)
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, view, config=config)
    assert isinstance(out, Finding) and out.action.text == "--schedule-conservativeness 1 -> 0.44"


def test_scheduler_too_conservative_counts_only_the_effective_part_above_1_43():
    # SGLang caps the ratio at 1.0 = 0.7 x 1.43: from 3 the same 0.444 of 1.43, not of 3.
    view = window_from(token_usage="0.8x20", num_queue_reqs="40x20", num_running_reqs="60x20")
    out = evaluate(
        SCHEDULER_TOO_CONSERVATIVE, view, config=ServerConfig(schedule_conservativeness=3.0)
    )
    assert isinstance(out, Finding) and out.action.text == "--schedule-conservativeness 3 -> 0.63"
    assert "above 1.43 all schedule alike" in out.action.note


def test_scheduler_too_conservative_is_graded_by_the_predicted_gain_not_one_measurement():
    # a warning at most; each finding's severity comes from the server model's prediction
    assert SCHEDULER_TOO_CONSERVATIVE.severity is Severity.WARNING
    assert "8B" not in SCHEDULER_TOO_CONSERVATIVE.measured


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


def test_a_cap_that_holds_an_online_batch_is_raised_too_the_plan_weighs_the_trade():
    # online the raise trades ITL for queue wait: no longer vetoed as a latency choice; the
    # prediction says every objective and the plan holds it where a service level breaks
    config = ServerConfig(schedule_conservativeness=1.0, max_running_requests=60)
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=config, profile="online")
    assert isinstance(out, Finding)
    assert out.action.text == "--max-running-requests 60 -> 120"
    assert "now capped at 60" in out.action.expected


def test_scheduler_too_conservative_unknown_current_value_noted():
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=None, config_error="http_401")
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-conservativeness 1 -> 0.3"
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
    # from SGLang's default the guide's step is said to change little (the ratio's floor only)
    assert "little expected from SGLang's default or above" in out.action.expected


def test_retractions_frequent_at_the_guides_value_says_no_value_of_it_helps():
    out = evaluate(
        RETRACTIONS_FREQUENT, RETRACTING, config=ServerConfig(schedule_conservativeness=1.3)
    )
    assert isinstance(out, Pass)
    assert "no value of it stops them" in out.detail


def test_retractions_frequent_goes_to_the_guides_value_in_one_step_and_warns_below_default():
    out = evaluate(
        RETRACTIONS_FREQUENT, RETRACTING, config=ServerConfig(schedule_conservativeness=0.3)
    )
    assert isinstance(out, Finding) and out.action.text == "--schedule-conservativeness 0.3 -> 1.3"
    assert out.severity is None  # the rule's warning stands
    assert "Retractions themselves need not fall" in out.action.expected


def test_retractions_frequent_from_the_default_or_online_is_a_hint():
    default = evaluate(
        RETRACTIONS_FREQUENT, RETRACTING, config=ServerConfig(schedule_conservativeness=1.0)
    )
    online = evaluate(
        RETRACTIONS_FREQUENT,
        RETRACTING,
        config=ServerConfig(schedule_conservativeness=0.3),
        profile="online",
    )
    assert isinstance(default, Finding) and default.severity is Severity.INFO
    assert isinstance(online, Finding) and online.severity is Severity.INFO


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


def _dp_attention_server(reported: float, version: str = "0.5.9") -> ServerConfig:
    """A DeepSeek-style server under attention DP, read as /server_info reports it."""
    import json
    from pathlib import Path

    from sglang_tuner.sources.server_info import parse_server_info

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "server_info"
    body = json.loads((fixtures / "v0.5.9.json").read_text())
    return parse_server_info({**body, "version": version, "schedule_conservativeness": reported})


def test_dp_attention_retractions_advice_is_in_flag_units_and_stops_once_applied():
    # reported 0.3 = 0.3 x the default 1.0: the advice raises the flag, 1 -> 1.3
    out = evaluate(RETRACTIONS_FREQUENT, RETRACTING, config=_dp_attention_server(0.3))
    assert isinstance(out, Finding)
    assert out.action.text.startswith("--schedule-conservativeness 1 -> 1.3")
    # once applied the server reports 0.39: the flag is at 1.3, no advice to set 1.3 again
    out = evaluate(RETRACTIONS_FREQUENT, RETRACTING, config=_dp_attention_server(0.39))
    assert not (isinstance(out, Finding) and "1.3 -> 1.3" in out.action.text)
    assert not (isinstance(out, Finding) and "0.39" in out.action.text)


def test_dp_attention_low_usage_is_not_refused_as_already_at_the_guides_0_3():
    # reported 0.3 is the flag 1.0: it may still be lowered
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, LOW_USAGE, config=_dp_attention_server(0.3))
    assert isinstance(out, Finding)
    assert out.action.text.startswith("--schedule-conservativeness 1 -> ")


def test_scheduler_too_conservative_reads_no_queue_without_running_requests_as_conservative():
    # one long request chunk-prefilled (nothing running, its next chunk queued), then a burst
    # arriving on an idle server: any scheduler admits these at once
    prefill = window_from(token_usage="0.02x8", num_queue_reqs="1x6 2x2", num_running_reqs="0x8")
    outcome = evaluate(SCHEDULER_TOO_CONSERVATIVE, prefill)
    assert isinstance(outcome, NoData) and "no request was running" in outcome.reason
    burst = window_from(
        token_usage="0.01x6 0.3x4", num_queue_reqs="40x6 0x4", num_running_reqs="0x6 30x4"
    )
    assert isinstance(evaluate(SCHEDULER_TOO_CONSERVATIVE, burst), Pass)
    # requests running while others wait with room in the pool: conservative
    held = window_from(token_usage="0.3x10", num_queue_reqs="40x10", num_running_reqs="30x10")
    assert isinstance(evaluate(SCHEDULER_TOO_CONSERVATIVE, held), Finding)
