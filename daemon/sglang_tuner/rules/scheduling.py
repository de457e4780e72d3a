"""Guide section "Achieve a high token usage": --schedule-conservativeness in both directions."""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sglang_tuner.model.advice import Action, Finding, NoData, Outcome, Pass, Prediction, Severity
from sglang_tuner.model.flags import MAX_RUNNING_REQUESTS as MAX_RUNNING
from sglang_tuner.model.flags import SCHEDULE_CONSERVATIVENESS as FLAG
from sglang_tuner.model.signals import (
    EVICTED_TOKENS_RATE,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    PREFILL_FULL_RATIO,
    PREFIX_CACHE_HIT_RATIO,
    RETRACTIONS_PER_MINUTE,
    TOKEN_USAGE,
)
from sglang_tuner.model.window import frequently
from sglang_tuner.predict.retraction import fitting_batch, predict_cap_down, predict_radix_off
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
RADIX_OFF = "--disable-radix-cache"
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
    if cap and running is not None and running >= 0.95 * cap:
        # The batch is at --max-running-requests: admission is capped, not conservative. Online
        # the raise trades ITL for queue wait and tokens/s: the prediction says on every
        # objective, and the plan holds it where it would break a service level.
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
    if current is None or current >= DEFAULT_CONSERVATIVENESS:
        expected = (
            "the guide's step, little expected from SGLang's default or above: the new-token "
            "ratio's floor rises by a third at most, and after each retraction SGLang "
            "re-estimates the ratio from the kept batch whatever this flag says, so admission "
            "and the batch stay about as they are"
        )
    else:
        expected = (
            "new requests reserve more room: the pool stays fuller between retractions, a "
            "larger batch, shorter queue wait; ITL p99 rises. Retractions themselves need not "
            "fall: after each one SGLang re-estimates the ratio from the kept batch, whatever "
            "this flag says"
        )
    return with_expected(action, expected)


def _not_too_conservative(inp: RuleInput) -> str | None:
    """At the guide's lowest value already, or retracting: lowering it is not the answer (a
    batch held at --max-running-requests gets that cap raised instead)."""
    current = _current(inp)
    if current is not None and current <= inp.thresholds["conservativeness_floor"]:
        return f"--schedule-conservativeness is already {current:g}, the guide's lowest value"
    full = inp.view.quantile(PREFILL_FULL_RATIO, 0.5)
    if full is not None and full >= inp.thresholds["prefill_full_ratio"]:
        return (
            f"{full:.0%} of the Prefill batch lines are cut at one size (#new-token within 10 % "
            "of the largest): the queue waits on the prefill token budget (--chunked-prefill-"
            "size, --max-prefill-tokens), which --schedule-conservativeness does not change"
        )
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
    (retraction bursts in the window). A batch held at --max-running-requests gets that cap
    doubled instead, on every profile: online the raise trades ITL for queue wait, and the
    prediction on every objective and the plan's service levels decide."""
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
    signals=(
        TOKEN_USAGE,
        NUM_QUEUE_REQS,
        NUM_RUNNING_REQS,
        RETRACTIONS_PER_MINUTE,
        PREFILL_FULL_RATIO,
    ),  # fmt: skip
    requires=(TOKEN_USAGE, NUM_QUEUE_REQS),
    thresholds={
        "token_usage_target": 0.9,
        "conservativeness_floor": 0.3,
        "retractions_per_minute": 1.0,
        "retraction_samples_ratio": 0.1,
        "prefill_full_ratio": 0.8,
    },
    provenance={
        "token_usage_target": "guide (all versions): 'token usage > 0.9 means good utilization'",
        "prefill_full_ratio": "SGLang's PrefillAdder (0.4-0.5): a batch stops at the first budget "
        "spent (the pool's, scaled by the conservativeness; --max-prefill-tokens; "
        "--chunked-prefill-size); ours: four in five batches at one size are cut by the token "
        "budgets, not the pool",
        "conservativeness_floor": "guide (all versions): 'decrease to a value like 0.3'",
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "retraction_samples_ratio": "ours: retractions come in bursts; bursts in a tenth of the "
        "samples mean the pool overflows",
    },
)


# What a retraction storm is in SGLang's code (0.5.4 wheel; the same in 0.4.10 and 0.5.23):
# - `Scheduler.update_running_batch`: when `ScheduleBatch.check_decode_mem` finds no room for
#   the next step, `retract_decode` frees the requests with the fewest output tokens (ties: the
#   longest prompt) until it fits (0.4.x: until the kept have room for 20 steps each); they
#   re-queue with their output kept and prefill prompt and output again.
#   The new-token ratio becomes (decoded + 20 x kept) / (sum(max_new_tokens) + 1) of the kept
#   batch, whatever --schedule-conservativeness says; without a retraction it decays by
#   (init - min) / 600 a step to min = 0.14 x init, init = min(0.7 x conservativeness, 1).
# - `PrefillAdder` admits while free + evictable tokens cover the new request's prompt and
#   min(max_new_tokens, 4096) plus each running request's remaining min(max_new - output,
#   4096) x the ratio: requests that run to max_new_tokens over-commit at any ratio below 1.
# - the radix cache never holds what a retraction needs: token usage counts none of its
#   evictable tokens (`_get_token_info`: used = pool - free - evictable) and `check_decode_mem`
#   evicts them before it decides. --disable-radix-cache changes admission only for requests
#   sent with ignore_eos (`add_one_req_ignore_eos` reserves their whole max_new_tokens once
#   `tree_cache.disable`); otherwise it only loses the prefix sharing (predict/retraction.py).
def _check_retractions(inp: RuleInput) -> Outcome:
    """Fires when retractions average above ~1/min while token usage is very high. Weighs the
    guide's --schedule-conservativeness 1.3 against --max-running-requests down to the batch
    the pool holds to every request's end and the radix cache off (predict/retraction.py),
    and advises the one predicted best here. At the guide's 1.3 already, no value of it helps
    (SGLang's minimum new-token ratio is 0.14 at most, so requests that run to max_new_tokens
    always over-commit): then only a cap or the cache predicted to gain, else nothing."""
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
    candidates, skipped = _remedies(inp)
    chosen = _best(candidates)
    if chosen is None:
        return Pass(seen, len(rates), "; ".join((
            f"{per_minute:.1f} retractions/min at --schedule-conservativeness "
            f"{_current(inp):g}: no value of it stops them (SGLang's minimum new-token ratio "
            "is at most 0.14)",
            *_alternatives(candidates, None, skipped),
        )))  # fmt: skip
    evidence = (
        f"{per_minute:.1f} retractions/min over {format_duration(view.window_seconds)} "
        f"(the guide tolerates about {th['retractions_per_minute']:g}/min); retractions in "
        f"{seen:.0%} of {len(rates)} samples; token usage p90 {format_value(usage_p90)}"
    )
    action = _with_alternatives(chosen.action, _alternatives(candidates, chosen, skipped))
    return Finding(evidence, action, confidence_for(inp), seen, len(rates), _graded(inp, chosen))


def _with_alternatives(action: Action, others: list[str]) -> Action:
    return with_note(action, "alternatives: " + "; ".join(others)) if others else action


@dataclass(frozen=True, slots=True)
class _Remedy:
    """One candidate change for a retraction storm, with the server model's prediction."""

    action: Action
    guide: bool  # the guide's own advice (--schedule-conservativeness up)

    @property
    def prediction(self) -> Prediction:
        assert self.action.prediction is not None
        return self.action.prediction


def _remedies(inp: RuleInput) -> tuple[list[_Remedy], list[str]]:
    """The candidates that apply here, the guide's first; and why the others were not weighed."""
    candidates, skipped = [], []
    current, ceiling = _current(inp), inp.thresholds["conservativeness_ceiling"]
    if current is None or current < ceiling:
        prediction = predict_fewer_overcommits(
            inp, inp.thresholds["steady_token_usage"], current, DEFAULT_CONSERVATIVENESS
        )
        candidates.append(_Remedy(predicted(_raise_conservativeness(inp), prediction), True))
    for build in (_cap_down, _radix_off):
        remedy = build(inp)
        if isinstance(remedy, str):
            skipped.append(remedy)
        else:
            candidates.append(remedy)
    return candidates, skipped


def _best(candidates: list[_Remedy]) -> _Remedy | None:
    """The guide's change, unless another is predicted to gain more on the profile's objective
    with no cost past a guard; another alone only where it is predicted to gain."""
    guide = next((c for c in candidates if c.guide), None)
    bar = max(0.0, guide.prediction.gain or 0.0) if guide else 0.0
    better = [
        c
        for c in candidates
        if not c.guide and (c.prediction.gain or 0.0) > bar and not c.prediction.costs()
    ]
    return max(better, key=lambda c: c.prediction.gain or 0.0) if better else guide


def _alternatives(
    candidates: list[_Remedy], chosen: _Remedy | None, skipped: list[str]
) -> list[str]:
    """Each candidate not chosen, with its prediction; each one not weighed, with why."""
    weighed = [f"{c.action.text}: {c.prediction.text()}" for c in candidates if c is not chosen]
    return [*weighed, *skipped]


def _graded(inp: RuleInput, chosen: _Remedy) -> Severity | None:
    """Graded by the server model's prediction; without one, the guide's change as measured
    on the 8B/H100: from 0.3 a warning, from SGLang's default 1.0 (+0.3 % offline, nothing
    online) a hint."""
    if not chosen.guide:
        return severity_for(chosen.prediction, Severity.INFO)
    current = _current(inp)
    base = DEFAULT_CONSERVATIVENESS if current is None else current
    hint = inp.profile == "online" or base >= DEFAULT_CONSERVATIVENESS
    return severity_for(chosen.prediction, Severity.INFO if hint else None)


def _cap_down(inp: RuleInput) -> _Remedy | str:
    """--max-running-requests down to the per-rank batch the pool holds to every request's
    end: the requests admitted can all finish without a retraction."""
    fit = fitting_batch(inp)
    if isinstance(fit, str):
        return f"--max-running-requests not weighed: {fit}"
    cap, hold = fit
    now, peak = max_running_per_rank(inp.config), per_rank_batch(inp.view, 1.0)
    if (now is not None and cap >= now) or (peak is not None and cap >= peak):
        return (
            f"--max-running-requests not weighed: the pool holds {cap} requests per rank to "
            f"their end ({hold.basis}), as many as run"
        )
    suggested = flag_from_per_rank(inp.config, cap)
    action = flag_action(MAX_RUNNING, max_running_flag(inp.config), suggested, inp)
    expected = (
        f"{cap} requests per rank fit the pool to their end ({hold.basis}): retractions stop, "
        "a smaller batch"
    )
    return _Remedy(predicted(with_expected(action, expected), predict_cap_down(inp, cap)), False)


def _radix_off(inp: RuleInput) -> _Remedy | str:
    """--disable-radix-cache, only while the cache is evicted from the full pool (it held the
    pool's free part) and the prefix hit ratio is low: never with a high hit ratio."""
    config, view = inp.config, inp.view
    if config is not None and config.disable_radix_cache:
        return "the radix cache is off already"
    hit, limit = view.mean(PREFIX_CACHE_HIT_RATIO), inp.thresholds["radix_off_max_hit"]
    if hit is None or hit > limit:
        shown = "unknown" if hit is None else f"{hit:.2f}"
        return f"radix cache off not weighed: prefix hit ratio {shown} (only below {limit:g})"
    if not (view.mean(EVICTED_TOKENS_RATE) or 0.0) > 0:
        return "radix cache off not weighed: no radix-cache eviction seen in the window"
    current = None if config is None or config.disable_radix_cache is None else "false"
    action = Action(f"{RADIX_OFF} {current or '?'} -> true", RADIX_OFF, current, "true")
    expected = (
        f"prefix hit ratio {hit:.2f}: little sharing lost; SGLang evicts the cache before it "
        "retracts, so only requests sent with ignore_eos retract less (their whole "
        "max_new_tokens is reserved once the cache is off)"
    )
    return _Remedy(predicted(with_expected(action, expected), predict_radix_off(inp)), False)


RETRACTIONS_FREQUENT = Rule(
    id="retractions_frequent",
    roles=DECODING_ROLES,
    measured=(
        "graded per server by the predicted gain of the change chosen (predict/server_model.py, "
        "predict/retraction.py): 0.3 -> 1.3 on long outputs measured +4 % tokens/s (8B/H100), "
        "+16 % (8B/L40S), +7 % (1B/L4); retractions x2 (the ratio is re-estimated after each "
        "retraction whatever the flag). Without a prediction: from the default 1.0 a hint."
    ),
    severity=Severity.WARNING,
    summary="KV cache pool is full and requests are retracted more than about once a minute.",
    action=(
        "Raise --schedule-conservativeness (the guide suggests about 1.3), unless lowering "
        "--max-running-requests to the batch the pool holds to the requests' ends, or (low "
        "prefix hit ratio) --disable-radix-cache, is predicted to gain more here."
    ),
    source=SOURCE,
    signals=(RETRACTIONS_PER_MINUTE, TOKEN_USAGE, PREFIX_CACHE_HIT_RATIO, EVICTED_TOKENS_RATE),
    thresholds={
        "retractions_per_minute": 1.0,
        "high_token_usage": 0.85,
        "conservativeness_ceiling": 1.3,
        "steady_token_usage": 0.9,
        "radix_off_max_hit": 0.1,
    },
    provenance={
        "retractions_per_minute": "guide (newest): 'occasional retractions (~1 per minute) are "
        "acceptable'",
        "high_token_usage": "ours: the guide says 'token usage very high' without a number",
        "conservativeness_ceiling": "guide (all versions): 'increase to a value like 1.3'",
        "steady_token_usage": "guide (all versions): 'token usage > 0.9 means good "
        "utilization'; where admission at 1.3 holds the pool (the simulator of SGLang's "
        "scheduler: 0.88-0.92 on three model x GPU pairs)",
        "radix_off_max_hit": "ours: below a tenth of prompt tokens from the cache, turning it "
        "off recomputes little; above it the cache saves more than it could free",
    },
    check=_check_retractions,
)
