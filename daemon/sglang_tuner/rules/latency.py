"""Guide section "Troubleshooting / High Latency" (online serving): batch, queue, prefill."""

import math
from dataclasses import replace

from sglang_tuner.changes.record import Change
from sglang_tuner.model.advice import (
    ITL_P50,
    TOKENS,
    Action,
    Finding,
    NoData,
    Outcome,
    Pass,
    Severity,
)
from sglang_tuner.model.signals import (
    E2E_P50_SECONDS,
    ITL_P50_SECONDS,
    ITL_P99_SECONDS,
    NUM_RUNNING_REQS_MAX_RANK,
    PROMPT_TOKENS_MEAN,
    QUEUE_TIME_P50_SECONDS,
    TTFT_P50_SECONDS,
    TTFT_P99_SECONDS,
)
from sglang_tuner.model.window import Row, frequently
from sglang_tuner.predict.itl_model import PROPORTIONAL, batch_for_itl_target, itl_fit
from sglang_tuner.predict.server_model import (
    STALL_BOUND,
    latency_cap,
    predict_itl_cap,
    wait_for_a_slot,
)
from sglang_tuner.predict.units import (
    batch_signal,
    flag_from_per_rank,
    max_running_flag,
    per_rank_batch,
    ranks_per_flag,
)
from sglang_tuner.rule import (
    DECODING_ROLES,
    PREFILLING_ROLES,
    Rule,
    RuleInput,
    flag_action,
    idle,
    judged,
    with_expected,
    with_note,
)
from sglang_tuner.rules.oom import default_chunked_prefill
from sglang_tuner.rules.sglang.defaults import LARGEST_DEFAULT_CHUNK, SMALLEST_DEFAULT_CHUNK
from sglang_tuner.rules.sglang.flags import has_flag

SOURCE = "Troubleshooting / High Latency"
ONLINE = ("online",)
# The guide gives no latency numbers: the targets marked "ours" are our defaults, overridable
# per rule (rules.<id>.thresholds).
# ITL p50 is read off SGLang's histogram, whose buckets are 5 ms wide around 30 ms (25, 30,
# 35, 40): a batch sized at exactly the target reads back anywhere in the bucket above it, and
# the rule fires again for a few milliseconds. The cap is sized 10 % under the target.
SIZING_MARGIN = 0.9
ITL_TARGET = "itl_p50_max_seconds"


def itl_target(inp: RuleInput) -> tuple[float, str]:
    """(seconds, the note saying so) of the ITL p50 the cap aims at: the target's ITL p50
    service level where the settings give one, else the rule's threshold (30 ms, the online
    profiles' default level too, or the user's override of it; no note)."""
    level = inp.service_levels.of(ITL_P50)
    if level is not None and level.configured:
        return level.bound, f"sized for the {level.text()} service level ({level.source})"
    return inp.thresholds[ITL_TARGET], ""


def _lower_max_running(inp: RuleInput) -> Action:
    """The per-rank batch at which ITL p50 meets the target's level, from the window."""
    batch = per_rank_batch(inp.view, 0.5) or 0.0
    itl = inp.view.quantile(ITL_P50_SECONDS, 0.5) or 0.0
    current = max_running_flag(inp.config)
    if batch <= 0 or itl <= 0:
        return flag_action("--max-running-requests", current, current or 1, inp)
    target, whose = itl_target(inp)
    sized = latency_cap(inp, target * SIZING_MARGIN)
    if not isinstance(sized, str):  # the server model: physics calibrated on this ITL
        per_rank, prediction = sized
        action = flag_action(
            "--max-running-requests", current, flag_from_per_rank(inp.config, per_rank), inp
        )
        action = with_note(action, whose) if whose else action
        return replace(with_expected(action, prediction.basis), prediction=prediction)
    action = _fitted_cap(inp, batch, itl, target)
    if sized.startswith(UNREACHABLE):  # the physics says no cap meets it: a hint at most
        action = with_note(action, f"{sized}: a cap cannot reach it; {FASTER}")
    elif sized.startswith(STALL_BOUND):  # the cap trades the prefill wait for TTFT: a hint
        action = with_note(action, f"{sized}; a faster prefill shortens the wait itself")
    return with_note(action, whose) if whose else action


UNREACHABLE = "no batch meets"  # latency_cap's answer where even one request is too slow
FASTER = "more tensor parallelism, a faster GPU or a smaller model can"
NO_COST = 0.005  # a fitted cap priced within half a point of nothing has no price


def _fitted_cap(inp: RuleInput, batch: float, itl: float, target: float) -> Action:
    """The cap from a fit of ITL on the batch over the window (no server model)."""
    if target != inp.thresholds[ITL_TARGET]:  # the fit reads its target from the thresholds
        inp = replace(inp, thresholds={**inp.thresholds, ITL_TARGET: target})
    current = max_running_flag(inp.config)
    per_rank, predicted, basis = batch_for_itl_target(inp, batch, itl)
    per_rank = min(per_rank, max(1, math.floor(batch) - 1))  # always below today's batch
    action = flag_action(
        "--max-running-requests", current, flag_from_per_rank(inp.config, per_rank), inp
    )
    # Decode tokens per second go with batch / ITL: what the smaller batch costs. Without a
    # fit the proportional model makes that ratio 1 by construction: no number is claimed.
    cost: float | None = None
    if basis == PROPORTIONAL or predicted <= 0:
        cost_text = (
            "decode tokens/s lower by an amount this window cannot tell (ITL did not vary "
            "with the batch enough to fit: a decode step's fixed weight read is unknown)"
        )
    else:
        # the fit's own ratio between the two batches, applied to the ITL read today (the fit
        # may sit off today's reading); b / (a + s b) never falls as b grows, so a smaller batch
        # never gains tokens/s (a fit read against today's ITL once claimed +295 %)
        fit = itl_fit(inp)
        at_now = fit[0] + fit[1] * batch if fit is not None else 0.0
        predicted = itl * predicted / at_now if at_now > 0 else predicted
        raw = (per_rank / predicted) / (batch / itl) - 1
        if raw < -NO_COST:
            cost = raw
            cost_text = f"decode tokens/s about {cost:+.0%}"
        else:  # a fit with no fixed cost per step prices the smaller batch at nothing
            cost_text = (
                "decode tokens/s lower by an amount this window cannot tell (the fit finds no "
                "fixed cost per step, so it prices a smaller batch at nothing, which it never is)"
            )
    ranks = ranks_per_flag(inp.config)
    ttft = wait_for_a_slot(inp, ranks, batch, per_rank, 1 + (cost or 0.0))
    expected = (
        f"ITL p50 from {itl * 1000:.0f} ms to about {predicted * 1000:.0f} ms at {per_rank} "
        f"requests per rank (batch p50 now {batch:.0f}), from {basis}; {cost_text}, and queue "
        "wait (TTFT) longer while the load stays"
    )
    prediction = predict_itl_cap(itl, predicted, f"{basis}; {cost_text}", cost, ttft)
    # `expected` already says it in milliseconds: the prediction rides along for /advice
    return replace(with_expected(action, expected), prediction=prediction)


def _check_batch(inp: RuleInput) -> Outcome:
    """Frequently: slow tokens (ITL p50 above target) while the per-rank batch is large."""
    if inp.view.present(ITL_P50_SECONDS) == 0:
        return NoData("no inter-token latency: no tokens were streamed", inp.view.window_seconds)
    th, batch = inp.thresholds, batch_signal(inp)
    target = itl_target(inp)[0]
    signals = (ITL_P50_SECONDS, batch)
    freq = frequently(
        inp.view,
        lambda r: r[ITL_P50_SECONDS] > target and r[batch] >= th["large_batch_min"],
        signals,
        inp.frequently_ratio,
        lambda r: r[batch] > 0,
    )
    if freq.considered == 0:
        return idle(inp)
    settled = _settled_after_own_cap(inp)
    if settled and freq.held:
        return Pass(freq.ratio, freq.considered, settled)
    return _unpriced_is_a_hint(judged(freq, inp, signals, _lower_max_running))


def _unpriced_is_a_hint(outcome: Outcome) -> Outcome:
    """A cap whose tokens/s cost this server's window cannot tell (no server model, and ITL
    did not vary with the batch enough to fit) is a hint, never applied: a smaller batch
    always costs throughput, and by how much is exactly what is unknown. So is a cap where
    the server model finds that no batch meets the target (one request alone is slower), or
    that ITL p50 is mostly the prefill its median step waits for (`STALL_BOUND`)."""
    if not isinstance(outcome, Finding):
        return outcome
    prediction = outcome.action.prediction
    reachable = UNREACHABLE not in outcome.action.note and STALL_BOUND not in outcome.action.note
    if reachable and (prediction is None or TOKENS in prediction.effects):
        return outcome
    return replace(outcome, severity=Severity.INFO)


def _settled_after_own_cap(inp: RuleInput) -> str:
    """Why the rule stays quiet right after its own cap ('' when it does not): the cap was sized
    for the target, and ITL p50 now reads within `repeat_tolerance` over it, which is inside
    the histogram's resolution there (SGLang's ITL buckets are 5 ms wide at 30 ms) and the
    sizing's error: another step would cost a restart and tokens/s for noise."""
    latest = inp.changes[-1] if inp.changes else None
    if latest is None or latest.rule != BATCH_TOO_LARGE_FOR_LATENCY.id:
        return ""
    itl = inp.view.quantile(ITL_P50_SECONDS, 0.5)
    target = itl_target(inp)[0]
    if itl is None or itl > target * (1 + inp.thresholds["repeat_tolerance"]):
        return ""
    return (
        f"ITL p50 {itl * 1e3:.1f} ms after this rule's cap ({_moved(latest)}): within "
        f"{inp.thresholds['repeat_tolerance']:.0%} of the {target * 1e3:.0f} ms target, inside "
        "the histogram's resolution there"
    )


def _moved(change: Change) -> str:
    return ", ".join(f"{flag} {change.before[flag]} -> {v}" for flag, v in change.after.items())


BATCH_TOO_LARGE_FOR_LATENCY = Rule(
    id="batch_too_large_for_latency",
    roles=DECODING_ROLES,
    measured=(
        "the cap sized on the server model (the decode step calibrated on this ITL): ITL p50 "
        "predicted and measured within 5 points on every pair of the closed-loop matrix (8B/"
        "L40S: 1024 -> 75, -48 % predicted, -49 % measured, tokens/s -40 %); judged on ITL."
    ),
    verifies=(ITL_P99_SECONDS, ITL_P50_SECONDS),
    severity=Severity.WARNING,
    summary="Tokens stream slowly because the running batch is large.",
    action="Lower --max-running-requests: trade throughput for lower latency.",
    source=SOURCE + " / Check Batch Size",
    signals=(ITL_P50_SECONDS, NUM_RUNNING_REQS_MAX_RANK),
    thresholds={ITL_TARGET: 0.03, "large_batch_min": 64.0, "repeat_tolerance": 0.1},
    provenance={
        "repeat_tolerance": "ours: after its own cap, an ITL p50 read up to 10 % over the target "
        "is inside SGLang's 5 ms histogram buckets at 30 ms (17 %) and the sizing's error",
        ITL_TARGET: "ours: the guide gives no latency number; 30 ms is ~33 tokens/s per "
        "stream, faster than people read; a target's ITL p50 service level, where set, wins",
        "large_batch_min": "ours: 'if batch size is too large' has no number; below 64 a "
        "smaller batch saves little per step",
    },
    profiles=ONLINE,
    check=_check_batch,
)


def _slow_clients(inp: RuleInput) -> Action:
    share = inp.thresholds["queue_share_of_e2e"]
    return Action(
        "client: reduce the request submission rate, or add replicas behind the SGLang Model "
        f"Gateway, until requests spend under {share:.0%} of their latency queued"
    )


def _check_queue_wait(inp: RuleInput) -> Outcome:
    """Frequently: queue time p50 >= half the end-to-end latency p50 (requests finishing)."""
    share = inp.thresholds["queue_share_of_e2e"]
    signals = (QUEUE_TIME_P50_SECONDS, E2E_P50_SECONDS)
    freq = frequently(
        inp.view,
        lambda r: r[QUEUE_TIME_P50_SECONDS] >= share * r[E2E_P50_SECONDS],
        signals,
        inp.frequently_ratio,
        lambda r: r[E2E_P50_SECONDS] > 0,
    )
    if freq.considered == 0:
        return idle(inp, "the server finished no request in every sample")
    return judged(freq, inp, signals, _slow_clients)


QUEUE_WAIT_DOMINATES = Rule(
    id="queue_wait_dominates",
    severity=Severity.WARNING,
    summary="Requests spend most of their end-to-end latency waiting in the queue.",
    action="Reduce the request submission rate or add replicas (the queue is the latency).",
    source=SOURCE + " / Check Queue Size",
    check=_check_queue_wait,
    signals=(QUEUE_TIME_P50_SECONDS, E2E_P50_SECONDS),
    requires=(QUEUE_TIME_P50_SECONDS, E2E_P50_SECONDS),
    thresholds={"queue_share_of_e2e": 0.5},
    provenance={
        "queue_share_of_e2e": "ours: 'requests are waiting too long in queue' has no number; "
        "half the end-to-end latency",
    },
    profiles=ONLINE,
)


def _chunk_size(inp: RuleInput) -> tuple[int | None, int]:
    """(configured chunk, chunk to reason with): the default by GPU, else the smallest one."""
    current = inp.config.chunked_prefill_size if inp.config else None
    assumed = default_chunked_prefill(inp) or SMALLEST_DEFAULT_CHUNK
    return current, current if current is not None else assumed


PIECEWISE = "--enable-piecewise-cuda-graph"


def _raise_chunked_prefill(inp: RuleInput) -> Action:
    """Double the chunk, up to SGLang's largest default; past it, piecewise CUDA graphs where
    the version has them opt-in (from 0.5.10 they are on by default)."""
    current, base = _chunk_size(inp)
    cap = int(inp.thresholds["chunked_prefill_max"])
    piecewise = has_flag(PIECEWISE, inp.config.version if inp.config else None)
    if base < 0 or base >= cap:
        if piecewise:
            text = f"enable piecewise CUDA graph for prefill ({PIECEWISE})"
            lower = "shorter prefill steps: lower TTFT"
            return Action(text, PIECEWISE, "false", "true", expected=lower)
        return Action(
            f"--chunked-prefill-size is {base} and piecewise CUDA graphs are on already: "
            "shorten prompts, or give prefill its own server (prefill-decode disaggregation)"
        )
    doubled = min(cap, 2 * base)
    action = flag_action("--chunked-prefill-size", current, doubled, inp, base)
    action = with_expected(
        action, f"long prompts prefilled in half as many chunks ({base} -> {doubled} tokens "
        "each): lower TTFT, a little more activation memory",
    )  # fmt: skip
    return with_note(action, f"then try {PIECEWISE}") if piecewise else action


def _check_prefill(inp: RuleInput) -> Outcome:
    """Frequently: TTFT above target, mostly prefill (not queue), prompts longer than a chunk."""
    for signal in (TTFT_P50_SECONDS, PROMPT_TOKENS_MEAN):
        if inp.view.present(signal) == 0:
            return NoData(
                f"{signal} is not exposed (no finished requests?)", inp.view.window_seconds
            )
    th, chunk = inp.thresholds, _chunk_size(inp)[1]
    has_queue = inp.view.present(QUEUE_TIME_P50_SECONDS) > 0
    signals = (TTFT_P50_SECONDS, PROMPT_TOKENS_MEAN) + (
        (QUEUE_TIME_P50_SECONDS,) if has_queue else ()
    )

    def prefill_bound(r: Row) -> bool:
        ttft = r[TTFT_P50_SECONDS]
        prefill = ttft - (r[QUEUE_TIME_P50_SECONDS] if has_queue else 0.0)
        return (
            ttft > th["ttft_p50_max_seconds"]
            and prefill >= th["prefill_share_of_ttft"] * ttft
            and (chunk < 0 or r[PROMPT_TOKENS_MEAN] > chunk)
        )

    freq = frequently(inp.view, prefill_bound, signals, inp.frequently_ratio)
    return judged(freq, inp, signals, _raise_chunked_prefill)


LONG_PROMPTS_DOMINATE_TTFT = Rule(
    id="long_prompts_dominate_ttft",
    roles=PREFILLING_ROLES,
    verifies=(TTFT_P99_SECONDS, TTFT_P50_SECONDS),
    severity=Severity.WARNING,
    summary="Time to first token is slow because long prompts are prefilled in many small chunks.",
    action="Raise --chunked-prefill-size, then enable piecewise CUDA graph.",
    source=SOURCE + " / Check Prefill Time",
    signals=(TTFT_P50_SECONDS, PROMPT_TOKENS_MEAN, QUEUE_TIME_P50_SECONDS),
    thresholds={
        "ttft_p50_max_seconds": 1.0,
        "prefill_share_of_ttft": 0.5,
        "chunked_prefill_max": float(LARGEST_DEFAULT_CHUNK),
    },
    profile_thresholds={"long_context": {"ttft_p50_max_seconds": 5.0}},
    provenance={
        "ttft_p50_max_seconds": "ours: the guide gives no latency number (long_context: 5 s)",
        "prefill_share_of_ttft": "ours: most of the TTFT is prefill, not queueing",
        "chunked_prefill_max": "SGLang's largest default --chunked-prefill-size (GPUs >= 160 GB)",
    },
    profiles=("online", "long_context"),
    check=_check_prefill,
)
