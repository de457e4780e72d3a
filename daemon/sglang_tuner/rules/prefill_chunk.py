"""Guide section "Avoid out-of-memory errors": a smaller `--chunked-prefill-size` "saves memory but
slows down the prefill speed for long prompts". A chunk set below SGLang's own default for the
GPU, with no prefill OOM to pay for, is that slowdown bought for nothing: each prefill pass
reads the weights and pays its launch cost once, over fewer tokens.
"""

from collections.abc import Mapping

from sglang_tuner.model.advice import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.flags import MEM_FRACTION_STATIC as MEM_FLAG
from sglang_tuner.model.signals import (
    ITL_P50_SECONDS,
    NUM_QUEUE_REQS,
    PREFILL_FULL_RATIO,
    PREFILL_OOM_EVENTS,
    PROMPT_TOKENS_RATE,
    STARTUP_AVAILABLE_GPU_MEM_GB,
)
from sglang_tuner.predict.server_model import predict_chunk_change, severity_for
from sglang_tuner.rule import (
    PREFILLING_ROLES,
    Rule,
    RuleInput,
    config_unknown,
    flag_action,
    predicted,
    with_expected,
    with_note,
)
from sglang_tuner.rules.memory import CHUNK_FLAG, startup_available_gb
from sglang_tuner.rules.oom import default_chunked_prefill
from sglang_tuner.rules.sglang.defaults import is_default
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb
from sglang_tuner.rules.sglang.mem_fraction import (
    GIB,
    MIN_ACTIVATION_TOKENS,
    RESERVE_MIB_PER_ACTIVATION_TOKEN,
)

SOURCE = "Hyperparameter Tuning / Avoid Out-of-Memory Errors (chunked prefill)"


def _raise_to_default(inp: RuleInput, current: int, default: int) -> Action:
    action = flag_action(CHUNK_FLAG, current, default, inp)
    action = with_note(
        action, f"{default} is SGLang's own value for this GPU; keep {current} only where it "
        "was lowered for a prefill OOM (the guide's trade: memory for prefill speed)",
    )  # fmt: skip
    return with_expected(
        action, f"prefill passes of up to {default} tokens instead of {current}: fewer weight "
        "reads per prompt token, faster prefill; decode steps wait less for it (SGLang runs "
        "every chunk of an admitted prompt before the next decode step, so the wait is the "
        "whole prompt's prefill at any chunk, priced anew)",
    )  # fmt: skip


def _raise_to(inp: RuleInput, current: int, target: int, why: str) -> Action:
    """Raise the chunk part of the way to SGLang's default: as far as the free memory holds."""
    action = with_note(flag_action(CHUNK_FLAG, current, target, inp), why)
    return with_expected(
        action, f"prefill passes of up to {target} tokens instead of {current}: fewer weight "
        "reads per prompt token, faster prefill, within the memory free today",
    )  # fmt: skip


def fitting_chunk(current: int, default: int, free_gb: float, th: Mapping[str, float]) -> int:
    """The largest power-of-two chunk above `current` and below `default` whose activations
    (`activations_gb`) leave `free_floor_gb` of the free memory; `current` where none does."""
    best, chunk = current, 1 << max(current, 1).bit_length()
    while chunk < default and activations_gb(chunk, th) + th["free_floor_gb"] <= free_gb:
        best, chunk = chunk, chunk * 2
    return best


def activations_gb(chunk: int, th: Mapping[str, float]) -> float:
    """A prefill pass's activations at `chunk` tokens as SGLang reserves them: 1.5 MB per token
    of max(chunk, 2048). They come out of the memory free after startup, which holds none yet
    (the pools and graphs are sized, no prefill has run)."""
    return th["reserve_gb_per_token"] * max(chunk, MIN_ACTIVATION_TOKENS)


def _check_small_chunk(inp: RuleInput) -> Outcome:
    """The chunk below SGLang's default for the GPU, no prefill OOM in the window, prompts being
    prefilled while requests wait or the batches are cut at the chunk; at a hand-set
    --mem-fraction-static, the new chunk's activations (`activations_gb`, whole) within the
    memory free after startup where that is known (SGLang's own fraction was sized for its own
    chunk): where the default's do not fit, the largest power-of-two chunk whose do
    (`fitting_chunk`)."""
    config, th = inp.config, inp.thresholds
    if config is None:
        return NoData(f"{CHUNK_FLAG} unknown ({config_unknown(inp)})", inp.view.window_seconds)
    current, default = config.chunked_prefill_size, default_chunked_prefill(inp)
    if current is None or default is None:
        return NoData(f"{CHUNK_FLAG} or SGLang's default for the GPU unknown", 60.0)
    if current <= 0 or current >= default:
        return Pass(detail=f"{CHUNK_FLAG} {current}, SGLang's default {default}")
    if inp.view.total(PREFILL_OOM_EVENTS):
        return Pass(detail=f"a prefill OOM in the window: {CHUNK_FLAG} {current} stays")
    if not inp.view.mean(PROMPT_TOKENS_RATE):
        return Pass(detail="no prompt tokens prefilled in the window")
    full = inp.view.quantile(PREFILL_FULL_RATIO, 0.5)
    waiting = inp.view.quantile(NUM_QUEUE_REQS, 0.5) or 0.0
    if waiting <= 0 and (full is None or full < th["prefill_full_ratio"]):
        return Pass(detail="nothing waits on prefill: no queue, batches not cut at the chunk")
    free = startup_available_gb(inp)
    need = activations_gb(default, th)
    fraction = config.mem_fraction_static
    own = fraction is not None and is_default(MEM_FLAG, fraction, config, gpu_memory_gb(config))
    target, fits = default, ""
    if not own and free is not None and free < need + th["free_floor_gb"]:
        target = fitting_chunk(current, default, free, th)
        if target <= current:
            return Pass(
                detail=f"{free:.1f} GB free after startup: a larger chunk's activations (SGLang's "
                f"reserve: {need:.1f} GB at {default} tokens) would not leave "
                f"{th['free_floor_gb']:.0f} GB free"
            )
        fits = (
            f"{default}, SGLang's default, needs {need:.1f} GB of activations (SGLang's own "
            f"reserve per chunk token) where {free:.1f} GB are free after startup at this "
            f"--mem-fraction-static; {target} is the largest chunk whose activations leave "
            f"{th['free_floor_gb']:.0f} GB free"
        )
    evidence = (
        f"{CHUNK_FLAG} {current}, under SGLang's {default} for this GPU, with no prefill OOM; "
        + (f"{waiting:.0f} requests waiting" if waiting > 0 else "")
        + (f"{', ' if waiting > 0 else ''}{full:.0%} of prefill batches cut at one size"
           if full is not None and full >= th["prefill_full_ratio"] else "")
    )  # fmt: skip
    action = (
        _raise_to_default(inp, current, default)
        if not fits
        else _raise_to(inp, current, target, fits)
    )
    prediction = predict_chunk_change(inp, target)
    action = predicted(action, prediction)
    return Finding(evidence, action, Confidence.HIGH, severity=severity_for(prediction, INFO))


INFO = Severity.INFO

CHUNKED_PREFILL_TOO_SMALL = Rule(
    id="chunked_prefill_too_small",
    roles=PREFILLING_ROLES,
    # The finding's severity is the server model's: a warning where faster prefill is
    # predicted to gain >= 5 % on the profile's objective, else (or without a prediction) info.
    measured=(
        "graded per server by the predicted gain (predict/server_model.py "
        "predict_chunk_change: the physics' prefill pass per token at each chunk); the "
        "closed-loop matrix (docs/performance.md) compares prediction and measurement"
    ),
    severity=Severity.WARNING,
    summary="--chunked-prefill-size is below SGLang's default for the GPU with no prefill OOM "
    "to pay for: prefill runs in needlessly small passes.",
    action="Set --chunked-prefill-size back to SGLang's default for the GPU.",
    source=SOURCE,
    check=_check_small_chunk,
    signals=(
        PROMPT_TOKENS_RATE,
        NUM_QUEUE_REQS,
        PREFILL_FULL_RATIO,
        PREFILL_OOM_EVENTS,
        STARTUP_AVAILABLE_GPU_MEM_GB,
        ITL_P50_SECONDS,
    ),  # fmt: skip
    thresholds={
        "prefill_full_ratio": 0.8,
        "reserve_gb_per_token": RESERVE_MIB_PER_ACTIVATION_TOKEN / GIB,
        "free_floor_gb": 1.0,
    },
    provenance={
        "prefill_full_ratio": "ours: four in five prefill batches at one size are cut by a "
        "token budget (SGLang's PrefillAdder), as scheduler_too_conservative reads it",
        "reserve_gb_per_token": "SGLang 0.5.23 arg_groups/memory_hook.py: 1.5 MB of activations "
        "per token of max(chunk, 2048), held out of the memory free after startup",
        "free_floor_gb": "ours: what stays free after the larger chunk's activations",
    },
)
