"""Every catalogued model and GPU can be chosen for a simulated server and reports itself."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sglang_sim import GPUS, LLMS, ServerModel, apply_flags
from sglang_sim.fleet import ServerSpec, check_spec, config_for
from sglang_sim.server_info import model_info, server_info

DEEPSEEK_DP = (
    ("--tp-size", "8"),
    ("--dp-size", "8"),
    ("--enable-dp-attention", "true"),
    ("--ep-size", "8"),
)


def test_deepseek_with_dp_attention_reports_sglang_adjusted_args():
    spec = ServerSpec("healthy", model="deepseek-v3", gpu="H200", flags=DEEPSEEK_DP)
    model = ServerModel(config_for(spec))
    model.advance_to(30.0)
    body = server_info(model, 30000, None)
    assert body["enable_dp_attention"] is True and body["dp_size"] == 8 and body["ep_size"] == 8
    assert body["schedule_conservativeness"] == pytest.approx(0.3)  # 1.0 x 0.3
    assert body["chunked_prefill_size"] == 8192 // 8
    assert body["attention_backend"] == "fa3"
    assert len(body["internal_states"]) == 8
    assert model.plan.failure is None and model.plan.max_total_num_tokens > 100_000
    info = model_info(model)
    assert info["model_type"] == "deepseek_v3"
    assert info["architectures"] == ["DeepseekV3ForCausalLM"]
    assert model.ranks[0].gauges["num_running_reqs"] > 0


def test_dp_attention_divides_max_running_requests_between_ranks():
    flags = (*DEEPSEEK_DP, ("--max-running-requests", "800"))
    spec = ServerSpec("healthy", model="deepseek-v3", gpu="H200", flags=flags)
    assert ServerModel(config_for(spec)).plan.max_running_requests == 100


@pytest.mark.parametrize("model", sorted(LLMS))
def test_every_model_serves_the_healthy_load_somewhere(model):
    spec = LLMS[model]
    big = spec.params * spec.dtype_bytes > 60e9
    flags = (("--tp-size", "8"),) if big else ()
    gpu = "H200" if big else "H100"
    server = ServerSpec("healthy", model=model, gpu=gpu, flags=flags, load=(("clients", "64"),))
    sim = ServerModel(config_for(server), seed=1)
    sim.advance_to(60.0)
    assert sim.plan.failure is None and sim.restarts == 0
    decoded = sim.ranks[0].stats.counters["realtime_tokens_total"].get(("decode",), 0.0)
    assert decoded > 0
    assert model_info(sim)["architectures"] == [spec.architecture]


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_gpu_runs_the_8b_model(gpu):
    sim = ServerModel(config_for(ServerSpec("healthy", gpu=gpu)), seed=1)
    sim.advance_to(60.0)
    assert sim.plan.failure is None and sim.restarts == 0
    assert sim.ranks[0].gauges["num_running_reqs"] > 0
    if GPUS[gpu].memory_gib < 30:  # 15 GiB of weights leave a 24 GB card a small pool
        assert sim.plan.max_total_num_tokens < 50_000


def test_small_model_on_a_consumer_card():
    sim = ServerModel(config_for(ServerSpec("healthy", model="llama-3.2-1b", gpu="RTX4090")))
    sim.advance_to(60.0)
    assert sim.plan.failure is None
    assert sim.knobs.attention_backend == "flashinfer"
    assert sim.knobs.chunked_prefill_size == 4096  # SGLang 0.5.20+'s default for 20-35 GB


def test_fa3_is_refused_on_blackwell():
    with pytest.raises(ValueError, match="does not run"):
        check_spec(ServerSpec("healthy", gpu="B200", flags=(("--attention-backend", "fa3"),)))
    config = config_for(ServerSpec("healthy", gpu="H100"))
    assert apply_flags(config, {"--attention-backend": "fa3"}).knobs.attention_backend == "fa3"


def test_dp_attention_needs_tp_divisible_by_dp():
    config = config_for(ServerSpec("healthy"))
    config = replace(config, knobs=replace(config.knobs, tp_size=4))
    with pytest.raises(ValueError, match="divisible"):
        apply_flags(config, {"--dp-size": "3", "--enable-dp-attention": "true"})


def test_h20_defaults_to_fa3_whose_decode_is_slower_than_flashinfer():
    fa3 = ServerModel(config_for(ServerSpec("healthy", gpu="H20")))
    fi = ServerModel(config_for(ServerSpec("healthy", gpu="H20", flags=(
        ("--attention-backend", "flashinfer"),))))  # fmt: skip
    assert fa3.knobs.attention_backend == "fa3"
    assert fa3.engine.decode_seconds(64, 64 * 12000) > fi.engine.decode_seconds(64, 64 * 12000)
