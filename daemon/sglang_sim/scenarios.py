"""Named presets: knobs plus load that make the scheduler model show one symptom of the guide."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from .hardware import Knobs
from .model import ServerConfig
from .workload import Load


@dataclass(frozen=True)
class Scenario:
    """A named server configuration and the symptom it is expected to show."""

    name: str
    description: str
    config: ServerConfig

    def for_version(self, version: str) -> ServerConfig:
        """The configuration served as a given SGLang version."""
        return replace(self.config, version=version)


# A healthy offline-batch server: an 8B model on one H100, enough clients to keep a queue;
# --mem-fraction-static 0.89 leaves ~7.9 GB free at startup (the guide's 5-8 GB band).
GOOD = Knobs(mem_fraction_static=0.89)
BUSY = Load(
    clients=740, prompt_mean=3000, max_new_tokens=2048, eos_fraction=0.97, eos_max_tokens=400
)
# 192 prefixes of 4096 tokens (786k tokens) cannot all stay in a ~450k-token pool: fcfs evicts
# them before reuse. (With 96 of 2048 tokens every prefix fits once each is charged once, as
# SGLang's radix tree does; fcfs then hits as often as lpm.)
SHARED = Load(
    clients=160,
    prompt_mean=4600,
    max_new_tokens=512,
    eos_fraction=0.3,
    shared_prefix_fraction=0.9,
    prefix_len=4096,
    prefix_groups=192,
)


def _s(name: str, description: str, knobs: Knobs = GOOD, load: Load = BUSY) -> Scenario:
    return Scenario(name, description, ServerConfig(knobs=knobs, load=load))


_ALL = (
    _s(
        "healthy",
        "Busy and well tuned: queue 100-2000, token usage > 0.9, rare retractions, "
        "CUDA graph covers the batch, 5-8 GB free at startup.",
    ),
    _s("idle", "Up with metrics on, no traffic: gauges refresh only every 30 s.", load=Load()),
    _s(
        "client_too_slow",
        "Clients send too little work: the queue is always empty and token usage low.",
        load=replace(BUSY, clients=0, rate=2.0),
    ),
    _s(
        "queue_flood",
        "Far more concurrent requests than the server can hold: queue > 2000.",
        load=replace(BUSY, clients=3200),
    ),
    _s(
        "scheduler_too_conservative",
        "--schedule-conservativeness 3 with generous max_new_tokens "
        "that requests stop well short of: token usage stays low while requests queue.",
        knobs=replace(GOOD, schedule_conservativeness=3.0, cuda_graph_max_bs=512),
        load=replace(
            BUSY, prompt_mean=1000, max_new_tokens=4096, eos_fraction=1.0, eos_max_tokens=200
        ),
    ),
    _s(
        "retraction_storm",
        "--schedule-conservativeness 0.3 with long outputs: admission reserves too little room, "
        "the KV pool overflows and requests are retracted many times a minute.",
        knobs=replace(GOOD, schedule_conservativeness=0.3, max_running_requests=256),
        load=replace(BUSY, clients=900, prompt_mean=500, max_new_tokens=4096, eos_fraction=0.0),
    ),
    _s(
        "mem_fraction_too_low",
        "--mem-fraction-static 0.75: 10-20 GB left free at startup, a "
        "smaller KV pool than the GPU allows.",
        knobs=replace(GOOD, mem_fraction_static=0.75),
    ),
    _s(
        "mem_fraction_too_high",
        "--mem-fraction-static 0.93: under 5 GB free at startup (the guide's OOM-risk band); "
        "the 8B model's 8k-token prefills (~2 GB) still fit, so it does not crash at this load.",
        knobs=replace(GOOD, mem_fraction_static=0.93),
    ),
    _s(
        "prefill_oom",
        "--chunked-prefill-size 20480 with long prompts (~16k tokens): a full 20480-token "
        "chunk's activations nearly fill the free memory and now and then exceed it: "
        "prefill OOM, the server restarts.",
        # 20480 tokens of activations (~4.5 GiB for the 8B model) against ~6.3 GB free
        knobs=replace(
            GOOD, mem_fraction_static=0.91, chunked_prefill_size=20480, max_prefill_tokens=20480
        ),
        load=replace(BUSY, clients=120, prompt_mean=16000, max_new_tokens=1024, eos_max_tokens=300),
    ),
    _s(
        "cuda_graph_not_covering",
        "--cuda-graph-max-bs 32 while ~200 requests run: decode runs "
        "without CUDA graphs (cuda graph: False) and is slower.",
        knobs=replace(GOOD, cuda_graph_max_bs=32),
    ),
    _s(
        "lpm_no_prefix_reuse",
        "--schedule-policy lpm on traffic without shared prefixes: no cache "
        "hits, only the sorting overhead.",
        knobs=replace(GOOD, schedule_policy="lpm"),
        load=replace(BUSY, clients=230),  # 1-128 waiting: lpm still sorts (above, it is fcfs)
    ),
    _s(
        "fcfs_heavy_prefix_reuse",
        "fcfs on traffic where 90% of requests share one of 192 long (4096-token) "
        "prefixes, more than the pool holds: the cache thrashes; lpm would raise the hit rate.",
        load=SHARED,
    ),
    _s(
        "tp_where_dp_fits",
        "An 8B model on --tp-size 4: it fits on one GPU, so 4 data-parallel "
        "replicas would serve more; KV pool far larger than the load needs.",
        # SGLang resolves --cuda-graph-max-bs to 512 on an 80 GB GPU with tp >= 4.
        knobs=replace(GOOD, tp_size=4, cuda_graph_max_bs=512),
        load=replace(BUSY, clients=240),
    ),
    _s(
        "online_batch_too_large",
        "Latency-sensitive streaming traffic with --max-running-requests "
        "1024: huge decode batches make inter-token latency and TTFT high.",
        knobs=replace(GOOD, max_running_requests=1024, cuda_graph_max_bs=1024),
        load=Load(
            clients=1100,
            prompt_mean=400,
            max_new_tokens=256,
            eos_fraction=0.2,
            streaming_fraction=1.0,
        ),
    ),
    _s(
        "metrics_disabled",
        "Started without --enable-metrics: /metrics answers 404.",
        knobs=replace(GOOD, enable_metrics=False),
    ),
    _s(
        "crash_loop",
        "--mem-fraction-static 0.965 leaves no room for activations: the server "
        "OOMs on its first large prefill, restarts, and does it again.",
        knobs=replace(GOOD, mem_fraction_static=0.965),
    ),
)

SCENARIOS: Mapping[str, Scenario] = MappingProxyType({s.name: s for s in _ALL})
