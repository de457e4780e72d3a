"""Guide section "Use Longest Prefix Match Scheduling": lpm versus fcfs by prefix reuse.

The two rules never disagree on one window: lpm is called needless only where fcfs would not be
called wasteful. A policy the history already left and judged is not advised back (`plan.py`).
"""

from collections.abc import Mapping

from sglang_tuner.model.advice import Action, NoData, Outcome, Pass, Prediction, Severity
from sglang_tuner.model.flags import SCHEDULE_POLICY as FLAG
from sglang_tuner.model.signals import NUM_QUEUE_REQS, PREFIX_CACHE_HIT_RATIO, TOKEN_USAGE
from sglang_tuner.model.window import frequently
from sglang_tuner.predict.server_model import no_prediction, objective
from sglang_tuner.rule import (
    PREFILLING_ROLES,
    Rule,
    RuleInput,
    choice_action,
    config_unknown,
    format_value,
    judged,
    predicted,
    with_expected,
    with_note,
)
from sglang_tuner.rules.sglang.defaults import LPM_FALLBACK_QUEUE, default_schedule_policy

LPM_FALLBACK_WHY = (
    "SGLang's schedule_policy.py (_determine_active_policy): lpm turns into fcfs above "
    f"{LPM_FALLBACK_QUEUE} waiting requests"
)
SOURCE = "Hyperparameter Tuning / Additional Optimizations / Use Longest Prefix Match Scheduling"
SIGNALS = (PREFIX_CACHE_HIT_RATIO, NUM_QUEUE_REQS)


def current_policy(inp: RuleInput) -> tuple[str | None, str]:
    """(policy, default): fcfs is SGLang's default since 0.4.3.post3, lpm before."""
    config = inp.config
    default = default_schedule_policy(config.version if config else None)
    return (config.schedule_policy if config else None), default


def _not_judgeable(inp: RuleInput, policy: str) -> Outcome | None:
    """NoData/Pass when the policy is another one or the prefix hits are unknown."""
    if inp.config is None:
        why = f"the schedule policy is unknown ({config_unknown(inp)})"
        return NoData(why, inp.view.window_seconds)
    current, default = current_policy(inp)
    if (current or default) != policy:
        return Pass(detail=f"schedule policy is {current or default}")
    if inp.view.present(PREFIX_CACHE_HIT_RATIO) == 0:
        return NoData(
            "prefix-cache hit ratio unknown: needs cached_tokens_total (SGLang >= 0.4.3.post4) "
            "and prompts being served",
            inp.view.window_seconds,
        )
    return None


def _to_fcfs(inp: RuleInput) -> Action:
    current, default = current_policy(inp)
    return choice_action(FLAG, current, "fcfs", inp, default)


def _to_fcfs_expected(inp: RuleInput) -> Action:
    hits = inp.view.mean(PREFIX_CACHE_HIT_RATIO) or 0.0
    prediction = Prediction(
        objective(inp.profile), 0.0, -0.02, 0.02,
        f"prefix-cache hit ratio mean {hits:.2f} stays as it is: fcfs saves only lpm's sort, "
        "host time the overlapped scheduler hides behind the decode step",
    )  # fmt: skip
    action = with_expected(
        _to_fcfs(inp), "no prefix matching and sorting in each scheduling round: slightly "
        "lower scheduling overhead; the cache hit ratio stays as low as it is",
    )  # fmt: skip
    return predicted(action, prediction)


def _to_lpm(inp: RuleInput) -> Action:
    current, default = current_policy(inp)
    action = choice_action(FLAG, current, "lpm", inp, default)
    limit = inp.thresholds["lpm_fallback_queue"]
    caveat = (
        f"lpm falls back to fcfs while more than {limit:g} requests wait, adds scheduling "
        "overhead, and can starve cache-cold requests (watch the TTFT tail)"
    )
    action = with_note(action, caveat)
    action = with_expected(
        action,
        "more requests scheduled next to the prefix they share: a higher prefix-cache hit "
        "ratio, less prefill work per request",
    )
    why = (
        "the hit ratio lpm reaches depends on the order requests arrive in and on what the "
        "pool keeps, which the window does not show"
    )
    return predicted(action, no_prediction(inp.profile, why))


def _check_lpm(inp: RuleInput) -> Outcome:
    """Policy lpm; frequently: prefix hit ratio < low while 1-128 requests wait (above 128 lpm
    falls back to fcfs by itself, so only a queue it still sorts pays its overhead)."""
    early = _not_judgeable(inp, "lpm")
    if early is not None:
        return early
    reuse = _reuse(inp, FCFS_WITH_PREFIX_REUSE.thresholds_for(inp.profile))
    if reuse is not None:  # what would send fcfs back to lpm: no flip-flop on one window
        return Pass(detail=f"shared prefixes all the same ({reuse})")
    th = inp.thresholds
    freq = frequently(
        inp.view,
        lambda r: (
            r[PREFIX_CACHE_HIT_RATIO] < th["prefix_hit_ratio_low"]
            and 0 < r[NUM_QUEUE_REQS] <= th["lpm_fallback_queue"]
        ),
        SIGNALS,
        inp.frequently_ratio,
    )
    return judged(freq, inp, SIGNALS, _to_fcfs_expected)


def _reuse(inp: RuleInput, th: Mapping[str, float]) -> str | None:
    """Evidence of shared prefixes (`th`: fcfs_with_prefix_reuse's thresholds): many hits, or
    some hits while the KV pool is full."""
    view = inp.view
    hits = view.mean(PREFIX_CACHE_HIT_RATIO) or 0.0
    if hits >= th["prefix_hit_ratio_high"]:
        return f"prefix-cache hit ratio mean {hits:.2f}"
    usage = view.quantile(TOKEN_USAGE, 0.5)
    # token_usage excludes evictable radix-cache tokens: a full pool leaves the cache no room,
    # so shared prefixes are evicted before they are reused (the hits stay low).
    pinned = usage is not None and usage >= th["pinned_token_usage"]
    if pinned and hits >= th["prefix_hit_ratio_thrash"]:
        return (
            f"prefix-cache hit ratio mean {hits:.2f} with token usage p50 {format_value(usage)}: "
            "shared prefixes are evicted before reuse"
        )
    return None


def _check_fcfs(inp: RuleInput) -> Outcome:
    """Policy fcfs, radix cache on; prefix reuse over the window (hit ratio mean >= high, or
    >= the thrash mark with token usage p50 >= 0.95); frequently: 0 < #queue-req <= 128.
    """
    if inp.config is not None and inp.config.disable_radix_cache:
        return Pass(detail="the radix cache is disabled: lpm would fall back to fcfs")
    early = _not_judgeable(inp, "fcfs")
    if early is not None:
        return early
    reuse = _reuse(inp, inp.thresholds)
    if reuse is None:
        return Pass(detail="no sign of shared prefixes")
    limit = inp.thresholds["lpm_fallback_queue"]
    # lpm only reorders a waiting queue, and above the fallback size it is fcfs anyway.
    freq = frequently(
        inp.view, lambda r: 0 < r[NUM_QUEUE_REQS] <= limit, (NUM_QUEUE_REQS,), inp.frequently_ratio
    )
    evidence = (
        f"{reuse}; 1-{limit:g} requests waiting in {freq.ratio:.0%} of {freq.considered} samples"
    )
    return judged(freq, inp, evidence, _to_lpm)


LPM_WITHOUT_PREFIX_REUSE = Rule(
    id="lpm_without_prefix_reuse",
    roles=PREFILLING_ROLES,
    # Predicted per server as no gain (the hit ratio stays; only the sort's host time goes).
    measured="predicted no gain on any server: the hit ratio stays, only lpm's sort goes. Info.",
    severity=Severity.INFO,
    summary="lpm pays its scheduling overhead on a long queue with almost no prefix-cache hits.",
    action="Switch to --schedule-policy fcfs (no shared prefixes to exploit).",
    source=SOURCE,
    signals=SIGNALS,
    thresholds={"prefix_hit_ratio_low": 0.1, "lpm_fallback_queue": float(LPM_FALLBACK_QUEUE)},
    provenance={
        "prefix_hit_ratio_low": "ours: the guide says 'high prefix reuse' without a number; "
        "under a tenth of prompt tokens from the cache is none to speak of",
        "lpm_fallback_queue": LPM_FALLBACK_WHY,
    },
    # Prefix reuse is the point of these workloads: only call it absent when it really is.
    profile_thresholds={
        "long_context": {"prefix_hit_ratio_low": 0.05},
        "multi_turn": {"prefix_hit_ratio_low": 0.05},
    },
    check=_check_lpm,
)

FCFS_WITH_PREFIX_REUSE = Rule(
    id="fcfs_with_prefix_reuse",
    roles=PREFILLING_ROLES,
    measured=(
        "fcfs -> lpm with 90 % of prompts sharing one of 96 long prefixes: tokens/s +12 %, ITL "
        "p99 -11 %; the daemon judged it helped. Once the cache thrashes (hit ratio under 3 %) "
        "shared prefixes look like none and the rule stays quiet."
    ),
    # No prediction for this server (the hit ratio lpm reaches is not in the window): a hint.
    severity=Severity.INFO,
    summary="Many prompts share prefixes but fcfs ignores them when picking from the queue.",
    action="Try --schedule-policy lpm (longest prefix match) for more cache hits.",
    source=SOURCE,
    signals=(*SIGNALS, TOKEN_USAGE),
    thresholds={
        "prefix_hit_ratio_high": 0.5,
        "prefix_hit_ratio_thrash": 0.03,  # ours: above the noise of prompts sharing nothing
        "pinned_token_usage": 0.95,
        "lpm_fallback_queue": float(LPM_FALLBACK_QUEUE),
    },
    profile_thresholds={
        "long_context": {"prefix_hit_ratio_high": 0.3},
        "multi_turn": {"prefix_hit_ratio_high": 0.3},
    },
    provenance={
        "prefix_hit_ratio_high": "ours: 'high prefix reuse' has no number; half the prompt "
        "tokens from the cache (long_context, multi_turn: 0.3)",
        "prefix_hit_ratio_thrash": "ours: above the noise of prompts that share nothing",
        "pinned_token_usage": "ours: a pool this full leaves the radix cache no room",
        "lpm_fallback_queue": LPM_FALLBACK_WHY,
    },
    check=_check_fcfs,
)
