"""prefix_cache_exceeds_pool: shared prefixes evicted many times over, a HiCache hint."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.prefix_cache import PREFIX_CACHE_EXCEEDS_POOL as RULE

POOL = 450_000.0
CONFIG = ServerConfig(
    version="0.5.23", model_path="meta-llama/Llama-3.1-8B-Instruct", max_total_num_tokens=450_000
)


def _window(evicted: str = "16000x20", hit: float = 0.25, usage: float = 0.99):
    return window_from(
        evicted_tokens_rate=evicted,
        prefix_cache_hit_ratio=f"{hit}x20",
        token_usage=f"{usage}x20",
        max_total_num_tokens=f"{POOL}x20",
    )


def test_prefix_cache_exceeds_pool_fires_when_shared_prefixes_are_evicted_many_times_over():
    out = evaluate(RULE, _window(), config=CONFIG)
    assert isinstance(out, Finding)
    assert out.action.text == "add --enable-hierarchical-cache"
    assert "16,000 tokens/s evicted from a 450,000-token KV pool" in out.evidence
    assert "hit ratio mean 0.25" in out.evidence and "token usage p50 0.99" in out.evidence
    assert "--hicache-ratio" in out.action.note and "= 110 GiB per GPU" in out.action.note
    assert out.action.prediction is not None and out.action.prediction.gain is None
    assert "how far apart requests reuse a prefix" in out.action.expected


def test_prefix_cache_exceeds_pool_silent_when_evictions_stay_under_the_pool_multiple():
    # 1,000 tokens/s over 100 s is 0.2 x the pool
    assert isinstance(evaluate(RULE, _window(evicted="1000x20"), config=CONFIG), Pass)


def test_prefix_cache_exceeds_pool_silent_without_shared_prefixes():
    # a full, busy pool evicts finished requests' tokens just as fast: no prefix to keep
    assert isinstance(evaluate(RULE, _window(hit=0.0), config=CONFIG), Pass)


def test_prefix_cache_exceeds_pool_silent_while_the_pool_leaves_the_cache_room():
    assert isinstance(evaluate(RULE, _window(usage=0.6), config=CONFIG), Pass)


def test_prefix_cache_exceeds_pool_silent_with_hicache_on():
    config = ServerConfig(version="0.5.23", enable_hierarchical_cache=True)
    out = evaluate(RULE, _window(), config=config)
    assert isinstance(out, Pass) and "HiCache is on" in out.detail


def test_prefix_cache_exceeds_pool_silent_with_the_radix_cache_off():
    config = ServerConfig(version="0.5.23", disable_radix_cache=True)
    assert isinstance(evaluate(RULE, _window(), config=config), Pass)


def test_prefix_cache_exceeds_pool_no_data_before_the_counter_existed():
    out = evaluate(RULE, _window(), config=ServerConfig(version="0.5.5"))
    assert isinstance(out, NoData) and "0.5.5.post1" in out.reason


def test_prefix_cache_exceeds_pool_no_data_without_the_counter():
    view = window_from(prefix_cache_hit_ratio="0.25x20", token_usage="0.99x20")
    out = evaluate(RULE, view, config=CONFIG)
    assert isinstance(out, NoData) and "sglang:evicted_tokens_total" in out.reason


def test_prefix_cache_exceeds_pool_no_data_without_server_info():
    out = evaluate(RULE, _window(), config=None, config_error="401 from /server_info")
    assert isinstance(out, NoData) and "HiCache state unknown" in out.reason


def test_prefix_cache_exceeds_pool_divides_the_rank_sum_of_old_versions():
    # before 0.5.21 the one series adds up all 4 TP ranks' identical counts: 4,000/s each
    old = ServerConfig(version="0.5.17", tp_size=4, max_total_num_tokens=450_000)
    assert isinstance(evaluate(RULE, _window(evicted="16000x20"), config=old), Pass)
    new = ServerConfig(version="0.5.23", tp_size=4, max_total_num_tokens=450_000)
    assert isinstance(evaluate(RULE, _window(evicted="16000x20"), config=new), Finding)


def test_prefix_cache_exceeds_pool_skipped_on_a_decode_server():
    config = ServerConfig(version="0.5.23", disaggregation_mode="decode")
    out = evaluate(RULE, _window(), config=config)
    assert isinstance(out, NoData) and "decode server" in out.reason
