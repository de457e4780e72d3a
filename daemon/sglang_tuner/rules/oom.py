"""Guide section "Avoid Out-of-Memory Errors": OOM during prefill and during decoding."""

import math
from collections.abc import Callable
from dataclasses import replace

from sglang_tuner.model.advice import (
    Action,
    Confidence,
    Finding,
    NoData,
    Outcome,
    Pass,
    Severity,
)
from sglang_tuner.model.flag_transforms import split_note
from sglang_tuner.model.signals import (
    DECODE_OOM_EVENTS,
    NUM_RUNNING_REQS_MAX_RANK,
    PREFILL_OOM_EVENTS,
    RESTARTS,
)
from sglang_tuner.predict.crash_fix import crash_fix, reported
from sglang_tuner.predict.units import (
    flag_from_per_rank,
    max_running_flag,
    max_running_per_rank,
    per_rank_batch,
)
from sglang_tuner.rule import (
    Rule,
    RuleInput,
    flag_action,
    with_expected,
    with_note,
)
from sglang_tuner.rules.memory import MEM_FRACTION_TOO_HIGH, lower_mem_fraction
from sglang_tuner.rules.sglang.defaults import default_for
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb

SOURCE = "Hyperparameter Tuning / Avoid Out-of-Memory Errors"
_NO_OOM_LINES = (
    "OOM errors are read from the SGLang log only: set the target's log_file "
    "(CUDA out-of-memory tracebacks in prefill or decode)"
)
NO_CRASH = "no more out-of-memory crashes"


def default_chunked_prefill(inp: RuleInput) -> int | None:
    """SGLang's `--chunked-prefill-size` when unset, for this server's version, GPU memory and
    PD role, in flag units (`rules/sglang/defaults.py`); None when the GPU is unknown."""
    if inp.config is None:
        return None
    value = default_for("--chunked-prefill-size", inp.config, gpu_memory_gb(inp.config))
    return value if isinstance(value, int) else None


def _lower_chunked_prefill(inp: RuleInput) -> Action:
    """Current -> 4096 -> 2048 (the guide's two values); -1 (chunking off) counts as unbounded."""
    th = inp.thresholds
    current = inp.config.chunked_prefill_size if inp.config else None
    default = default_chunked_prefill(inp)
    base = current if current is not None else default
    first, floor = int(th["chunked_prefill_step_1"]), int(th["chunked_prefill_floor"])
    if base is not None and 0 < base <= floor:
        return _lower_mem_fraction_instead(inp, base)
    target = first if base is None or base < 0 or base > first else floor
    action = flag_action("--chunked-prefill-size", current, target, inp, default)
    if split := split_note("--chunked-prefill-size", target, inp.config):
        action = with_note(action, split)
    shrink = (
        f"prefill activations about {target / base:.0%} of today's" if base and base > 0 else ""
    )
    expected = (
        f"{NO_CRASH}: {shrink or 'smaller prefill activations'}; slower prefill of long prompts"
    )
    return with_expected(action, expected)


def _lower_mem_fraction_instead(inp: RuleInput, chunk: int) -> Action:
    """The chunk is at the guide's floor already: the guide's General OOM step on
    --mem-fraction-static (0.8, then 0.7), as mem_fraction_too_high gives it, so that a crash
    loop gets a flag to change rather than a sentence."""
    general = replace(inp, thresholds=MEM_FRACTION_TOO_HIGH.thresholds_for(inp.profile))
    action = lower_mem_fraction(general)
    if action.flag is None:
        return replace(action, text=f"--chunked-prefill-size is already {chunk}; {action.text}")
    action = with_note(action, f"--chunked-prefill-size is already {chunk}, the guide's floor")
    return with_expected(action, f"{NO_CRASH}: more GPU memory left for prefill activations")


# A batch of one (or none) ran out: capping concurrency cannot help, one request's own size did.
SMALLEST_CAPPED_BATCH = 2


def _no_cap(batch: float) -> Action:
    """No `--max-running-requests` value: at most one request per rank was running, so a cap
    (down to 1) changes nothing the crash depended on."""
    return Action(
        f"no --max-running-requests cap: at most one request per rank was running (p90 batch "
        f"{batch:g}), so one request's own size ran out of memory, not the batch; limit what one "
        "request may take (--context-length); where SGLang's numbers show free tokens covering "
        "the request, it is an allocator bug",
        expected="no flag value: a smaller batch cannot stop a single request's failure",
    )


def lower_max_running(inp: RuleInput) -> Action:
    """Below the batch that ran out of memory: the p90 per-rank batch minus one step."""
    current = max_running_per_rank(inp.config)
    batch = per_rank_batch(inp.view, 0.9)
    base = batch if batch is not None else current
    if base is None:
        why = inp.config_error or "/server_info did not report it and no running batch was seen"
        return Action("--max-running-requests: lower it", "--max-running-requests", note=why)
    if current is not None:
        base = min(base, current)
    if base < SMALLEST_CAPPED_BATCH:
        return _no_cap(base)
    per_rank = max(1, math.floor(base * (1 - inp.thresholds["max_running_step_ratio"])))
    suggested = flag_from_per_rank(inp.config, per_rank)
    action = flag_action("--max-running-requests", max_running_flag(inp.config), suggested, inp)
    expected = f"{NO_CRASH}: at most {per_rank} requests per rank, {base:.0f} ran out of memory"
    return with_expected(action, f"{expected}; lower peak concurrency")


def crashes_in_window(
    inp: RuleInput, signal: str, no_log: str, threshold: str = "oom_events"
) -> tuple[float, int] | NoData | Pass:
    """(crashes of one kind in the window, samples that could have shown one): NoData (`no_log`)
    when no sample could, a Pass below the rule's `threshold`."""
    present = inp.view.present(signal)
    if present == 0:
        return NoData(no_log, inp.view.window_seconds)
    count = inp.view.total(signal) or 0.0
    return (count, present) if count >= inp.thresholds[threshold] else Pass(0.0, present)


# What a crash rule says of the crashes in its window: (evidence, the fix) from their count.
CrashJudge = Callable[[RuleInput, float], tuple[str, Action]]


def crash_check(
    inp: RuleInput, signal: str, no_log: str, judge: CrashJudge, threshold: str = "oom_events"
) -> Outcome:
    """A crash rule's check: NoData or a Pass as `crashes_in_window` says, else a finding at
    high confidence with the evidence and fix `judge` gives for the crashes counted."""
    crashes = crashes_in_window(inp, signal, no_log, threshold)
    if not isinstance(crashes, tuple):
        return crashes
    count, present = crashes
    evidence, action = judge(inp, count)
    return Finding(evidence, action, Confidence.HIGH, 1.0, present)


def _check_events(
    inp: RuleInput, signal: str, phase: str, suggest: Callable[[RuleInput], Action]
) -> Outcome:
    """Fires on any OOM line of the phase in the window; one crash is enough evidence."""

    def judge(inp: RuleInput, events: float) -> tuple[str, Action]:
        evidence = f"{events:.0f} CUDA out-of-memory crash(es) during {phase} in the window"
        action = suggest(inp)
        # Sure only from a reported value: an assumed or unknown one may already be the suggestion.
        sure = reported(action)
        basis = evidence if sure else f"{evidence}; today's value unknown, it may already be as low"
        return evidence, crash_fix(inp, action, signal, basis, sure)

    return crash_check(inp, signal, _NO_OOM_LINES, judge)


def _check_prefill_oom(inp: RuleInput) -> Outcome:
    """Any CUDA OOM in a prefill (extend) forward pass in the window."""
    return _check_events(inp, PREFILL_OOM_EVENTS, "prefill", _lower_chunked_prefill)


def _check_decode_oom(inp: RuleInput) -> Outcome:
    """Any CUDA OOM in a decode forward pass (or graph replay) in the window."""
    return _check_events(inp, DECODE_OOM_EVENTS, "decode", lower_max_running)


ONE_CRASH = "ours: one crash in the window is enough to act on"

PREFILL_OOM = Rule(
    id="prefill_oom",
    measured=(
        "--chunked-prefill-size 20480 -> 4096 on a crash-looping server: crashes 4.3 -> 0 per "
        "10 min, tokens/s 127 -> 222 (+75 %); the daemon judged it helped."
    ),
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.CRITICAL,
    summary="The server ran out of memory during prefill.",
    action="Lower --chunked-prefill-size to 4096, then 2048 (slower prefill for long prompts).",
    source=SOURCE + " (OOM During Prefill)",
    check=_check_prefill_oom,
    signals=(PREFILL_OOM_EVENTS,),
    thresholds={
        "oom_events": 1.0,
        "chunked_prefill_step_1": 4096.0,
        "chunked_prefill_floor": 2048.0,
    },
    provenance={
        "oom_events": ONE_CRASH,
        "chunked_prefill_step_1": "guide (all versions): 'to 4096 or 2048'",
        "chunked_prefill_floor": "guide (all versions): 'to 4096 or 2048'",
    },
    needs_up=False,  # judged from the window's events and startup facts, also while down
    needs_window=False,
    stability=True,
)

DECODE_OOM = Rule(
    id="decode_oom",
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.CRITICAL,
    summary="The server ran out of memory during decoding.",
    action="Lower --max-running-requests below the batch that ran out (limits concurrency).",
    source=SOURCE + " (OOM During Decoding)",
    check=_check_decode_oom,
    signals=(DECODE_OOM_EVENTS, NUM_RUNNING_REQS_MAX_RANK),
    thresholds={"oom_events": 1.0, "max_running_step_ratio": 0.25},
    provenance={
        "oom_events": ONE_CRASH,
        "max_running_step_ratio": "ours: the guide says 'lower' without a number; a quarter "
        "below the p90 batch that crashed",
    },
    needs_up=False,  # judged from the window's events and startup facts, also while down
    needs_window=False,
    stability=True,
)
