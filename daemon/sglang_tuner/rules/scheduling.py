"""Guide section "Achieve a high token usage": --schedule-conservativeness in both directions."""

from ..signals import NUM_QUEUE_REQS, NUM_RUNNING_REQS, RETRACTIONS_PER_MINUTE, TOKEN_USAGE
from ..values import Action, Finding, NoData, Outcome, Pass, Severity
from ..window import frequently
from .base import (
    Rule,
    RuleInput,
    confidence_for,
    flag_action,
    format_duration,
    format_value,
    frequently_evidence,
    judged,
    with_expected,
)
from .units import flag_from_per_rank, max_running_flag, max_running_per_rank, per_rank_batch

SOURCE = "Hyperparameter Tuning / Achieve a high token usage"
FLAG = "--schedule-conservativeness"
DEFAULT_CONSERVATIVENESS = 1.0  # SGLang's default (server_args.py)


def _current(inp: RuleInput) -> float | None:
    return inp.config.schedule_conservativeness if inp.config else None


def _lower_conservativeness(inp: RuleInput) -> Action:
    """One step down toward the guide's 0.3; never below it."""
    running, cap = per_rank_batch(inp.view, 0.5), max_running_per_rank(inp.config)
    if cap and running is not None and running >= 0.95 * cap:
        # The batch is at --max-running-requests: admission is capped, not conservative.
        suggested = flag_from_per_rank(inp.config, cap * 2)
        action = flag_action("--max-running-requests", max_running_flag(inp.config), suggested, inp)
        usage = format_value(inp.view.quantile(TOKEN_USAGE, 0.5))
        return with_expected(
            action, f"up to {cap * 2} requests per rank (now capped at {cap}): token usage up from "
            f"p50 {usage}, higher throughput while the pool has room",
        )  # fmt: skip
    floor, step = inp.thresholds["conservativeness_floor"], inp.thresholds["step"]
    current = _current(inp)
    base = DEFAULT_CONSERVATIVENESS if current is None else current  # at the floor: vetoed
    return flag_action(
        FLAG, current, max(floor, round(base - step, 2)), inp, DEFAULT_CONSERVATIVENESS
    )


def _raise_conservativeness(inp: RuleInput) -> Action:
    """One step up toward the guide's 1.3; never above it."""
    ceiling, step = inp.thresholds["conservativeness_ceiling"], inp.thresholds["step"]
    current = _current(inp)
    base = DEFAULT_CONSERVATIVENESS if current is None else current
    if base >= ceiling:
        return Action(
            f"{FLAG} is already {base:g}: free KV memory instead "
            "(--kv-cache-dtype fp8_e4m3, --quantization fp8, or lower --max-running-requests)"
        )
    return flag_action(
        FLAG, current, min(ceiling, round(base + step, 2)), inp, DEFAULT_CONSERVATIVENESS
    )


def _not_too_conservative(inp: RuleInput) -> str | None:
    """At the guide's lowest value already, or retracting: lowering it is not the answer."""
    current = _current(inp)
    if current is not None and current <= inp.thresholds["conservativeness_floor"]:
        return f"--schedule-conservativeness is already {current:g}, the guide's lowest value"
    rates = inp.view.values(RETRACTIONS_PER_MINUTE)
    if not rates:
        return None
    limit = inp.thresholds["retractions_per_minute"]
    seen = sum(1 for r in rates if r > 0) / len(rates)
    # Retractions come in bursts: a window with bursts in it is an overflowing pool, even when
    # the average stays low or the burst has just ended.
    if sum(rates) / len(rates) > limit or seen >= inp.thresholds["retraction_samples_ratio"]:
        return f"requests were retracted in {seen:.0%} of samples: the pool overflows"
    return None


def _check_conservative(inp: RuleInput) -> Outcome:
    """Frequently: token usage < 0.9 with requests waiting; not when already at the guide's
    lowest value or while the pool overflows (retraction bursts in the window)."""
    target = inp.thresholds["token_usage_target"]
    freq = frequently(
        inp.view,
        lambda r: r[TOKEN_USAGE] < target and r[NUM_QUEUE_REQS] > 0,
        (TOKEN_USAGE, NUM_QUEUE_REQS),
        inp.frequently_ratio,
    )
    veto = _not_too_conservative(inp) if freq.held else None
    if veto is not None:
        return Pass(freq.ratio, freq.considered, veto)
    evidence = frequently_evidence(freq, inp, (TOKEN_USAGE, NUM_QUEUE_REQS, NUM_RUNNING_REQS))
    return judged(freq, inp, evidence, _lower_conservativeness(inp))


SCHEDULER_TOO_CONSERVATIVE = Rule(
    id="scheduler_too_conservative",
    severity=Severity.WARNING,
    summary="Token usage stays below 0.9 while requests wait: the scheduler admits too few.",
    action="Lower --schedule-conservativeness (the guide suggests about 0.3).",
    source=SOURCE,
    check=_check_conservative,
    signals=(TOKEN_USAGE, NUM_QUEUE_REQS, NUM_RUNNING_REQS, RETRACTIONS_PER_MINUTE),
    requires=(TOKEN_USAGE, NUM_QUEUE_REQS),
    thresholds={
        "token_usage_target": 0.9,
        "conservativeness_floor": 0.3,
        "step": 0.3,
        "retractions_per_minute": 1.0,
        "retraction_samples_ratio": 0.1,
    },
    provenance={
        "token_usage_target": "guide (all versions): 'token usage > 0.9 means good utilization'",
        "conservativeness_floor": "guide (all versions): 'decrease to a value like 0.3'",
        "step": "ours: the guide gives a target value, not a step",
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "retraction_samples_ratio": "ours: retractions come in bursts; bursts in a tenth of the "
        "samples mean the pool overflows",
    },
)


def _check_retractions(inp: RuleInput) -> Outcome:
    """Fires when retractions average above ~1/min while token usage is very high."""
    view, th = inp.view, inp.thresholds
    rates = view.values(RETRACTIONS_PER_MINUTE)
    if not rates:
        return NoData(
            "retractions are not in this server's metrics (SGLang < 0.4.9.post3): "
            "set the target's log_file so they are read from the log",
            view.window_seconds,
        )
    per_minute = sum(rates) / len(rates)
    seen = sum(1 for r in rates if r > 0) / len(rates)
    usage_p90 = view.quantile(TOKEN_USAGE, 0.9)
    high_usage = usage_p90 is None or usage_p90 >= th["high_token_usage"]
    if per_minute <= th["retractions_per_minute"] or not high_usage:
        return Pass(seen, len(rates))
    evidence = (
        f"{per_minute:.1f} retractions/min over {format_duration(view.window_seconds)} "
        f"(the guide tolerates about {th['retractions_per_minute']:g}/min); retractions in "
        f"{seen:.0%} of {len(rates)} samples; token usage p90 {format_value(usage_p90)}"
    )
    return Finding(evidence, _raise_conservativeness(inp), confidence_for(inp), seen, len(rates))


RETRACTIONS_FREQUENT = Rule(
    id="retractions_frequent",
    severity=Severity.WARNING,
    summary="KV cache pool is full and requests are retracted more than about once a minute.",
    action="Raise --schedule-conservativeness (the guide suggests about 1.3).",
    source=SOURCE,
    signals=(RETRACTIONS_PER_MINUTE, TOKEN_USAGE),
    thresholds={
        "retractions_per_minute": 1.0,
        "high_token_usage": 0.85,
        "conservativeness_ceiling": 1.3,
        "step": 0.3,
    },
    provenance={
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "high_token_usage": "ours: the guide says 'token usage very high' without a number",
        "conservativeness_ceiling": "guide (all versions): 'increase to a value like 1.3'",
        "step": "ours: the guide gives a target value, not a step",
    },
    check=_check_retractions,
)
