"""Physics anchors (published figures, within 20 %) and SGLang's scheduler facts per version."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sglang_sim import GPUS, LLMS, Knobs, Load, ServerConfig, ServerModel, measure
from sglang_sim.catalogue import parse_version
from sglang_sim.defaults import capture_batch_sizes, resolve_knobs
from sglang_sim.kvcache import ratio_bounds, rules_for

GUIDE = Knobs(mem_fraction_static=0.88)
# The guide's decode line: #running-req: 233, #token: 370959, token usage: 0.82, cuda graph: True,
# gen throughput (token/s): 4594.01, #queue-req: 317 -> a 452,389-token pool (8B on 80 GB).
GUIDE_LOAD = Load(
    clients=550, prompt_mean=1300, max_new_tokens=4096, eos_fraction=1.0, eos_max_tokens=600
)


def within(value: float, anchor: float, tolerance: float = 0.2) -> bool:
    """True when value is within +-tolerance of the anchor."""
    return abs(value / anchor - 1) <= tolerance


def test_anchor_guide_pool_size_8b_on_an_80gb_gpu():
    model = ServerModel(ServerConfig(knobs=GUIDE))
    assert within(model.plan.max_total_num_tokens, 370959 / 0.82)


def test_anchor_guide_decode_line_throughput_and_usage():
    result = measure(ServerConfig(knobs=GUIDE, load=GUIDE_LOAD), seconds=300, warmup=120)
    assert within(result.running_mean, 233) and within(result.queue_mean, 317)
    assert within(result.gen_throughput, 4594.01)
    assert within(result.token_usage, 0.82)


@pytest.mark.parametrize(("clients", "tpot_ms"), [(1, 6.48), (4, 6.59)])
def test_anchor_inter_token_latency_at_low_concurrency_on_h100(clients, tpot_ms):
    load = Load(clients=clients, prompt_mean=200, max_new_tokens=256, eos_fraction=0.0)
    result = measure(ServerConfig(knobs=GUIDE, load=load), seconds=120, warmup=20)
    assert within(result.itl_p50 * 1000, tpot_ms)


def test_kv_bytes_per_token_from_the_model_shape():
    assert LLMS["llama-3.1-8b"].kv_bytes_per_token() == 32 * 8 * 128 * 2 * 2
    assert LLMS["llama-3.1-70b"].kv_bytes_per_token(tp=4) == 80 * 2 * 128 * 2 * 2


def test_fp8_kv_cache_doubles_the_pool_and_fp8_weights_free_memory():
    base = ServerModel(ServerConfig(knobs=GUIDE)).plan
    kv8 = ServerModel(ServerConfig(knobs=replace(GUIDE, kv_cache_dtype="fp8_e4m3"))).plan
    w8 = ServerModel(ServerConfig(knobs=replace(GUIDE, quantization="fp8"))).plan
    assert kv8.max_total_num_tokens == pytest.approx(2 * base.max_total_num_tokens, rel=0.01)
    assert w8.weight_gb == pytest.approx(base.weight_gb / 2)
    assert w8.max_total_num_tokens > base.max_total_num_tokens


def test_decode_step_grows_with_kv_read_and_shrinks_with_bandwidth():
    h100 = ServerModel(ServerConfig(knobs=GUIDE)).engine
    h200 = ServerModel(ServerConfig(knobs=GUIDE, gpu=GPUS["H200"])).engine
    assert h100.decode_seconds(64, 400_000) > h100.decode_seconds(64, 100_000)
    assert h200.decode_seconds(64, 400_000) < h100.decode_seconds(64, 400_000)


def test_cuda_graph_pays_off_at_small_batches_more_than_at_large_ones():
    graphs = ServerModel(ServerConfig(knobs=GUIDE)).engine
    eager = ServerModel(ServerConfig(knobs=replace(GUIDE, disable_cuda_graph=True))).engine
    small = eager.decode_seconds(8, 8 * 1500) / graphs.decode_seconds(8, 8 * 1500)
    large = eager.decode_seconds(240, 240 * 1500) / graphs.decode_seconds(240, 240 * 1500)
    assert small > large > 1.0


def test_70b_on_four_gpus_splits_weights_and_pays_all_reduce():
    config = ServerConfig(knobs=replace(GUIDE, tp_size=4), llm=LLMS["llama-3.1-70b"])
    model = ServerModel(config)
    assert model.plan.failure is None and 30 < model.plan.weight_gb < 35
    assert model.engine.decode_seconds(1, 1000) > model.engine.derived["weights_s"]


@pytest.mark.parametrize(
    ("gpu", "version", "max_bs", "chunk"),
    [
        ("H100", "0.4.10", 160, 8192),
        ("H200", "0.4.10", 256, 8192),
        ("B200", "0.4.10", 512, 16384),
        ("H100", "0.5.9", 256, 8192),
        ("L40S", "0.5.23", 32, 4096),
        ("B200", "0.5.23", 512, 16384),
    ],
)
def test_defaults_by_gpu_memory_and_version(gpu, version, max_bs, chunk):
    knobs = resolve_knobs(Knobs(), GPUS[gpu], parse_version(version))
    assert (knobs.cuda_graph_max_bs, knobs.chunked_prefill_size) == (max_bs, chunk)
    sizes = capture_batch_sizes(knobs, GPUS[gpu], parse_version(version), 4096)
    assert max(sizes) == max_bs


def test_auto_mem_fraction_per_version_on_h100():
    old = resolve_knobs(Knobs(), GPUS["H100"], (0, 4, 10)).mem_fraction_static
    new = resolve_knobs(Knobs(), GPUS["H100"], (0, 5, 9)).mem_fraction_static
    assert old == pytest.approx(0.874, abs=0.002) and new == pytest.approx(0.835, abs=0.003)


@pytest.mark.parametrize(
    ("conservativeness", "init", "low"), [(0.3, 0.21, 0.0294), (1.0, 0.7, 0.098), (3.0, 1.0, 0.14)]
)
def test_new_token_ratio_scales_with_conservativeness_capped_at_one(conservativeness, init, low):
    got_init, got_low, decay = ratio_bounds(conservativeness)
    assert got_init == pytest.approx(init) and got_low == pytest.approx(low)
    assert decay == pytest.approx((init - low) / 600)


def test_retraction_rules_differ_between_0_4_and_0_5():
    old, new = rules_for((0, 4, 10)), rules_for((0, 5, 23))
    assert (old.retract_room_steps, old.ratio_plus_one, old.charge_remaining) == (20, False, False)
    assert (new.retract_room_steps, new.ratio_plus_one, new.charge_remaining) == (1, True, True)


def test_default_max_running_requests_is_the_req_to_token_pool():
    model = ServerModel(ServerConfig(knobs=GUIDE))
    assert model.plan.max_running_requests == 2048
    capped = ServerModel(ServerConfig(knobs=replace(GUIDE, max_running_requests=300)))
    assert capped.plan.max_running_requests == 300


def test_eager_decode_pays_a_gap_per_launch_or_waits_for_the_host():
    # gpu-physics.md (H200): ~1 us of GPU idle per launch once the GPU is the bound, ~12.5 us of
    # host CPU per launch; SGLang's layer issues ~11.5 launches
    graphs = ServerModel(ServerConfig(knobs=GUIDE)).engine
    eager = ServerModel(ServerConfig(knobs=replace(GUIDE, disable_cuda_graph=True))).engine
    extra = eager.decode_seconds(1, 120) - graphs.decode_seconds(1, 120)
    assert extra == pytest.approx(32 * 11.5 * 1e-6)  # an 8B's batch-1 step outlasts its launches
    tiny = ServerConfig(knobs=replace(GUIDE, disable_cuda_graph=True), llm=LLMS["llama-3.2-1b"])
    host = 16 * 11.5 * 12.5e-6
    assert ServerModel(tiny).engine.decode_seconds(1, 120) == pytest.approx(host + 0.7e-3)


def test_a_closed_loop_client_is_admitted_after_the_step_its_answer_ends():
    # SGLang receives new requests on every iteration of its event loop: a client that sends
    # again as its answer ends waits one decode step and its prefill, not the rest of a block
    # of decode steps (before: TTFT p99 0.36 s, 11 of 64 clients waiting unseen by #queue-req)
    load = Load(clients=64, prompt_mean=200, max_new_tokens=256, eos_fraction=0.5,
                eos_max_tokens=256)  # fmt: skip
    result = measure(ServerConfig(knobs=GUIDE, load=load), seconds=60, warmup=20)
    assert result.queue_mean == 0 and result.running_mean > 0.95 * 64
    assert result.ttft_p99 < 4 * result.itl_p50
    assert result.itl_p99 < 4 * result.itl_p50
