"""A shared prefix is charged to the KV pool once while requests hold it (radix-tree locks)."""

from __future__ import annotations

from dataclasses import replace

from sglang_sim import SCENARIOS, Knobs, Load, ServerConfig, ServerModel
from sglang_sim.exposition import render_metrics
from sglang_sim.kvcache import PrefixCache
from sglang_sim.scheduler import Rank

PREFIX = 2048
ONE_PREFIX = Load(
    clients=8,
    prompt_mean=2500,
    max_new_tokens=2000,
    eos_fraction=0.0,
    shared_prefix_fraction=1.0,
    prefix_len=PREFIX,
    prefix_groups=1,
)


def locked(rank: Rank) -> int:
    """Tokens of the prefixes some running or chunked request holds."""
    return sum(rank.cache.groups[g] for g in rank.cache.refs)


def chunk_own(rank: Rank) -> int:
    """Pool tokens the request being prefilled in chunks has charged beyond its prefix."""
    req = rank.chunked
    return 0 if req is None else max(req.cached + req.done_prefill - req.shared, 0)


def test_concurrent_requests_sharing_a_prefix_use_it_once_in_the_pool():
    model = ServerModel(ServerConfig(knobs=Knobs(mem_fraction_static=0.89), load=ONE_PREFIX))
    model.advance_to(5.0)
    rank = model.ranks[0]
    assert len(rank.running) == 8 and rank.chunked is None
    unique = sum(r.prompt + r.out - PREFIX for r in rank.running)
    assert rank.used == PREFIX + unique
    assert rank.used < sum(r.prompt + r.out for r in rank.running) - 6 * PREFIX
    # attention still reads the prefix once per request
    assert rank.gauges["decode_sum_seq_lens"] <= sum(r.prompt + r.out for r in rank.running)


def test_prefix_becomes_evictable_when_its_last_holder_finishes():
    cache = PrefixCache()
    assert cache.acquire(7, PREFIX) == PREFIX  # first holder pays
    assert cache.acquire(7, PREFIX) == 0  # second shares
    assert cache.lock_cost(7) == 0 and cache.prefix_tokens == 0
    assert cache.release(7) == 0
    cache.evict(0)
    assert cache.hit(7) == PREFIX  # still locked by one holder: not evictable
    assert cache.release(7) == PREFIX
    assert cache.prefix_tokens == PREFIX and cache.lock_cost(7) == PREFIX
    assert cache.evictable(10 * PREFIX) == PREFIX
    cache.evict(PREFIX - 1)
    assert cache.hit(7) == 0 and cache.prefix_tokens == 0


def test_relocking_an_evictable_prefix_takes_it_out_of_the_evictable_part():
    cache = PrefixCache()
    cache.acquire(1, PREFIX)
    cache.release(1)
    assert cache.acquire(1, PREFIX) == PREFIX and cache.prefix_tokens == 0


def test_disabled_radix_cache_shares_nothing():
    cache = PrefixCache(enabled=False)
    assert cache.acquire(3, PREFIX) == 0 and cache.hit(3) == 0


def test_pool_accounting_stays_exact_under_heavy_prefix_reuse():
    model = ServerModel(SCENARIOS["fcfs_heavy_prefix_reuse"].config, seed=2)
    for t in (30.0, 60.0, 90.0, 120.0):
        model.advance_to(t)
        rank = model.ranks[0]
        own = sum(r.prompt + r.out - r.shared for r in rank.running)
        assert rank.used == own + locked(rank) + chunk_own(rank)
        assert rank.cache.locked_tokens == locked(rank)
        assert rank._seq_sum() == sum(r.prompt + r.out for r in rank.running)
        assert 0 <= rank.used <= rank.capacity
        holders = [r for r in rank.running if r.shared]
        assert all(rank.cache.refs.get(r.group, 0) > 0 for r in holders)


def test_retraction_releases_prefix_locks():
    load = replace(ONE_PREFIX, clients=400, max_new_tokens=4096)
    knobs = Knobs(mem_fraction_static=0.89, schedule_conservativeness=0.3)
    model = ServerModel(ServerConfig(knobs=knobs, load=load), seed=1)
    model.advance_to(120.0)
    rank = model.ranks[0]
    assert rank.total_retracted > 0
    assert all(r.shared == 0 for r in rank.waiting)
    assert rank._seq_sum() == sum(r.prompt + r.out for r in rank.running)
    chunked = rank.chunked is not None and rank.chunked.shared > 0
    holders = sum(1 for r in rank.running if r.shared) + int(chunked)
    assert rank.cache.refs.get(0, 0) == holders


def _evicted(model: ServerModel) -> float:
    """sglang:evicted_tokens_total summed over its series on the model's /metrics page."""
    lines = render_metrics(model).splitlines()
    values = [float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith("sglang:evicted_tokens_")]
    return sum(values)


def test_evicted_tokens_counter_grows_under_heavy_prefix_reuse():
    model = ServerModel(SCENARIOS["fcfs_heavy_prefix_reuse"].for_version("0.5.23"), seed=1)
    model.advance_to(120.0)
    before = _evicted(model)
    model.advance_to(180.0)
    rate = (_evicted(model) - before) / 60.0
    # 192 prefixes of 4096 tokens cannot stay in a ~450k-token pool: >10,000 tokens/s
    assert rate > 10_000
    assert 'cache_type="RadixCache",dp_rank="0",pp_rank="0",tp_rank="0"' in render_metrics(model)


def test_evicted_tokens_counter_is_one_series_without_rank_labels_before_0_5_21():
    model = ServerModel(SCENARIOS["fcfs_heavy_prefix_reuse"].for_version("0.5.9"), seed=1)
    model.advance_to(60.0)
    page = render_metrics(model)
    assert 'sglang:evicted_tokens_total{cache_type="RadixCache"} ' in page
    assert (
        "# HELP sglang:evicted_tokens_total The number of tokens evicted from GPU to CPU." in page
    )


def test_evicted_tokens_counter_absent_before_0_5_5_post1():
    model = ServerModel(SCENARIOS["fcfs_heavy_prefix_reuse"].for_version("0.4.10"), seed=1)
    model.advance_to(60.0)
    assert "evicted_tokens" not in render_metrics(model)


def test_evicted_tokens_counter_absent_with_the_radix_cache_off():
    scenario = SCENARIOS["fcfs_heavy_prefix_reuse"].for_version("0.5.23")
    config = replace(scenario, knobs=replace(scenario.knobs, disable_radix_cache=True))
    model = ServerModel(config, seed=1)
    model.advance_to(60.0)
    assert "evicted_tokens" not in render_metrics(model)
