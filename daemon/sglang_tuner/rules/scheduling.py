"""Guide section "Achieve a high token usage": --schedule-conservativeness in both directions."""

import math
from collections.abc import Mapping

from sglang_tuner.model.advice import Action, Finding, NoData, Outcome, Pass, Prediction, Severity
from sglang_tuner.model.flags import SCHEDULE_CONSERVATIVENESS as FLAG
from sglang_tuner.model.signals import (
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    RETRACTIONS_PER_MINUTE,
    TOKEN_USAGE,
)
from sglang_tuner.model.window import frequently
from sglang_tuner.predict.server_model import (
    predict_admission,
    predict_cap_raise,
    predict_fewer_overcommits,
    severity_for,
)
from sglang_tuner.predict.units import (
    flag_from_per_rank,
    max_running_flag,
    max_running_per_rank,
    per_rank_batch,
)
from sglang_tuner.rule import (
    DECODING_ROLES,
    Rule,
    RuleInput,
    confidence_for,
    flag_action,
    format_duration,
    format_value,
    idle,
    judged,
    predicted,
    with_expected,
    with_note,
)
from sglang_tuner.rules.sglang.flags import conservativeness_scale

SOURCE = "Hyperparameter Tuning / Achieve a high token usage"
DEFAULT_CONSERVATIVENESS = 1.0  # SGLang's default (server_args.py)
# SGLang's new-token ratio starts at min(0.7 x conservativeness, 1) and decays to 0.14 x that
# (SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR; every version we support).
# Past 1/0.7 both are capped: every value above ~1.43 schedules exactly alike.
RATIO_PER_CONSERVATIVENESS = 0.7
EFFECTIVE_MAX = 1 / RATIO_PER_CONSERVATIVENESS
MIN_RATIO_FACTOR = 0.14


def _current(inp: RuleInput) -> float | None:
    return inp.config.schedule_conservativeness if inp.config else None


def _lower_conservativeness(inp: RuleInput) -> Action:
    """One step down toward the guide's 0.3; never below it."""
    running, cap = per_rank_batch(inp.view, 0.5), max_running_per_rank(inp.config)
    # Online, a capped batch is usually a latency choice (batch_too_large_for_latency's).
    if inp.profile != "online" and cap and running is not None and running >= 0.95 * cap:
        # The batch is at --max-running-requests: admission is capped, not conservative.
        suggested = flag_from_per_rank(inp.config, cap * 2)
        action = flag_action("--max-running-requests", max_running_flag(inp.config), suggested, inp)
        usage = format_value(inp.view.quantile(TOKEN_USAGE, 0.5))
        return with_expected(
            action, f"up to {cap * 2} requests per rank (now capped at {cap}): token usage up from "
            f"p50 {usage}, higher throughput while the pool has room",
        )  # fmt: skip
    return _computed_conservativeness(inp)


def _computed_conservativeness(inp: RuleInput) -> Action:
    """The value whose reservations leave the pool at the usage target, in one step.

    Admission fills the pool with used tokens plus each running request's remaining
    max_new_tokens x the new-token ratio; at steady state (no retraction for 600 decode steps)
    the ratio sits at its floor, proportional to the conservativeness below ~1.43. With usage u
    today and target T, the reservations must shrink by u(1 - T) / (T(1 - u)).
    """
    th, current = inp.thresholds, _current(inp)
    base = DEFAULT_CONSERVATIVENESS if current is None else current
    usage = inp.view.quantile(TOKEN_USAGE, 0.5) or 0.0
    target = th["token_usage_target"]
    shrink = usage * (1 - target) / (target * (1 - usage)) if 0 < usage < target else 1.0
    # in flag units: under attention DP SGLang schedules with 0.3 x the flag
    flag_max = EFFECTIVE_MAX / conservativeness_scale(inp.config)
    effective = min(base, flag_max)
    suggested = max(th["conservativeness_floor"], _floor2(effective * shrink))
    action = flag_action(FLAG, current, suggested, inp, DEFAULT_CONSERVATIVENESS)
    note = (
        f"values above {flag_max:.2f} all schedule alike (SGLang caps the new-token ratio)"
        if base > flag_max else ""
    )  # fmt: skip
    expected = (
        f"token usage from p50 {usage:.2f} to about {target:g}: more requests running, less "
        "queue wait (TTFT), longer decode steps (ITL); throughput rises only where the decode "
        "step is not already compute- or bandwidth-bound"
    )
    action = with_expected(action, expected)
    return with_note(action, note) if note else action


def _floor2(value: float) -> float:
    return math.floor(value * 100) / 100


def _raise_conservativeness(inp: RuleInput) -> Action:
    """Straight to the guide's 1.3: a value in between only delays the same outcome."""
    current = _current(inp)
    action = flag_action(
        FLAG,
        current,
        inp.thresholds["conservativeness_ceiling"],
        inp,
        DEFAULT_CONSERVATIVENESS,
    )
    expected = (
        "new requests reserve more room: the pool stays fuller between retractions, a larger "
        "batch, shorter queue wait; ITL p99 rises. Retractions themselves need not fall: after "
        "each one SGLang re-estimates the ratio from the kept batch, whatever this flag says"
    )
    return with_expected(action, expected)


def _not_too_conservative(inp: RuleInput) -> str | None:
    """At the guide's lowest value already, retracting, or (online) capped by
    --max-running-requests on purpose: lowering it is not the answer."""
    current = _current(inp)
    running, cap = per_rank_batch(inp.view, 0.5), max_running_per_rank(inp.config)
    if inp.profile == "online" and cap and running is not None and running >= 0.95 * cap:
        return f"the batch is at --max-running-requests ({cap} per rank): capped, not conservative"
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


def _admitting(row: Mapping[str, float]) -> bool:
    """A sample where admission is being decided against running requests: with none running
    the queue is the request being (chunk-)prefilled or a burst arriving, which any scheduler
    admits at once, never held back by the reservations of running requests."""
    return row.get(NUM_RUNNING_REQS, 1.0) > 0


def _check_conservative(inp: RuleInput) -> Outcome:
    """Frequently, over samples with requests running: token usage < 0.9 with requests
    waiting; not when already at the guide's lowest value or while the pool overflows
    (retraction bursts in the window)."""
    target = inp.thresholds["token_usage_target"]
    freq = frequently(
        inp.view,
        lambda r: r[TOKEN_USAGE] < target and r[NUM_QUEUE_REQS] > 0,
        (TOKEN_USAGE, NUM_QUEUE_REQS),
        inp.frequently_ratio,
        gate=_admitting,
    )
    if freq.considered == 0 and inp.view.present(NUM_RUNNING_REQS):
        return idle(inp, "no request was running in any sample: nothing held admission back")
    veto = _not_too_conservative(inp) if freq.held else None
    if veto is not None:
        return Pass(freq.ratio, freq.considered, veto)
    signals = (TOKEN_USAGE, NUM_QUEUE_REQS, NUM_RUNNING_REQS)
    outcome = judged(freq, inp, signals, _lower_conservativeness)
    if not isinstance(outcome, Finding):
        return outcome
    prediction = _predict_admission(inp, outcome.action)
    outcome.action = predicted(outcome.action, prediction)
    outcome.severity = severity_for(prediction, Severity.INFO)
    return outcome


def _predict_admission(inp: RuleInput, action: Action) -> Prediction:
    """More admitted per rank: up to the usage target, or into a raised request cap."""
    if action.flag == "--max-running-requests":
        cap = max_running_per_rank(inp.config)
        return predict_cap_raise(inp, 2 * cap) if cap else predict_admission(inp, 0.9)
    return predict_admission(inp, inp.thresholds["token_usage_target"])


SCHEDULER_TOO_CONSERVATIVE = Rule(
    id="scheduler_too_conservative",
    # The finding's severity is the server model's: a warning where the larger batch is
    # predicted to gain >= 5 % on the profile's objective, else (or without a prediction) info.
    measured=(
        "graded per server by the predicted gain of the larger batch (predict/server_model.py): "
        "the closed-loop matrix (docs/performance.md) compares prediction and measurement"
    ),
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
        "retractions_per_minute": 1.0,
        "retraction_samples_ratio": 0.1,
    },
    provenance={
        "token_usage_target": "guide (all versions): 'token usage > 0.9 means good utilization'",
        "conservativeness_floor": "guide (all versions): 'decrease to a value like 0.3'",
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "retraction_samples_ratio": "ours: retractions come in bursts; bursts in a tenth of the "
        "samples mean the pool overflows",
    },
)


def _check_retractions(inp: RuleInput) -> Outcome:
    """Fires when retractions average above ~1/min while token usage is very high, unless the
    flag is at the guide's 1.3 already (then no value of it helps: SGLang's minimum new-token
    ratio is 0.14 at most, so requests that run to max_new_tokens always over-commit)."""
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
    current = _current(inp)
    if current is not None and current >= th["conservativeness_ceiling"]:
        return Pass(seen, len(rates), (
            f"{per_minute:.1f} retractions/min at --schedule-conservativeness {current:g}: no "
            "value of it stops them (SGLang's minimum new-token ratio is at most 0.14); they cost "
            "less throughput than a lower --max-running-requests would"
        ))  # fmt: skip
    evidence = (
        f"{per_minute:.1f} retractions/min over {format_duration(view.window_seconds)} "
        f"(the guide tolerates about {th['retractions_per_minute']:g}/min); retractions in "
        f"{seen:.0%} of {len(rates)} samples; token usage p90 {format_value(usage_p90)}"
    )
    # Graded by the server model's prediction; without one, as measured on the 8B/H100: from
    # 0.3 a warning, from SGLang's default 1.0 (+0.3 % offline, nothing online) a hint.
    base = DEFAULT_CONSERVATIVENESS if current is None else current
    hint = inp.profile == "online" or base >= DEFAULT_CONSERVATIVENESS
    prediction = predict_fewer_overcommits(inp, th["steady_token_usage"])
    action = predicted(_raise_conservativeness(inp), prediction)
    return Finding(
        evidence, action, confidence_for(inp), seen, len(rates),
        severity_for(prediction, Severity.INFO if hint else None),
    )  # fmt: skip


RETRACTIONS_FREQUENT = Rule(
    id="retractions_frequent",
    roles=DECODING_ROLES,
    measured=(
        "graded per server by the predicted gain of a fuller pool (predict/server_model.py): "
        "0.3 -> 1.3 on long outputs measured +4 % tokens/s (8B/H100), +16 % (8B/L40S), +7 % "
        "(1B/L4); retractions x2 (the ratio is re-estimated after each retraction whatever "
        "the flag). Without a prediction: from the default 1.0 a hint."
    ),
    severity=Severity.WARNING,
    summary="KV cache pool is full and requests are retracted more than about once a minute.",
    action="Raise --schedule-conservativeness (the guide suggests about 1.3).",
    source=SOURCE,
    signals=(RETRACTIONS_PER_MINUTE, TOKEN_USAGE),
    thresholds={
        "retractions_per_minute": 1.0,
        "high_token_usage": 0.85,
        "conservativeness_ceiling": 1.3,
        "steady_token_usage": 0.9,
    },
    provenance={
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "high_token_usage": "ours: the guide says 'token usage very high' without a number",
        "conservativeness_ceiling": "guide (all versions): 'increase to a value like 1.3'",
        "steady_token_usage": "guide (all versions): 'token usage > 0.9 means good "
        "utilization'; where admission at 1.3 holds the pool (the simulator of SGLang's "
        "scheduler: 0.88-0.92 on three model x GPU pairs)",
    },
    check=_check_retractions,
)
