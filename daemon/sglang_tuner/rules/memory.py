"""Guide sections "Tune Memory Allocation" and "Avoid Out-of-Memory Errors"."""

import math
from dataclasses import replace

from sglang_tuner.model.advice import (
    Action,
    Confidence,
    Finding,
    NoData,
    Outcome,
    Pass,
    Prediction,
    Severity,
)
from sglang_tuner.model.flags import MEM_FRACTION_STATIC as MEM_FLAG
from sglang_tuner.model.signals import (
    CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    DECODE_OOM_EVENTS,
    GPU_FB_FREE_GB,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    PREFILL_OOM_EVENTS,
    RESTARTS,
    RETRACTIONS_PER_MINUTE,
    STARTUP_AVAILABLE_GPU_MEM_GB,
    STARTUP_KV_POOL_GB,
    TOKEN_USAGE,
)
from sglang_tuner.predict.crash_fix import crash_fix, reported
from sglang_tuner.predict.server_model import no_prediction, predict_pool_change, severity_for
from sglang_tuner.rule import (
    Rule,
    RuleInput,
    choice_action,
    confidence_for,
    config_unknown,
    flag_action,
    format_duration,
    predicted,
    unknown_current,
    with_expected,
    with_note,
)
from sglang_tuner.rules.scheduling import DEFAULT_CONSERVATIVENESS
from sglang_tuner.rules.sglang.backends import is_mla_or_nsa
from sglang_tuner.rules.sglang.defaults import default_for, is_default
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb
from sglang_tuner.rules.sglang.mem_fraction import (
    GIB,
    MIN_ACTIVATION_TOKENS,
    RESERVE_BASE_MIB,
    RESERVE_MIB_PER_ACTIVATION_TOKEN,
    RESERVE_MIB_PER_RANK,
    estimate_mem_fraction_static,
)
from sglang_tuner.rules.sglang.versions import in_span

CHUNK_FLAG = "--chunked-prefill-size"
MEMORY_SOURCE = "Hyperparameter Tuning / Tune Memory Allocation"
OOM_SOURCE = "Hyperparameter Tuning / Avoid Out-of-Memory Errors"
AVAILABLE_TARGET_GB = 6.5  # the middle of the guide's 5-8 GB "good" band
_NO_STARTUP_MEM = (
    "startup available_gpu_mem is unknown: needs SGLang >= 0.5.11 metrics, "
    ">= 0.5.17 /server_info, the target's log_file, or its dcgm_url"
)


def _check_mem_too_low(inp: RuleInput) -> Outcome:
    """Startup fact: available_gpu_mem (else DCGM's free memory, lowest over the window, else
    the estimate from SGLang's pool sizing) at or above 10 GB — or, on a card whose whole KV
    pool is a few GB, a surplus over what a raise leaves of at least a tenth of the pool — with
    load seen and the pool binding. First, where SGLang's own fraction (0.5.3+) is held down by
    a prefill chunk above SGLang's default, the chunk goes back to the default instead."""
    surplus = surplus_memory(inp)
    if surplus is None:
        return NoData(_NO_STARTUP_MEM, inp.view.window_seconds)
    free, what = surplus
    smaller = _smaller_chunk(inp) if _load_seen(inp) and not _pool_not_binding(inp) else None
    if smaller is not None:  # before any raise: SGLang's own fraction grows by more
        evidence = (
            f"{what} {free:.2f} GB, the KV pool binds, and SGLang's own {MEM_FLAG} keeps "
            f"1.5 MB per token of --chunked-prefill-size {smaller.current} for activations"
        )
        prediction = smaller.prediction or no_prediction(inp.profile, "")
        return Finding(evidence, smaller, Confidence.HIGH, severity=severity_for(prediction, INFO))
    target, why = raise_target(inp)
    relative = _surplus_of_pool(inp, free - target)
    if free < inp.thresholds["available_gpu_mem_too_high_gb"] and not relative:
        return Pass(detail=f"{what} {free:.2f} GB")
    total = gpu_memory_gb(inp.config) or LARGEST_GPU_GB
    if free - target < 0.01 * total:
        return Pass(detail=f"{what} {free:.2f} GB: {why}")
    calm = _pool_not_binding(inp)
    if calm:
        return Pass(detail=f"{what} {free:.2f} GB, but {calm}: a larger pool would sit empty")
    if not _load_seen(inp):
        return NoData(
            f"{what} {free:.2f} GB, but no load seen yet: whether the KV pool binds is unknown",
            inp.view.window_seconds,
        )
    evidence = f"{what} {free:.2f} GB, " + (relative or "above the guide's 5-8 GB band")
    action = raise_mem_fraction(inp)
    prediction = _predict_fraction(inp, action)
    action = predicted(action, prediction)
    sure = Confidence.MEDIUM if what == ESTIMATED else Confidence.HIGH
    return Finding(evidence, action, sure, severity=severity_for(prediction, INFO))


def _smaller_chunk(inp: RuleInput) -> Action | None:
    """Where --mem-fraction-static is SGLang's own (0.5.3+: its formula reserves 1.5 MB per
    token of the prefill chunk) and the chunk is above SGLang's default for the GPU, the chunk
    back to that default: SGLang's fraction, computed again at the restart, hands the chunk's
    surplus reserve to the KV pool (None: not that case, or the new fraction is unknown)."""
    config = inp.config
    gpu = gpu_memory_gb(config)
    if config is None or gpu is None or not in_span(config.version, "0.5.3"):
        return None
    chunk, fraction = config.chunked_prefill_size, _mem_fraction(inp)
    default = default_for(CHUNK_FLAG, config, gpu)
    if not isinstance(default, int) or not chunk or chunk <= default or fraction is None:
        return None
    if not is_default(MEM_FLAG, fraction, config, gpu):
        return None
    mla = is_mla_or_nsa(config.model_path)
    new = estimate_mem_fraction_static(replace(config, chunked_prefill_size=default), gpu, mla=mla)
    if new is None or new < fraction + 0.01:
        return None
    freed = (
        RESERVE_MIB_PER_ACTIVATION_TOKEN
        * (max(chunk, MIN_ACTIVATION_TOKENS) - max(default, MIN_ACTIVATION_TOKENS))
        / GIB
    )
    action = flag_action(CHUNK_FLAG, chunk, default, inp)
    action = with_note(action, f"leave {MEM_FLAG} unset: SGLang sets it to about {new:g}")
    action = with_expected(
        action, f"SGLang's own {MEM_FLAG} {fraction:g} -> about {new:g} (its reserve for the "
        f"prefill chunk shrinks by {freed:.1f} GB): a larger KV pool; "
        f"long prompts prefilled in {chunk // default}x as many chunks",
    )  # fmt: skip
    return predicted(action, predict_pool_change(inp, new))


def _surplus_of_pool(inp: RuleInput, surplus_gb: float) -> str:
    """The surplus said relative to the KV pool ('' under `surplus_share_of_pool` of it, or
    with the pool's size unknown): the guide's 10 GB is for a card with a 40-60 GB pool."""
    pool = inp.view.last(STARTUP_KV_POOL_GB)
    if pool is None or pool <= 0 or surplus_gb < inp.thresholds["surplus_share_of_pool"] * pool:
        return ""
    return (
        f"{surplus_gb:.1f} GB over what a raise leaves: {surplus_gb / pool:.0%} of the "
        f"{pool:.1f} GB KV pool"
    )


def _predict_fraction(inp: RuleInput, action: Action) -> Prediction:
    """What the larger pool does here: only a pool that binds the batch while requests wait
    turns into throughput (or, online, shorter queue wait)."""
    try:
        new = float(action.suggested or "")
    except ValueError:
        return no_prediction(inp.profile, "the current --mem-fraction-static is unknown")
    return predict_pool_change(inp, new)


def _load_seen(inp: RuleInput) -> bool:
    """Whether the window holds any reading of the server's load (a startup-only excerpt
    holds none: whether the pool binds is then unknown, not "maybe")."""
    view = inp.view
    readings = (TOKEN_USAGE, NUM_RUNNING_REQS, NUM_QUEUE_REQS)
    return any(view.last(s) is not None for s in readings) or bool(
        view.total(RETRACTIONS_PER_MINUTE)
    )


def _pool_not_binding(inp: RuleInput) -> str:
    """Why the KV pool does not limit the server ('' when it may, or when the window cannot
    tell): token usage stays low, nothing is retracted and nothing waits."""
    usage = inp.view.quantile(TOKEN_USAGE, 0.9)
    if usage is None or usage >= inp.thresholds["pool_pressure_usage"]:
        return ""
    if (inp.view.total(RETRACTIONS_PER_MINUTE) or 0.0) > 0:
        return ""
    if (inp.view.quantile(NUM_QUEUE_REQS, 0.5) or 0.0) > 0:
        return ""
    return f"token usage p90 {usage:.2f} with no retraction and no queue"


# Crashes where the GPU itself ran out; not SGLang's own pool running out (a smaller pool makes
# that worse) nor "Not enough memory" at startup (it asks for the opposite).
GPU_OOM_SIGNALS = (PREFILL_OOM_EVENTS, DECODE_OOM_EVENTS, CUDA_GRAPH_CAPTURE_OOM_EVENTS)


def _check_mem_too_high(inp: RuleInput) -> Outcome:
    """A restart with CUDA OOMs in the window, or startup available_gpu_mem under 5 GB (with
    the fraction unknown and no OOM: under 1 GB, below what any SGLang default leaves)."""
    th, free = inp.thresholds, startup_available_gb(inp)
    restarts = inp.view.total(RESTARTS) or 0.0
    ooms = sum(inp.view.total(signal) or 0.0 for signal in GPU_OOM_SIGNALS)
    if restarts >= th["oom_restarts"] and ooms > 0:
        evidence = f"{restarts:.0f} restart(s) with {ooms:.0f} CUDA OOM crash(es) in the window"
        # judged by the crashes: predicted to stop them, its tokens/s price said after
        signal = max(GPU_OOM_SIGNALS, key=lambda name: inp.view.total(name) or 0.0)
        action = _with_cost(inp, lower_mem_fraction(inp))
        action = crash_fix(inp, action, signal, evidence, sure=reported(action))
        return Finding(evidence, action, Confidence.HIGH)
    if free is None:
        return NoData(_NO_STARTUP_MEM, inp.view.window_seconds)
    floor, why = _free_floor(inp)
    unknown = _mem_fraction(inp) is None and not ooms  # an OOM says the free memory is short
    if unknown and free >= th["unknown_fraction_floor_gb"]:
        return Pass(detail=f"available_gpu_mem {free:.2f} GB, {_MAYBE_OWN}")
    if free >= floor:
        return Pass(detail=f"available_gpu_mem {free:.2f} GB")
    own = _sglang_own_default(inp)
    if own:
        return Pass(detail=f"available_gpu_mem {free:.2f} GB, under {why}, but {own}")
    evidence = f"startup available_gpu_mem {free:.2f} GB, under {why}: OOM risk"
    return Finding(evidence, _with_cost(inp, lower_mem_fraction(inp)), Confidence.HIGH)


_MAYBE_OWN = (
    "but --mem-fraction-static is unknown: SGLang's own default leaves this little on small "
    "cards, and the guide's band is for a hand-set fraction"
)


def _sglang_own_default(inp: RuleInput) -> str:
    """Why the free memory is SGLang's own choice ('' when it is not, or unknown): the fraction
    is what SGLang sets when the flag is left out (0.5.3+: its formula reserves the chunk's
    activations, the CUDA graphs and the ranks' communication buffers; earlier: its own tier).
    Without an OOM in the window a cut is then a margin against a risk SGLang sized for, paid
    for in KV pool: the guide's band is for a hand-set fraction."""
    config, current = inp.config, _mem_fraction(inp)
    if config is None or current is None:
        return ""
    if not is_default(MEM_FLAG, current, config, gpu_memory_gb(config)):
        return ""
    return (
        f"{MEM_FLAG} {current:g} is SGLang {config.version}'s own default for this GPU and no "
        "OOM was seen: lowering it would trade KV pool for a margin SGLang already sized"
    )


def _with_cost(inp: RuleInput, action: Action) -> Action:
    """A safety margin's price on this server: the smaller pool's effect, where it binds."""
    if action.flag != MEM_FLAG:
        return action
    return predicted(action, _predict_fraction(inp, action))


def _free_floor(inp: RuleInput) -> tuple[float, str]:
    """The least free memory that is safe: the guide's 5 GB, plus what SGLang itself keeps
    free per rank for communication buffers on large tp x pp (`tp x pp / 8` GiB in its
    memory settings, 0.5.3+): a tp-16 server that OOMs with 6 GB free is below that. Where
    SGLang's own default leaves less for the server's prefill chunk (512 MB + 1.5 MB per token
    of the larger of --chunked-prefill-size and 2048: 3.5 GB at 2048), that is the floor: the
    guide's 5 GB is what a 4096-token chunk needs."""
    th, config = inp.thresholds, inp.config
    guide = th["available_gpu_mem_too_low_gb"]
    ranks = (config.tp_size or 1) * (config.pp_size or 1) if config is not None else 1
    extra = ranks * th["reserve_gb_per_rank"] if ranks > 1 else 0.0
    chunk = config.chunked_prefill_size if config is not None else None
    if chunk and chunk > 0:
        own = th["sglang_reserve_base_gb"] + th["sglang_reserve_gb_per_chunk_token"] * max(
            chunk, MIN_ACTIVATION_TOKENS
        )
        if own < guide:
            return own + extra, (
                f"{own + extra:g} GB (what SGLang's own default leaves for "
                f"--chunked-prefill-size {chunk}"
                + (f", + {extra:g} GB for {ranks} ranks' communication" if extra else "")
                + f"; the guide's {guide:g} GB is for 4096-token chunks)"
            )
    if extra <= 0:
        return guide, f"the guide's {guide:g} GB"
    return guide + extra, (
        f"{guide + extra:g} GB (the guide's {guide:g} GB + SGLang's {extra:g} GB for "
        f"{ranks} ranks' communication)"
    )


INFO = Severity.INFO

MEM_FRACTION_TOO_LOW = Rule(
    id="mem_fraction_too_low",
    # The finding's severity is the server model's: a warning where the larger pool is
    # predicted to gain >= 5 % on the profile's objective, else (or without a prediction) info.
    measured=(
        "graded per server by the predicted gain (predict/server_model.py): the closed-loop "
        "matrix (docs/performance.md) compares prediction and measurement per model and GPU"
    ),
    severity=Severity.WARNING,
    summary="10-20 GB (on a small card, a tenth of its KV pool) stay free after startup: the KV "
    "cache pool could be larger.",
    action="Raise --mem-fraction-static by the surplus over ~6.5 GB (or over what the prefill "
    "chunk needs, past 4096 tokens), as a share of GPU memory.",
    source=MEMORY_SOURCE,
    signals=(
        STARTUP_AVAILABLE_GPU_MEM_GB,
        GPU_FB_FREE_GB,
        STARTUP_KV_POOL_GB,
        TOKEN_USAGE,
        RETRACTIONS_PER_MINUTE,
        NUM_QUEUE_REQS,
        NUM_RUNNING_REQS,
    ),  # fmt: skip
    thresholds={
        "available_gpu_mem_too_high_gb": 10.0,
        "available_gpu_mem_target_gb": AVAILABLE_TARGET_GB,
        "sglang_reserve_base_gb": RESERVE_BASE_MIB / GIB,
        "sglang_reserve_gb_per_chunk_token": RESERVE_MIB_PER_ACTIVATION_TOKEN / GIB,
        "mem_fraction_max": 0.95,  # past it activations have no room on any GPU
        "pool_pressure_usage": 0.9,
        "surplus_share_of_pool": 0.1,
    },
    check=_check_mem_too_low,
    provenance={
        "available_gpu_mem_too_high_gb": "guide (newest, Chinese translation): '10-20 GB: too "
        "high, increase --mem-fraction-static'",
        "available_gpu_mem_target_gb": "ours: the middle of the guide's 5-8 GB 'good' band",
        "sglang_reserve_base_gb": "SGLang 0.5.23 arg_groups/memory_hook.py: its default "
        "--mem-fraction-static reserves 512 MB of constant metadata",
        "sglang_reserve_gb_per_chunk_token": "SGLang 0.5.23 arg_groups/memory_hook.py: plus 1.5 "
        "MB per token of max(chunked_prefill_size, 2048) for activations; a raise leaves at "
        "least that free (6.5 GB at 4096 tokens: the guide's middle)",
        "mem_fraction_max": "ours: past 0.95 activations have no room on any GPU we know",
        "pool_pressure_usage": "ours: the guide's high token usage; below it, with nothing "
        "retracted or waiting, the pool is not what limits the server",
        "surplus_share_of_pool": "ours: the guide's 10 GB gate, relative: on an 80 GB card its "
        "3.5 GB over the 6.5 GB target is 6-9 % of a 40-60 GB KV pool; on a 24 GB card with a "
        "4 GB pool, 2.6 GB spare is 65 % more pool, which the absolute gate never sees",
    },
    needs_up=False,  # judged from the window's events and startup facts, also while down
    needs_window=False,
)

MEM_FRACTION_TOO_HIGH = Rule(
    id="mem_fraction_too_high",
    measured=(
        "0.93 -> 0.90 (4.6 GB free, no crash in the model): tokens/s -0.1 %; 0.965 -> 0.90 "
        "after a crash loop: -1.4 %. A safety margin, judged by crashes."
    ),
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.WARNING,
    summary="Under 5 GB free after startup at a hand-set fraction, or the server restarted "
    "after OOM errors.",
    action="Lower --mem-fraction-static back into the 5-8 GB band (after OOMs: 0.8, then 0.7).",
    source=MEMORY_SOURCE + "; " + OOM_SOURCE + " (General OOM)",
    signals=(STARTUP_AVAILABLE_GPU_MEM_GB, RESTARTS, *GPU_OOM_SIGNALS),
    thresholds={
        "available_gpu_mem_too_low_gb": 5.0,
        "unknown_fraction_floor_gb": 1.0,
        "reserve_gb_per_rank": RESERVE_MIB_PER_RANK / GIB,
        "sglang_reserve_base_gb": RESERVE_BASE_MIB / GIB,
        "sglang_reserve_gb_per_chunk_token": RESERVE_MIB_PER_ACTIVATION_TOKEN / GIB,
        "available_gpu_mem_target_gb": AVAILABLE_TARGET_GB,
        "oom_restarts": 1.0,
        "mem_fraction_step_1": 0.8,
        "mem_fraction_floor": 0.7,
    },
    check=_check_mem_too_high,
    provenance={
        "reserve_gb_per_rank": "SGLang's own memory settings (0.5.3+, ServerArgs."
        "_handle_gpu_memory_settings): tp x pp x 128 MiB kept free for communication buffers",
        "available_gpu_mem_too_low_gb": "guide (newest, Chinese translation): '< 5 GB: too low, "
        "risk of OOM'",
        "unknown_fraction_floor_gb": "ours: from SGLang's own defaults; with the fraction unknown "
        "it may be SGLang's, which leaves 12 % of one GPU free before its CUDA graphs (0.88 by "
        "its tp table, 0.3-0.4.6: 1.4 GB on a 12 GB card) and 2.8-3.5 GB later (0.4.8+ tiers "
        "and formula); under 1 GB after the graphs no default leaves on a card of 12 GB or more",
        "sglang_reserve_base_gb": "SGLang 0.5.23 arg_groups/memory_hook.py: its default "
        "--mem-fraction-static reserves 512 MB of constant metadata",
        "sglang_reserve_gb_per_chunk_token": "SGLang 0.5.23 arg_groups/memory_hook.py: plus 1.5 "
        "MB per token of max(chunked_prefill_size, 2048) for activations (graphs reserved on "
        "top); below the guide's 5 GB (chunks under ~3,100 tokens) that is the floor",
        "available_gpu_mem_target_gb": "ours: the middle of the guide's 5-8 GB 'good' band",
        "oom_restarts": "ours: one restart with OOM lines is enough to act on",
        "mem_fraction_step_1": "guide (newest): General OOM, 'reduce to 0.8 or 0.7'",
        "mem_fraction_floor": "guide (newest): General OOM, 'reduce to 0.8 or 0.7'",
    },
    stability=True,
    needs_up=False,  # judged from the window's events and startup facts, also while down
    needs_window=False,
)


EFFICIENCY_SOURCE = "Troubleshooting / Memory Issues / Increase Memory Efficiency"


FP8_CAVEAT = (
    "FP8 KV cache (and FP8 weights) can change outputs slightly: check accuracy on your own "
    "evaluation before rolling it out"
)


def _use_fp8(inp: RuleInput) -> Action | None:
    """FP8 KV cache first (halves KV bytes), then FP8 weights; one knob at a time; None when
    both are FP8 already."""
    config = inp.config
    kv_dtype = config.kv_cache_dtype if config else None
    if not (kv_dtype or "").startswith("fp8"):
        action = choice_action("--kv-cache-dtype", kv_dtype, "fp8_e4m3", inp, "auto")
        return with_expected(action, "about twice the KV tokens in the same memory: more "
                             "requests running where the pool binds them (no prediction: FP8 "
                             "changes the model's outputs, check accuracy first)")  # fmt: skip
    quant = config.quantization if config else None
    if "fp8" not in (quant or ""):
        action = choice_action("--quantization", quant or "none", "fp8", inp)
        return with_expected(action, "half the weight memory goes to the KV pool, and the "
                             "weight reads of each step halve (no prediction: FP8 changes the "
                             "model's outputs, check accuracy first)")  # fmt: skip
    return None


def _check_kv_pressure(inp: RuleInput) -> Outcome:
    """Retractions above ~1/min on average although --schedule-conservativeness is already
    >= 1.3 (below it, retractions_frequent's advice comes first). A full pool with a queue and
    no retractions is a healthy saturated server, not pressure."""
    rates = inp.view.values(RETRACTIONS_PER_MINUTE)
    if not rates:
        return NoData(
            "retractions are not exposed (nor read from the log)", inp.view.window_seconds
        )
    per_minute = sum(rates) / len(rates)
    if per_minute <= inp.thresholds["retractions_per_minute"]:
        return Pass(detail=f"{per_minute:.1f} retractions/min")
    current = inp.config.schedule_conservativeness if inp.config else None
    conservativeness = DEFAULT_CONSERVATIVENESS if current is None else current
    if conservativeness < inp.thresholds["conservativeness_high"]:
        return Pass(detail=f"--schedule-conservativeness {conservativeness:g} can still rise")
    span = format_duration(inp.view.window_seconds)
    evidence = (
        f"{per_minute:.1f} retractions/min over {span} with --schedule-conservativeness "
        f"already {conservativeness:g}"
    )
    action = _use_fp8(inp)
    if action is None:
        return Pass(detail=f"{evidence}; KV cache and weights are FP8 already: more GPUs, or a "
                    "lower --max-running-requests at some throughput")  # fmt: skip
    return Finding(evidence, with_note(action, FP8_CAVEAT), confidence_for(inp), 1.0, len(rates))


KV_CACHE_PRESSURE = Rule(
    id="kv_cache_pressure",
    measured=(
        "FP8 KV cache on a retraction storm: tokens/s +75 %, then FP8 weights +23 %; a hint "
        "because FP8 changes outputs and only the operator can check accuracy."
    ),
    # FP8 changes the model's outputs: the operator checks accuracy first, so a hint, however
    # large the measured gain.
    severity=Severity.INFO,
    summary="The KV cache stays full although the scheduler is already conservative.",
    action="Shrink the KV cache: --kv-cache-dtype fp8_e4m3, then --quantization fp8.",
    source=EFFICIENCY_SOURCE,
    check=_check_kv_pressure,
    signals=(RETRACTIONS_PER_MINUTE,),
    thresholds={"retractions_per_minute": 1.0, "conservativeness_high": 1.3},
    provenance={
        "retractions_per_minute": "guide (newest): '~1 retraction per minute is acceptable'",
        "conservativeness_high": "guide (all versions): 'increase to a value like 1.3', already "
        "applied",
    },
)


def startup_available_gb(inp: RuleInput) -> float | None:
    """The guide's `available_gpu_mem`: metrics/log signal first, then /server_info."""
    value = inp.view.last(STARTUP_AVAILABLE_GPU_MEM_GB)
    if value is None and inp.config is not None:
        value = inp.config.startup_available_gpu_mem_gb
    return value


ESTIMATED = "free memory estimated from SGLang's pool sizing"


def surplus_memory(inp: RuleInput) -> tuple[float, str] | None:
    """(free GB, what says so): startup available_gpu_mem, else the DCGM exporter's free
    framebuffer, lowest over the window (a running server only ever holds more than at startup,
    so this never overstates the surplus), else the estimate from SGLang's own pool sizing."""
    value = startup_available_gb(inp)
    if value is not None:
        return value, "startup available_gpu_mem"
    dcgm = inp.view.min(GPU_FB_FREE_GB)
    if dcgm is not None:
        return dcgm, "free GPU memory (DCGM), lowest over the window"
    estimate = estimated_free_gb(inp)
    return None if estimate is None else (estimate, ESTIMATED)


# SGLang's own estimate of CUDA graph memory per captured batch size (memory settings, 0.5.3+:
# `graph max bs x 2` MiB), and the graph batch it captures up to when the server does not say.
GRAPH_MIB_PER_BS = 2.0
UNREPORTED_GRAPH_BS = 256


def estimated_free_gb(inp: RuleInput) -> float | None:
    """Free memory after startup where no reading says it, from how SGLang sizes its pool
    (`ModelRunner.profile_max_num_token`, 0.4.x-0.5.x: pool = free after weights - GPU memory x
    (1 - fraction)): GPU memory x (1 - --mem-fraction-static) stays free, less the CUDA graphs
    (SGLang's own 2 MiB per captured batch size). None without the GPU or the fraction."""
    config, total, fraction = inp.config, gpu_memory_gb(inp.config), _mem_fraction(inp)
    if config is None or total is None or fraction is None:
        return None
    graphs = 0.0
    if not config.disable_cuda_graph:
        graphs = (config.cuda_graph_max_bs or UNREPORTED_GRAPH_BS) * GRAPH_MIB_PER_BS / GIB
    return total * (1 - fraction) - graphs


# With the GPU unknown, size the step for the largest GPU we know: the smallest, safest step.
LARGEST_GPU_GB = 288.0


def _mem_fraction(inp: RuleInput) -> float | None:
    return inp.config.mem_fraction_static if inp.config else None


def _floor2(value: float) -> float:
    return math.floor(value * 100 + 1e-9) / 100


def raise_target(inp: RuleInput) -> tuple[float, str]:
    """The free memory a raise leaves, in GB, and what sets it: the middle of the guide's band,
    or more where the server's prefill chunk needs more. SGLang's own memory settings (0.5.3+)
    reserve 512 MB + 1.5 MB per token of the chunk (at least 2048) for activations: 6.5 GB at
    4096 tokens, the guide's middle; 24.5 GB at 16384, which a raise to 6.5 GB free would take
    from the prefill."""
    th, config = inp.thresholds, inp.config
    guide = th["available_gpu_mem_target_gb"]
    chunk = config.chunked_prefill_size if config is not None else None
    if not chunk or chunk <= 0:
        return guide, f"the guide's {guide:g} GB"
    need = th["sglang_reserve_base_gb"] + th["sglang_reserve_gb_per_chunk_token"] * max(
        chunk, MIN_ACTIVATION_TOKENS
    )
    if need <= guide:
        return guide, f"the guide's {guide:g} GB"
    return need, (
        f"{need:g} GB is what --chunked-prefill-size {chunk}'s prefill needs by SGLang's own "
        "memory settings (512 MB + 1.5 MB per token): no surplus past it for the KV pool"
    )


def raise_mem_fraction(inp: RuleInput) -> Action:
    """current + (free - target) / GPU memory: hand the surplus over what the guide's band and
    the prefill chunk need (`raise_target`) to the KV pool, capped."""
    surplus = surplus_memory(inp)
    th, free = inp.thresholds, surplus[0] if surplus else 0.0
    total = gpu_memory_gb(inp.config)
    delta = _floor2((free - raise_target(inp)[0]) / (total or LARGEST_GPU_GB))
    delta = max(0.01, delta)  # the guide's own step is 0.01
    gpu_note = (
        ""
        if total
        else f"GPU memory unknown (set gpu_model or dcgm_url): sized for {LARGEST_GPU_GB:g} GB"
    )
    current = _mem_fraction(inp)
    if current is None:  # no machine value: a step from an unknown value is not a value
        why = config_unknown(inp)
        note = f"current value unknown ({why})" + (f"; {gpu_note}" if gpu_note else "")
        look_up = "read mem_fraction_static from /server_info or the log's launch line"
        return Action(f"{MEM_FLAG}: {delta:g} above today's value ({look_up})", MEM_FLAG,
                      None, None, note)  # fmt: skip
    suggested = min(th["mem_fraction_max"], round(current + delta, 2))
    if suggested <= current:
        return Action(f"{MEM_FLAG} is already {current:g}, the most this advice goes to")
    action = flag_action(MEM_FLAG, current, suggested, inp)
    return Action(action.text, MEM_FLAG, action.current, action.suggested, gpu_note)


def lower_mem_fraction(inp: RuleInput) -> Action:
    """Back into the 5-8 GB band when the shortfall is known, else the guide's 0.8 / 0.7."""
    th, free, total = inp.thresholds, startup_available_gb(inp), gpu_memory_gb(inp.config)
    current = _mem_fraction(inp)
    if current is None or free is None or total is None:
        return _mem_fraction_ladder(inp)
    floor = _free_floor(inp)[0]
    if free >= floor:
        return _mem_fraction_ladder(inp)
    # the band moves down with a floor below the guide's (SGLang's own reserve for small chunks)
    lowered = max(0.0, th["available_gpu_mem_too_low_gb"] - floor)
    target = th["available_gpu_mem_target_gb"] - lowered
    shortfall = math.ceil((target - free) / total * 100 - 1e-9) / 100
    suggested = max(th["mem_fraction_floor"], _floor2(current - shortfall))
    if suggested >= current:
        return _mem_fraction_ladder(inp)
    return flag_action(MEM_FLAG, current, suggested, inp)


def _ladder_from_default(inp: RuleInput, steps: list[float]) -> Action:
    """The ladder's step with the current fraction unknown: from SGLang's own default where the
    version, GPU and flags give it (said as assumed), else the direction only. A step of the
    ladder written as a value could be a raise: SGLang's default runs from 0.69 (a 16384-token
    chunk on an 80 GB card, 0.5.3+) to 0.93, so the value is left to the one who can read it."""
    config = inp.config
    default = default_for(MEM_FLAG, config, gpu_memory_gb(config)) if config else None
    if isinstance(default, float):
        below = [s for s in steps if s < default - 1e-9]
        if below:
            return flag_action(MEM_FLAG, None, below[-1], inp, default=default)
    ladder = " then ".join(f"{s:g}" for s in reversed(steps))
    return Action(
        f"lower {MEM_FLAG} below what runs now (its value is unknown here: read "
        f"mem_fraction_static in the launch line, the server_args= log line or /server_info); "
        f"the guide's steps are {ladder}, each only where it is below the current value",
        MEM_FLAG,
        note=unknown_current(inp, None),
    )


def _mem_fraction_ladder(inp: RuleInput) -> Action:
    """One step down the guide's ladder (0.8, then 0.7); past 0.7 other knobs take over."""
    current = _mem_fraction(inp)
    steps = sorted((inp.thresholds["mem_fraction_step_1"], inp.thresholds["mem_fraction_floor"]))
    if current is None:
        return _ladder_from_default(inp, steps)
    below = [s for s in steps if s < current - 1e-9]
    if not below:
        return Action(
            f"{MEM_FLAG} is already {current:g}: lower --chunked-prefill-size, "
            "--cuda-graph-max-bs or --max-running-requests instead"
        )
    return flag_action(MEM_FLAG, current, below[-1], inp)
