"""prefer_data_parallel and attention_backend_for_gpu."""

import pytest
from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.parallelism import ATTENTION_BACKEND_FOR_GPU, PREFER_DATA_PARALLEL

VIEW = window_from(num_running_reqs="10x10", num_queue_reqs="40x10")  # saturated: a queue
H100 = "NVIDIA H100 80GB HBM3"


def test_prefer_data_parallel_fires_when_model_fits_one_gpu():
    config = ServerConfig(model_path="meta-llama/Llama-3.1-8B-Instruct", tp_size=2, gpu_model=H100)
    out = evaluate(PREFER_DATA_PARALLEL, VIEW, config=config)
    assert isinstance(out, Finding)
    # the Model Gateway first, as the guide says; --dp-size as the one-launch form
    assert out.action.text == (
        "serve 2 tp-1 replicas behind the SGLang Model Gateway (router); in one launch: "
        "--tp-size 2 -> 1, --dp-size 1 -> 2"
    )
    assert out.action.flags() == {"--tp-size": "1", "--dp-size": "2"}
    assert "the guide prefers the Model Gateway to --dp-size" in out.action.note
    assert "(~16 GB) take 20% of one 80 GB GPU" in out.evidence


def test_prefer_data_parallel_silent_when_the_load_would_not_fill_the_replicas():
    config = ServerConfig(model_path="meta-llama/Llama-3.1-8B-Instruct", tp_size=4, gpu_model=H100)
    idle = window_from(num_running_reqs="3x10", num_queue_reqs="0x10", token_usage="0.1x10")
    out = evaluate(PREFER_DATA_PARALLEL, idle, config=config)
    assert isinstance(out, Pass) and "fill 4 replicas in only 0%" in out.detail
    full = window_from(num_running_reqs="30x10", num_queue_reqs="0x10", token_usage="0.95x10")
    assert isinstance(evaluate(PREFER_DATA_PARALLEL, full, config=config), Finding)
    busy = window_from(num_running_reqs="240x10", num_queue_reqs="0x10", token_usage="0.4x10")
    assert isinstance(evaluate(PREFER_DATA_PARALLEL, busy, config=config), Finding)


def test_prefer_data_parallel_no_data_without_load():
    config = ServerConfig(model_path="meta-llama/Llama-3.1-8B-Instruct", tp_size=4, gpu_model=H100)
    out = evaluate(PREFER_DATA_PARALLEL, window_from(num_running_reqs="3x10"), config=config)
    assert isinstance(out, NoData) and "no load yet" in out.reason


def test_prefer_data_parallel_uses_reported_weight_memory():
    raw = {"internal_states": [{"memory_usage": {"weight": 4.0}}]}
    config = ServerConfig(model_path="/models/x", tp_size=4, gpu_model=H100, raw=raw)
    assert isinstance(evaluate(PREFER_DATA_PARALLEL, VIEW, config=config), Finding)


def test_prefer_data_parallel_silent_when_model_needs_tp():
    config = ServerConfig(model_path="meta-llama/Llama-3.3-70B-Instruct", tp_size=4, gpu_model=H100)
    assert isinstance(evaluate(PREFER_DATA_PARALLEL, VIEW, config=config), Pass)


def test_prefer_data_parallel_silent_on_tp1_and_dp_attention():
    base = {"model_path": "org/M-8B", "gpu_model": H100}
    assert isinstance(
        evaluate(PREFER_DATA_PARALLEL, VIEW, config=ServerConfig(tp_size=1, **base)), Pass
    )
    config = ServerConfig(tp_size=8, enable_dp_attention=True, **base)
    assert isinstance(evaluate(PREFER_DATA_PARALLEL, VIEW, config=config), Pass)


def test_prefer_data_parallel_no_data_without_gpu_or_model_size():
    out = evaluate(
        PREFER_DATA_PARALLEL, VIEW, config=ServerConfig(model_path="org/M-8B", tp_size=2)
    )
    assert isinstance(out, NoData) and "gpu_model or dcgm_url" in out.reason
    out = evaluate(
        PREFER_DATA_PARALLEL, VIEW, config=ServerConfig(model_path="/m", tp_size=2, gpu_model=H100)
    )
    assert isinstance(out, NoData) and "model size unknown" in out.reason
    out = evaluate(PREFER_DATA_PARALLEL, VIEW, config=None, config_error="http_401")
    assert isinstance(out, NoData) and "http_401" in out.reason


def test_prefer_data_parallel_is_a_throughput_rule_and_not_for_long_contexts():
    assert "online" not in PREFER_DATA_PARALLEL.profiles
    assert "long_context" not in PREFER_DATA_PARALLEL.profiles


def _backend(gpu: str, backend: str | None, model: str = "meta-llama/Llama-3.1-8B-Instruct"):
    # a backend the user set shows at the top level of /server_info too
    config = ServerConfig(
        gpu_model=gpu, attention_backend=backend, model_path=model,
        raw={"attention_backend": backend, "version": "0.5.9"}, version="0.5.9",
    )  # fmt: skip
    return evaluate(ATTENTION_BACKEND_FOR_GPU, VIEW, config=config)


def test_attention_backend_for_gpu_hopper_wants_fa3_over_a_slow_backend():
    out = _backend(H100, "triton")
    assert isinstance(out, Finding)
    assert out.action.text == "--attention-backend triton -> fa3"
    assert "on NVIDIA H100 80GB HBM3 (hopper): the guide's choice is fa3" in out.evidence


def test_attention_backend_for_gpu_leaves_flashinfer_alone_on_hopper():
    # measured as fast or faster than fa3 on Hopper (sgl-project/sglang#6066, #5630)
    assert isinstance(_backend(H100, "flashinfer"), Pass)
    assert isinstance(_backend("NVIDIA H20", "flashinfer"), Pass)


def test_attention_backend_for_gpu_h20_suggests_flashinfer():
    out = _backend("NVIDIA H20", "triton")
    assert (
        isinstance(out, Finding) and out.action.text == "--attention-backend triton -> flashinfer"
    )


def test_attention_backend_for_gpu_blackwell_mha():
    out = _backend("NVIDIA B200", "triton")
    assert (
        isinstance(out, Finding) and out.action.text == "--attention-backend triton -> trtllm_mha"
    )


@pytest.mark.parametrize(
    "model", ["deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3.2-Exp"]
)
@pytest.mark.parametrize("gpu", ["NVIDIA B200", H100])
def test_attention_backend_for_gpu_leaves_mla_and_nsa_models_to_sglang(model, gpu):
    # SGLang picks these models' backend itself (the reported value is its own choice)
    out = _backend(gpu, "flashinfer", model)
    assert isinstance(out, Pass) and "MLA/NSA" in out.detail


def test_attention_backend_for_gpu_ampere_and_ada_want_flashinfer():
    out = _backend("NVIDIA A100-SXM4-80GB", "triton")
    assert (
        isinstance(out, Finding) and out.action.text == "--attention-backend triton -> flashinfer"
    )
    assert isinstance(_backend("NVIDIA L40S", "fa3"), Finding)


def test_attention_backend_for_gpu_silent_on_the_right_backend():
    assert isinstance(_backend(H100, "fa3"), Pass)
    assert isinstance(_backend("NVIDIA B200", "trtllm_mha"), Pass)
    assert isinstance(_backend("NVIDIA L4", "flashinfer"), Pass)


def test_attention_backend_for_gpu_leaves_sglangs_own_pick_alone():
    # 0.4.7 - 0.5.4: the scheduler reports the backend it chose while server_args says null
    config = ServerConfig(
        gpu_model=H100, attention_backend="flashinfer", version="0.5.2",
        model_path="meta-llama/Llama-3.1-8B-Instruct", raw={"attention_backend": None},
    )  # fmt: skip
    out = evaluate(ATTENTION_BACKEND_FOR_GPU, VIEW, config=config)
    assert isinstance(out, Pass) and "SGLang's own choice" in out.detail


def test_attention_backend_for_gpu_auto_selected_is_left_alone():
    out = _backend(H100, None)
    assert isinstance(out, Pass) and "auto-selected" in out.detail


def test_attention_backend_for_gpu_no_data_without_gpu_model():
    out = evaluate(ATTENTION_BACKEND_FOR_GPU, VIEW, config=ServerConfig(attention_backend="triton"))
    assert isinstance(out, NoData) and "gpu_model" in out.reason
    out = evaluate(ATTENTION_BACKEND_FOR_GPU, VIEW, config=None, config_error="timeout")
    assert isinstance(out, NoData)
