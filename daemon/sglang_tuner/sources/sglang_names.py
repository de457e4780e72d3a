"""SGLang's metric names, per version, and the canonical signal each carries: the tables that the
mapper (`sglang.py`) and the Prometheus queries (`promql.py`) both read, and the signals both
derive from counter increases.

`token_usage` is SGLang's own gauge: before v0.5.11 the full-attention pool usage (max with SWA on
hybrid models), from v0.5.11 the max over full/SWA/Mamba pools; both exclude evictable radix-cache
tokens. `cache_hit_rate`, `is_cuda_graph` and `utilization` are never read (§6.3: broken).
"""

from sglang_tuner.model import signals as s

# Gauges: canonical signal -> (SGLang family, how DP ranks combine).
_GAUGES: dict[str, tuple[str, str]] = {
    s.NUM_RUNNING_REQS: ("num_running_reqs", "sum"),
    s.NUM_RUNNING_REQS_MAX_RANK: ("num_running_reqs", "max"),
    s.NUM_QUEUE_REQS: ("num_queue_reqs", "sum"),
    s.TOKEN_USAGE: ("token_usage", "mean"),
    s.NUM_USED_TOKENS: ("num_used_tokens", "sum"),
    s.MAX_TOTAL_NUM_TOKENS: ("max_total_num_tokens", "sum"),  # >= v0.5.6
    s.GEN_THROUGHPUT: ("gen_throughput", "sum"),
    s.STARTUP_AVAILABLE_GPU_MEM_GB: ("startup_available_gpu_memory_gb", "min"),  # >= v0.5.11
}
# Counter rates per second: canonical signal -> SGLang counter (all versions since v0.3.5/v0.4.1;
# the radix cache's evictions since v0.5.5.post1, sgl-project/sglang#10225).
_RATES: dict[str, str] = {
    s.REQUEST_RATE: "num_requests_total",
    s.PROMPT_TOKENS_RATE: "prompt_tokens_total",
    s.GENERATION_TOKENS_RATE: "generation_tokens_total",
    s.EVICTED_TOKENS_RATE: "evicted_tokens_total",
}
# Latency histograms: (p50 signal, p99 signal) -> families, newest name first.
_HISTOGRAMS: dict[tuple[str, str], tuple[str, ...]] = {
    (s.TTFT_P50_SECONDS, s.TTFT_P99_SECONDS): ("time_to_first_token_seconds",),
    (s.ITL_P50_SECONDS, s.ITL_P99_SECONDS): (
        "inter_token_latency_seconds",  # >= v0.4.3.post3
        "time_per_output_token_seconds",  # <= v0.4.3
    ),
    (s.E2E_P50_SECONDS, s.E2E_P99_SECONDS): ("e2e_request_latency_seconds",),
    (s.QUEUE_TIME_P50_SECONDS, s.QUEUE_TIME_P99_SECONDS): (
        "queue_time_seconds",  # >= v0.5.3
        "queue_time_s",  # v0.5.2
    ),
}
_RETRACTED_COUNTER = "num_retracted_requests_total"  # >= v0.5.7, on every TP rank
_RETRACTED_INTERVAL = "num_retracted_reqs"  # >= v0.5.2, per-log-interval delta, `pid` label
_RETRACTED_CUMULATIVE = "total_retracted_reqs"  # v0.4.9.post3 - v0.5.3, cumulative gauge
_CUDA_GRAPH_PASSES = "cuda_graph_passes_total"  # >= v0.5.7, label `mode`
_CACHED_TOKENS = "cached_tokens_total"  # >= v0.4.3.post4; `cache_source` >= v0.5.9

_FAMILIES: frozenset[str] = frozenset(
    [f for f, _ in _GAUGES.values()]
    + list(_RATES.values())
    + [f for names in _HISTOGRAMS.values() for f in names]
    + [_RETRACTED_COUNTER, _RETRACTED_INTERVAL, _RETRACTED_CUMULATIVE]
    + [_CUDA_GRAPH_PASSES, _CACHED_TOKENS]
)
_HISTOGRAM_FAMILIES = frozenset(f for names in _HISTOGRAMS.values() for f in names)
# Sample names kept by the parser: histograms are read from their buckets only.
# TTFT's _sum too: its mean over an interval is exact, its quantiles are read inside buckets.
_TTFT_SUM = "time_to_first_token_seconds_sum"
_SAMPLE_NAMES = (
    (_FAMILIES - _HISTOGRAM_FAMILIES) | {f + "_bucket" for f in _HISTOGRAM_FAMILIES} | {_TTFT_SUM}
)

# Every SGLang name the map reads, colon form; histograms also with their sample suffixes.
SGLANG_METRIC_NAMES: frozenset[str] = frozenset(
    [f"sglang:{f}" for f in _FAMILIES]
    + [f"sglang:{f}{x}" for f in _HISTOGRAM_FAMILIES for x in ("_bucket", "_sum", "_count")]
)

# A scheduler's series set is one DP rank; these ranks repeat it (identical or mirrored values).
_RANK_LABELS = ("dp_rank", "tp_rank", "pp_rank", "moe_ep_rank")


def describe_signal_sources() -> dict[str, list[str]]:
    """Canonical signal -> the SGLang metric names (colon form) that carry it, newest first."""
    table = {sig: [f"sglang:{fam}"] for sig, (fam, _) in _GAUGES.items()}
    table |= {sig: [f"sglang:{fam}"] for sig, fam in _RATES.items()}
    for pair, names in _HISTOGRAMS.items():
        table |= {sig: [f"sglang:{n}_bucket" for n in names] for sig in pair}
    table[s.NUM_DP_RANKS] = ["sglang:num_running_reqs"]
    table[s.RETRACTIONS_PER_MINUTE] = [
        f"sglang:{n}" for n in (_RETRACTED_COUNTER, _RETRACTED_INTERVAL, _RETRACTED_CUMULATIVE)
    ]
    table[s.PREFIX_CACHE_HIT_RATIO] = ["sglang:cached_tokens_total", "sglang:prompt_tokens_total"]
    table[s.PROMPT_TOKENS_MEAN] = ["sglang:prompt_tokens_total", "sglang:num_requests_total"]
    table[s.TTFT_MEAN_SECONDS] = [
        f"sglang:{_TTFT_SUM}",
        "sglang:time_to_first_token_seconds_bucket",
    ]
    table[s.CUDA_GRAPH_PASS_RATIO] = ["sglang:cuda_graph_passes_total"]
    table[s.RESTARTS] = sorted(f"sglang:{f}" for f in _RATES.values())
    return table


def _ratios(inc: dict[str, float]) -> dict[str, float]:
    """Prefix-cache hit ratio, mean prompt length and CUDA-graph pass ratio from increases."""
    values: dict[str, float] = {}
    prompt, requests = inc.get("prompt_tokens_total"), inc.get("num_requests_total")
    if prompt and _CACHED_TOKENS in inc:
        values[s.PREFIX_CACHE_HIT_RATIO] = min(1.0, inc[_CACHED_TOKENS] / prompt)
    if prompt is not None and requests:
        values[s.PROMPT_TOKENS_MEAN] = prompt / requests
    graph, none = inc.get("decode_cuda_graph", 0.0), inc.get("decode_none", 0.0)
    if graph + none > 0:
        values[s.CUDA_GRAPH_PASS_RATIO] = graph / (graph + none)
    return values
