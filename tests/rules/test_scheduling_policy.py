"""lpm_without_prefix_reuse and fcfs_with_prefix_reuse."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.scheduling_policy import FCFS_WITH_PREFIX_REUSE, LPM_WITHOUT_PREFIX_REUSE

LPM = ServerConfig(version="0.5.9", schedule_policy="lpm")
FCFS = ServerConfig(version="0.5.9", schedule_policy="fcfs")


def _window(hit: float, queue: float):
    return window_from(prefix_cache_hit_ratio=f"{hit}x20", num_queue_reqs=f"{queue}x20")


def test_lpm_without_prefix_reuse_fires_while_lpm_still_sorts_the_queue_without_hits():
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 80), config=LPM)
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-policy lpm -> fcfs"
    assert "prefix_cache_hit_ratio p50 0.02" in out.evidence
    assert "scheduling overhead" in out.action.expected


def test_lpm_without_prefix_reuse_silent_above_128_waiting_where_lpm_is_fcfs_already():
    # SGLang turns lpm into fcfs above 128 waiting requests: switching changes nothing there
    assert isinstance(evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 150), config=LPM), Pass)


def test_lpm_without_prefix_reuse_silent_with_an_empty_queue():
    assert isinstance(evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 0), config=LPM), Pass)


def test_lpm_without_prefix_reuse_silent_with_reuse():
    assert isinstance(evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.6, 150), config=LPM), Pass)


def test_lpm_without_prefix_reuse_stricter_for_multi_turn():
    view = _window(0.07, 80)
    assert isinstance(evaluate(LPM_WITHOUT_PREFIX_REUSE, view, config=LPM), Finding)
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, view, config=LPM, profile="multi_turn")
    assert isinstance(out, Pass)


def test_lpm_without_prefix_reuse_silent_on_fcfs():
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 150), config=FCFS)
    assert isinstance(out, Pass) and out.detail == "schedule policy is fcfs"


def test_lpm_without_prefix_reuse_old_default_is_lpm():
    config = ServerConfig(version="0.4.3")
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 80), config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-policy lpm -> fcfs"
    assert out.action.note == (
        "current value unknown (neither /server_info nor the log's launch line said it); "
        "assumed SGLang's default lpm"
    )


def test_lpm_without_prefix_reuse_no_data_without_config():
    out = evaluate(
        LPM_WITHOUT_PREFIX_REUSE, _window(0.02, 150), config=None, config_error="timeout"
    )
    assert isinstance(out, NoData) and "(timeout)" in out.reason


def test_lpm_without_prefix_reuse_no_data_without_hit_ratio():
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, window_from(num_queue_reqs="150x20"), config=LPM)
    assert isinstance(out, NoData) and "cached_tokens_total" in out.reason


def test_fcfs_with_prefix_reuse_fires_with_high_reuse_and_a_queue():
    out = evaluate(FCFS_WITH_PREFIX_REUSE, _window(0.7, 50), config=FCFS)
    assert isinstance(out, Finding)
    assert out.action.text == "--schedule-policy fcfs -> lpm"
    assert "falls back to fcfs while more than 128 requests wait" in out.action.note


def test_fcfs_with_prefix_reuse_silent_above_lpm_fallback_queue():
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, _window(0.7, 500), config=FCFS), Pass)


def test_fcfs_with_prefix_reuse_silent_without_queue():
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, _window(0.7, 0), config=FCFS), Pass)


def test_fcfs_with_prefix_reuse_lower_bar_for_multi_turn_and_long_context():
    view = _window(0.4, 50)
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, view, config=FCFS), Pass)
    for profile in ("multi_turn", "long_context"):
        out = evaluate(FCFS_WITH_PREFIX_REUSE, view, config=FCFS, profile=profile)
        assert isinstance(out, Finding)


def test_fcfs_with_prefix_reuse_silent_when_radix_cache_disabled():
    config = ServerConfig(schedule_policy="fcfs", disable_radix_cache=True)
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, _window(0.7, 50), config=config), Pass)


def test_fcfs_with_prefix_reuse_unknown_policy_assumes_fcfs_default():
    config = ServerConfig(version="0.5.9")
    out = evaluate(FCFS_WITH_PREFIX_REUSE, _window(0.7, 50), config=config)
    assert isinstance(out, Finding)
    assert out.action.note.startswith(
        "current value unknown (neither /server_info nor the log's launch line said it); "
    )


def test_fcfs_with_prefix_reuse_no_data_with_too_few_samples():
    view = window_from(prefix_cache_hit_ratio="0.7x2", num_queue_reqs="50x2")
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, view, config=FCFS), NoData)


def test_fcfs_with_prefix_reuse_fires_on_cache_thrash():
    view = window_from(
        prefix_cache_hit_ratio=" ".join(["0.03 0.09"] * 10),
        num_queue_reqs="49x20",
        token_usage="0.99x20",
    )
    out = evaluate(FCFS_WITH_PREFIX_REUSE, view, config=FCFS)
    assert isinstance(out, Finding)
    assert out.evidence == (
        "prefix-cache hit ratio mean 0.06 with token usage p50 0.99: shared prefixes are "
        "evicted before reuse; 1-128 requests waiting in 100% of 20 samples"
    )


def test_fcfs_with_prefix_reuse_silent_without_hits_on_a_full_pool():
    view = window_from(prefix_cache_hit_ratio="0x20", num_queue_reqs="49x20", token_usage="0.99x20")
    out = evaluate(FCFS_WITH_PREFIX_REUSE, view, config=FCFS)
    assert isinstance(out, Pass) and out.detail == "no sign of shared prefixes"


def test_the_policy_rules_never_both_hold_on_one_window():
    # hits 0.05 with a pinned pool: fcfs would be sent to lpm, so lpm is not sent back to fcfs
    pinned = window_from(
        prefix_cache_hit_ratio="0.05x20", num_queue_reqs="80x20", token_usage="0.97x20"
    )
    assert isinstance(evaluate(FCFS_WITH_PREFIX_REUSE, pinned, config=FCFS), Finding)
    out = evaluate(LPM_WITHOUT_PREFIX_REUSE, pinned, config=LPM)
    assert isinstance(out, Pass) and "shared prefixes all the same" in out.detail
