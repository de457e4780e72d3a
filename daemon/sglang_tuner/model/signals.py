"""Canonical signal names: the vocabulary shared by sources, window store and tuning rules.

`sources/sglang.py` maps each SGLang version's metric names onto these; rules read only these.
Every signal is a float per snapshot; a missing signal means "not exposed" (not zero).
"""

from typing import Final

# Scheduler gauges (SGLang refreshes them only at log points; see sources/sglang.py).
NUM_RUNNING_REQS: Final = "num_running_reqs"  # summed over DP ranks
NUM_RUNNING_REQS_MAX_RANK: Final = "num_running_reqs_max_rank"  # largest single DP rank
NUM_QUEUE_REQS: Final = "num_queue_reqs"  # summed over DP ranks
TOKEN_USAGE: Final = "token_usage"  # 0-1, mean over DP ranks
NUM_USED_TOKENS: Final = "num_used_tokens"  # summed over DP ranks
MAX_TOTAL_NUM_TOKENS: Final = "max_total_num_tokens"  # KV pool capacity, summed over DP ranks
GEN_THROUGHPUT: Final = "gen_throughput"  # decode tokens/s, summed over DP ranks
NUM_DP_RANKS: Final = "num_dp_ranks"  # scheduler series sets seen in the page

# Rates derived from counters (reset-aware), per second unless named otherwise.
RETRACTIONS_PER_MINUTE: Final = "retractions_per_minute"
REQUEST_RATE: Final = "request_rate"  # finished requests/s
PROMPT_TOKENS_RATE: Final = "prompt_tokens_rate"
GENERATION_TOKENS_RATE: Final = "generation_tokens_rate"
PREFIX_CACHE_HIT_RATIO: Final = "prefix_cache_hit_ratio"  # cached / prompt tokens, from counters
CUDA_GRAPH_PASS_RATIO: Final = "cuda_graph_pass_ratio"  # decode passes run with a CUDA graph
# Radix-cache tokens evicted from the GPU pool per second, summed over DP ranks (>= v0.5.5.post1,
# metrics and prefix cache on; the series appears at the first eviction). Before v0.5.21 it has
# no rank labels: SGLang's multiprocess registry sums every TP/PP rank's count into it.
EVICTED_TOKENS_RATE: Final = "evicted_tokens_rate"

# Latency quantiles over the scrape interval, from histogram bucket deltas (seconds).
TTFT_P50_SECONDS: Final = "ttft_p50_seconds"
TTFT_P99_SECONDS: Final = "ttft_p99_seconds"
ITL_P50_SECONDS: Final = "itl_p50_seconds"
ITL_P99_SECONDS: Final = "itl_p99_seconds"
E2E_P50_SECONDS: Final = "e2e_p50_seconds"
E2E_P99_SECONDS: Final = "e2e_p99_seconds"
QUEUE_TIME_P50_SECONDS: Final = "queue_time_p50_seconds"
QUEUE_TIME_P99_SECONDS: Final = "queue_time_p99_seconds"
# The mean TTFT of the requests the interval finished, from the histogram's _sum and _count:
# exact, where its quantiles are read inside buckets that double (10, 20, 40 s).
TTFT_MEAN_SECONDS: Final = "ttft_mean_seconds"
PROMPT_TOKENS_MEAN: Final = "prompt_tokens_mean"  # mean prompt length of finished requests
# Log only: the share of Prefill batch lines whose #new-token is within 10 % of the largest one
# this process printed (from its third such line on): batches cut at one size are cut by a
# prefill token budget (--chunked-prefill-size, --max-prefill-tokens), not by the pool.
PREFILL_FULL_RATIO: Final = "prefill_full_ratio"

# Startup facts and events.
STARTUP_AVAILABLE_GPU_MEM_GB: Final = "startup_available_gpu_mem_gb"
# The fraction a failed start asked for ("Raise --mem-fraction-static above Y", 2026 builds).
MEM_FRACTION_REQUIRED: Final = "mem_fraction_required"
# The latest process's startup lines (log only, sources/log/startup.py), per rank, in GiB: free
# GPU memory before and after the weights, the weights, the KV pool, free memory after the pools.
STARTUP_FREE_BEFORE_LOAD_GB: Final = "startup_free_before_load_gb"
STARTUP_FREE_AFTER_LOAD_GB: Final = "startup_free_after_load_gb"
STARTUP_WEIGHTS_GB: Final = "startup_weights_gb"
STARTUP_KV_POOL_GB: Final = "startup_kv_pool_gb"
STARTUP_FREE_AFTER_POOL_GB: Final = "startup_free_after_pool_gb"
STARTUP_MEMORY_SIGNALS: Final = (
    STARTUP_FREE_BEFORE_LOAD_GB,
    STARTUP_FREE_AFTER_LOAD_GB,
    STARTUP_WEIGHTS_GB,
    STARTUP_KV_POOL_GB,
    STARTUP_FREE_AFTER_POOL_GB,
)
RESTARTS: Final = "restarts"  # restarts detected since the previous snapshot (counter resets)

# Crashes read from the log (sources/log/crash.py): events since the previous snapshot, each
# crash counted once however many TP ranks print it; 0.0 when the log showed none.
# CUDA (torch) OOM in a prefill/extend forward pass: traceback through forward_extend & co.
PREFILL_OOM_EVENTS: Final = "prefill_oom_events"
# CUDA (torch) OOM in a decode forward pass: traceback through forward_decode, graph replay.
DECODE_OOM_EVENTS: Final = "decode_oom_events"
# OOM while capturing CUDA graphs at startup ("Capture cuda graph failed: CUDA out of memory",
# or a CUDA OOM raised inside the graph runner's capture or after "Capture ... graph begin").
CUDA_GRAPH_CAPTURE_OOM_EVENTS: Final = "cuda_graph_capture_oom_events"
# The scheduler's own pools ran out ("Prefill/Decode out of memory. Try to lower your batch
# size.", "alloc_req_slots runs out of memory", "No space left for only one request"): the KV
# or request-slot pool was exhausted, GPU memory was not.
KV_POOL_EXHAUSTED_EVENTS: Final = "kv_pool_exhausted_events"
# Startup found no room for the KV pool: "Not enough memory. Please try to increase
# --mem-fraction-static" (the fix raises it).
STARTUP_NOT_ENOUGH_MEMORY_EVENTS: Final = "startup_not_enough_memory_events"
# SGLang's allocator lost track of its memory, not a capacity problem: "... memory leak
# detected!", or a pool OOM whose own numbers show the free tokens covered the request.
ALLOCATOR_BUG_EVENTS: Final = "allocator_bug_events"
# Any other fatal crash: NCCL errors and timeouts, the scheduler watchdog, non-memory capture
# failures, other "... hit an exception" tracebacks; only for a crash with none of the above.
OTHER_CRASH_EVENTS: Final = "other_crash_events"
# They count even while the server is down (a crash loop).
CRASH_EVENT_SIGNALS: Final[tuple[str, ...]] = (
    PREFILL_OOM_EVENTS,
    DECODE_OOM_EVENTS,
    CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    KV_POOL_EXHAUSTED_EVENTS,
    STARTUP_NOT_ENOUGH_MEMORY_EVENTS,
    ALLOCATOR_BUG_EVENTS,
    OTHER_CRASH_EVENTS,
)
CUDA_GRAPH_FALSE_RATIO: Final = (
    "cuda_graph_false_ratio"  # log: Decode lines with "cuda graph: False"
)
# log: the largest running batch (one scheduler's: a DP rank's) of the Decode lines that said
# "cuda graph: False" (speculative ones apart): a batch the graphs did not cover
EAGER_BATCH_MAX: Final = "eager_batch_max"

# GPU facts from the DCGM exporter.
GPU_FB_FREE_GB: Final = "gpu_fb_free_gb"

ALL_SIGNALS: Final[tuple[str, ...]] = (
    NUM_RUNNING_REQS,
    NUM_RUNNING_REQS_MAX_RANK,
    NUM_QUEUE_REQS,
    TOKEN_USAGE,
    NUM_USED_TOKENS,
    MAX_TOTAL_NUM_TOKENS,
    GEN_THROUGHPUT,
    NUM_DP_RANKS,
    RETRACTIONS_PER_MINUTE,
    REQUEST_RATE,
    PROMPT_TOKENS_RATE,
    GENERATION_TOKENS_RATE,
    PREFIX_CACHE_HIT_RATIO,
    CUDA_GRAPH_PASS_RATIO,
    EVICTED_TOKENS_RATE,
    TTFT_P50_SECONDS,
    TTFT_P99_SECONDS,
    ITL_P50_SECONDS,
    ITL_P99_SECONDS,
    E2E_P50_SECONDS,
    E2E_P99_SECONDS,
    QUEUE_TIME_P50_SECONDS,
    QUEUE_TIME_P99_SECONDS,
    TTFT_MEAN_SECONDS,
    PROMPT_TOKENS_MEAN,
    PREFILL_FULL_RATIO,
    STARTUP_AVAILABLE_GPU_MEM_GB,
    MEM_FRACTION_REQUIRED,
    *STARTUP_MEMORY_SIGNALS,
    RESTARTS,
    *CRASH_EVENT_SIGNALS,
    CUDA_GRAPH_FALSE_RATIO,
    EAGER_BATCH_MAX,
    GPU_FB_FREE_GB,
)

# How each signal is exported: (unit of its family `sglang_tuner_signal_<unit>`, the `signal`
# label, the factor to the family's base unit). One unit per family; labels carry no unit.
_GIB = float(1 << 30)  # SGLang and DCGM report GiB
EXPORTED_AS: Final[dict[str, tuple[str, str, float]]] = {
    NUM_RUNNING_REQS: ("requests", "running", 1.0),
    NUM_RUNNING_REQS_MAX_RANK: ("requests", "running_busiest_rank", 1.0),
    EAGER_BATCH_MAX: ("requests", "largest_eager_batch_in_log", 1.0),
    NUM_QUEUE_REQS: ("requests", "waiting", 1.0),
    TOKEN_USAGE: ("ratio", "token_usage", 1.0),
    PREFIX_CACHE_HIT_RATIO: ("ratio", "prefix_cache_hit", 1.0),
    CUDA_GRAPH_PASS_RATIO: ("ratio", "cuda_graph_pass", 1.0),
    CUDA_GRAPH_FALSE_RATIO: ("ratio", "cuda_graph_false_in_log", 1.0),
    PREFILL_FULL_RATIO: ("ratio", "prefill_batches_full_in_log", 1.0),
    NUM_USED_TOKENS: ("tokens", "used", 1.0),
    MAX_TOTAL_NUM_TOKENS: ("tokens", "pool", 1.0),
    PROMPT_TOKENS_MEAN: ("tokens", "prompt_mean", 1.0),
    TTFT_MEAN_SECONDS: ("seconds", "ttft_mean", 1.0),
    GEN_THROUGHPUT: ("tokens_per_second", "gen_throughput", 1.0),
    PROMPT_TOKENS_RATE: ("tokens_per_second", "prompt", 1.0),
    GENERATION_TOKENS_RATE: ("tokens_per_second", "generation", 1.0),
    EVICTED_TOKENS_RATE: ("tokens_per_second", "evicted", 1.0),
    REQUEST_RATE: ("requests_per_second", "finished", 1.0),
    RETRACTIONS_PER_MINUTE: ("requests_per_second", "retracted", 1 / 60),
    TTFT_P50_SECONDS: ("seconds", "ttft_p50", 1.0),
    TTFT_P99_SECONDS: ("seconds", "ttft_p99", 1.0),
    ITL_P50_SECONDS: ("seconds", "itl_p50", 1.0),
    ITL_P99_SECONDS: ("seconds", "itl_p99", 1.0),
    E2E_P50_SECONDS: ("seconds", "e2e_p50", 1.0),
    E2E_P99_SECONDS: ("seconds", "e2e_p99", 1.0),
    QUEUE_TIME_P50_SECONDS: ("seconds", "queue_time_p50", 1.0),
    QUEUE_TIME_P99_SECONDS: ("seconds", "queue_time_p99", 1.0),
    STARTUP_AVAILABLE_GPU_MEM_GB: ("bytes", "startup_available_gpu_mem", _GIB),
    MEM_FRACTION_REQUIRED: ("ratio", "mem_fraction_required", 1.0),
    STARTUP_FREE_BEFORE_LOAD_GB: ("bytes", "startup_free_before_load", _GIB),
    STARTUP_FREE_AFTER_LOAD_GB: ("bytes", "startup_free_after_load", _GIB),
    STARTUP_WEIGHTS_GB: ("bytes", "startup_weights", _GIB),
    STARTUP_KV_POOL_GB: ("bytes", "startup_kv_pool", _GIB),
    STARTUP_FREE_AFTER_POOL_GB: ("bytes", "startup_free_after_pool", _GIB),
    GPU_FB_FREE_GB: ("bytes", "gpu_free", _GIB),
    NUM_DP_RANKS: ("number", "dp_ranks_reporting", 1.0),
    RESTARTS: ("number", "restarts", 1.0),
    PREFILL_OOM_EVENTS: ("number", "prefill_oom", 1.0),
    DECODE_OOM_EVENTS: ("number", "decode_oom", 1.0),
    CUDA_GRAPH_CAPTURE_OOM_EVENTS: ("number", "cuda_graph_capture_oom", 1.0),
    KV_POOL_EXHAUSTED_EVENTS: ("number", "kv_pool_exhausted", 1.0),
    STARTUP_NOT_ENOUGH_MEMORY_EVENTS: ("number", "startup_not_enough_memory", 1.0),
    ALLOCATOR_BUG_EVENTS: ("number", "allocator_bug", 1.0),
    OTHER_CRASH_EVENTS: ("number", "other_crash", 1.0),
}
SIGNAL_UNITS: Final[tuple[str, ...]] = tuple(dict.fromkeys(u for u, _, _ in EXPORTED_AS.values()))
