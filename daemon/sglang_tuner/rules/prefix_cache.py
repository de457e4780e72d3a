"""The radix prefix cache against its pool: shared prefixes evicted faster than they are reused,
where SGLang's hierarchical cache (HiCache) would keep them in host memory."""

from sglang_physics import kv_bytes_per_token

from sglang_tuner.model.advice import Action, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import (
    EVICTED_TOKENS_RATE,
    MAX_TOTAL_NUM_TOKENS,
    NUM_DP_RANKS,
    PREFIX_CACHE_HIT_RATIO,
    TOKEN_USAGE,
)
from sglang_tuner.predict.server_model import deployment, model_spec, no_prediction
from sglang_tuner.rule import (
    PREFILLING_ROLES,
    Rule,
    RuleInput,
    confidence_for,
    config_unknown,
    format_duration,
    format_value,
    predicted,
    with_expected,
    with_note,
)
from sglang_tuner.rules.sglang.versions import version_at_least

SOURCE = (
    "Hyperparameter Tuning / Best Practices Summary / Use Latest Features ('Leverage HiCache'); "
    "SGLang's --enable-hierarchical-cache (arg_groups/fields/memory.py)"
)
FLAG = "--enable-hierarchical-cache"
EVICTED_SINCE = (0, 5, 5, 1)  # 0.5.5.post1: RadixCacheMetricsCollector, sgl-project/sglang#10225
RANK_LABELS_SINCE = (0, 5, 21)  # radix_cache_metric_labels: one series per rank from here
# --hicache-ratio's default: host pool / device pool (0.5.23 `_handle_hicache_ratio_default`,
# 2.0 in cache mode; the flag's default in every release before).
HICACHE_RATIO = 2.0
SIGNALS = (EVICTED_TOKENS_RATE, PREFIX_CACHE_HIT_RATIO, TOKEN_USAGE, MAX_TOTAL_NUM_TOKENS)


def _ranks_summed(config: ServerConfig) -> int:
    """How many scheduler ranks' counts one eviction series sums before v0.5.21: every rank's
    tree evicts what its DP rank's does, and without rank labels the multiprocess registry
    adds them all up (TP x PP, attention-TP under attention DP)."""
    if version_at_least(config.version, RANK_LABELS_SINCE) is not False:
        return 1
    tp, dp = config.tp_size or 1, config.dp_size or 1
    per_dp = max(tp // dp, 1) if config.enable_dp_attention else tp
    return per_dp * (config.pp_size or 1)


def _pool(inp: RuleInput, config: ServerConfig) -> float | None:
    """The KV pool over all DP ranks: the gauge (>= v0.5.6), else /server_info's per rank."""
    total = inp.view.last(MAX_TOTAL_NUM_TOKENS)
    if total:
        return total
    ranks = inp.view.last(NUM_DP_RANKS) or config.dp_size or 1
    return float(config.max_total_num_tokens) * ranks if config.max_total_num_tokens else None


def _not_judgeable(inp: RuleInput) -> Outcome | None:
    """Pass/NoData when HiCache or the radix cache settle it, or the counter cannot exist."""
    config = inp.config
    if config is None:
        return NoData(f"HiCache state unknown ({config_unknown(inp)})", inp.view.window_seconds)
    if config.enable_hierarchical_cache:
        return Pass(detail="HiCache is on already: evicted prefixes go to host memory")
    if config.disable_radix_cache:
        return Pass(detail="the radix cache is disabled: no prefix is kept to evict")
    if version_at_least(config.version, EVICTED_SINCE) is False:
        return NoData(
            f"SGLang {config.version} does not count evictions: sglang:evicted_tokens_total "
            "needs SGLang >= 0.5.5.post1",
            inp.view.window_seconds,
        )
    return None


def _host_note(inp: RuleInput, config: ServerConfig, pool: float) -> str:
    """What the host pool costs: --hicache-ratio x each GPU's KV pool, in GiB where known."""
    head = (
        f"HiCache's host pool is --hicache-ratio x the GPU KV pool (default {HICACHE_RATIO:g}; "
        "--hicache-size <GB> sets it directly) in pinned host RAM for every GPU"
    )
    spec = model_spec(config.model_path)
    if spec is None:
        return head
    per_token = kv_bytes_per_token(spec, deployment(config))
    ranks = inp.view.last(NUM_DP_RANKS) or config.dp_size or 1
    per_rank = config.max_total_num_tokens or pool / ranks
    gib = HICACHE_RATIO * per_rank * per_token / (1 << 30)
    return (
        f"{head}: {HICACHE_RATIO:g} x {per_rank:,.0f} tokens x {per_token / 1024:.0f} KiB/token "
        f"= {gib:.0f} GiB per GPU"
    )


def _action(inp: RuleInput, config: ServerConfig, pool: float, evicted_rate: float) -> Action:
    action = Action(f"add {FLAG}", FLAG, "off", "on")
    action = with_note(action, _host_note(inp, config, pool))
    kept = HICACHE_RATIO * pool / evicted_rate
    action = with_expected(
        action,
        f"prefixes evicted from the GPU pool are kept in host memory about {kept:.0f} s longer "
        "at this eviction rate and loaded back instead of recomputed: less prefill work per "
        "request. How much depends on how far apart requests reuse a prefix, which the window "
        "does not show",
    )
    why = (
        "the gain depends on the distance between reuses of a prefix and on the host-to-GPU "
        "bandwidth, neither of which the metrics show"
    )
    return predicted(action, no_prediction(inp.profile, why))


def _check(inp: RuleInput) -> Outcome:
    """Radix cache on, HiCache off; over the window: prefix hit ratio mean >= reuse mark (prompts
    share prefixes), token usage p50 >= high (running requests hold the pool), and the tokens
    evicted >= pool_multiple x the KV pool (its cached part turned over that often)."""
    early = _not_judgeable(inp)
    if early is not None:
        return early
    config, th, view = inp.config, inp.thresholds, inp.view
    assert config is not None  # _not_judgeable returned NoData otherwise
    usage = view.quantile(TOKEN_USAGE, 0.5) or 0.0
    if usage < th["token_usage_high"]:
        return Pass(detail=f"token usage p50 {usage:.2f}: the pool leaves the cache room")
    hits = view.mean(PREFIX_CACHE_HIT_RATIO)
    if hits is None or hits < th["prefix_hit_ratio_reuse"]:
        return Pass(detail=f"prefix-cache hit ratio mean {format_value(hits)}: no shared prefixes")
    rates = view.values(EVICTED_TOKENS_RATE)
    if not rates:
        return NoData(
            "sglang:evicted_tokens_total not seen: metrics off, or no eviction yet (SGLang adds "
            "the series at its first eviction)",
            view.window_seconds,
        )
    pool = _pool(inp, config)
    if not pool:
        return NoData("KV pool size unknown (max_total_num_tokens)", view.window_seconds)
    rate = sum(rates) / len(rates) / _ranks_summed(config)
    turnover = rate * len(rates) * inp.interval_seconds / pool
    if turnover < th["evicted_pool_multiple"]:
        return Pass(detail=f"evicted {turnover:.1f} x the pool over the window")
    room = max(1.0 - usage, 0.0) * pool
    evidence = (
        f"{rate:,.0f} tokens/s evicted from a {pool:,.0f}-token KV pool: {turnover:.1f} x the "
        f"pool over {format_duration(view.window_seconds)}, an unused prefix lasts ~"
        f"{room / rate:.1f} s in the free part; prefix-cache hit ratio mean {hits:.2f} "
        f"(prompts share prefixes), token usage p50 {usage:.2f}"
    )
    return Finding(evidence, _action(inp, config, pool, rate), confidence_for(inp), 1.0, len(rates))


PREFIX_CACHE_EXCEEDS_POOL = Rule(
    id="prefix_cache_exceeds_pool",
    roles=PREFILLING_ROLES,
    measured="a hint: its gain depends on how far apart requests reuse a prefix, which the "
    "window does not show; not measured in the closed-loop benchmark.",
    severity=Severity.INFO,
    summary="Prompts share prefixes, but the full KV pool evicts them many times over: they do "
    "not fit on the GPU.",
    action="Try --enable-hierarchical-cache: evicted prefixes stay in host memory and are "
    "loaded back instead of recomputed (costs --hicache-ratio x the KV pool in host RAM).",
    source=SOURCE,
    signals=SIGNALS,
    requires=(TOKEN_USAGE,),
    thresholds={
        "token_usage_high": 0.9,
        "prefix_hit_ratio_reuse": 0.03,
        "evicted_pool_multiple": 3.0,
    },
    provenance={
        "token_usage_high": "guide (Achieve a high token usage): 0.9 is a full pool; "
        "token_usage excludes evictable tokens, so the cache keeps at most the rest",
        "prefix_hit_ratio_reuse": "ours: fcfs_with_prefix_reuse's thrash mark, above the noise "
        "of prompts that share nothing",
        "evicted_pool_multiple": "ours: the pool's contents evicted three times over in the "
        "window; a prefix not reused within a third of it is recomputed",
    },
    check=_check,
)
