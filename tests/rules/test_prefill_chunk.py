"""chunked_prefill_too_small: a chunk below SGLang's default for the GPU, bought for no OOM."""

from dataclasses import replace

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.prefill_chunk import CHUNKED_PREFILL_TOO_SMALL

# A 30B-A3B MoE on an H200 (SGLang 0.4.10, its own --mem-fraction-static for the card) with
# prefill in 512-token passes while requests wait: 54 % of each step is prefill.
SMALL = ServerConfig(
    version="0.4.10", model_path="Qwen/Qwen3-30B-A3B", gpu_model="NVIDIA H200",
    chunked_prefill_size=512, mem_fraction_static=0.911, cuda_graph_max_bs=256, tp_size=1,
)  # fmt: skip
BUSY = {
    "num_running_reqs": "65x20", "num_queue_reqs": "191x20", "token_usage": "0.85x20",
    "gen_throughput": "2000x20", "itl_p50_seconds": "0.015x20", "itl_p99_seconds": "0.06x20",
    "prompt_tokens_rate": "20000x20", "startup_available_gpu_mem_gb": "11.5x20",
}  # fmt: skip


def test_a_chunk_under_sglangs_default_goes_back_to_it_with_its_gain_and_its_cost():
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, window_from(**BUSY), config=SMALL)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    assert out.action.text == "--chunked-prefill-size 512 -> 8192"
    p = out.action.prediction
    assert p is not None and p.objective == "tok/s" and p.gain is not None and p.gain > 0.05
    # SGLang runs all of a prompt's chunks before the next decode step: the stall ITL p99
    # holds beyond ITL p50 is the whole prompt's prefill, cheaper per token in longer passes
    assert -0.6 < p.effects["ITL p99"][0] < -0.1
    assert "trades ITL p99" not in out.action.expected
    assert "decode steps wait less" in out.action.expected
    assert "191 requests waiting" in out.evidence


def test_the_chunk_stays_after_a_prefill_oom_or_at_the_default():
    oom = window_from(**BUSY, prefill_oom_events="0x19 1")
    assert isinstance(evaluate(CHUNKED_PREFILL_TOO_SMALL, oom, config=SMALL), Pass)
    at_default = replace(SMALL, chunked_prefill_size=8192)
    assert isinstance(
        evaluate(CHUNKED_PREFILL_TOO_SMALL, window_from(**BUSY), config=at_default), Pass
    )


def test_nothing_waiting_on_prefill_is_no_advice():
    calm = window_from(**{**BUSY, "num_queue_reqs": "0x20"})
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, calm, config=SMALL)
    assert isinstance(out, Pass) and "nothing waits on prefill" in out.detail


def _at_hand_set_fraction(free_gb: float) -> Finding | Pass:
    hand = replace(SMALL, mem_fraction_static=0.95)
    window = window_from(**{**BUSY, "startup_available_gpu_mem_gb": f"{free_gb}x20"})
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, window, config=hand)
    assert isinstance(out, Finding | Pass), out
    return out


def test_a_hand_set_fraction_must_leave_room_for_the_larger_chunks_activations():
    # a chunk's activations as SGLang reserves them: 1.5 MB per token of max(chunk, 2048), out
    # of the memory free after startup (no prefill has run then), leaving 1 GB: 8192 needs 12 GB
    roomy = _at_hand_set_fraction(13.5)
    assert isinstance(roomy, Finding) and roomy.action.text == "--chunked-prefill-size 512 -> 8192"
    # short of the default's, the largest power of two that fits, said why
    part = _at_hand_set_fraction(11.5)
    assert isinstance(part, Finding) and part.action.text == "--chunked-prefill-size 512 -> 4096"
    assert "8192, SGLang's default, needs 12.0 GB of activations" in part.action.note
    assert "4096 is the largest chunk" in part.action.note
    p = part.action.prediction
    assert p is not None and p.gain is not None and p.gain > 0  # priced at 4096, not 8192
    # 2048 costs no more than 512 (SGLang reserves at least 2048 tokens' activations)
    least = _at_hand_set_fraction(5.0)
    assert isinstance(least, Finding) and least.action.text == "--chunked-prefill-size 512 -> 2048"
    tight = _at_hand_set_fraction(3.5)
    assert isinstance(tight, Pass) and "would not leave 1 GB free" in tight.detail


def test_without_the_servers_flags_it_cannot_judge():
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, window_from(**BUSY), config=None)
    assert isinstance(out, NoData) and "--chunked-prefill-size unknown" in out.reason


def test_where_itl_p50_is_mostly_prefill_the_chunk_raise_moves_it_and_tokens_per_second():
    # 10,000-token prompts behind 30-token outputs: every decode step waits for the prompts
    # its departures admitted, so ITL p50 (1.3 s) is forty decode steps; prefill in passes of
    # 8,192 tokens instead of 512 halves each prompt's price, and with it the step and ITL p50
    long = window_from(**{
        **BUSY, "num_running_reqs": "70x20", "num_queue_reqs": "184x20", "token_usage": "0.95x20",
        "gen_throughput": "54x20", "itl_p50_seconds": "1.3x20", "itl_p99_seconds": "7.9x20",
        "prompt_tokens_rate": "22000x20", "generation_tokens_rate": "54x20",
        "request_rate": "2.2x20",
    })  # fmt: skip
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, long, config=SMALL)
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain > 0.6
    assert -0.65 < p.effects["ITL p50"][0] < -0.3
    assert "of ITL p50" in p.basis


def test_online_a_chunk_raise_is_judged_on_the_latency_it_shortens_most():
    # the same prefill-bound steps for a chat service with nobody queued: TTFT p99 has no
    # queue to drain, but every token waits for the prefill passes between two decode steps,
    # so ITL p50 is what the raise shortens and what its severity is graded on
    calm = window_from(**{
        **BUSY, "num_running_reqs": "70x20", "num_queue_reqs": "0x20", "token_usage": "0.35x20",
        "gen_throughput": "54x20", "itl_p50_seconds": "1.3x20", "itl_p99_seconds": "7.9x20",
        "prompt_tokens_rate": "22000x20", "generation_tokens_rate": "54x20",
        "request_rate": "2.2x20", "prefill_full_ratio": "0.97x20",
    })  # fmt: skip
    out = evaluate(CHUNKED_PREFILL_TOO_SMALL, calm, config=SMALL, profile="online")
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    p = out.action.prediction
    assert p is not None and p.objective == "ITL p50" and p.gain is not None and p.gain > 0.3
