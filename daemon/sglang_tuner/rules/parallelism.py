"""Guide sections "Optimize Parallelism Strategy" and "Use Fast Attention Backend"."""

from sglang_tuner.model.advice import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.signals import NUM_QUEUE_REQS, NUM_RUNNING_REQS, TOKEN_USAGE
from sglang_tuner.predict.server_model import predict_data_parallel, severity_for
from sglang_tuner.rule import (
    Rule,
    RuleInput,
    choice_action,
    config_unknown,
    predicted,
    with_expected,
)
from sglang_tuner.rules.sglang.backends import (
    is_hybrid_attention,
    is_mla_or_nsa,
    may_advise_backend,
)
from sglang_tuner.rules.sglang.hardware import gpu_facts, gpu_memory_gb, weight_gb

PARALLEL_SOURCE = "Hyperparameter Tuning / Optimize Parallelism Strategy"
BACKEND_SOURCE = "Optimizing for Different Workloads / Online Serving / Use Fast Attention Backend"
_NO_GPU = "GPU model unknown: set the target's gpu_model or dcgm_url"


def _config_missing(inp: RuleInput) -> NoData:
    return NoData(f"server config unknown ({config_unknown(inp)})", inp.view.window_seconds)


def _to_data_parallel(inp: RuleInput) -> Action:
    """--tp-size N -> 1 with --dp-size 1 -> N: N replicas on the same GPUs, one launch."""
    config = inp.config
    tp = config.tp_size if config and config.tp_size else 2
    dp = config.dp_size if config and config.dp_size else 1
    replicas = Action(f"--dp-size {dp} -> {tp * dp}", "--dp-size", str(dp), str(tp * dp))
    return Action(
        f"serve {tp * dp} tp-1 replicas behind the SGLang Model Gateway (router); in one launch: "
        f"--tp-size {tp} -> 1, --dp-size {dp} -> {tp * dp}",
        "--tp-size",
        str(tp),
        "1",
        "the guide prefers the Model Gateway to --dp-size: replicas restart and scale one at a "
        "time; --dp-size is the one-launch form",
        expected=f"{tp} replicas instead of one tp-{tp} server: no all-reduce per layer and "
        f"{tp}x the decode batches in flight, each GPU reading the whole weights",
        companions=(replicas,),
    )


def _filled(inp: RuleInput, replicas: int) -> float | Outcome:
    """The share of samples whose load would fill `replicas` replicas: a running batch of at
    least `min_batch_per_replica` each, or more work than the server ran (a queue, a full KV
    pool). At a smaller load, tp's split weight reads make each step faster than a replica's."""
    rows = inp.view.rows((NUM_QUEUE_REQS, NUM_RUNNING_REQS))
    if len(rows) < inp.min_samples:
        why = "no load yet: replicas pay off only for load that fills them"
        return NoData(why, inp.view.window_seconds)
    th = inp.thresholds
    full, each = th["saturated_token_usage"], th["min_batch_per_replica"] * replicas
    busy = sum(
        1
        for r in rows
        if r[NUM_RUNNING_REQS] >= each or r[NUM_QUEUE_REQS] > 0 or r.get(TOKEN_USAGE, 0.0) >= full
    )
    return busy / len(rows)


def _check_data_parallel(inp: RuleInput) -> Outcome:
    """tp > 1 (no DP attention, no pp) while the weights take <= half of one GPU. Heuristic:
    weights = /server_info memory_usage.weight x tp, else the '<N>B' in the model path x 2 bytes
    (1 for fp8, 0.5 for 4-bit); GPU memory from gpu_model."""
    config = inp.config
    if config is None:
        return _config_missing(inp)
    tp = config.tp_size or 1
    if tp <= 1 or config.enable_dp_attention or (config.pp_size or 1) > 1:
        return Pass(detail=f"tp {tp}: nothing to trade for data parallelism")
    gpu_gb = gpu_memory_gb(config)
    if gpu_gb is None:
        return NoData(_NO_GPU, inp.view.window_seconds)
    weights = weight_gb(config)
    if weights is None:
        return NoData(
            f"model size unknown: no '<N>B' in {config.model_path!r} and no "
            "internal_states memory_usage.weight in /server_info",
            inp.view.window_seconds,
        )
    share = weights / gpu_gb
    if share > inp.thresholds["max_weight_share_of_gpu"]:
        return Pass(detail=f"weights {weights:.0f} GB take {share:.0%} of one {gpu_gb:g} GB GPU")
    filled = _filled(inp, tp)
    if not isinstance(filled, float):
        return filled
    if filled < inp.frequently_ratio:
        return Pass(
            detail=f"the load would fill {tp} replicas in only {filled:.0%} of samples: they "
            "would sit idle"
        )
    evidence = (
        f"--tp-size {tp}, but the weights (~{weights:.0f} GB) take {share:.0%} of one "
        f"{gpu_gb:g} GB GPU, leaving room for the KV cache on a single GPU"
    )
    prediction = predict_data_parallel(inp, tp)
    finding = Finding(evidence, predicted(_to_data_parallel(inp), prediction), Confidence.MEDIUM)
    finding.severity = severity_for(prediction, Severity.WARNING)
    return finding


PREFER_DATA_PARALLEL = Rule(
    id="prefer_data_parallel",
    measured=(
        "graded per server by the predicted gain of the replicas (predict/server_model.py): an 8B "
        "on 4 H100s at tp 4 -> 4 replicas predicted +9 %, measured +5.6 %; on 4 L40S predicted "
        "+59 %, measured +56 % (closed-loop matrix). Without a prediction: a warning."
    ),
    # Without a prediction a warning: tp>1 for a model that fits one GPU idles most of the
    # GPUs' throughput.
    severity=Severity.WARNING,
    summary="Tensor parallelism is used for a model that fits one GPU: data parallelism is faster.",
    action="Serve tp-size-1 replicas behind the SGLang Model Gateway instead of --tp-size > 1.",
    source=PARALLEL_SOURCE,
    thresholds={
        "max_weight_share_of_gpu": 0.5,
        "saturated_token_usage": 0.9,
        "min_batch_per_replica": 16.0,
    },
    provenance={
        "max_weight_share_of_gpu": "ours: the guide says 'when there is enough GPU memory'; "
        "weights under half of one GPU leave as much again for the KV cache",
        "saturated_token_usage": "ours: the guide's high token usage; with a queue or a full "
        "pool the server has more work than it runs, which the replicas would take",
        "min_batch_per_replica": "ours: below ~16 requests a step reads mostly weights, which "
        "tp splits across GPUs and each replica reads whole; the closed loop measured +5 % "
        "tokens/s at 60 per replica (8B, 4 H100s)",
    },
    # the guide argues for throughput; long contexts need the KV room tp's split weights leave
    profiles=("offline", "multi_turn"),
    check=_check_data_parallel,
    signals=(NUM_QUEUE_REQS, NUM_RUNNING_REQS, TOKEN_USAGE),
)

# Fast backends per GPU generation, the first one suggested (Blackwell: MLA models differ).
# Hopper: the guide names fa3, but flashinfer measured as fast or faster in public SGLang
# threads (decode on H100/H200 with Qwen3, sgl-project/sglang#6066), so a server on either is
# left alone; on the H20 flashinfer decodes 2.2x faster than fa3 (QwQ-32B, 2014 vs 908 tok/s,
# sgl-project/sglang#5630; 35 vs 98 us per decode step, #6151), so flashinfer is suggested there.
BACKENDS: dict[str, tuple[str, ...]] = {
    "hopper": ("fa3", "flashinfer"),
    "blackwell": ("trtllm_mha", "trtllm_mla"),
    "ampere": ("flashinfer",),
    "ada": ("flashinfer",),
}


def _recommended(inp: RuleInput) -> tuple[str, tuple[str, ...], str] | None:
    """(backend to suggest, acceptable backends, generation) for the target's GPU."""
    facts = gpu_facts(inp.config.gpu_model if inp.config else None)
    if facts is None:
        return None
    good = BACKENDS[facts.generation]
    gpu = (inp.config.gpu_model or "") if inp.config else ""
    if facts.generation == "hopper" and "H20" in gpu.upper():
        good = ("flashinfer", "fa3")  # measured on the H20: flashinfer decodes 2.2x faster
    mla = inp.config is not None and is_mla_or_nsa(inp.config.model_path)
    pick = "trtllm_mla" if facts.generation == "blackwell" and mla else good[0]
    return pick, good, facts.generation


def _suggest_backend(inp: RuleInput) -> Action:
    pick = _recommended(inp)
    current = inp.config.attention_backend if inp.config else None
    action = choice_action("--attention-backend", current, pick[0] if pick else "?", inp)
    return with_expected(
        action,
        "faster attention kernels on this GPU generation: shorter "
        "steps; benchmark before and after, as the guide says",
    )


def _check_backend(inp: RuleInput) -> Outcome:
    """Config fact: the resolved attention backend is not one the guide names for the GPU."""
    config = inp.config
    if config is None:
        return _config_missing(inp)
    pick = _recommended(inp)
    if pick is None:
        return NoData(_NO_GPU + " (a known model)", inp.view.window_seconds)
    if is_mla_or_nsa(config.model_path) or is_hybrid_attention(config.model_path):
        return Pass(detail="SGLang picks the attention backend of MLA/NSA/hybrid models itself")
    current = config.attention_backend
    if current is None:
        return Pass(detail="attention backend auto-selected by SGLang")
    if not may_advise_backend(config, pick[2]):
        return Pass(detail=f"{current} is SGLang's own choice for this GPU and model")
    if current in pick[1]:
        return Pass(detail=f"{current} is a fast backend for {config.gpu_model}")
    evidence = (
        f"--attention-backend {current} on {config.gpu_model} "
        f"({pick[2]}): the guide's choice is {pick[0]}"
    )
    return Finding(evidence, _suggest_backend(inp), Confidence.HIGH)


ATTENTION_BACKEND_FOR_GPU = Rule(
    id="attention_backend_for_gpu",
    severity=Severity.INFO,
    summary="The attention backend is not the fastest one for this GPU generation.",
    action="Hopper: fa3 or flashinfer (H20: flashinfer); Blackwell: trtllm_mha / trtllm_mla; "
    "Ampere/Ada: flashinfer.",
    source=BACKEND_SOURCE,
    check=_check_backend,
    needs_window=False,
)
