"""prefill_oom and decode_oom (OOM lines from the SGLang log)."""

from dataclasses import replace

from helpers import evaluate, window_from
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import WindowSummary
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass, Prediction
from sglang_tuner.model.flags import FlagHistory, FlagOutcome
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import PREFILL_OOM_EVENTS
from sglang_tuner.predict.server_model import CRASHES
from sglang_tuner.rules.oom import DECODE_OOM, PREFILL_OOM
from sglang_tuner.sources.server_info import parse_server_info

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


def test_prefill_oom_at_2048_lowers_mem_fraction_as_the_guide_does():
    config = ServerConfig(chunked_prefill_size=2048, mem_fraction_static=0.9)
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.9 -> 0.8"
    assert out.action.note == "--chunked-prefill-size is already 2048, the guide's floor"
    assert out.action.prediction is not None
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 1.0)


def test_prefill_oom_at_2048_and_mem_fraction_0_7_has_no_flag_left():
    config = ServerConfig(chunked_prefill_size=2048, mem_fraction_static=0.7)
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.flag is None
    assert out.action.text.startswith(
        "--chunked-prefill-size is already 2048; --mem-fraction-static is already 0.7"
    )
    assert out.action.prediction is not None and out.action.prediction.gain is None


def test_prefill_oom_chunking_disabled_goes_to_4096():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=-1))
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size -1 -> 4096"


def test_prefill_oom_unknown_value_assumes_gpu_default():
    config = ServerConfig(gpu_model="NVIDIA H100 80GB HBM3")
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size 8192 -> 4096"
    assert out.action.note.endswith("assumed SGLang's default 8192")


def test_prefill_oom_unknown_value_assumes_the_default_of_the_servers_version():
    # An L40S (48 GB) defaults to 8192 up to 0.5.2 and to 4096 from 0.5.3.
    old, new = (ServerConfig(gpu_model="NVIDIA L40S", version=v) for v in ("0.5.2", "0.5.3"))
    assert evaluate(PREFILL_OOM, PREFILL_CRASH, config=old).action.text == (
        "--chunked-prefill-size 8192 -> 4096"
    )
    assert evaluate(PREFILL_OOM, PREFILL_CRASH, config=new).action.text == (
        "--chunked-prefill-size 4096 -> 2048"
    )


def test_prefill_oom_under_dp_attention_speaks_the_flags_units():
    # Unset on an H100: 8192, which SGLang divides over the 8 attention-DP ranks (1024 each).
    # The flag is 8192, not 1024: not at the guide's floor, and 4096 halves each rank's chunk.
    config = ServerConfig(
        gpu_model="NVIDIA H100 80GB HBM3",
        version="0.5.9",
        dp_size=8,
        enable_dp_attention=True,
        mem_fraction_static=0.9,
    )
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=config)
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size 8192 -> 4096"
    assert out.action.suggested == "4096"
    assert "over the 8 attention-DP ranks: 512 each" in out.action.note


def test_prefill_oom_reads_the_reported_quotient_back_as_the_flag():
    # /server_info of a DP-attention server started with --chunked-prefill-size 16384 reports
    # 16384 // 8 = 2048 (0.4.10 server_args.py); the advice lowers the flag, not the quotient.
    body = {"version": "0.4.10", "dp_size": 8, "tp_size": 8, "enable_dp_attention": True,
            "chunked_prefill_size": 2048, "mem_fraction_static": 0.85}  # fmt: skip
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=parse_server_info(body))
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size 16384 -> 4096"
    assert "already" not in out.action.note


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


# -- the prediction a crash fix carries ---------------------------------------------------------
APPLIED_4096 = Change(
    target="t", at=10.0, kind="flags", before={"--chunked-prefill-size": "unset"},
    after={"--chunked-prefill-size": "4096"}, rule="prefill_oom", profile="offline",
    before_window=WindowSummary(0.0, 0.0, {}, {}), due=0.0,
)  # fmt: skip


def test_prefill_oom_predicts_the_crashes_stop_from_a_reported_value():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=ServerConfig(chunked_prefill_size=8192))
    assert isinstance(out, Finding) and out.severity is None  # the rule's: critical
    assert out.action.prediction == Prediction(
        CRASHES, 1.0, 1.0, 1.0, "1 CUDA out-of-memory crash(es) during prefill in the window"
    )
    assert out.action.expected.startswith("-100 % crashes")


def test_prefill_oom_is_less_sure_when_todays_value_is_unknown():
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=None, config_error="timeout")
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 0.0)
    assert "today's value unknown" in out.action.prediction.basis


def test_prefill_oom_applied_and_crashing_again_predicts_nothing():
    # 4096 was applied at 10 s (the value unknown to /server_info): the crash at 25 s came after
    view = window_from(prefill_oom_events="0x5 1 0x4")
    out = evaluate(PREFILL_OOM, view, config=None, config_error="503", changes=(APPLIED_4096,))
    assert isinstance(out, Finding) and out.action.text == "--chunked-prefill-size ? -> 4096"
    assert out.action.prediction is not None and out.action.prediction.gain is None
    assert out.action.prediction.basis == (
        "--chunked-prefill-size unset -> 4096 was applied: that change did not stop the crashes"
    )
    assert "did not stop the crashes" in out.action.note


def test_prefill_oom_applied_before_the_last_crash_still_claims_the_fix():
    late = replace(APPLIED_4096, at=100.0)  # applied after every crash in the window
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=None, config_error="503", changes=(late,))
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.gain == 1.0


def test_prefill_oom_value_that_crashed_before_predicts_nothing():
    crashed = FlagOutcome(4096, 5.0, PREFILL_OOM_EVENTS)
    history = FlagHistory(failing={"chunked_prefill_size": crashed})
    out = evaluate(PREFILL_OOM, PREFILL_CRASH, config=None, config_error="x", history=history)
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.gain is None
    assert out.action.prediction.basis.startswith("the server crashed with --chunked-prefill-size")


def test_decode_oom_predicts_the_crashes_stop():
    out = evaluate(DECODE_OOM, DECODE_CRASH, config=ServerConfig(max_running_requests=256))
    assert isinstance(out, Finding) and out.action.prediction is not None
    assert out.action.prediction.objective == CRASHES
    assert (out.action.prediction.gain, out.action.prediction.low) == (1.0, 1.0)


def test_no_max_running_cap_when_one_request_alone_ran_out():
    # An idle server (one request at a time) whose request ran out of memory: a cap of 1 would
    # change nothing the crash depended on. Before: "--max-running-requests 4096 -> 1".
    config = ServerConfig(version="0.5.23", max_running_requests=4096, gpu_model="NVIDIA L4")
    for batch in ("0x9 1", "1x10"):
        view = window_from(decode_oom_events="0x9 1", num_running_reqs_max_rank=batch)
        out = evaluate(DECODE_OOM, view, config=config)
        assert isinstance(out, Finding) and out.action.suggested is None
        assert out.action.text.startswith("no --max-running-requests cap")
    busy = window_from(decode_oom_events="0x9 1", num_running_reqs_max_rank="200x10")
    out = evaluate(DECODE_OOM, busy, config=config)
    assert isinstance(out, Finding) and out.action.text == "--max-running-requests 4096 -> 150"
