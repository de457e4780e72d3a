"""Each version's /metrics page parses and carries exactly that version's metric names."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import SCENARIOS, VERSIONS, ServerModel
from sglang_sim.exposition import go_float, render_metrics

COMMON = {
    "num_running_reqs",
    "num_queue_reqs",
    "token_usage",
    "num_used_tokens",
    "gen_throughput",
    "cache_hit_rate",
    "prompt_tokens",
    "generation_tokens",
    "num_requests",
    "time_to_first_token_seconds",
    "inter_token_latency_seconds",
    "e2e_request_latency_seconds",
}
ONLY = {
    "0.4.10": {"total_retracted_reqs", "num_prefill_infight_queue_reqs"},
    "0.5.9": {
        "cache_config_info",
        "num_running_reqs_offline_batch",
        "engine_startup_time",
        "kv_transfer_latency_ms",
    },
    "0.5.17": set(),
    "0.5.23": {"prealloc_full_token_usage", "request_time_per_output_token_seconds"},
}
SINCE_057 = {
    "cuda_graph_passes",
    "realtime_tokens",
    "new_token_ratio",
    "max_total_num_tokens",
    "decode_sum_seq_lens",
    "http_requests",
    "queue_time_seconds",
}
SINCE_0511 = {
    "full_token_usage",
    "kv_available_tokens",
    "kv_evictable_tokens",
    "kv_used_tokens",
    "startup_available_gpu_memory_gb",
    "prompt_tokens_histogram",
    "context_len",
}


def page(version: str, scenario: str = "healthy", until: float = 75.0) -> str:
    """A page after traffic and retractions, with one /metrics request counted."""
    model = ServerModel(SCENARIOS[scenario].for_version(version), seed=5)
    model.advance_to(until)
    model.http.inc("http_requests", 1, ("/metrics", "GET"))
    model.http.inc("http_responses", 1, ("/metrics", "200", "GET"))
    return render_metrics(model)


def names(text: str) -> set[str]:
    """Family names without the sglang: prefix, as prometheus_client's parser reports them."""
    return {f.name.removeprefix("sglang:") for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("version", VERSIONS)
def test_page_parses_with_prometheus_client_for_every_version(version):
    families = list(text_string_to_metric_families(page(version)))
    assert len(families) > 10
    assert all(f.name.startswith("sglang:") for f in families)


@pytest.mark.parametrize("version", VERSIONS)
def test_page_has_its_version_names_and_not_others(version):
    found = names(page(version))
    assert COMMON <= found
    assert ONLY[version] <= found
    others = set().union(*(ONLY[v] for v in VERSIONS if v != version)) - ONLY[version]
    assert not others & found
    new = version >= "0.5.17" or version == "0.5.9"
    assert (SINCE_057 <= found) == new
    assert bool(SINCE_0511 & found) == (version in ("0.5.17", "0.5.23"))


def test_old_version_has_no_moe_rank_label_and_new_has_it():
    assert "moe_ep_rank" not in page("0.4.10")
    assert 'moe_ep_rank="0"' in page("0.5.9")


def test_labels_are_sorted_and_no_created_samples():
    text = page("0.5.23")
    assert "_created" not in text
    for labels in re.findall(r"\{([^}]*)\}", text):
        keys = [pair.split("=")[0] for pair in labels.split('",')]
        assert keys == sorted(keys)


def test_retracted_gauge_has_pid_label_and_counter_appears_once_per_tp_rank():
    config = SCENARIOS["retraction_storm"].for_version("0.5.23")
    model = ServerModel(replace(config, knobs=replace(config.knobs, tp_size=2)), seed=5)
    model.advance_to(75.0)
    text = render_metrics(model)
    assert re.search(r'sglang:num_retracted_reqs\{[^}]*pid="\d+"', text)
    counters = re.findall(r"^sglang:num_retracted_requests_total\{[^}]*\} (\S+)", text, re.M)
    assert len(counters) == 2 and counters[0] == counters[1] and float(counters[0]) > 0


def test_counter_families_absent_until_touched():
    quiet = page("0.5.23", scenario="healthy", until=20.0)
    assert "num_retracted_requests_total" not in quiet
    assert "sglang:num_retracted_reqs{" in quiet  # a gauge set at every log point


def test_is_streaming_label_only_from_0_5_17():
    assert 'is_streaming="true"' in page("0.5.23")
    assert "is_streaming" not in page("0.5.9")


def test_cached_tokens_labelled_by_source_from_0_5_9():
    old = page("0.4.10", "fcfs_heavy_prefix_reuse")
    new = page("0.5.9", "fcfs_heavy_prefix_reuse")
    assert re.search(r'^sglang:cached_tokens_total\{model_name="[^"]+"\} ', old, re.M)
    assert 'cache_source="device"' in new


def test_cuda_graph_prefill_modes_only_from_0_5_10():
    assert 'mode="prefill_none"' not in page("0.5.9")
    assert 'mode="prefill_none"' in page("0.5.23")
    assert 'mode="decode_cuda_graph"' in page("0.5.9")


def test_cuda_graph_not_covering_counts_decode_none_passes():
    text = page("0.5.23", "cuda_graph_not_covering")
    assert re.search(r'sglang:cuda_graph_passes_total\{[^}]*mode="decode_none"[^}]*\} [1-9]', text)


def test_dp_ranks_give_one_series_set_each():
    config = SCENARIOS["healthy"].for_version("0.5.23")
    model = ServerModel(replace(config, knobs=replace(config.knobs, dp_size=2)))
    model.advance_to(10.0)
    text = render_metrics(model)
    running = re.findall(r"^sglang:num_running_reqs\{([^}]*)\}", text, re.M)
    assert sorted('dp_rank="0"' in r for r in running) == [False, True]


def test_current_version_page_size_is_realistic():
    lines = page("0.5.23", "healthy", until=90.0).count("\n")
    assert 550 <= lines <= 750


def test_cache_hit_rate_zeroed_at_decode_log_points():
    model = ServerModel(SCENARIOS["fcfs_heavy_prefix_reuse"].config, seed=2)
    zero = 0
    for t in range(60, 120, 5):
        model.advance_to(float(t))
        zero += model.ranks[0].gauges["cache_hit_rate"] == 0.0
    assert zero >= 6


def test_histogram_buckets_follow_the_version():
    assert 'sglang:e2e_request_latency_seconds_bucket{le="800.0"' in page("0.4.10", "healthy")
    new = page("0.5.9", "healthy")
    assert 'sglang:e2e_request_latency_seconds_bucket{le="2400.0"' in new
    assert 'sglang:e2e_request_latency_seconds_bucket{le="800.0"' not in new


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12, "12.0"),
        (0.5, "0.5"),
        (2907684, "2.907684e+06"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_go_float_matches_prometheus_client(value, text):
    assert go_float(value) == text
