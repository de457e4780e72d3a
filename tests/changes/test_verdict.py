"""Verdicts: the same metrics before and after a change, compared with a block bootstrap."""

import math

from helpers import window_from
from sglang_tuner.changes.bootstrap import ratio_interval
from sglang_tuner.changes.verdict import (
    HELPED,
    HURT,
    INCONCLUSIVE,
    NO_CHANGE,
    TRADED,
    compare,
    summarize,
)

NAMES = (
    "gen_throughput", "token_usage", "retractions_per_minute", "request_rate",
    "num_running_reqs", "num_queue_reqs", "prompt_tokens_mean", "itl_p50_seconds",
)  # fmt: skip


def _wobble(mean: float, n: int = 60, amplitude: float = 0.03) -> str:
    """A deterministic series around `mean` (a few per cent up and down)."""
    return " ".join(f"{mean * (1 + amplitude * math.sin(k * 1.7)):.4f}" for k in range(n))


def _window(tput: float, usage: float = 0.9, running: float = 300, queue: float = 400, **kw):
    return summarize(window_from(**_raw(tput, usage, running, queue, **kw)), NAMES)


def _raw(tput: float, usage: float = 0.9, running: float = 300, queue: float = 400, **kw):
    return {
        "gen_throughput": _wobble(tput),
        "token_usage": _wobble(usage, amplitude=0.01),
        "retractions_per_minute": "0x60",
        "request_rate": _wobble(tput / 250),
        "num_running_reqs": _wobble(running),
        "num_queue_reqs": _wobble(queue),
        "prompt_tokens_mean": _wobble(1000),
    } | kw


def test_compare_says_helped_when_throughput_rises_beyond_the_interval():
    verdict = compare(_window(4000), _window(4600, usage=0.93), "offline")
    assert verdict.verdict == HELPED
    tput = next(m for m in verdict.metrics if m.metric == "gen_throughput")
    assert tput.verdict == HELPED and tput.effect_ratio is not None
    assert 1.13 < tput.effect_ratio < 1.17 and tput.low is not None and tput.low > 1.03
    assert "bootstrap" in verdict.method


def test_compare_says_hurt_and_which_metric():
    verdict = compare(_window(4000), _window(3400), "offline")
    assert verdict.verdict == HURT and verdict.reason == "worse: gen_throughput"


def test_compare_says_no_change_inside_the_band():
    verdict = compare(_window(4000), _window(4010), "offline")
    assert verdict.verdict == NO_CHANGE


def test_compare_names_the_metrics_that_decided_it():
    before, after = _window(4000), _window(3400)
    assert compare(before, after, "offline").judged_on == ("gen_throughput",)
    asked = compare(before, after, "offline", primary=("token_usage", "ttft_p50_seconds"))
    assert asked.judged_on == ("token_usage",)  # the offline profile does not read TTFT p50
    doubled = compare(before, _window(8000, running=600), "offline", primary=("token_usage",))
    assert doubled.verdict == INCONCLUSIVE and doubled.judged_on == ("token_usage",)


def test_offline_verdict_follows_throughput_and_names_more_retractions_beside_it():
    after = _window(4300, retractions_per_minute=_wobble(30))
    before = _window(4000, retractions_per_minute=_wobble(5))
    verdict = compare(before, after, "offline")
    assert verdict.verdict == HELPED
    assert verdict.reason == "better: gen_throughput; also worse: retractions_per_minute"


def test_offline_verdict_is_hurt_when_throughput_falls_whatever_else_improves():
    after = _window(3600, retractions_per_minute=_wobble(0.5))
    before = _window(4000, retractions_per_minute=_wobble(30))
    verdict = compare(before, after, "offline")
    assert verdict.verdict == HURT
    assert verdict.reason == "worse: gen_throughput; also better: retractions_per_minute"


def test_compare_inconclusive_when_the_clients_doubled_at_the_same_time():
    verdict = compare(_window(4000), _window(5000, running=350, queue=1450), "offline")
    assert verdict.verdict == INCONCLUSIVE
    assert verdict.reason.startswith("the load changed: running + waiting requests 700 -> 1.8e+03")


def test_compare_a_saturated_server_serving_more_requests_is_not_a_load_change():
    # closed-loop clients: a faster server finishes more requests per second, same clients
    verdict = compare(_window(4000), _window(4800), "offline")
    assert verdict.verdict == HELPED


def test_compare_an_unsaturated_server_judges_load_by_request_rate():
    before = _window(2000, queue=0, request_rate=_wobble(8))
    after = _window(2000, queue=0, request_rate=_wobble(16))
    verdict = compare(before, after, "offline")
    assert verdict.verdict == INCONCLUSIVE and "request rate" in verdict.reason


def test_compare_inconclusive_with_too_few_samples():
    short = summarize(window_from(gen_throughput="4000x3"), NAMES)
    verdict = compare(short, _window(4600), "offline")
    assert verdict.verdict == INCONCLUSIVE and "too few samples" in verdict.reason


def test_compare_online_judges_latency_lower_is_better():
    before = _raw(3000, ttft_p99_seconds=_wobble(2.0), itl_p99_seconds=_wobble(0.08))
    after = _raw(2990, ttft_p99_seconds=_wobble(1.2), itl_p99_seconds=_wobble(0.05))
    names = (*NAMES, "ttft_p99_seconds", "itl_p99_seconds")
    verdict = compare(
        summarize(window_from(**before), names), summarize(window_from(**after), names), "online"
    )
    by_metric = {m.metric: m.verdict for m in verdict.metrics}
    assert by_metric["ttft_p99_seconds"] == HELPED and by_metric["itl_p99_seconds"] == HELPED


def test_ratio_interval_is_repeatable_and_brackets_the_ratio():
    old, new = [10.0 + (k % 3) for k in range(30)], [12.0 + (k % 3) for k in range(30)]
    first, second = ratio_interval(old, new), ratio_interval(old, new)
    assert first == second
    ratio, low, high = first
    assert low is not None and high is not None and ratio is not None
    assert low <= ratio <= high


def _capped(tput: float, itl: float) -> dict:
    return {"itl_p50_seconds": _wobble(itl, amplitude=0.001), "gen_throughput": _wobble(tput)}


def test_a_latency_cap_that_cut_throughput_unannounced_is_hurt_not_helped():
    before = summarize(window_from(**_raw(4000, **_capped(4000, 0.080))), NAMES)
    after = summarize(window_from(**_raw(4000, **_capped(880, 0.030))), NAMES)
    verdict = compare(before, after, "online", primary=("itl_p50_seconds",))
    itl = next(m for m in verdict.metrics if m.metric == "itl_p50_seconds")
    assert itl.verdict == HELPED  # what it was for got better...
    assert verdict.verdict == HURT  # ...at a cost nobody was told of
    assert "cost: tok/s -78%" in verdict.reason and "not stated in advance" in verdict.reason


def test_the_same_cut_stated_in_advance_is_traded():
    before = summarize(window_from(**_raw(4000, **_capped(4000, 0.080))), NAMES)
    after = summarize(window_from(**_raw(4000, **_capped(2400, 0.040))), NAMES)
    verdict = compare(before, after, "online", primary=("itl_p50_seconds",), stated=("tok/s",))
    assert verdict.verdict == TRADED
    assert "at the stated cost: tok/s -40%" in verdict.reason


def test_a_cost_inside_its_guard_leaves_the_verdict_alone():
    before = summarize(window_from(**_raw(4000, **_capped(4000, 0.080))), NAMES)
    after = summarize(window_from(**_raw(4000, **_capped(3700, 0.050))), NAMES)  # -7.5 %
    verdict = compare(before, after, "online", primary=("itl_p50_seconds",))
    assert verdict.verdict == HELPED


def test_offline_changes_are_held_to_latency_too():
    slow = {"itl_p50_seconds": _wobble(0.030, amplitude=0.001)}
    slower = {"itl_p50_seconds": _wobble(0.060, amplitude=0.001)}
    before = summarize(window_from(**_raw(4000, **slow)), NAMES)
    after = summarize(window_from(**_raw(4600, **slower)), NAMES)
    verdict = compare(before, after, "offline")
    assert verdict.verdict == HURT and "ITL p50 +100%" in verdict.reason


def test_an_offline_change_that_doubles_the_itl_tail_is_hurt_unless_stated():
    names = (*NAMES, "itl_p99_seconds")
    tail = {"itl_p99_seconds": _wobble(0.100, amplitude=0.001)}
    longer = {"itl_p99_seconds": _wobble(0.200, amplitude=0.001)}
    before = summarize(window_from(**_raw(4000, **tail)), names)
    after = summarize(window_from(**_raw(4600, **longer)), names)
    assert compare(before, after, "offline").verdict == HURT
    assert "ITL p99 +100%" in compare(before, after, "offline").reason
    assert compare(before, after, "offline", stated=("ITL p99",)).verdict == TRADED


# SGLang's TTFT buckets (0.4.10-0.5.23 `metrics/collector.py`): they double past 100 s.
TTFT_BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ONLINE_NAMES = (*NAMES, "ttft_p99_seconds", "itl_p99_seconds")


def _online(tput: float, ttft: float, itl: float = 0.05):
    raw = _raw(tput, ttft_p99_seconds=_wobble(ttft), itl_p99_seconds=_wobble(itl))
    return summarize(window_from(**raw), ONLINE_NAMES)


def test_a_tail_rise_inside_one_doubling_bucket_is_no_measurement_and_no_cost():
    # a p99 of a few requests per scrape read between 200 and 400 s: interpolation doubles a
    # +9 % rise; the bucket edges cannot tell it from none
    before, after = _online(3000, 210.0), _online(2990, 380.0)
    read_alone = compare(before, after, "online", primary=("itl_p99_seconds",))
    assert read_alone.verdict == HURT and "TTFT p99 +81%" in read_alone.reason
    verdict = compare(
        before, after, "online", primary=("itl_p99_seconds",),
        resolution={"ttft_p99_seconds": TTFT_BOUNDS},
    )  # fmt: skip
    ttft = next(m for m in verdict.metrics if m.metric == "ttft_p99_seconds")
    assert ttft.verdict == INCONCLUSIVE and verdict.verdict == NO_CHANGE
    assert (
        "within the histogram's resolution, not a measurement: ttft_p99_seconds +81% "
        "(bounds 200, 400)" in verdict.reason
    )


def test_a_tail_rise_across_a_whole_bucket_is_still_measured():
    before, after = _online(3000, 90.0), _online(2990, 300.0)  # (80, 100] -> (200, 400]
    verdict = compare(
        before, after, "online", primary=("itl_p99_seconds",),
        resolution={"ttft_p99_seconds": TTFT_BOUNDS},
    )  # fmt: skip
    assert verdict.verdict == HURT and "TTFT p99 +233%" in verdict.reason


def _capped_online(tput: float, itl: float, ttft: float):
    raw = _raw(tput, itl_p50_seconds=_wobble(itl), ttft_p99_seconds=_wobble(ttft))
    return summarize(window_from(**raw), ONLINE_NAMES)


def test_a_cost_past_its_guard_is_held_to_the_least_rise_the_buckets_show():
    # a latency cap: ITL p50 down to a quarter as asked, TTFT p99 read 55.6 s -> 99.8 s (+79 %,
    # past the 50 % guard) from SGLang's 40-60 s and 80-100 s buckets: at least +33 %, under the
    # guard. The simulator measured +26 % there; the revert this once set off cost ITL p50 +233 %
    before, after = _capped_online(3000, 0.12, 55.6), _capped_online(2800, 0.03, 99.8)
    primary, bounds = ("itl_p50_seconds",), {"ttft_p99_seconds": TTFT_BOUNDS}
    read_alone = compare(before, after, "online", primary=primary)
    assert read_alone.verdict == HURT
    assert "TTFT p99 +79% (not stated in advance)" in read_alone.reason
    held = compare(before, after, "online", primary=primary, resolution=bounds)
    assert held.verdict == HELPED and "worse: ttft_p99_seconds" in held.reason
    # three buckets further (200-400 s) the least rise, +233 %, is a cost past the guard
    further = _capped_online(2800, 0.03, 300.0)
    assert compare(before, further, "online", primary=primary, resolution=bounds).verdict == HURT


def test_fine_buckets_resolve_what_they_resolve():
    itl_bounds = (0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1)
    before, after = _online(3000, 5.0, itl=0.027), _online(3000, 5.0, itl=0.038)
    verdict = compare(
        before, after, "online", resolution={"itl_p99_seconds": itl_bounds}
    )  # (0.025, 0.03] -> (0.035, 0.04]: at least +17 %
    itl = next(m for m in verdict.metrics if m.metric == "itl_p99_seconds")
    assert itl.verdict == HURT


def _noisy(mean: float) -> str:
    """Tokens/s swinging by half between scrapes: no interval can tell a 5 % gain."""
    return " ".join(f"{mean * (1 + 0.5 * math.sin(k * 1.7)):.4f}" for k in range(60))


def test_a_stated_cost_beside_a_gain_too_noisy_to_tell_is_inconclusive_not_hurt():
    # an offline pool raise: ITL p50 doubles, as its advice said; tokens/s cannot be told
    slow = {"itl_p50_seconds": _wobble(0.030, amplitude=0.001)}
    slower = {"itl_p50_seconds": _wobble(0.060, amplitude=0.001)}
    before = summarize(window_from(**{**_raw(4000, **slow), "gen_throughput": _noisy(4000)}), NAMES)
    after = summarize(
        window_from(**{**_raw(4000, **slower), "gen_throughput": _noisy(4200)}), NAMES
    )
    said = compare(before, after, "offline", stated=("ITL p50",))
    assert said.verdict == INCONCLUSIVE  # no revert of a trade that may be paying off
    assert "at the cost stated in advance: ITL p50 +100%, for a gain not measured" in said.reason
    # the same cost nobody was told of is harm
    unsaid = compare(before, after, "offline")
    assert unsaid.verdict == HURT and "not stated in advance" in unsaid.reason


def test_a_stated_cost_for_a_gain_measured_as_none_is_hurt():
    slow = {"itl_p50_seconds": _wobble(0.030, amplitude=0.001)}
    slower = {"itl_p50_seconds": _wobble(0.060, amplitude=0.001)}
    before = summarize(window_from(**_raw(4000, **slow)), NAMES)
    after = summarize(window_from(**_raw(4010, **slower)), NAMES)
    verdict = compare(before, after, "offline", stated=("ITL p50",))
    assert verdict.verdict == HURT and "cost: ITL p50 +100%" in verdict.reason
