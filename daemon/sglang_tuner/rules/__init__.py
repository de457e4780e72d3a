"""The tuning rules: one module per section of the guide, each rule data plus one pure function
(the contract is `rule.py`), and SGLang's per-version facts in `sglang/`. What a change would do
to the server is the predictor's answer (`predict/`). Rules are listed here explicitly, never
discovered.

May import: `model`, `changes`, `rule`, `predict`, and the physics package `sglang_physics`.
Pure: no I/O, no clock.
"""

from sglang_tuner.rule import Rule
from sglang_tuner.rules.crashes import (
    ALLOCATOR_BUG,
    CRASH_DIAGNOSED,
    CUDA_GRAPH_CAPTURE_OOM,
    KV_POOL_EXHAUSTED,
    STARTUP_NOT_ENOUGH_MEMORY,
)
from sglang_tuner.rules.cuda_graph import CUDA_GRAPH_NOT_COVERING, TORCH_COMPILE_SMALL_BATCH
from sglang_tuner.rules.diagnosis import LOW_THROUGHPUT
from sglang_tuner.rules.latency import (
    BATCH_TOO_LARGE_FOR_LATENCY,
    LONG_PROMPTS_DOMINATE_TTFT,
    QUEUE_WAIT_DOMINATES,
)
from sglang_tuner.rules.memory import KV_CACHE_PRESSURE, MEM_FRACTION_TOO_HIGH, MEM_FRACTION_TOO_LOW
from sglang_tuner.rules.observability import (
    METRICS_DISABLED,
    METRICS_ONLY_FIRST_RANK,
    STALE_METRICS,
)
from sglang_tuner.rules.oom import DECODE_OOM, PREFILL_OOM
from sglang_tuner.rules.parallelism import ATTENTION_BACKEND_FOR_GPU, PREFER_DATA_PARALLEL
from sglang_tuner.rules.pool_sizing import KV_POOL_SIZING
from sglang_tuner.rules.prefill_chunk import CHUNKED_PREFILL_TOO_SMALL
from sglang_tuner.rules.prefix_cache import PREFIX_CACHE_EXCEEDS_POOL
from sglang_tuner.rules.queue import QUEUE_EMPTY, QUEUE_TOO_LONG
from sglang_tuner.rules.scheduling import RETRACTIONS_FREQUENT, SCHEDULER_TOO_CONSERVATIVE
from sglang_tuner.rules.scheduling_policy import FCFS_WITH_PREFIX_REUSE, LPM_WITHOUT_PREFIX_REUSE
from sglang_tuner.rules.verification import TUNING_REGRESSION

ALL_RULES: tuple[Rule, ...] = (
    QUEUE_EMPTY,
    QUEUE_TOO_LONG,
    SCHEDULER_TOO_CONSERVATIVE,
    RETRACTIONS_FREQUENT,
    # Memory and KV cache
    MEM_FRACTION_TOO_LOW,
    MEM_FRACTION_TOO_HIGH,
    PREFILL_OOM,
    DECODE_OOM,
    CUDA_GRAPH_CAPTURE_OOM,
    KV_POOL_EXHAUSTED,
    STARTUP_NOT_ENOUGH_MEMORY,
    ALLOCATOR_BUG,
    CRASH_DIAGNOSED,
    KV_CACHE_PRESSURE,
    KV_POOL_SIZING,
    CHUNKED_PREFILL_TOO_SMALL,
    # Batching and CUDA graphs
    CUDA_GRAPH_NOT_COVERING,
    TORCH_COMPILE_SMALL_BATCH,
    # Scheduling policy
    LPM_WITHOUT_PREFIX_REUSE,
    FCFS_WITH_PREFIX_REUSE,
    PREFIX_CACHE_EXCEEDS_POOL,
    # Parallelism and hardware
    PREFER_DATA_PARALLEL,
    ATTENTION_BACKEND_FOR_GPU,
    # Latency (online)
    BATCH_TOO_LARGE_FOR_LATENCY,
    QUEUE_WAIT_DOMINATES,
    LONG_PROMPTS_DOMINATE_TTFT,
    # Observability
    METRICS_DISABLED,
    METRICS_ONLY_FIRST_RANK,
    STALE_METRICS,
    # Diagnosis
    LOW_THROUGHPUT,
    # Change verification (ours)
    TUNING_REGRESSION,
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in ALL_RULES}
