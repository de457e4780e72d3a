"""The server model (predict/server_model.py): each prediction kind, and the severity it grades."""

import math
from dataclasses import replace

import pytest
from helpers import evaluate, rule_input, window_from
from sglang_physics import MODELS
from sglang_sim import SCENARIOS
from sglang_sim.gpus import gpu_named
from sglang_sim.measure import measure
from sglang_sim.workload import Load
from sglang_tuner.model.advice import Finding, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.window import WindowView
from sglang_tuner.predict.server_model import (
    gpu_spec,
    itl_p99,
    itl_tail,
    latency_cap,
    model_spec,
    objective_gain,
    predict_pool_change,
    server_model,
    step_fit,
)
from sglang_tuner.rules.cuda_graph import CUDA_GRAPH_NOT_COVERING
from sglang_tuner.rules.latency import BATCH_TOO_LARGE_FOR_LATENCY
from sglang_tuner.rules.memory import MEM_FRACTION_TOO_HIGH, MEM_FRACTION_TOO_LOW
from sglang_tuner.rules.parallelism import PREFER_DATA_PARALLEL
from sglang_tuner.rules.scheduling import SCHEDULER_TOO_CONSERVATIVE

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
L40S = "NVIDIA L40S"
# An 8B on an L40S at --mem-fraction-static 0.5 under a closed-loop load, as the simulator
# shows it: 15 running, 725 waiting, the pool full, 48 ms per step of which ITL p50 33 ms.
L40S_AT_HALF = ServerConfig(
    model_path=LLAMA_8B, gpu_model=L40S, mem_fraction_static=0.5,
    max_total_num_tokens=56_835, startup_available_gpu_mem_gb=20.0, cuda_graph_max_bs=160,
)  # fmt: skip
BOUND = window_from(
    num_running_reqs="15x20", num_queue_reqs="725x20", token_usage="0.9x20",
    gen_throughput="310x20", itl_p50_seconds="0.033x20", startup_available_gpu_mem_gb="20x20",
)  # fmt: skip


def test_the_model_path_and_gpu_name_map_to_the_physics_specs():
    assert model_spec(LLAMA_8B) is not None and model_spec(LLAMA_8B).layers == 32  # type: ignore[union-attr]
    assert model_spec("Qwen/Qwen3-30B-A3B-FP8").experts == 128  # type: ignore[union-attr]
    assert model_spec("someone/my-own-model") is None
    assert gpu_spec("NVIDIA H100 80GB HBM3").bandwidth_tb_s == 3.35  # type: ignore[union-attr]
    assert gpu_spec("NVIDIA L40S").memory_gib == 44.39  # type: ignore[union-attr]
    assert gpu_spec("Some Accelerator") is None


def test_an_l40s_at_mem_fraction_half_gets_a_warning_with_a_large_predicted_gain():
    out = evaluate(MEM_FRACTION_TOO_LOW, BOUND, config=L40S_AT_HALF)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    p = out.action.prediction
    assert p is not None and p.objective == "tok/s"
    assert p.gain is not None and 0.25 < p.gain < 0.6  # the simulator measures +46 %
    assert p.low is not None and p.high is not None and p.low < p.gain < p.high
    assert "the KV pool binds the batch at 15 per rank with 725 waiting" in p.basis
    assert out.action.expected.startswith(f"{p.gain * 100:+.0f} % tok/s (")


def test_a_server_with_no_kv_pressure_gets_no_mem_fraction_warning():
    idle_pool = window_from(
        num_running_reqs="15x20", num_queue_reqs="0x20", token_usage="0.4x20",
        gen_throughput="310x20", startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, idle_pool, config=L40S_AT_HALF)
    assert isinstance(out, Pass)  # a larger pool would sit empty


def test_a_full_pool_with_nothing_waiting_is_a_hint_predicting_no_gain_and_saying_why():
    full_no_queue = window_from(
        num_running_reqs="15x20", num_queue_reqs="0x20", token_usage="0.95x20",
        gen_throughput="310x20", startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, full_no_queue, config=L40S_AT_HALF)
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    p = out.action.prediction
    assert p is not None and p.gain == 0.0
    assert "the KV pool does not bind the batch" in p.basis


def test_an_unknown_model_with_a_steady_batch_is_no_prediction_and_a_hint():
    config = ServerConfig(
        model_path="someone/my-own-model", gpu_model=L40S, mem_fraction_static=0.5,
        max_total_num_tokens=56_835,
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, BOUND, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    assert out.action.prediction is not None and out.action.prediction.gain is None
    assert out.action.expected.startswith("no prediction: ")


@pytest.mark.parametrize(
    ("raw", "mode", "why"),
    [
        ({"speculative_algorithm": "EAGLE"}, None, "speculative decoding (EAGLE): the model has"),
        ({"disaggregation_mode": "decode"}, "decode", "a decode server of prefill-decode"),
    ],
)
def test_a_server_the_model_does_not_cover_gets_no_prediction_and_a_hint(raw, mode, why):
    """Speculative decoding and a PD role: the step model has neither, so no figure is given
    (and no warning), even where the model and GPU are known and the window moved."""
    config = replace(L40S_AT_HALF, raw=raw, disaggregation_mode=mode)
    out = evaluate(MEM_FRACTION_TOO_LOW, BOUND, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    p = out.action.prediction
    assert p is not None and p.gain is None and p.basis.startswith(why)
    assert out.action.expected.startswith("no prediction: " + why)
    covered = evaluate(MEM_FRACTION_TOO_LOW, BOUND, config=L40S_AT_HALF)
    assert isinstance(covered, Finding) and covered.action.prediction is not None
    assert covered.action.prediction.gain is not None  # the same server, modelled


def test_without_the_physics_a_moving_batch_is_fitted():
    moving = window_from(
        num_running_reqs="10 12 14 16 18 20 10 12 14 16", gen_throughput=[
            b / (0.02 + 0.001 * b) for b in (10, 12, 14, 16, 18, 20, 10, 12, 14, 16)
        ],
    )  # fmt: skip
    inp = rule_input(MEM_FRACTION_TOO_LOW, moving, config=ServerConfig(model_path="x/unknown"))
    fit = step_fit(inp)
    assert fit is not None and abs(fit[0] - 0.02) < 1e-6 and abs(fit[1] - 0.001) < 1e-6
    model = server_model(inp)
    assert not isinstance(model, str)
    # against the window's mean batch, 14.2
    assert abs(model.throughput_ratio(28) - (28 / 0.048) / (14.2 / 0.0342)) < 0.01


def test_a_lower_mem_fraction_for_safety_carries_its_predicted_cost():
    config = ServerConfig(
        model_path=LLAMA_8B, gpu_model=L40S, mem_fraction_static=0.89,
        max_total_num_tokens=200_000, startup_available_gpu_mem_gb=3.0,
    )  # fmt: skip
    view = window_from(
        num_running_reqs="60x20", num_queue_reqs="600x20", token_usage="0.93x20",
        gen_throughput="600x20", itl_p50_seconds="0.06x20", startup_available_gpu_mem_gb="3x20",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_HIGH, view, config=config)
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain < 0  # a price, still a warning
    assert out.severity is None  # the rule's own severity: a safety margin


def test_lower_conservativeness_is_a_warning_where_the_bigger_batch_pays():
    view = window_from(
        num_running_reqs="15x20", num_queue_reqs="725x20", token_usage="0.45x20",
        gen_throughput="310x20", itl_p50_seconds="0.033x20",
    )  # fmt: skip
    config = ServerConfig(
        model_path=LLAMA_8B, gpu_model=L40S, schedule_conservativeness=2.2,
        max_total_num_tokens=160_000,
    )  # fmt: skip
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, view, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain >= 0.05
    assert "token usage p50 0.45 -> 0.9" in p.basis


def test_lower_conservativeness_on_a_batch_bound_step_is_a_hint():
    # a small batch share of a long step: the step grows as fast as the batch (fit: all slope)
    view = window_from(
        num_running_reqs="200x20", num_queue_reqs="300x20", token_usage="0.6x20",
        gen_throughput="2000x20", itl_p50_seconds="0.099x20",
    )  # fmt: skip
    config = ServerConfig(
        model_path=LLAMA_8B, gpu_model="NVIDIA H100 80GB HBM3", schedule_conservativeness=1.0,
        max_total_num_tokens=400_000,
    )  # fmt: skip
    out = evaluate(SCHEDULER_TOO_CONSERVATIVE, view, config=config)
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.gain is not None
    assert out.severity is (Severity.WARNING if p.gain >= 0.05 else Severity.INFO)


def test_cuda_graphs_for_a_small_model_with_eager_batches_are_a_warning():
    # a 1B model on an H100: a decode forward is ~1 ms, launching it eagerly ~2.3 ms of host
    config = ServerConfig(
        model_path="meta-llama/Llama-3.2-1B-Instruct", gpu_model="NVIDIA H100 80GB HBM3",
        cuda_graph_max_bs=16, max_total_num_tokens=100_000, version="0.5.23",
    )  # fmt: skip
    view = window_from(  # 1,000 cached tokens per request
        num_running_reqs="40x20", gen_throughput="13000x20", token_usage="0.4x20",
        startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain >= 0.05
    assert "run eager" in p.basis


def test_cuda_graphs_online_are_predicted_on_every_latency_and_judged_by_the_larger_fall():
    # an 8B on an H100, online, nobody waiting: graphs shorten every token's
    # step (ITL p50 falls), TTFT p99 has no queue to shrink
    config = ServerConfig(
        model_path=LLAMA_8B, gpu_model="NVIDIA H100 80GB HBM3", cuda_graph_max_bs=16,
        max_total_num_tokens=400_000, version="0.5.23",
    )  # fmt: skip
    view = window_from(
        num_running_reqs="40x20", num_queue_reqs="0x20", gen_throughput="2600x20",
        token_usage="0.2x20", itl_p50_seconds="0.0145x20", itl_p99_seconds="0.03x20",
        ttft_p50_seconds="0.03x20", ttft_p99_seconds="0.08x20", request_rate="10x20",
        generation_tokens_rate="2600x20", prompt_tokens_rate="3000x20",
        startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config, profile="online")
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.objective == "ITL p50" and p.gain is not None and p.gain > 0
    assert set(p.effects) >= {"tok/s", "ITL p50", "TTFT p99"}
    assert p.effects["ITL p50"][0] == pytest.approx(-p.gain)
    assert abs(p.effects["TTFT p99"][0]) < 0.05  # nobody waits: the queue moves nothing
    offline = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config)
    assert isinstance(offline, Finding) and offline.action.prediction is not None
    assert offline.action.prediction.objective == "tok/s"


def test_cuda_graphs_where_the_gpu_is_the_bound_are_a_hint_predicting_little():
    # an 8B on an L4-class bandwidth: an 80 ms step hides the launches
    config = ServerConfig(
        model_path=LLAMA_8B, gpu_model="NVIDIA L40S", cuda_graph_max_bs=32,
        max_total_num_tokens=160_000, version="0.5.23",
    )  # fmt: skip
    view = window_from(
        num_running_reqs="80x20", gen_throughput="1000x20", token_usage="0.9x20",
        startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain < 0.05


def test_the_pool_prediction_scales_the_pool_by_the_freed_memory():
    inp = rule_input(MEM_FRACTION_TOO_LOW, BOUND, config=L40S_AT_HALF)
    p = predict_pool_change(inp, 0.8)
    # 0.3 of 44.4 GiB at 128 KiB per token: about 104,000 more tokens
    assert "pool 56,835 -> 16" in p.basis


def test_online_the_larger_pool_is_predicted_on_queue_wait():
    out = evaluate(MEM_FRACTION_TOO_LOW, BOUND, config=L40S_AT_HALF, profile="online")
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.objective == "TTFT p99"
    assert p.gain is not None and 0 < p.gain <= 1  # the queue drains faster: TTFT falls
    assert p.text().startswith("-")  # a latency gain reads as a fall


def test_online_ttft_p99_moves_by_the_wait_not_in_proportion_to_it():
    # 100 of 200 waiting requests taken in at the same rate: the wait halves; TTFT p99 (20 s,
    # of which 8 s is the median wait) loses those 4 s, not half of itself
    view = window_from(
        num_running_reqs="100x20", num_queue_reqs="200x20", token_usage="0.9x20",
        gen_throughput="3000x20", queue_time_p50_seconds="8x20", ttft_p99_seconds="20x20",
    )  # fmt: skip
    inp = rule_input(MEM_FRACTION_TOO_LOW, view, config=L40S_AT_HALF, profile="online")
    model = server_model(inp)
    assert not isinstance(model, str)
    gain = objective_gain(inp, model.obs, 200.0, 1.0)
    assert abs(gain - 4 / 20) < 1e-9
    no_quantiles = rule_input(MEM_FRACTION_TOO_LOW, BOUND, profile="online")
    assert objective_gain(no_quantiles, model.obs, 200.0, 1.0) == 0.5  # the wait itself


# The 8B on an L40S under 1,100 streaming clients (the simulator's online_batch_too_large at
# --mem-fraction-static 0.82): 288 running, 806 waiting, ITL p50 read off SGLang's histogram
# 51 ms (its 40-60 ms bucket); measured at --max-running-requests 75: ITL p50 -48 % (58 -> 30
# ms on a fine grid), tokens/s 3,096 -> 1,867.
STREAMING_L40S = ServerConfig(
    model_path=LLAMA_8B, gpu_model=L40S, mem_fraction_static=0.82, max_running_requests=1024,
    max_total_num_tokens=171_628,
)  # fmt: skip
STREAMING = window_from(
    num_running_reqs="288x20", num_queue_reqs="806x20", token_usage="0.86x20",
    gen_throughput="3096x20", itl_p50_seconds="0.051x20",
)  # fmt: skip


def test_the_latency_cap_is_sized_on_the_physics_and_predicts_the_measured_itl():
    out = evaluate(BATCH_TOO_LARGE_FOR_LATENCY, STREAMING, config=STREAMING_L40S, profile="online")
    assert isinstance(out, Finding)
    action, p = out.action, out.action.prediction
    assert action.flag == "--max-running-requests" and action.current == "1024"
    assert action.suggested is not None and 50 <= int(action.suggested) <= 100  # measured: 75
    assert p is not None and p.objective == "ITL p50" and p.gain is not None
    assert abs(p.gain - 0.48) <= 0.05  # the simulator measures -48 % at 75
    # sized under the 30 ms target (SGLang's histogram reads 30.x ms back as 30-35)
    assert "-> 27 ms" in p.basis and "calibrated on the observed step" in p.basis
    # the real throughput cost, not "-0 %" by construction
    cost = float(p.basis.split("decode tokens/s ")[1].split("%")[0])
    assert -60 < cost < -25  # measured -40 %


def test_under_dp_attention_the_cap_is_asked_in_whole_server_units():
    config = ServerConfig(
        model_path="deepseek-ai/DeepSeek-V3", gpu_model="NVIDIA H200", tp_size=8, dp_size=8,
        enable_dp_attention=True, mem_fraction_static=0.89, max_running_requests=1024,
        max_running_requests_per_dp=128, max_total_num_tokens=300_000, cuda_graph_max_bs=512,
    )  # fmt: skip
    view = window_from(
        num_running_reqs="1024x20", num_queue_reqs="400x20", token_usage="0.6x20",
        gen_throughput="30000x20", itl_p50_seconds="0.033x20", num_dp_ranks="8x20",
    )  # fmt: skip
    out = evaluate(BATCH_TOO_LARGE_FOR_LATENCY, view, config=config, profile="online")
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.gain is not None and p.gain > 0
    per_rank = int(p.basis.split(" at ")[1].split(" per rank")[0])
    assert per_rank < 128 and out.action.suggested == str(per_rank * 8)


def test_no_batch_meeting_the_target_is_said_and_sized_the_old_way():
    slow = window_from(
        num_running_reqs="80x20", num_queue_reqs="100x20", token_usage="0.8x20",
        gen_throughput="400x20", itl_p50_seconds="0.2x20",
    )  # fmt: skip
    inp = rule_input(BATCH_TOO_LARGE_FOR_LATENCY, slow, config=STREAMING_L40S, profile="online")
    reason = latency_cap(inp, 0.001)
    assert isinstance(reason, str) and reason.startswith("no batch meets 1 ms on this server")


# An 8B on four L40S at tp 4 under a closed-loop load (the simulator's tp_where_dp_fits):
# 223 running, 6 waiting, 1,288 tokens/s; measured as four tp-1 replicas: tokens/s +56 %.
TP4_L40S = ServerConfig(
    model_path=LLAMA_8B, gpu_model=L40S, tp_size=4, mem_fraction_static=0.89,
    max_total_num_tokens=1_142_877,
)  # fmt: skip


def test_data_parallel_is_predicted_per_replica_and_graded_by_it():
    view = window_from(
        num_running_reqs="223x20", num_queue_reqs="6x20", token_usage="0.63x20",
        gen_throughput="1288x20", itl_p50_seconds="0.051x20",
    )  # fmt: skip
    out = evaluate(PREFER_DATA_PARALLEL, view, config=TP4_L40S)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    p = out.action.prediction
    assert p is not None and p.objective == "tok/s" and p.gain is not None
    assert abs(p.gain - 0.56) <= 0.1, p
    assert "4 replicas at a batch of 57 each" in p.basis
    assert out.action.expected.startswith(f"{p.gain * 100:+.0f} % tok/s")


# An 8B on two B200s at tp 2, --mem-fraction-static 0.95, behind a closed loop of 740 clients
# that all run (the simulator's seed 31158, unperturbed figures).
TP2_B200 = ServerConfig(
    model_path=LLAMA_8B, gpu_model="NVIDIA B200", tp_size=2, mem_fraction_static=0.95,
    max_total_num_tokens=2_637_889,
)  # fmt: skip


def _all_running(usage: float) -> WindowView:
    return window_from(
        num_running_reqs="740x20", num_queue_reqs="0x20", token_usage=f"{usage}x20",
        gen_throughput="7300x20", itl_p50_seconds="0.1x20", itl_p99_seconds="0.22x20",
        ttft_p50_seconds="0.073x20", ttft_p99_seconds="0.2x20", ttft_mean_seconds="0.082x20",
        request_rate="15.8x20", generation_tokens_rate="7300x20",
        prompt_tokens_rate="47400x20",
    )  # fmt: skip


def test_data_parallel_states_its_ttft_cost_where_a_replica_pool_binds():
    # at token usage 0.87 each replica's pool (one GPU: whole weights, a smaller share of KV)
    # holds fewer than its half of the 740: the rest wait, and each prompt's prefill runs on one
    # GPU. The simulator measured +10 % tok/s and TTFT p99 +256 %.
    out = evaluate(PREFER_DATA_PARALLEL, _all_running(0.87), config=TP2_B200)
    assert isinstance(out, Finding)
    p = out.action.prediction
    assert p is not None and p.objective == "tok/s" and p.gain is not None and p.gain > 0
    assert set(p.effects) >= {"tok/s", "TTFT p99", "ITL p50", "ITL p99"}
    assert p.effects["TTFT p99"][0] > 0.5
    assert "a prompt's prefill on one GPU takes" in p.basis
    assert "TTFT p99 +" in out.action.expected  # the cost said in advance
    # a roomy pool: every client still fits a replica; only the slower prefill is left
    roomy = evaluate(PREFER_DATA_PARALLEL, _all_running(0.4), config=TP2_B200)
    assert isinstance(roomy, Finding) and roomy.action.prediction is not None
    assert 0 < roomy.action.prediction.effects["TTFT p99"][0] < p.effects["TTFT p99"][0]


def test_data_parallel_without_the_physics_is_no_prediction_and_keeps_its_warning():
    config = ServerConfig(
        model_path="someone/my-own-8B", gpu_model=L40S, tp_size=4, mem_fraction_static=0.89,
        max_total_num_tokens=1_300_000,
    )  # fmt: skip
    view = window_from(
        num_running_reqs="240x20", num_queue_reqs="0x20", token_usage="0.3x20",
        gen_throughput="4000x20",
    )  # fmt: skip
    out = evaluate(PREFER_DATA_PARALLEL, view, config=config)
    assert isinstance(out, Finding) and out.severity is Severity.WARNING
    assert out.action.prediction is not None and out.action.prediction.gain is None


def test_a_cut_pool_that_holds_less_than_today_predicts_the_smaller_batch():
    # 20 running at token usage 0.6 (34,101 of 56,835 tokens) with nothing waiting: the pool
    # does not bind today, but 0.5 -> 0.4 leaves ~22,000 tokens: what runs now no longer fits
    roomy = window_from(
        num_running_reqs="20x20", num_queue_reqs="0x20", token_usage="0.6x20",
        gen_throughput="400x20", itl_p50_seconds="0.04x20", startup_available_gpu_mem_gb="20x20",
    )  # fmt: skip
    inp = rule_input(MEM_FRACTION_TOO_HIGH, roomy, config=L40S_AT_HALF)
    cut = predict_pool_change(inp, 0.4)
    assert "holds less than the 34,101 in use today" in cut.basis
    assert cut.gain is not None and cut.gain < -0.1  # fewer running: fewer tokens/s
    # a cut that still holds today's use moves nothing
    slight = predict_pool_change(inp, 0.48)
    assert slight.gain == 0.0 and "does not bind" in slight.basis


@pytest.mark.parametrize(
    ("model", "gpu", "tp"), [("qwen3-30b-a3b", "NVIDIA H20", 2), ("llama-3.1-8b", "NVIDIA L40S", 1)]
)
def test_a_larger_prefill_chunk_is_priced_with_the_same_attention(model: str, gpu: str, tp: int):
    # A 512-token chunk of a 3,000-token prompt attends to the chunks before it: a larger chunk
    # saves pass overheads and weight reads, never attention. Priced as a fresh sequence of the
    # chunk's length, the larger pass looked dearer per token and the raise a loss.
    from tests.scenario_harness import run_scenario

    base = SCENARIOS["healthy"].for_version("0.5.23")
    small = replace(
        base, llm=MODELS[model], gpu=gpu_named(gpu), load=Load(clients=1024),
        knobs=replace(base.knobs, chunked_prefill_size=512, tp_size=tp),
    )  # fmt: skip
    run = run_scenario("healthy", config=small, gpu_model=gpu)
    finding = run.finding("chunked_prefill_too_small")
    p = finding.action.prediction
    assert p is not None and p.gain is not None and finding.action.suggested is not None
    raised = replace(
        small, knobs=replace(small.knobs, chunked_prefill_size=int(finding.action.suggested))
    )
    before, after = (measure(c, seconds=600.0, seed=1) for c in (small, raised))
    measured = after.gen_throughput / before.gen_throughput - 1
    assert p.gain > 0 and abs(p.gain - measured) < 0.03, (p.gain, measured)


def test_without_itl_the_prefill_a_step_carries_is_priced_on_the_windows_prompt():
    # no ITL p50 to split the step: the prefill is priced by the physics, each token attending
    # to the prompt before it, so the same prompt tokens per output token cost more when they
    # come as 16,000-token prompts than as 1,000-token ones
    from sglang_tuner.predict.server_model import Observed, ServerModel, physics_for

    physics = physics_for(L40S_AT_HALF)
    assert physics is not None

    def per_step(prompt: float) -> float:
        obs = Observed(1, 15, 0.048, 725, 0.9, 56_835, 2.0, False, None, prompt)
        return ServerModel(obs, physics, None, 160, False).prefill_per_step(15)

    assert per_step(16_000) > 1.2 * per_step(1_000) > 0


# Long prompts behind short outputs, online: 60 running, each step's departures admit ~2
# 8,000-token prompts, so ITL p50 (0.4 s) is mostly the prefill the median step waits for.
PREFILL_BOUND_RATES = {
    "num_running_reqs": "60x20", "num_queue_reqs": "30x20", "token_usage": "0.5x20",
    "gen_throughput": "120x20", "itl_p50_seconds": "0.4x20", "itl_p99_seconds": "2.0x20",
    "prompt_tokens_rate": "32000x20", "generation_tokens_rate": "120x20",
    "request_rate": "4x20",
}  # fmt: skip
PREFILL_BOUND = window_from(**PREFILL_BOUND_RATES)


def test_an_itl_p50_no_decode_step_explains_is_read_as_decode_plus_its_stall():
    config = replace(STREAMING_L40S, max_running_requests=1024)
    inp = rule_input(BATCH_TOO_LARGE_FOR_LATENCY, PREFILL_BOUND, config=config, profile="online")
    model = server_model(inp)
    assert not isinstance(model, str) and model.stall_evident
    obs = model.obs
    # the decode step is the physics' own; the rest of ITL p50 is the stall it holds
    assert model.decode_itl == pytest.approx(model.decode(obs.batch))
    assert model.itl(obs.batch) == pytest.approx(obs.itl)
    # a cap one under today's batch leaves ITL p50 where it is: the stall is scaled to the one
    # ITL p50 shows, not modelled afresh beside it
    one_less = model.itl_unbound(obs.batch - 1)
    assert one_less is not None and abs(one_less / obs.itl - 1) < 0.05


def test_no_latency_cap_is_sized_where_itl_p50_is_mostly_the_prefill_it_waits_for():
    # the cap would gain ITL p50 by holding prompts in the queue: TTFT p99 pays, by more than
    # the queue model bounds (the matrix measured +56 % and +85 % where it said +48 % and +10 %)
    config = replace(STREAMING_L40S, max_running_requests=1024)
    view = window_from(
        **{**PREFILL_BOUND_RATES, "num_running_reqs": "80x20", "gen_throughput": "160x20"}
    )
    inp = rule_input(BATCH_TOO_LARGE_FOR_LATENCY, view, config=config, profile="online")
    reason = latency_cap(inp, 0.03)
    assert isinstance(reason, str) and reason.startswith("ITL p50 is mostly prefill")
    out = evaluate(BATCH_TOO_LARGE_FOR_LATENCY, view, config=config, profile="online")
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    assert "ITL p50 is mostly prefill" in out.action.note


# 1,100 clients on a 70B over 2 B200s, 600-token prompts: a decode log line's rate is high
# where no prefill fell in its interval, and a scrape that lands in a prefill bunch reads the
# last one again; requests finish in waves, so the counter's rate is lumpy but its mean is right.
BUNCHED = {
    "num_running_reqs": "770x12",
    "gen_throughput": "8411 8411 8411 1217 8614 8377 8294 8446 8479 8479 9458 9468",
    "generation_tokens_rate": "1473 2037 3065 2749 27065 0 0 0 858 2615 2225 3820",
}


def test_the_decode_step_is_read_from_the_generation_counter_not_the_sampled_gauge():
    config = ServerConfig(model_path="meta-llama/Llama-3.1-70B-Instruct", gpu_model="NVIDIA B200")
    model = server_model(rule_input(MEM_FRACTION_TOO_LOW, window_from(**BUNCHED), config=config))
    assert not isinstance(model, str)
    counted = sum(float(v) for v in BUNCHED["generation_tokens_rate"].split()) / 12
    assert model.obs.step == pytest.approx(770 / counted)  # 167 ms a step, not the gauge's 95


def test_without_the_generation_counter_the_gauge_is_the_rate():
    # a server judged from its log has no counter: its batch lines' rate is all there is
    gauge = {k: v for k, v in BUNCHED.items() if k != "generation_tokens_rate"}
    config = ServerConfig(model_path="meta-llama/Llama-3.1-70B-Instruct", gpu_model="NVIDIA B200")
    model = server_model(rule_input(MEM_FRACTION_TOO_LOW, window_from(**gauge), config=config))
    assert not isinstance(model, str)
    mean = sum(float(v) for v in BUNCHED["gen_throughput"].split()) / 12
    assert model.obs.step == pytest.approx(770 / mean)


def test_a_slow_servers_prompt_share_is_read_from_its_lumpy_counters_means():
    # SGLang counts a request's tokens when it finishes: on a server finishing a request now
    # and then, most scrapes count none, and a median of the rates would say no prompt at all
    lumpy = window_from(
        num_running_reqs="32x10", gen_throughput="900x10",
        prompt_tokens_rate="0x8 60000x2", generation_tokens_rate="0x8 4500x2",
    )  # fmt: skip
    config = ServerConfig(model_path=LLAMA_8B, gpu_model=L40S)
    model = server_model(rule_input(MEM_FRACTION_TOO_LOW, lumpy, config=config))
    assert not isinstance(model, str)
    assert model.obs.prefill_per_output == pytest.approx(60000 / 4500)
    assert model.prefill_per_step(32) > 0  # each output token carries its prompt's prefill


# A full pool admitting one request per departure: 15 running, 40-token outputs (0.375
# admissions a step), 1,500-token prompts; ITL's histogram shows a decode step in (20, 40] ms
# and the steps that waited for a prompt's prefill in (200, 400] ms.
PER_DEPARTURE = {
    "num_running_reqs": "15x20", "num_queue_reqs": "725x20", "token_usage": "0.94x20",
    "gen_throughput": "310x20", "itl_p50_seconds": "0.033x20", "itl_p99_seconds": "0.35x20",
    "generation_tokens_rate": "310x20", "request_rate": "7.75x20",
    "prompt_tokens_rate": "11625x20",
}  # fmt: skip


def _waited(share: float) -> dict[str, str]:
    """Each interval's ITL buckets, `share` of its tokens in the steps that waited."""
    return {
        "itl_bucket:0.02": "0x20", "itl_bucket:0.04": f"{100 * (1 - share):g}x20",
        "itl_bucket:0.2": "0x20", "itl_bucket:0.4": f"{100 * share:g}x20",
    }  # fmt: skip


def _itl_change(view: WindowView, fraction: float = 0.8) -> float:
    p = predict_pool_change(rule_input(MEM_FRACTION_TOO_LOW, view, config=L40S_AT_HALF), fraction)
    return p.effects["ITL p50"][0]


def test_behind_a_full_pool_the_steps_that_waited_are_read_off_the_itl_histogram():
    view = window_from(**PER_DEPARTURE, **_waited(0.3))
    model = server_model(rule_input(MEM_FRACTION_TOO_LOW, view, config=L40S_AT_HALF))
    assert not isinstance(model, str) and model.bursts is not None
    bursts = model.bursts
    # 30 % of the tokens came in steps that waited: a Poisson rate of -ln(0.7) waits a step
    assert bursts.share == pytest.approx(0.3)
    assert bursts.events == pytest.approx(-math.log(0.7))
    # each wait is what the histogram shows past ITL p50 (33 ms): 167 to 367 ms, evenly
    assert bursts.waited(0.1) == 1.0
    assert bursts.waited(0.267) == pytest.approx(0.5)
    assert bursts.waited(0.4) == 0.0
    # fewer than half of the steps wait today, or at half the batch: the median step waits
    # for none; at twice the batch 51 % do, and the median step holds one of the shortest
    # waits, a whole prompt's prefill (not the near-0 wait of prompts of exponential length)
    assert bursts.median(bursts.events) == 0.0
    assert model.itl(model.obs.batch) == pytest.approx(model.obs.itl)
    assert model.median_stall(model.obs.batch / 2) == 0.0
    assert 0.167 < bursts.median(bursts.events * 2) < 0.18
    # at 2.9x, 64 %: further up today's waits, some steps holding two
    assert 0.2 < bursts.median(bursts.events * 2.9) < 0.3


def test_a_larger_pool_brings_the_stall_into_the_median_step_where_departures_admit():
    # at 2.9x the batch, 1 - e^(-0.36 x 2.9) = 64 % of steps wait: ITL p50 holds a stall
    without = _itl_change(window_from(**PER_DEPARTURE))
    per_departure = _itl_change(window_from(**PER_DEPARTURE, **_waited(0.3)))
    assert per_departure > without + 1.0  # a 1,500-token prefill beside a 33 ms step


def test_the_tail_token_waits_for_its_own_stall_on_the_decode_step_not_the_medians_too():
    # ITL p99 is a decode step and the prefill it waited for: the wait ITL p50 comes to hold
    # is not added to it again
    def effects(view: WindowView) -> dict:
        inp = rule_input(MEM_FRACTION_TOO_LOW, view, config=L40S_AT_HALF)
        return predict_pool_change(inp, 0.8).effects

    with_waits = effects(window_from(**PER_DEPARTURE, **_waited(0.3)))
    without = effects(window_from(**PER_DEPARTURE))
    assert with_waits["ITL p50"][0] > without["ITL p50"][0] + 1.0
    assert with_waits["ITL p99"][0] == pytest.approx(without["ITL p99"][0], rel=1e-2)


def test_a_larger_pool_leaves_the_median_step_alone_where_cohorts_admit():
    # 3 % of steps waited (requests admitted together finish together): at 2.9x the batch
    # still under half of the steps wait, and ITL p50 moves by the decode step alone
    without = _itl_change(window_from(**PER_DEPARTURE))
    cohorts = _itl_change(window_from(**PER_DEPARTURE, **_waited(0.03)))
    assert cohorts == pytest.approx(without)


def test_a_retracting_server_is_not_read_for_its_waits():
    # retracted requests come back in bursts of their own: today's waits are no guide
    view = window_from(
        **PER_DEPARTURE, **_waited(0.3), retractions_per_minute="5x20"
    )  # fmt: skip
    model = server_model(rule_input(MEM_FRACTION_TOO_LOW, view, config=L40S_AT_HALF))
    assert not isinstance(model, str) and model.obs.retracting and model.bursts is None


def test_waits_too_few_for_today_s_tail_price_the_tail_of_a_larger_batch():
    # 0.5 % of the tokens waited 167-367 ms behind the full pool: today's ITL p99 (36 ms) is a
    # decode step. At 2.9x the batch 1.4 % of the steps wait, so ITL p99's step holds one of
    # those waits (not one prompt's prefill priced per departure)
    tail_now = {**PER_DEPARTURE, "itl_p99_seconds": "0.036x20"}
    inp = rule_input(MEM_FRACTION_TOO_LOW, window_from(**tail_now, **_waited(0.005)),
                     config=L40S_AT_HALF)  # fmt: skip
    model = server_model(inp)
    assert not isinstance(model, str) and model.bursts is not None
    bursts = model.bursts
    assert bursts.tail(bursts.events) == 0.0  # today's tail holds no wait
    wait = bursts.tail(bursts.events * 2.9)
    assert 0.2 < wait < 0.3  # a third of the way up today's waits
    # ITL p99 then: the decode step (ITL p50 +10 %), today's spread above it, and that wait
    p99 = itl_p99(inp)  # read off the same histogram: a decode step's bucket
    assert p99 is not None and 0.033 < p99 <= 0.04
    change = itl_tail(inp, model, model.obs.batch * 2.9, 0.1)
    assert change == pytest.approx((0.033 * 1.1 + (p99 - 0.033) + wait) / p99 - 1)
    assert predict_pool_change(inp, 0.8).effects["ITL p99"][0] > 4.0
    # at today's batch no wait reaches the tail: ITL p99 moves with the decode step
    assert itl_tail(inp, model, model.obs.batch, 0.1) == pytest.approx(0.033 * 0.1 / p99)
