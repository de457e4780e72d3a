"""cuda_graph_capture_oom, kv_pool_exhausted and startup_not_enough_memory: one fix per kind."""

from dataclasses import replace

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.flags import FlagHistory, FlagOutcome
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.predict.server_model import CRASHES
from sglang_tuner.rules.crashes import (
    ALLOCATOR_BUG,
    CUDA_GRAPH_CAPTURE_OOM,
    KV_POOL_EXHAUSTED,
    STARTUP_NOT_ENOUGH_MEMORY,
)
from sglang_tuner.rules.memory import MEM_FRACTION_TOO_HIGH
from sglang_tuner.sources.log.lines import scan_lines
from sglang_tuner.sources.server_info import parse_server_info

H100 = "NVIDIA H100 80GB HBM3"
CAPTURE_CRASH = window_from(cuda_graph_capture_oom_events="0x3 1 0x2")
POOL_CRASH = window_from(kv_pool_exhausted_events="0x5 1 0x4", num_running_reqs_max_rank="160x10")
STARTUP_CRASH = window_from(startup_not_enough_memory_events="1")


def test_capture_oom_goes_back_to_the_last_graph_size_that_served():
    config = ServerConfig(version="0.5.23", cuda_graph_max_bs=512, gpu_model=H100)
    history = FlagHistory(safe={"cuda_graph_max_bs": FlagOutcome(256, 0.0)})
    out = evaluate(CUDA_GRAPH_CAPTURE_OOM, CAPTURE_CRASH, config=config, history=history)
    assert isinstance(out, Finding)
    assert out.action.text == "--cuda-graph-max-bs-decode 512 -> 256"
    assert "as it did without crashing" in out.action.expected


def test_capture_oom_without_history_halves_to_a_captured_size():
    config = ServerConfig(version="0.5.9", cuda_graph_max_bs=400, gpu_model=H100)
    out = evaluate(CUDA_GRAPH_CAPTURE_OOM, CAPTURE_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--cuda-graph-max-bs 400 -> 200"  # 200 is on the grid (16..256 by 8)
    assert "graph buffers about 50% of those that ran out" in out.action.expected


def test_capture_oom_blames_the_value_it_crashed_with_not_todays():
    config = ServerConfig(version="0.5.9", cuda_graph_max_bs=160, gpu_model=H100)
    history = FlagHistory(failing={"cuda_graph_max_bs": FlagOutcome(320, 0.0, "x")})
    out = evaluate(CUDA_GRAPH_CAPTURE_OOM, CAPTURE_CRASH, config=config, history=history)
    assert isinstance(out, Finding) and out.action.text == "--cuda-graph-max-bs 320 -> 160"


def test_capture_oom_unset_flag_starts_from_sglangs_default():
    config = ServerConfig(version="0.5.9", gpu_model=H100, tp_size=1)
    out = evaluate(CUDA_GRAPH_CAPTURE_OOM, CAPTURE_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.current is not None
    assert int(out.action.suggested or 0) <= int(out.action.current) // 2


def test_capture_oom_needs_the_log():
    assert isinstance(evaluate(CUDA_GRAPH_CAPTURE_OOM, window_from(num_running_reqs="1x8")), NoData)
    quiet = window_from(cuda_graph_capture_oom_events="0x8")
    assert isinstance(evaluate(CUDA_GRAPH_CAPTURE_OOM, quiet), Pass)


def test_kv_pool_exhausted_lowers_the_batch_and_warns_off_a_smaller_pool():
    config = ServerConfig(max_running_requests=200)
    out = evaluate(KV_POOL_EXHAUSTED, POOL_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--max-running-requests 200 -> 120"  # 160 ran out, a quarter below
    assert "do not lower --mem-fraction-static" in out.action.note


def test_kv_pool_exhaustion_alone_never_lowers_mem_fraction():
    view = window_from(kv_pool_exhausted_events="0x5 1 0x4", restarts="0x5 1 0x4")
    config = ServerConfig(mem_fraction_static=0.85)
    out = evaluate(MEM_FRACTION_TOO_HIGH, view, config=config)
    assert not isinstance(out, Finding)


def test_startup_not_enough_memory_raises_mem_fraction_by_a_step():
    config = ServerConfig(mem_fraction_static=0.7, gpu_model=H100)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.7 -> 0.75"
    assert out.action.expected.endswith(
        "the server starts: about 4.0 GB more for weights and the KV pool"
    )


def test_startup_not_enough_memory_with_the_value_unknown_sets_no_value():
    # Before: "--mem-fraction-static: raise by 0.05" with the machine value "+0.05", which
    # SGLang's argparse reads as 0.05: a server restarted with it never starts.
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=None)
    assert isinstance(out, Finding)
    assert out.action.flag == "--mem-fraction-static" and out.action.suggested is None
    assert out.action.flags() == {}
    assert "read mem_fraction_static from the log's 'Current value' line" in out.action.text


def test_startup_not_enough_memory_takes_the_value_sglangs_own_message_names():
    # check --log on the failed start alone: SGLang's message names the fraction it ran with
    # (0.5.17+ model_runner: "Current value: mem_fraction_static=0.6").
    line = (
        "[2026-01-05 10:00:00] RuntimeError: Not enough memory. Please try to increase "
        "--mem-fraction-static. Current value: mem_fraction_static=0.6"
    )
    args = scan_lines([line]).server_args
    assert args is not None
    config = replace(parse_server_info(args), gpu_model="NVIDIA L4")
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.6 -> 0.65"
    assert out.action.suggested == "0.65"


def test_startup_not_enough_memory_below_zero_lowers_the_chunk_that_ate_the_card():
    # SGLang 0.5.17 on a 24 GB L4 with --chunked-prefill-size 16384 and the fraction unset: its
    # memory settings reserve 0.5 + 16384 x 1.5 MB = 24.5 GB, so its own fraction is negative
    line = (
        "[2026-01-05 10:00:00] RuntimeError: Not enough memory. Please try to increase "
        "--mem-fraction-static. Current value: mem_fraction_static=-0.12"
    )
    args = scan_lines([line]).server_args
    assert args is not None and args["mem_fraction_static"] == -0.12
    config = replace(
        parse_server_info(args), version="0.5.17", gpu_model="NVIDIA L4", chunked_prefill_size=16384
    )
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size 16384 -> 2048"  # SGLang's own for an L4
    assert "SGLang's own --mem-fraction-static came out at -0.12" in out.action.expected
    assert "(24.5 GB of a 24 GB GPU)" in out.action.expected
    # never a negative fraction as the value to restart with
    assert all(not v.startswith("-") for v in out.action.flags().values())


def test_startup_between_a_fraction_too_low_and_one_too_high_names_the_other_levers():
    history = FlagHistory(
        failing={"mem_fraction_static": FlagOutcome(0.85, 10.0, "decode_oom_events")},
        failing_low={
            "mem_fraction_static": FlagOutcome(0.84, 20.0, "startup_not_enough_memory_events", True)
        },
    )
    config = ServerConfig(version="0.5.23", mem_fraction_static=0.84)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config, history=history)
    assert isinstance(out, Finding) and out.action.suggested is None
    for lever in ("--context-length", "--cuda-graph-max-bs-decode", "draft model", "fp8"):
        assert lever in out.action.text


def test_startup_not_enough_memory_at_the_ceiling_says_the_model_does_not_fit():
    config = ServerConfig(mem_fraction_static=0.95)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.flag is None
    assert "--tp-size" in out.action.text and "--quantization fp8" in out.action.text


def test_startup_not_enough_memory_takes_the_fraction_sglang_asks_for():
    window = window_from(startup_not_enough_memory_events="1", mem_fraction_required="0.942")
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, window, config=ServerConfig(mem_fraction_static=0.9))
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.9 -> 0.95"
    assert "another process" in out.action.note


def test_startup_not_enough_memory_past_the_ceiling_when_sglang_asks_for_more():
    window = window_from(startup_not_enough_memory_events="1", mem_fraction_required="0.9611")
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, window, config=ServerConfig(mem_fraction_static=0.9))
    assert isinstance(out, Finding)
    assert out.action.flag is None and "does not fit" in out.action.text


def test_allocator_bug_changes_no_flag():
    out = evaluate(ALLOCATOR_BUG, window_from(allocator_bug_events="0 1 0"))
    assert isinstance(out, Finding)
    assert out.action.flag is None and out.action.text.startswith("not a tuning problem")
    assert isinstance(evaluate(ALLOCATOR_BUG, window_from(allocator_bug_events="0x3")), Pass)


def test_startup_raise_never_reaches_a_fraction_that_ran_out_of_gpu_memory():
    # 0.85 hit a CUDA OOM, then 0.84 found no room for the KV pool: nothing fits between
    history = FlagHistory(
        failing={"mem_fraction_static": FlagOutcome(0.85, 10.0, "cuda_graph_capture_oom_events")},
        failing_low={
            "mem_fraction_static": FlagOutcome(0.84, 20.0, "startup_not_enough_memory_events", True)
        },
    )
    config = ServerConfig(mem_fraction_static=0.84, gpu_model=H100)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config, history=history)
    assert isinstance(out, Finding) and out.action.flag is None
    assert "below 0.85, which ran out of GPU memory" in out.action.text
    # 0.80 too low, 0.85 out of memory: the raise stops below 0.85
    history = FlagHistory(
        failing=history.failing,
        failing_low={
            "mem_fraction_static": FlagOutcome(0.8, 20.0, "startup_not_enough_memory_events", True)
        },
    )
    config = ServerConfig(mem_fraction_static=0.8, gpu_model=H100)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config, history=history)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.8 -> 0.84"


# -- the prediction a crash fix carries ---------------------------------------------------------
def test_capture_oom_predicts_the_crashes_stop():
    config = ServerConfig(version="0.5.23", cuda_graph_max_bs=512, gpu_model=H100)
    history = FlagHistory(safe={"cuda_graph_max_bs": FlagOutcome(256, 0.0)})
    out = evaluate(CUDA_GRAPH_CAPTURE_OOM, CAPTURE_CRASH, config=config, history=history)
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.objective == CRASHES
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 1.0)


def test_kv_pool_exhausted_predicts_the_crashes_stop():
    out = evaluate(KV_POOL_EXHAUSTED, POOL_CRASH, config=ServerConfig(max_running_requests=200))
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.gain == 1.0
    assert out.action.prediction.basis.startswith("1 crash(es): SGLang's KV or request pool")


def test_startup_not_enough_memory_is_sure_only_with_sglangs_own_figure():
    window = window_from(startup_not_enough_memory_events="1", mem_fraction_required="0.942")
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, window, config=ServerConfig(mem_fraction_static=0.9))
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 1.0)
    assert out.action.prediction.basis.endswith("SGLang asked for a fraction above 0.942")
    config = ServerConfig(mem_fraction_static=0.7, gpu_model=H100)
    out = evaluate(STARTUP_NOT_ENOUGH_MEMORY, STARTUP_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 0.0)


def test_allocator_bug_predicts_nothing_and_says_why():
    out = evaluate(ALLOCATOR_BUG, window_from(allocator_bug_events="0 1 0"))
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.gain is None
    assert out.action.prediction.basis.startswith("an allocator bug or leak")


def test_kv_pool_exhausted_by_one_request_sets_no_cap():
    # SGLang's own pool ran out with one request running: "--max-running-requests 4096 -> 1"
    # would change nothing; the note still forbids shrinking the pool.
    view = window_from(kv_pool_exhausted_events="0x9 1", num_running_reqs_max_rank="1x10")
    out = evaluate(KV_POOL_EXHAUSTED, view, config=ServerConfig(max_running_requests=4096))
    assert isinstance(out, Finding) and out.action.suggested is None
    assert out.action.text.startswith("no --max-running-requests cap: at most one request")
    assert "lower --mem-fraction-static" not in out.action.text
