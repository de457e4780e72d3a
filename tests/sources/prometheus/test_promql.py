"""The fleet's PromQL: durations, selectors for both spellings, rank aggregation, and answers back
into signals; the expressions evaluated by Prometheus's own engine (`promtool test rules`)."""

import math
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from sglang_tuner.model import signals as s
from sglang_tuner.sources.prometheus.promql import (
    CACHED_TOKENS_RATE,
    COUNTER_RESETS,
    CUDA_GRAPH_PASSES_RATE,
    UP,
    FleetQuery,
    PromQL,
    build_queries,
    duration,
    part_name,
    signals_from,
)

PROMQL = PromQL(["instance", "job"], 'job="sglang"', 60.0)
QUERIES = {q.name: q for q in build_queries(PROMQL)}
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool")


@pytest.mark.parametrize(
    ("seconds", "text"), [(60, "60s"), (90.0, "90s"), (0.5, "500ms"), (2.25, "2250ms")]
)
def test_duration_is_whole_seconds_or_milliseconds(seconds, text):
    assert duration(seconds) == text


def test_series_reads_both_spellings_with_the_extra_matchers():
    assert PROMQL.series("num_queue_reqs") == (
        '{__name__=~"sglang[:_]num_queue_reqs", job="sglang"}'
    )
    bare = PromQL(["instance"], "", 60.0)
    assert bare.series("num_queue_reqs", ', priority=""') == (
        '{__name__=~"sglang[:_]num_queue_reqs", priority=""}'
    )


def test_ranged_takes_each_spelling_apart_the_colon_one_first():
    assert PromQL(["instance"], "", 2.5).ranged("rate", "num_requests_total") == (
        '(rate({__name__="sglang:num_requests_total"}[2500ms])'
        ' or rate({__name__="sglang_num_requests_total"}[2500ms]))'
    )


def test_per_dp_sums_inside_a_rank_then_takes_the_busiest_tp_rank():
    assert PROMQL.per_dp("X", "mode") == (
        "max by (instance, job, dp_rank, mode) "
        "(sum by (instance, job, dp_rank, tp_rank, pp_rank, moe_ep_rank, mode) (X))"
    )


def test_build_queries_split_only_the_cuda_graph_passes_by_mode():
    assert {q.name: q.split_by for q in QUERIES.values() if q.split_by} == {
        CUDA_GRAPH_PASSES_RATE: "mode"
    }
    assert QUERIES[UP].expr == 'max by (instance, job) (up{job="sglang"}) == 0'


def test_build_queries_fall_back_through_every_retraction_metric_in_order():
    parts = QUERIES[s.RETRACTIONS_PER_MINUTE].expr.split(" or 0 * count by ")
    assert "num_retracted_requests_total" in parts[0]  # the counter first (>= v0.5.7)
    rest = parts[1]
    assert rest.index("cuda_graph_passes_total") < rest.index("total_retracted_reqs")
    assert rest.index("total_retracted_reqs") < rest.index("sum_over_time")
    assert "60 / 60 * sum by" in rest  # the per-interval gauge, summed over one minute


def test_build_queries_latency_prefers_the_newest_histogram_name():
    expr = QUERIES[s.ITL_P99_SECONDS].expr
    assert expr.startswith("histogram_quantile(0.99, ")
    assert expr.index("inter_token_latency_seconds") < expr.index("time_per_output_token")


def test_part_name_adds_the_split_value():
    query = FleetQuery(CUDA_GRAPH_PASSES_RATE, "x", "mode")
    assert part_name(query, "decode_none") == "cuda_graph_passes_rate:decode_none"
    assert part_name(FleetQuery(s.TOKEN_USAGE, "x"), None) == s.TOKEN_USAGE


def test_signals_from_keeps_signals_and_drops_missing_answers_and_helper_parts():
    parts = {
        s.TOKEN_USAGE: 0.5,
        s.TTFT_P99_SECONDS: math.nan,  # no request finished in the window
        s.ITL_P99_SECONDS: math.inf,
        UP: 0.0,
        COUNTER_RESETS: 1.0,
    }
    assert signals_from(parts) == {s.TOKEN_USAGE: 0.5}


def test_signals_from_derives_ratios_from_the_rates():
    parts = {
        s.PROMPT_TOKENS_RATE: 1000.0,
        s.REQUEST_RATE: 4.0,
        CACHED_TOKENS_RATE: 250.0,
        f"{CUDA_GRAPH_PASSES_RATE}:decode_cuda_graph": 30.0,
        f"{CUDA_GRAPH_PASSES_RATE}:decode_none": 10.0,
    }
    values = signals_from(parts)
    assert values[s.PREFIX_CACHE_HIT_RATIO] == 0.25
    assert values[s.PROMPT_TOKENS_MEAN] == 250.0
    assert values[s.CUDA_GRAPH_PASS_RATIO] == 0.75


def test_signals_from_no_cached_tokens_while_prompts_are_counted_is_no_hit_yet():
    values = signals_from({s.PROMPT_TOKENS_RATE: 1000.0, s.REQUEST_RATE: 0.0})
    assert values[s.PREFIX_CACHE_HIT_RATIO] == 0.0
    assert s.PROMPT_TOKENS_MEAN not in values  # no request finished: no mean length


def test_signals_from_caps_the_hit_ratio_at_one():
    values = signals_from({s.PROMPT_TOKENS_RATE: 100.0, CACHED_TOKENS_RATE: 150.0})
    assert values[s.PREFIX_CACHE_HIT_RATIO] == 1.0


# -- evaluated by Prometheus -------------------------------------------------------------------


def _promtool(tmp_path: Path, series: dict[str, str], expr: str, expected: list) -> None:
    """Assert Prometheus evaluates `expr` at 5 min over `series` (one sample every 15 s) to
    `expected`: (labels, value) pairs."""
    (tmp_path / "none.yml").write_text("groups: []\n")
    test = {
        "rule_files": ["none.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": labels, "value": value} for labels, value in expected
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    result = subprocess.run(
        ["promtool", "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_a_gauge_is_summed_over_dp_ranks_and_taken_once_per_tp_group(tmp_path):
    rank = 'sglang:num_running_reqs{{instance="a:1", job="sglang", dp_rank="{dp}", tp_rank="{tp}"}}'
    series = {
        rank.format(dp=0, tp=0): "5x30",
        rank.format(dp=0, tp=1): "5x30",  # the same scheduler seen from its second TP rank
        rank.format(dp=1, tp=0): "7x30",
        rank.format(dp=1, tp=1): "7x30",
        'sglang:num_running_reqs{instance="b:1", job="other"}': "100x30",  # not selected
    }
    a = '{instance="a:1", job="sglang"}'
    _promtool(tmp_path, series, QUERIES[s.NUM_RUNNING_REQS].expr, [(a, 12)])
    _promtool(tmp_path, series, QUERIES[s.NUM_DP_RANKS].expr, [(a, 2)])


@needs_promtool
def test_promtool_a_counter_in_both_spellings_is_counted_once(tmp_path):
    series = {  # 60 requests a minute: one a second
        'sglang:num_requests_total{instance="a:1", job="sglang"}': "0+15x30",
        'sglang_num_requests_total{instance="a:1", job="sglang"}': "0+15x30",
        'sglang_num_requests_total{instance="b:1", job="sglang"}': "0+30x30",
    }
    expected = [('{instance="a:1", job="sglang"}', 1), ('{instance="b:1", job="sglang"}', 2)]
    _promtool(tmp_path, series, QUERIES[s.REQUEST_RATE].expr, expected)


@needs_promtool
def test_promtool_retractions_are_zero_where_only_graph_counters_exist(tmp_path):
    labels = 'instance="a:1", job="sglang"'
    series = {
        f'sglang:cuda_graph_passes_total{{{labels}, mode="decode_cuda_graph"}}': "0+10x30",
        'sglang:total_retracted_reqs{instance="b:1", job="sglang"}': "0+3x30",  # 12/min
    }
    expected = [(f"{{{labels}}}", 0), ('{instance="b:1", job="sglang"}', 12)]
    _promtool(tmp_path, series, QUERIES[s.RETRACTIONS_PER_MINUTE].expr, expected)
