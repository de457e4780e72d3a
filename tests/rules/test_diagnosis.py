"""low_throughput: the guide's Low Throughput tree, first failing check named."""

from helpers import evaluate, window_from
from sglang_tuner.rules.diagnosis import LOW_THROUGHPUT
from sglang_tuner.values import Finding, NoData, Pass, ServerConfig

H100_FA3 = ServerConfig(
    gpu_model="NVIDIA H100 80GB HBM3",
    attention_backend="fa3",
    cuda_graph_max_bs=256,
    schedule_conservativeness=1.0,
)


def _busy(**series):
    base = {
        "num_running_reqs": "100x20",
        "gen_throughput": "2000x20",
        "cuda_graph_pass_ratio": "1x20",
    }
    return window_from(**{**base, **series})


def test_low_throughput_names_token_usage_first():
    view = _busy(token_usage="0.5x20", num_queue_reqs="40x20")
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3)
    assert isinstance(out, Finding)
    assert out.evidence.startswith(
        "first failing check: Check Token Usage (scheduler_too_conservative)"
    )
    assert out.evidence.endswith("gen throughput p50 2000 tok/s")
    assert out.action.text == "--schedule-conservativeness 1 -> 0.7"


def test_low_throughput_empty_queue_is_the_clients_problem():
    view = _busy(token_usage="0.5x20", num_queue_reqs="0x20")
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3)
    assert isinstance(out, Finding)
    assert "Check Queue Size (queue_empty)" in out.evidence
    assert out.action.text.startswith("client: submit requests faster")


def test_low_throughput_then_cuda_graph():
    view = _busy(token_usage="0.95x20", num_queue_reqs="40x20", cuda_graph_pass_ratio="0.1x20")
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3)
    assert isinstance(out, Finding) and "Check CUDA Graph" in out.evidence
    assert out.action.text == "--cuda-graph-max-bs 256 -> 512"


def test_low_throughput_then_attention_backend():
    config = ServerConfig(
        gpu_model="NVIDIA H100 80GB HBM3", attention_backend="triton", cuda_graph_max_bs=256
    )
    view = _busy(token_usage="0.95x20", num_queue_reqs="40x20")
    out = evaluate(LOW_THROUGHPUT, view, config=config)
    assert isinstance(out, Finding) and "Check Attention Backend" in out.evidence
    assert out.action.text == "--attention-backend triton -> fa3"


def test_low_throughput_silent_when_every_check_passes():
    view = _busy(token_usage="0.95x20", num_queue_reqs="40x20")
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3)
    assert isinstance(out, Pass) and out.detail == "every Low Throughput check passed"


def test_low_throughput_silent_when_throughput_meets_expectation():
    view = _busy(token_usage="0.5x20", num_queue_reqs="40x20")
    thresholds = {"expected_gen_throughput": 2200.0, "low_throughput_ratio": 0.8}
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3, thresholds=thresholds)
    assert isinstance(out, Pass)


def test_low_throughput_no_data_when_idle():
    view = window_from(num_running_reqs="0x20", token_usage="0x20", num_queue_reqs="0x20")
    out = evaluate(LOW_THROUGHPUT, view, config=H100_FA3)
    assert isinstance(out, NoData) and "idle" in out.reason


def test_low_throughput_no_data_lists_unjudged_checks():
    view = window_from(num_running_reqs="100x20")
    out = evaluate(LOW_THROUGHPUT, view, config=None, config_error="http_401")
    assert isinstance(out, NoData)
    assert "Check Token Usage: signal token_usage is not exposed" in out.reason
    assert "Check CUDA Graph:" in out.reason


def test_low_throughput_is_a_throughput_rule():
    assert "online" not in LOW_THROUGHPUT.profiles
