"""The metric families SGLang's collectors register, one row each with its HELP: the table
`catalogue.py` parses into `Family` values (which versions define each, and its labels).
"""

# name, type, scope, first version, first version without it, buckets, extra labels; HELP.
# Read from sglang/srt/metrics/collector.py (<= 0.5.9), observability/metrics_collector.py,
# http_request_metrics.py and cpu_monitor.py (>= 0.5.10), and sglang-monitoring.md. Families a
# plain unified server never touches (PD transfer, grammar, LoRA, HiCache, EPLB) are left out:
# a labelled metric that was never touched emits nothing. Versions are integers: 0.5.5.1 stands
# for 0.5.5.post1. RadixCacheMetricsCollector's `evicted_tokens_total` (scope `cache`) is the one
# radix-cache family kept: its HELP was reworded by 0.5.20 (0.5.17 has the old one).
# HELP lines longer than a table row.
_EVICTED_HELP = (
    "The number of device KV token slots freed by eviction, regardless of whether the data was "
    "backed up to host (see sglang:hicache_backup_tokens_total) or destroyed (see "
    "sglang:hicache_dropped_tokens_total)."
)
FAMILY_TABLE = f"""
num_running_reqs                      gauge     sched     -      -      -         -
    The number of running requests.
num_used_tokens                       gauge     sched     -      -      -         -
    The number of used tokens.
token_usage                           gauge     sched     -      -      -         -
    The token usage.
full_token_usage                      gauge     sched     0.5.10 -      -         -
    The token usage for full attention layers.
swa_token_usage                       gauge     sched     0.5.2  -      -         -
    The token usage for SWA layers.
mamba_usage                           gauge     sched     0.5.5  -      -         -
    The token usage for Mamba layers.
pending_prealloc_token_usage          gauge     sched     0.5.4  -      -         -
    The token usage for pending preallocated tokens.
prealloc_full_token_usage             gauge     sched     0.5.18 -      -         -
    Share of the full KV pool held by pending decode requests.
prealloc_swa_token_usage              gauge     sched     0.5.18 -      -         -
    Share of the SWA KV pool held by pending decode requests.
gen_throughput                        gauge     sched     -      -      -         -
    The generation throughput (token/s).
num_queue_reqs                        gauge     sched     -      -      -         -
    The number of requests in the waiting queue.
num_grammar_queue_reqs                gauge     sched     -      -      -         -
    The number of requests in the grammar waiting queue.
num_running_reqs_offline_batch        gauge     sched     0.5.2  0.5.11 -         -
    The number of running low-priority offline batch requests(label is 'batch').
cache_hit_rate                        gauge     sched     -      -      -         -
    The prefix cache hit rate.
decode_sum_seq_lens                   gauge     sched     0.5.7  -      -         -
    The sum of all sequence lengths in decode.
kv_available_tokens                   gauge     sched     0.5.11 -      -         -
    Number of free token slots in the KV cache pool.
kv_evictable_tokens                   gauge     sched     0.5.11 -      -         -
    Number of evictable token slots in the KV cache pool.
kv_used_tokens                        gauge     sched     0.5.11 -      -         -
    Number of actively used token slots in the KV cache pool.
swa_available_tokens                  gauge     sched     0.5.11 -      -         -
    Number of free token slots in the SWA pool.
swa_evictable_tokens                  gauge     sched     0.5.11 -      -         -
    Number of evictable token slots in the SWA pool.
swa_used_tokens                       gauge     sched     0.5.11 -      -         -
    Number of actively used token slots in the SWA pool.
mamba_available_tokens                gauge     sched     0.5.11 -      -         -
    Number of free state slots in the mamba pool.
mamba_evictable_tokens                gauge     sched     0.5.11 -      -         -
    Number of evictable state slots in the mamba pool.
mamba_used_tokens                     gauge     sched     0.5.11 -      -         -
    Number of actively used state slots in the mamba pool.
spec_accept_length                    gauge     sched     -      -      -         -
    The average acceptance length of speculative decoding.
spec_accept_rate                      gauge     sched     0.5.4  -      -         -
    The acceptance rate of speculative decoding.
spec_cap_length                       gauge     sched     0.5.16 -      -         -
    Mean DSpark verify window per verify step.
spec_block_accept_length              gauge     sched     0.5.16 -      -         -
    Mean uncapped block accept length per verify step.
spec_num_steps                        gauge     sched     0.5.13 -      -         -
    Currently active speculative_num_steps.
spec_num_draft_tokens                 gauge     sched     0.5.13 -      -         -
    Currently active speculative_num_draft_tokens.
total_retracted_reqs                  gauge     sched     0.4.9  0.5.4  -         -
    The total number of retracted requests.
num_retracted_reqs                    gauge     pid       0.5.2  -      -         -
    The number of retracted requests.
num_paused_reqs                       gauge     pid       0.5.2  -      -         -
    The number of paused requests by async weight sync.
num_prefill_prealloc_queue_reqs       gauge     sched     0.4.6  0.5.11 -         -
    The number of requests in the prefill prealloc queue.
num_prefill_infight_queue_reqs        gauge     sched     0.4.6  0.5.2  -         -
    The number of requests in the prefill infight queue.
num_prefill_bootstrap_queue_reqs      gauge     sched     0.5.11 -      -         -
    The number of requests in the prefill bootstrap queue.
num_prefill_inflight_queue_reqs       gauge     sched     0.5.2  -      -         -
    The number of requests in the prefill inflight queue.
num_decode_prealloc_queue_reqs        gauge     sched     0.4.6  -      -         -
    The number of requests in the decode prealloc queue.
num_decode_transfer_queue_reqs        gauge     sched     0.4.6  -      -         -
    The number of requests in the decode transfer queue.
num_decode_host_receive_queue_reqs    gauge     sched     0.5.18 -      -         -
    Requests in the decode transfer queue receiving into host memory.
num_decode_deferred_kv_release_reqs   gauge     sched     0.5.18 -      -         -
    Failed decode requests whose KV release is deferred.
kv_transfer_speed_gb_s                gauge     sched     0.5.2  0.5.10 -         -
    The transfer speed of the KV cache in GB/s.
kv_transfer_latency_ms                gauge     sched     0.5.2  0.5.10 -         -
    The transfer latency of the KV cache in ms.
kv_transfer_bootstrap_ms              gauge     sched     0.5.5  0.5.10 -         -
    The bootstrap time of the KV transfer in ms.
kv_transfer_alloc_ms                  gauge     sched     0.5.5  0.5.10 -         -
    The allocation waiting time of the KV transfer in ms.
kv_transfer_total_mb                  gauge     sched     0.5.7  0.5.10 -         -
    The total number of tokens transferred in the KV cache.
utilization                           gauge     sched     0.5.2  -      -         -
    The utilization.
fwd_occupancy                         gauge     sched     0.5.12 -      -         -
    Forward pass GPU occupancy percentage.
engine_startup_time                   gauge     sched     0.5.2  0.5.17 -         -
    The time taken for the engine to start up.
new_token_ratio                       gauge     sched     0.5.6  -      -         -
    The new token ratio.
is_cuda_graph                         gauge     sched     0.5.4  -      -         -
    Whether the batch is using CUDA graph.
num_unique_running_routing_keys       gauge     sched     0.5.8  -      -         -
    Number of unique routing keys in running batch.
max_total_num_tokens                  gauge     sched     0.5.6  -      -         -
    Maximum total number of tokens in the KV cache pool.
weight_memory_usage_gb                gauge     sched     0.5.17 -      -         -
    Memory used by model weights in GB.
kv_cache_memory_usage_gb              gauge     sched     0.5.17 -      -         -
    Memory used by the KV cache pools in GB.
graph_memory_usage_gb                 gauge     sched     0.5.17 -      -         phase
    Memory used by captured device graphs in GB.
page_size                             gauge     sched     0.5.12 -      -         -
    KV cache page size in tokens.
num_pages                             gauge     sched     0.5.12 -      -         -
    Number of KV cache pages.
context_len                           gauge     sched     0.5.12 -      -         -
    Maximum context length.
startup_available_gpu_memory_gb       gauge     sched     0.5.12 -      -         -
    Available GPU memory in GB at startup.
cache_config_info                     gauge     info      0.5.9  0.5.11 -         -
    Cache configuration information.
num_retracted_requests_total          counter   tp        0.5.7  -      -         -
    Total number of retracted requests.
num_retracted_input_tokens_total      counter   tp        0.5.7  -      -         -
    Total number of retracted input tokens.
num_retracted_output_tokens_total     counter   tp        0.5.7  -      -         -
    Total number of retracted output tokens.
evicted_tokens_total                  counter   cache     0.5.5.1 0.5.20 -        -
    The number of tokens evicted from GPU to CPU.
evicted_tokens_total                  counter   cache     0.5.20 -      -         -
    {_EVICTED_HELP}
cuda_graph_passes_total               counter   sched     0.5.7  -      -         mode
    Total number of forward passes categorized by CUDA graph.
realtime_tokens_total                 counter   sched     0.5.7  -      -         mode
    Total number of tokens processed (updated on each log interval).
queue_time_seconds                    histogram sched     0.5.3  0.5.10 queue_old -
    Histogram of queueing time in seconds.
queue_time_seconds                    histogram sched     0.5.10 -      queue_new -
    Histogram of queueing time in seconds.
per_stage_req_latency_seconds         histogram sched     0.5.3  -      stage     stage
    The latency of each stage of requests.
prompt_tokens_total                   counter   tok       -      -      -         -
    Number of prefill tokens processed.
generation_tokens_total               counter   tok       -      -      -         -
    Number of generation tokens processed.
cached_tokens_total                   counter   tok       -      0.5.9  -         -
    Number of cached prompt tokens.
cached_tokens_total                   counter   tok       0.5.9  -      -         cache_source
    Number of cached prompt tokens by source (device/host/storage).
num_requests_total                    counter   tok       -      -      -         -
    Number of requests processed.
time_to_first_token_seconds           histogram tok       -      -      ttft      -
    Histogram of time to first token in seconds.
inter_token_latency_seconds           histogram tok       -      -      itl       -
    Histogram of inter-token latency in seconds.
request_time_per_output_token_seconds histogram tok       0.5.18 -      itl       -
    Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).
e2e_request_latency_seconds           histogram tok       -      0.5.2  e2e_old   -
    Histogram of End-to-end request latency in seconds
e2e_request_latency_seconds           histogram tok       0.5.2  -      e2e_new   -
    Histogram of End-to-end request latency in seconds
prompt_tokens_histogram               histogram tok       0.5.11 -      tokens    -
    Histogram of prompt token length.
uncached_prompt_tokens_histogram      histogram tok       0.5.12 -      tokens    -
    Histogram of uncached (compute) prompt token length.
generation_tokens_histogram           histogram tok       0.5.11 -      tokens    -
    Histogram of generation token length.
http_requests_total                   counter   http      0.5.7  -      -         endpoint,method
    Total number of HTTP requests by endpoint and method
http_responses_total counter http 0.5.7 - - endpoint,status_code,method
    Total number of HTTP responses by endpoint and status code
http_requests_active                  gauge     http      0.5.7  -      -         endpoint,method
    Number of currently active HTTP requests
routing_keys_active                   gauge     plain     0.5.8  -      -         -
    Number of unique routing keys with active requests
process_cpu_seconds_total             counter   component 0.5.8  -      -         component
    Total CPU time consumed by the process in seconds.
"""
