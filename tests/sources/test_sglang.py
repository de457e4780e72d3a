"""SignalMapper on hand-written pages of each SGLang version (tests/fixtures/sglang)."""

from pathlib import Path

import pytest
from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import Window
from sglang_tuner.model.window_histogram import (
    TTFT_BUCKETS,
    is_bucket_signal,
    quantile_sorted,
    window_buckets,
)
from sglang_tuner.sources.sglang import NoSglangMetricsError, SignalMapper
from sglang_tuner.sources.sglang_names import SGLANG_METRIC_NAMES, describe_signal_sources

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sglang"
# Between scrape a and b (5 s): see tests/fixtures/sglang/make_fixtures.py
RATES = {
    s.REQUEST_RATE: 10.0,
    s.PROMPT_TOKENS_RATE: 20_000.0,
    s.GENERATION_TOKENS_RATE: 3_000.0,
    s.PREFIX_CACHE_HIT_RATIO: 0.6,
    s.PROMPT_TOKENS_MEAN: 2_000.0,
    s.TTFT_P50_SECONDS: 0.4,
    s.TTFT_P99_SECONDS: 0.6,
    s.RESTARTS: 0.0,
}


def window_histogram_of(
    samples: list[dict[str, float]], prefix: str
) -> tuple[list[float], list[float]]:
    """The histogram a window of `samples` (5 s apart) carries, summed."""
    window = Window(len(samples) + 3)
    for k, values in enumerate([*samples, *samples, *samples]):  # three samples at least
        window.append(Snapshot("t", 5.0 * (k + 1), values))
    found = window_buckets(window.view(1e9, 1e9), prefix)
    assert found is not None
    return found


def two_scrapes(stem: str) -> dict[str, float]:
    """Signals after scrape `a` at t=100 and `b` at t=105."""
    mapper = SignalMapper()
    mapper.update((FIXTURES / f"{stem}_a.prom").read_text(), 100.0)
    return mapper.update((FIXTURES / f"{stem}_b.prom").read_text(), 105.0)


@pytest.mark.parametrize(
    "stem", ["v0.4.10", "v0.5.4", "v0.5.9_dp2", "v0.5.17", "v0.5.17_tp2", "v0.5.17_escaped"]
)
def test_signal_mapper_rates_over_two_scrapes_every_version(stem: str) -> None:
    values = two_scrapes(stem)
    assert {k: values[k] for k in RATES} == pytest.approx(RATES)


def test_signal_mapper_first_scrape_has_gauges_but_no_rates() -> None:
    values = SignalMapper().update((FIXTURES / "v0.5.17_a.prom").read_text(), 100.0)
    assert values[s.NUM_RUNNING_REQS] == 100.0 and values[s.TOKEN_USAGE] == 0.8
    assert s.REQUEST_RATE not in values and s.RETRACTIONS_PER_MINUTE not in values


def test_signal_mapper_v0_5_17_gauges_and_startup_memory() -> None:
    values = two_scrapes("v0.5.17")
    assert values[s.NUM_QUEUE_REQS] == 20.0
    assert values[s.NUM_USED_TOKENS] == 400_000.0
    assert values[s.MAX_TOTAL_NUM_TOKENS] == 500_000.0
    assert values[s.GEN_THROUGHPUT] == 3_000.0
    assert values[s.STARTUP_AVAILABLE_GPU_MEM_GB] == 13.5
    assert values[s.CUDA_GRAPH_PASS_RATIO] == pytest.approx(0.9)
    assert values[s.RETRACTIONS_PER_MINUTE] == pytest.approx(60.0)
    assert values[s.QUEUE_TIME_P50_SECONDS] > 0


def test_signal_mapper_does_not_sum_retractions_over_tp_ranks() -> None:
    assert two_scrapes("v0.5.17_tp2")[s.RETRACTIONS_PER_MINUTE] == pytest.approx(60.0)


def test_signal_mapper_sums_gauges_and_counters_over_dp_ranks() -> None:
    values = two_scrapes("v0.5.9_dp2")
    assert values[s.NUM_RUNNING_REQS] == 160.0
    assert values[s.NUM_RUNNING_REQS_MAX_RANK] == 100.0
    assert values[s.NUM_QUEUE_REQS] == 30.0
    assert values[s.TOKEN_USAGE] == pytest.approx(0.7)
    assert values[s.GEN_THROUGHPUT] == 5_000.0
    assert values[s.NUM_DP_RANKS] == 2.0
    assert values[s.RETRACTIONS_PER_MINUTE] == pytest.approx(120.0)  # 5 per rank in 5 s


def test_signal_mapper_v0_4_10_uses_cumulative_retraction_gauge() -> None:
    values = two_scrapes("v0.4.10")
    assert values[s.RETRACTIONS_PER_MINUTE] == pytest.approx(24.0)
    assert s.CUDA_GRAPH_PASS_RATIO not in values and s.MAX_TOTAL_NUM_TOKENS not in values


def test_signal_mapper_v0_5_4_uses_interval_gauge_summed_over_pid() -> None:
    assert two_scrapes("v0.5.4")[s.RETRACTIONS_PER_MINUTE] == pytest.approx(36.0)


def test_signal_mapper_counter_reset_counts_a_restart_and_rates_start_again_after_it() -> None:
    mapper = SignalMapper()
    mapper.update((FIXTURES / "v0.5.17_b.prom").read_text(), 100.0)
    restart = (FIXTURES / "v0.5.17_c_restart.prom").read_text()
    values = mapper.update(restart, 105.0)
    assert values[s.RESTARTS] == 1.0
    # what the new process counted since it started is no increase over these 5 s
    assert s.REQUEST_RATE not in values and s.RETRACTIONS_PER_MINUTE not in values
    assert s.TTFT_P99_SECONDS not in values
    assert values[s.NUM_RUNNING_REQS] >= 0  # the gauges are read as ever
    after = mapper.update(restart, 110.0)  # from the restart on, its counters are the baseline
    assert after[s.RESTARTS] == 0.0 and after[s.REQUEST_RATE] == 0.0
    assert after[s.RETRACTIONS_PER_MINUTE] == 0.0


def test_signal_mapper_ignores_cache_hit_rate_gauge() -> None:
    text = (FIXTURES / "v0.5.17_b.prom").read_text()
    assert "sglang:cache_hit_rate{" in text
    values = two_scrapes("v0.5.17")
    assert values[s.PREFIX_CACHE_HIT_RATIO] == pytest.approx(0.6)  # the gauge says 0.0


def test_signal_mapper_keeps_only_total_priority_series() -> None:
    page = 'sglang:num_queue_reqs{priority=""} 7\nsglang:num_queue_reqs{priority="1"} 3\n'
    assert SignalMapper().update(page, 1.0)[s.NUM_QUEUE_REQS] == 7.0


def test_signal_mapper_raises_on_page_without_sglang_samples() -> None:
    with pytest.raises(NoSglangMetricsError):
        SignalMapper().update("up 1\n", 1.0)


@pytest.mark.parametrize(
    ("page", "reason", "message"),
    [
        ("", "no_sglang_metrics", "no samples on this page"),
        ("# HELP sglang:num_running_reqs x\n# TYPE sglang:num_running_reqs gauge\n",
         "no_sglang_metrics", "no samples on this page"),
        ("up 1\n", "not_sglang", "no SGLang metric families on this page (found up)"),
        ('vllm:num_requests_running{model_name="m"} 3\nvllm:num_requests_waiting 0\n'
         "python_gc_objects_collected_total 1\n",
         "not_sglang", "(found vllm:*, python_*): not an SGLang server?"),
        ("a_1 1\nb_1 1\nc_1 1\nd_1 1\ne_1 1\nf_1 1\n",
         "not_sglang", "(found a_*, b_*, c_*, d_* and 2 more)"),
        ('sglang_tuner_target_up{target="gpu-a"} 1.0\nsglang_tuner_build_info 1\n'
         "python_info 1\n",
         "own_exporter", "this page is sglang-tuner's own /metrics, not an SGLang server"),
    ],
)  # fmt: skip
def test_signal_mapper_says_whose_page_it_is_when_none_is_sglangs(
    page: str, reason: str, message: str
) -> None:
    with pytest.raises(NoSglangMetricsError) as raised:
        SignalMapper().update(page, 1.0)
    assert raised.value.reason == reason and message in str(raised.value)


def test_signal_mapper_accepts_an_sglang_page_with_nothing_it_reads_yet() -> None:
    page = 'sglang:some_future_family{model_name="m"} 1\nsglang_tuner_target_up 1\nup 1\n'
    assert SignalMapper().update(page, 1.0) == {}


def test_signal_mapper_emits_only_canonical_signals() -> None:
    values = two_scrapes("v0.5.23_dp2_full")
    assert {k for k in values if not is_bucket_signal(k)} <= set(s.ALL_SIGNALS)
    carried = {k for k in values if is_bucket_signal(k)}
    assert {k.split(":")[0] for k in carried} == {"ttft_bucket", "itl_bucket"}


def test_signal_mapper_carries_the_intervals_buckets_that_give_its_quantiles() -> None:
    values = two_scrapes("v0.5.17")
    bounds, counts = window_histogram_of([values], TTFT_BUCKETS)
    assert quantile_sorted(0.5, bounds, counts) == pytest.approx(values[s.TTFT_P50_SECONDS])
    assert quantile_sorted(0.99, bounds, counts) == pytest.approx(values[s.TTFT_P99_SECONDS])


def test_signal_mapper_carries_no_buckets_on_its_first_scrape() -> None:
    values = SignalMapper().update((FIXTURES / "v0.5.17_a.prom").read_text(), 100.0)
    assert not any(is_bucket_signal(k) for k in values)


def test_sglang_metric_names_cover_every_described_source() -> None:
    described = {name for names in describe_signal_sources().values() for name in names}
    assert described <= SGLANG_METRIC_NAMES
    assert all(name.startswith("sglang:") for name in SGLANG_METRIC_NAMES)
    assert not {"sglang:cache_hit_rate", "sglang:is_cuda_graph", "sglang:utilization"} & (
        SGLANG_METRIC_NAMES
    )


def test_describe_signal_sources_uses_canonical_signals() -> None:
    assert set(describe_signal_sources()) <= set(s.ALL_SIGNALS)


def test_signal_mapper_does_not_sum_gauges_over_pipeline_ranks() -> None:
    page = (
        'sglang:num_running_reqs{pp_rank="0",tp_rank="0"} 40\n'
        'sglang:num_running_reqs{pp_rank="1",tp_rank="0"} 40\n'
    )
    values = SignalMapper().update(page, 1.0)
    assert values[s.NUM_RUNNING_REQS] == 40.0 and values[s.NUM_DP_RANKS] == 1.0


def test_signal_mapper_retraction_counter_absent_on_new_server_reads_zero() -> None:
    page = 'sglang:cuda_graph_passes_total{mode="decode_cuda_graph",tp_rank="0"} {n}\n'
    mapper = SignalMapper()
    mapper.update(page.replace("{n}", "10"), 0.0)
    values = mapper.update(page.replace("{n}", "20"), 5.0)
    assert values[s.RETRACTIONS_PER_MINUTE] == 0.0 and values[s.CUDA_GRAPH_PASS_RATIO] == 1.0


def test_signal_mapper_no_latency_quantile_without_new_requests() -> None:
    text = (FIXTURES / "v0.5.17_a.prom").read_text()
    mapper = SignalMapper()
    mapper.update(text, 0.0)
    values = mapper.update(text, 5.0)
    assert s.TTFT_P50_SECONDS not in values and values[s.REQUEST_RATE] == 0.0


def test_signal_mapper_keeps_the_first_of_a_repeated_series_and_counts_the_repeat() -> None:
    # Prometheus keeps the first sample of a series a page repeats; summing them would read a
    # token usage of 0.45 + 17 as 17.45. Series that differ in a label are still combined.
    page = (
        'sglang:token_usage{dp_rank="0"} 0.45\n'
        'sglang:token_usage{dp_rank="0"} 17\n'
        'sglang:num_queue_reqs{dp_rank="0"} 2\n'
        'sglang:num_queue_reqs{dp_rank="1"} 3\n'
        'sglang:num_queue_reqs{dp_rank="1"} 3\n'
    )
    mapper = SignalMapper()
    values = mapper.update(page, 0.0)
    assert values[s.TOKEN_USAGE] == 0.45
    assert values[s.NUM_QUEUE_REQS] == 5.0
    assert mapper.duplicates == 2
    without_last_line = page.rsplit("\n", 2)[0] + "\n"
    mapper.update(without_last_line, 1.0)
    assert mapper.duplicates == 1  # the last page's


def test_signal_mapper_keeps_the_bucket_bounds_each_latency_quantile_is_read_from() -> None:
    def page(counts: tuple[int, ...]) -> str:
        bounds = ("100.0", "200.0", "400.0", "+Inf")
        return (
            "".join(
                f'sglang:time_to_first_token_seconds_bucket{{le="{le}",tp_rank="0"}} {n}\n'
                for le, n in zip(bounds, counts, strict=True)
            )
            + f'sglang:time_to_first_token_seconds_count{{tp_rank="0"}} {counts[-1]}\n'
        )

    mapper = SignalMapper()
    mapper.update(page((0, 0, 0, 0)), 0.0)
    values = mapper.update(page((1, 3, 4, 4)), 5.0)
    # one request of four past 200 s: the p99 reads 392 s, somewhere in (200, 400] in truth
    assert 200 < values[s.TTFT_P99_SECONDS] <= 400
    assert mapper.resolution[s.TTFT_P99_SECONDS] == (100.0, 200.0, 400.0, float("inf"))
    assert mapper.resolution[s.TTFT_P50_SECONDS] == (100.0, 200.0, 400.0, float("inf"))


def test_signal_mapper_reads_the_intervals_mean_ttft_from_sum_and_count() -> None:
    a, b = (FIXTURES / "v0.5.17_a.prom").read_text(), (FIXTURES / "v0.5.17_b.prom").read_text()
    mapper = SignalMapper()
    mapper.update(a, 100.0)
    values = mapper.update(b, 105.0)
    # time_to_first_token_seconds: _sum 61 + 40.5 -> 90.5 + 61, _count 122 + 81 -> 181 + 122
    assert values[s.TTFT_MEAN_SECONDS] == pytest.approx((151.5 - 101.5) / (303 - 203))
