"""prefill_oom and decode_oom (OOM lines from the SGLang log)."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.oom import DECODE_OOM, PREFILL_OOM

PREFILL_CRASH = window_from(prefill_oom_events="0x5 1 0x4")
DECODE_CRASH = window_from(decode_oom_events="0x5 2 0x4", num_running_reqs_max_rank="100x5 200x5")


def test_prefill_oom_fires_and_halves_toward_4096():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=8192))
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size 8192 -> 4096"
    assert out.evidence == "1 CUDA out-of-memory crash(es) during prefill in the window"
    assert out.confidence is Confidence.HIGH


def test_prefill_oom_second_step_is_2048():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=4096))
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size 4096 -> 2048"


def test_prefill_oom_at_2048_points_at_mem_fraction():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=2048))
    assert isinstance(out, Finding) and out.action.flag is None
    assert "--mem-fraction-static" in out.action.text


def test_prefill_oom_chunking_disabled_goes_to_4096():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=-1))
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size -1 -> 4096"


def test_prefill_oom_unknown_value_assumes_gpu_default():
    config = ServerConfig(gpu_model="NVIDIA H100 80GB HBM3")
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size 8192 -> 4096"
    assert out.action.note.endswith("assumed SGLang's default 8192")


def test_prefill_oom_unknown_value_and_gpu():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=None, config_error="timeout")
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size ? -> 4096"
    assert out.action.note == "current value unknown (timeout)"


def test_prefill_oom_fires_on_a_single_sample():
    out = evaluate(PREFILL_OOM, window_from(prefill_oom_events="1"))
    assert isinstance(out, Finding)


def test_prefill_oom_silent_without_oom_lines():
    assert isinstance(evaluate(PREFILL_OOM, window_from(prefill_oom_events="0x10")), Pass)


def test_prefill_oom_no_data_asks_for_log_file():
    out = evaluate(PREFILL_OOM, window_from(num_running_reqs="1x10"))
    assert isinstance(out, NoData) and "set the target's log_file" in out.reason


def test_decode_oom_fires_below_the_p90_batch():
    out = evaluate(DECODE_OOM, DECODE_CRASH, config=ServerConfig(max_running_requests=256))
    assert isinstance(out, Finding)
    # p90 per-rank batch 200, a quarter below: 150
    assert out.action.text == "--max-running-requests 256 -> 150"
    assert out.evidence == "2 CUDA out-of-memory crash(es) during decode in the window"


def test_decode_oom_never_suggests_above_current():
    out = evaluate(DECODE_OOM, DECODE_CRASH, config=ServerConfig(max_running_requests=120))
    assert isinstance(out, Finding) and out.action.text == "--max-running-requests 120 -> 90"


def test_decode_oom_per_rank_from_total_and_dp_ranks():
    view = window_from(decode_oom_events="1x6", num_running_reqs="400x6", num_dp_ranks="2x6")
    out = evaluate(DECODE_OOM, view, config=ServerConfig(max_running_requests=256))
    assert isinstance(out, Finding) and out.action.text == "--max-running-requests 256 -> 150"


def test_decode_oom_unknown_value_noted():
    out = evaluate(DECODE_OOM, DECODE_CRASH, config=None, config_error="http_401")
    assert isinstance(out, Finding)
    assert out.action.text == "--max-running-requests ? -> 150"
    assert out.action.note == "current value unknown (http_401)"


def test_decode_oom_without_batch_or_value_says_so():
    out = evaluate(DECODE_OOM, window_from(decode_oom_events="1x6"), config=None, config_error="x")
    assert isinstance(out, Finding)
    assert out.action.text == "--max-running-requests: lower it"
    assert out.action.note == "x"


def test_decode_oom_silent_without_oom_lines():
    assert isinstance(evaluate(DECODE_OOM, window_from(decode_oom_events="0x10")), Pass)


def test_decode_oom_no_data_asks_for_log_file():
    out = evaluate(DECODE_OOM, window_from(num_running_reqs="1x10"))
    assert isinstance(out, NoData) and "log_file" in out.reason
