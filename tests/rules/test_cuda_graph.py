"""cuda_graph_not_covering and torch_compile_small_batch."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.cuda_graph import (
    CUDA_GRAPH_NOT_COVERING,
    TORCH_COMPILE_SMALL_BATCH,
    graph_flag,
)
from sglang_tuner.sources.log.lines import scan_lines

BIG_BATCH = window_from(num_running_reqs_max_rank="300x20", cuda_graph_pass_ratio="0.3x20")
GRAPH_256 = ServerConfig(version="0.5.9", cuda_graph_max_bs=256, mem_fraction_static=0.88)


def test_cuda_graph_not_covering_fires_when_batch_exceeds_max_bs():
    out = evaluate(CUDA_GRAPH_NOT_COVERING, BIG_BATCH, config=GRAPH_256)
    assert isinstance(out, Finding)
    # the p99 batch (300) rounded up to a captured size, paid for with less static memory
    assert out.action.text == "--cuda-graph-max-bs 256 -> 304, --mem-fraction-static 0.88 -> 0.86"
    assert out.action.flags() == {"--cuda-graph-max-bs": "304", "--mem-fraction-static": "0.86"}
    assert "p99 batch 300" in out.action.expected
    # the companion shrinks the pool: the text leaves throughput to the prediction
    assert "higher throughput" not in out.action.expected
    assert "is the prediction's" in out.action.expected
    assert out.evidence.startswith(
        "running batch per rank above the CUDA-graph max bs 256 in 100% of 20 samples"
    )


def test_cuda_graph_not_covering_uses_renamed_flag_from_0_5_14():
    config = ServerConfig(version="0.5.14", cuda_graph_max_bs=256, mem_fraction_static=0.88)
    out = evaluate(CUDA_GRAPH_NOT_COVERING, BIG_BATCH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text.startswith("--cuda-graph-max-bs-decode 256 -> 304")


def test_graph_flag_by_version():
    assert graph_flag("0.5.13") == "--cuda-graph-max-bs"
    assert graph_flag("v0.5.14.post1") == "--cuda-graph-max-bs-decode"
    assert graph_flag(None) == "--cuda-graph-max-bs-decode"  # unknown: the newest spelling


def test_cuda_graph_not_covering_sizes_to_the_batches_seen_not_the_guides_512():
    # 90 % of batches are at most 137: one step to the captured size above the p99, not 512
    view = window_from(num_running_reqs_max_rank="100x9 137x9 60x2", cuda_graph_pass_ratio="0.2x20")
    config = ServerConfig(version="0.5.9", cuda_graph_max_bs=32, mem_fraction_static=0.88)
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config)
    assert isinstance(out, Finding) and out.action.suggested == "144"


def test_cuda_graph_not_covering_no_memory_change_when_startup_left_plenty_free():
    view = window_from(num_running_reqs_max_rank="300x20", startup_available_gpu_mem_gb="12x20")
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=GRAPH_256)
    assert isinstance(out, Finding)
    assert out.action.text == "--cuda-graph-max-bs 256 -> 304" and out.action.companions == ()
    assert "12.0 GB covers the extra graphs" in out.action.note


def test_cuda_graph_not_covering_caps_at_768_for_larger_batches():
    view = window_from(num_running_reqs_max_rank="900x20")
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=GRAPH_256)
    assert isinstance(out, Finding) and out.action.suggested == "768"


def test_cuda_graph_not_covering_never_beyond_768():
    config = ServerConfig(version="0.5.9", cuda_graph_max_bs=768)
    out = evaluate(
        CUDA_GRAPH_NOT_COVERING, window_from(num_running_reqs_max_rank="900x20"), config=config
    )
    assert isinstance(out, Finding) and out.action.flag is None
    assert (
        out.action.text == "--cuda-graph-max-bs is already 768: lower --max-running-requests to 768"
    )


def test_cuda_graph_not_covering_from_pass_ratio_with_unknown_max_bs():
    view = window_from(cuda_graph_pass_ratio="0.2x20")
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=None, config_error="http_401")
    assert isinstance(out, Finding)
    # version unknown too: the newest spelling, and the note says so
    assert out.action.text == "--cuda-graph-max-bs-decode ? -> 512"
    assert out.action.note.startswith("current value unknown (http_401); no running-batch sizes")
    assert "decode passes ran without a CUDA graph" in out.evidence


def test_cuda_graph_not_covering_from_log_false_ratio():
    view = window_from(cuda_graph_false_ratio="0.9x20", num_running_reqs="40x20")
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view)
    assert isinstance(out, Finding) and "'cuda graph: False'" in out.evidence


def test_cuda_graph_not_covering_from_the_log_covers_the_batches_that_ran_without_a_graph():
    """A log's samples keep each interval's latest batch line (here 28, inside the graphs);
    the lines that said `cuda graph: False` ran 46: the size suggested covers them."""
    view = window_from(
        cuda_graph_false_ratio="0.7x20", num_running_reqs="28x20", eager_batch_max="46x20"
    )
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view)
    assert isinstance(out, Finding) and out.action.suggested is not None
    assert int(out.action.suggested) >= 46


def test_a_log_of_decode_lines_without_a_graph_suggests_graphs_that_cover_them():
    lines = [
        f"[2025-11-11 04:06:{27 + k}] Decode batch, #running-req: {n}, #token: 30000, token "
        f"usage: 0.19, cuda graph: {graph}, gen throughput (token/s): 1447.08, #queue-req: 0"
        for k, (n, graph) in enumerate([(46, False), (36, False), (28, True)])
    ]
    counts = scan_lines(lines)
    assert (counts.decode_without_graph, counts.eager_batch_max) == (2, 46)


def test_cuda_graph_not_covering_disabled_graph_says_reenable():
    config = ServerConfig(disable_cuda_graph=True, cuda_graph_max_bs=256)
    view = window_from(cuda_graph_pass_ratio="0x20", num_running_reqs_max_rank="10x20")
    out = evaluate(CUDA_GRAPH_NOT_COVERING, view, config=config)
    assert isinstance(out, Finding)
    assert out.action.text.startswith("re-enable CUDA graphs")


def test_cuda_graph_not_covering_silent_when_covered():
    view = window_from(num_running_reqs_max_rank="100x20", cuda_graph_pass_ratio="1x20")
    assert isinstance(evaluate(CUDA_GRAPH_NOT_COVERING, view, config=GRAPH_256), Pass)


def test_cuda_graph_not_covering_silent_when_occasional():
    view = window_from(num_running_reqs_max_rank="300x5 100x15")
    assert isinstance(evaluate(CUDA_GRAPH_NOT_COVERING, view, config=GRAPH_256), Pass)


def test_cuda_graph_not_covering_no_data_without_any_coverage_signal():
    out = evaluate(CUDA_GRAPH_NOT_COVERING, window_from(num_running_reqs="300x20"))
    assert isinstance(out, NoData)
    assert "SGLang >= 0.5.7" in out.reason and "log_file" in out.reason


def test_cuda_graph_not_covering_no_data_with_too_few_samples():
    out = evaluate(CUDA_GRAPH_NOT_COVERING, window_from(cuda_graph_pass_ratio="0x4"))
    assert isinstance(out, NoData) and "4 of the 6" in out.reason


SMALL = ServerConfig(model_path="meta-llama/Llama-3.1-8B-Instruct", enable_torch_compile=False)


def test_torch_compile_small_batch_fires_for_small_model_and_batches():
    out = evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="8x20"), config=SMALL)
    assert isinstance(out, Finding)
    assert out.action.flag == "--enable-torch-compile"
    assert out.action.text == (
        "add --enable-torch-compile, and export TORCHINDUCTOR_CACHE_DIR=/var/cache/sglang/"
        "torchinductor so the compile cache survives /tmp cleanup"
    )
    assert out.evidence.startswith("8B-parameter model; running batch per rank <= 32")


def test_torch_compile_small_batch_silent_for_large_model():
    config = ServerConfig(
        model_path="meta-llama/Llama-3.3-70B-Instruct", enable_torch_compile=False
    )
    assert isinstance(
        evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="8x20"), config=config),
        Pass,
    )


def test_torch_compile_small_batch_silent_for_large_batches():
    assert isinstance(
        evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="200x20"), config=SMALL),
        Pass,
    )


def test_torch_compile_small_batch_silent_when_compile_on():
    config = ServerConfig(model_path="Qwen/Qwen2.5-0.5B", enable_torch_compile=True)
    assert isinstance(
        evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="8x20"), config=config),
        Pass,
    )


def test_torch_compile_small_batch_no_data_without_config():
    out = evaluate(
        TORCH_COMPILE_SMALL_BATCH,
        window_from(num_running_reqs="8x20"),
        config=None,
        config_error="http_401",
    )
    assert isinstance(out, NoData) and out.reason == "torch.compile unknown (http_401)"


def test_torch_compile_small_batch_no_data_when_model_size_unknown():
    config = ServerConfig(model_path="/models/my-finetune", enable_torch_compile=False)
    out = evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="8x20"), config=config)
    assert isinstance(out, NoData) and "model size unknown" in out.reason


def test_torch_compile_small_batch_no_data_when_idle():
    out = evaluate(TORCH_COMPILE_SMALL_BATCH, window_from(num_running_reqs="0x20"), config=SMALL)
    assert isinstance(out, NoData) and "idle" in out.reason
