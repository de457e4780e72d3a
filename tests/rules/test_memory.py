"""mem_fraction_too_low, mem_fraction_too_high and kv_cache_pressure."""

from dataclasses import replace

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.memory import KV_CACHE_PRESSURE, MEM_FRACTION_TOO_HIGH, MEM_FRACTION_TOO_LOW
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb
from sglang_tuner.rules.sglang.mem_fraction import estimate_mem_fraction_static

H100 = "NVIDIA H100 80GB HBM3"


def _startup(free_gb: float, n: int = 10):
    return window_from(startup_available_gpu_mem_gb=f"{free_gb}x{n}", num_running_reqs=f"10x{n}")


def test_mem_fraction_too_low_fires_with_surplus_sized_step():
    config = ServerConfig(mem_fraction_static=0.8, gpu_model=H100)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(15.0), config=config)
    assert isinstance(out, Finding)
    # (15 - 6.5) / 80 = 0.106 -> +0.10
    assert out.action.text == "--mem-fraction-static 0.8 -> 0.9"
    assert out.action.note == ""
    assert "15.00 GB" in out.evidence


def test_mem_fraction_too_low_caps_the_suggestion():
    config = ServerConfig(mem_fraction_static=0.88, gpu_model=H100)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(20.0), config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.88 -> 0.95"


def test_mem_fraction_too_low_falls_back_to_the_lowest_dcgm_free_memory():
    config = ServerConfig(mem_fraction_static=0.8, gpu_model=H100)
    view = window_from(gpu_fb_free_gb="22 18 15 19x7", num_running_reqs="10x10")
    out = evaluate(MEM_FRACTION_TOO_LOW, view, config=config)
    assert isinstance(out, Finding)
    assert out.evidence.startswith("free GPU memory (DCGM), lowest over the window 15.00 GB")
    assert out.action.text == "--mem-fraction-static 0.8 -> 0.9"  # sized from the lowest, 15 GB
    tight = window_from(gpu_fb_free_gb="22 9 15x8", num_running_reqs="10x10")
    assert isinstance(evaluate(MEM_FRACTION_TOO_LOW, tight, config=config), Pass)


def test_mem_fraction_too_low_unknown_gpu_takes_the_smallest_step():
    out = evaluate(
        MEM_FRACTION_TOO_LOW, _startup(12.0), config=ServerConfig(mem_fraction_static=0.8)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.8 -> 0.81"
    assert "GPU memory unknown (set gpu_model or dcgm_url)" in out.action.note


def test_mem_fraction_too_low_unknown_current_value_noted():
    config = ServerConfig(gpu_model=H100)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(15.0), config=config)
    assert isinstance(out, Finding)
    assert out.action.text == (
        "--mem-fraction-static: 0.1 above today's value "
        "(read mem_fraction_static from /server_info or the log's launch line)"
    )
    assert out.action.suggested is None  # never "+0.1": argparse would read it as 0.1
    assert (
        out.action.note
        == "current value unknown (neither /server_info nor the log's launch line said it)"
    )


def test_mem_fraction_too_low_reads_server_info_when_metrics_lack_it():
    config = ServerConfig(
        mem_fraction_static=0.8, gpu_model=H100, startup_available_gpu_mem_gb=15.0
    )
    out = evaluate(MEM_FRACTION_TOO_LOW, window_from(num_running_reqs="1x10"), config=config)
    assert isinstance(out, Finding)


def test_mem_fraction_too_low_silent_in_good_band():
    assert isinstance(evaluate(MEM_FRACTION_TOO_LOW, _startup(6.0)), Pass)
    assert isinstance(evaluate(MEM_FRACTION_TOO_LOW, _startup(9.0)), Pass)


def test_mem_fraction_too_low_no_data_names_sources():
    out = evaluate(MEM_FRACTION_TOO_LOW, window_from(num_running_reqs="1x10"))
    assert isinstance(out, NoData)
    assert "SGLang >= 0.5.11" in out.reason and "log_file" in out.reason


def test_mem_fraction_too_low_leaves_what_the_prefill_chunk_needs():
    # SGLang's memory settings reserve 512 MB + 1.5 MB per chunk token for activations: a
    # 16384-token chunk needs 24.5 GB, so 15 GB free is no surplus at all
    big = ServerConfig(mem_fraction_static=0.8, gpu_model=H100, chunked_prefill_size=16384)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(15.0), config=big)
    assert isinstance(out, Pass) and "24.5 GB is what --chunked-prefill-size 16384" in out.detail
    # 8192 tokens need 12.5 GB: (15 - 12.5) / 80 = +0.03, not the guide's +0.10
    mid = ServerConfig(mem_fraction_static=0.8, gpu_model=H100, chunked_prefill_size=8192)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(15.0), config=mid)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.8 -> 0.83"
    # up to 4096 tokens the guide's 6.5 GB stands
    small = ServerConfig(mem_fraction_static=0.8, gpu_model=H100, chunked_prefill_size=4096)
    out = evaluate(MEM_FRACTION_TOO_LOW, _startup(15.0), config=small)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.8 -> 0.9"


def test_mem_fraction_too_low_estimates_free_memory_from_sglangs_pool_sizing():
    # SGLang 0.4.10 reports no free memory: its pool leaves GPU memory x (1 - fraction) free,
    # less its CUDA graphs (2 MiB per batch size): 80 x 0.58 - 160 x 2 MiB = 46.1 GB
    config = ServerConfig(
        version="0.4.10", mem_fraction_static=0.42, gpu_model=H100, cuda_graph_max_bs=160,
        chunked_prefill_size=8192,
    )  # fmt: skip
    view = window_from(num_running_reqs="10x10")
    out = evaluate(MEM_FRACTION_TOO_LOW, view, config=config)
    assert isinstance(out, Finding) and out.confidence == Confidence.MEDIUM
    assert out.evidence.startswith("free memory estimated from SGLang's pool sizing 46.09 GB")
    # (46.09 - 12.5 GB for the 8192-token chunk) / 80 = +0.41
    assert out.action.text == "--mem-fraction-static 0.42 -> 0.83"
    # without the GPU nothing is estimated
    unknown = evaluate(MEM_FRACTION_TOO_LOW, view, config=replace(config, gpu_model=None))
    assert isinstance(unknown, NoData)


def test_mem_fraction_too_low_on_a_small_card_weighs_the_surplus_against_the_pool():
    l4 = ServerConfig(mem_fraction_static=0.54, gpu_model="NVIDIA L4", chunked_prefill_size=2048)
    # 9.1 GB free is under the guide's 10 GB, but 2.6 GB spare is 65 % more of a 4 GB pool
    small_pool = window_from(
        startup_available_gpu_mem_gb="9.1x10", startup_kv_pool_gb="4.0x10",
        num_running_reqs="10x10", num_queue_reqs="50x10", token_usage="0.95x10",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, small_pool, config=l4)
    assert isinstance(out, Finding)
    assert out.evidence == (
        "startup available_gpu_mem 9.10 GB, 2.6 GB over what a raise leaves: 65% of the 4.0 GB "
        "KV pool"
    )
    assert out.action.text == "--mem-fraction-static 0.54 -> 0.64"  # (9.1 - 6.5) / 24: +0.10
    # the same 9.1 GB beside a 60 GB pool is 4 %: the guide's band holds
    big_pool = window_from(startup_available_gpu_mem_gb="9.1x10", startup_kv_pool_gb="60x10")
    assert isinstance(evaluate(MEM_FRACTION_TOO_LOW, big_pool, config=l4), Pass)


def test_mem_fraction_too_high_fires_under_5_gb():
    config = ServerConfig(mem_fraction_static=0.9)
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(3.5), config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.9 -> 0.8"
    assert "3.50 GB" in out.evidence


def test_mem_fraction_too_high_leaves_sglangs_own_default_alone_without_an_oom():
    # SGLang 0.5.17 on a 24 GB A10 sizes the fraction itself (memory settings: 512 MB + 1.5 MB
    # per chunk token + graphs + communication); the free memory it leaves is its choice
    config = ServerConfig(
        version="0.5.17", gpu_model="NVIDIA A10", tp_size=2, chunked_prefill_size=2048,
        cuda_graph_max_bs=160,
    )  # fmt: skip
    own = estimate_mem_fraction_static(config, gpu_memory_gb(config))
    assert own is not None
    at_default = replace(config, mem_fraction_static=own)
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(3.0), config=at_default)
    assert isinstance(out, Pass)
    assert f"--mem-fraction-static {own:g} is SGLang 0.5.17's own default" in out.detail
    # set by hand to the same free memory, it is the guide's case
    by_hand = replace(config, mem_fraction_static=round(own + 0.02, 3))
    assert isinstance(evaluate(MEM_FRACTION_TOO_HIGH, _startup(3.0), config=by_hand), Finding)
    # and an OOM crash is acted on whoever chose the value
    crashed = window_from(restarts="0x10 1 0x9", decode_oom_events="0x9 1 0x10")
    assert isinstance(evaluate(MEM_FRACTION_TOO_HIGH, crashed, config=at_default), Finding)


def test_mem_fraction_too_high_second_step_is_0_7():
    out = evaluate(
        MEM_FRACTION_TOO_HIGH, _startup(3.5), config=ServerConfig(mem_fraction_static=0.8)
    )
    assert isinstance(out, Finding)
    assert out.action.text == "--mem-fraction-static 0.8 -> 0.7"


def test_mem_fraction_too_high_past_0_7_points_at_other_knobs():
    out = evaluate(
        MEM_FRACTION_TOO_HIGH, _startup(3.5), config=ServerConfig(mem_fraction_static=0.7)
    )
    assert isinstance(out, Finding)
    assert out.action.flag is None
    assert out.action.text.startswith(
        "--mem-fraction-static is already 0.7: lower --chunked-prefill"
    )


def test_mem_fraction_too_high_fires_on_oom_restart():
    view = window_from(restarts="0x10 1 0x9", decode_oom_events="0x9 1 0x10")
    out = evaluate(MEM_FRACTION_TOO_HIGH, view, config=ServerConfig(mem_fraction_static=0.88))
    assert isinstance(out, Finding)
    assert out.evidence == "1 restart(s) with 1 CUDA OOM crash(es) in the window"
    assert out.action.text == "--mem-fraction-static 0.88 -> 0.8"
    # a crash fix: judged by the crashes, predicted to stop them
    p = out.action.prediction
    assert p is not None and p.objective == "crashes" and p.gain == 1.0
    assert out.action.expected.startswith("-100 % crashes")


def test_mem_fraction_too_high_restart_without_oom_is_not_enough():
    view = window_from(
        restarts="0x10 1 0x9", decode_oom_events="0x20", startup_available_gpu_mem_gb="6x20"
    )
    assert isinstance(evaluate(MEM_FRACTION_TOO_HIGH, view), Pass)


def test_mem_fraction_too_high_unknown_current_value_noted():
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(0.5), config=None, config_error="http_401")
    assert isinstance(out, Finding)
    # a step of the ladder from an unknown value could be a raise: the direction only
    assert out.action.text.startswith("lower --mem-fraction-static below what runs now")
    assert (out.action.flag, out.action.suggested) == ("--mem-fraction-static", None)
    assert out.action.note == "current value unknown (http_401)"


def test_mem_fraction_too_high_unknown_current_steps_down_from_sglangs_own_default():
    # SGLang 0.4.6 on one GPU sets 0.88 itself: the guide's 0.8 is below it, said as assumed
    config = ServerConfig(version="0.4.6", tp_size=1, gpu_model="NVIDIA H100 80GB HBM3")
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(0.5), config=config)
    assert isinstance(out, Finding)
    assert (out.action.current, out.action.suggested) == ("0.88", "0.8")
    assert "assumed SGLang's default 0.88" in out.action.note


def test_mem_fraction_too_high_leaves_an_unknown_fraction_that_may_be_sglangs_own():
    # 3.5 GB free is what SGLang's own default leaves on many cards: with the fraction unknown,
    # only a reading below what any default leaves (1 GB) says a hand-set fraction is too high
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(3.5), config=None)
    assert isinstance(out, Pass) and "unknown" in out.detail
    assert isinstance(evaluate(MEM_FRACTION_TOO_HIGH, _startup(0.4), config=None), Finding)


def test_mem_fraction_too_low_waits_for_load_on_a_startup_only_excerpt():
    config = ServerConfig(mem_fraction_static=0.8, gpu_model=H100)
    view = window_from(startup_available_gpu_mem_gb="15x10")
    out = evaluate(MEM_FRACTION_TOO_LOW, view, config=config)
    assert isinstance(out, NoData) and "no load seen yet" in out.reason


def test_mem_fraction_too_high_silent_in_good_band():
    assert isinstance(evaluate(MEM_FRACTION_TOO_HIGH, _startup(6.5)), Pass)


def test_mem_fraction_too_high_no_data_without_startup_memory():
    out = evaluate(MEM_FRACTION_TOO_HIGH, window_from(num_running_reqs="1x10"))
    assert isinstance(out, NoData) and "available_gpu_mem" in out.reason


PINNED = window_from(token_usage="0.99x20", num_queue_reqs="50x20", retractions_per_minute="0x20")
RETRACTING = window_from(
    token_usage="0.95x20", num_queue_reqs="50x20", retractions_per_minute="3x20"
)
CONSERVATIVE = ServerConfig(schedule_conservativeness=1.3, kv_cache_dtype="auto")


def test_kv_cache_pressure_fires_when_retracting_and_conservative_with_accuracy_caveat():
    out = evaluate(KV_CACHE_PRESSURE, RETRACTING, config=CONSERVATIVE)
    assert isinstance(out, Finding)
    assert out.action.text == "--kv-cache-dtype auto -> fp8_e4m3"
    assert "--schedule-conservativeness already 1.3" in out.evidence
    assert "check accuracy" in out.action.note
    assert "twice the KV tokens" in out.action.expected
    # no figure from some other server's run: this server has no prediction
    assert "no prediction" in out.action.expected and "%" not in out.action.expected
    assert KV_CACHE_PRESSURE.severity is Severity.INFO  # FP8 changes outputs: a hint only


def test_kv_cache_pressure_silent_on_a_healthy_saturated_server():
    # A full pool with a queue and no retractions is what the guide calls good utilization.
    assert isinstance(evaluate(KV_CACHE_PRESSURE, PINNED, config=CONSERVATIVE), Pass)


def test_kv_cache_pressure_fires_on_persistent_retractions():
    view = window_from(token_usage="0.9x20", num_queue_reqs="0x20", retractions_per_minute="4x20")
    out = evaluate(KV_CACHE_PRESSURE, view, config=CONSERVATIVE)
    assert isinstance(out, Finding) and out.evidence.startswith("4.0 retractions/min")


def test_kv_cache_pressure_after_fp8_kv_suggests_fp8_weights():
    config = ServerConfig(schedule_conservativeness=1.5, kv_cache_dtype="fp8_e4m3")
    out = evaluate(KV_CACHE_PRESSURE, RETRACTING, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--quantization none -> fp8"


def test_kv_cache_pressure_when_all_fp8_passes_and_says_what_is_left():
    config = ServerConfig(
        schedule_conservativeness=1.5, kv_cache_dtype="fp8_e5m2", quantization="fp8"
    )
    out = evaluate(KV_CACHE_PRESSURE, RETRACTING, config=config)
    assert isinstance(out, Pass) and "more GPUs" in out.detail


def test_kv_cache_pressure_leaves_conservativeness_advice_first():
    out = evaluate(
        KV_CACHE_PRESSURE, RETRACTING, config=ServerConfig(schedule_conservativeness=1.0)
    )
    assert isinstance(out, Pass) and "can still rise" in out.detail


def test_kv_cache_pressure_unknown_config_assumes_default_conservativeness():
    out = evaluate(KV_CACHE_PRESSURE, RETRACTING, config=None, config_error="http_401")
    assert isinstance(out, Pass)


def test_kv_cache_pressure_unknown_dtype_noted():
    config = ServerConfig(schedule_conservativeness=1.3)
    out = evaluate(KV_CACHE_PRESSURE, RETRACTING, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--kv-cache-dtype auto -> fp8_e4m3"
    assert "current value unknown" in out.action.note


def test_kv_cache_pressure_silent_on_healthy_usage():
    view = window_from(
        token_usage="0.92x20", num_queue_reqs="50x20", retractions_per_minute="0.5x20"
    )
    assert isinstance(evaluate(KV_CACHE_PRESSURE, view, config=CONSERVATIVE), Pass)


def test_kv_cache_pressure_no_data():
    assert isinstance(evaluate(KV_CACHE_PRESSURE, window_from(num_queue_reqs="1x20")), NoData)
    assert isinstance(
        evaluate(KV_CACHE_PRESSURE, window_from(retractions_per_minute="1x3")), NoData
    )


def test_mem_fraction_too_high_computes_the_way_back_into_the_band():
    config = ServerConfig(mem_fraction_static=0.93, gpu_model=H100)
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(3.1), config=config)
    assert isinstance(out, Finding)
    # (6.5 - 3.1) / 80 = 0.0425 -> -0.05
    assert out.action.text == "--mem-fraction-static 0.93 -> 0.88"


def test_mem_fraction_too_high_computed_value_never_below_0_7():
    config = ServerConfig(mem_fraction_static=0.72, gpu_model="NVIDIA L4")
    out = evaluate(MEM_FRACTION_TOO_HIGH, _startup(0.5), config=config)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.72 -> 0.7"


def test_mem_fraction_too_high_after_oom_restarts_uses_the_ladder():
    view = window_from(
        restarts="0x10 1 0x9", prefill_oom_events="0x9 1 0x10", startup_available_gpu_mem_gb="7x20"
    )
    config = ServerConfig(mem_fraction_static=0.88, gpu_model=H100)
    out = evaluate(MEM_FRACTION_TOO_HIGH, view, config=config)
    assert isinstance(out, Finding) and out.action.text == "--mem-fraction-static 0.88 -> 0.8"


def test_mem_fraction_too_high_counts_sglangs_reserve_for_many_ranks():
    from sglang_tuner.model.server_config import ServerConfig

    view = window_from(startup_available_gpu_mem_gb="6x10")
    one = ServerConfig(tp_size=1, mem_fraction_static=0.85)
    alone = evaluate(MEM_FRACTION_TOO_HIGH, view, config=one)
    assert isinstance(alone, Pass)  # 6 GB: inside the guide's band on one GPU
    wide = evaluate(MEM_FRACTION_TOO_HIGH, view, config=replace(one, tp_size=16))
    assert isinstance(wide, Finding)  # tp 16: SGLang itself keeps 2 GB more for communication
    assert "under 7 GB (the guide's 5 GB + SGLang's 2 GB for 16 ranks' communication)" in (
        wide.evidence
    )


def test_mem_fraction_too_low_silent_while_the_pool_is_not_what_limits():
    calm = window_from(
        startup_available_gpu_mem_gb="15x10", token_usage="0.3x10", num_queue_reqs="0x10",
        retractions_per_minute="0x10",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, calm, config=ServerConfig(mem_fraction_static=0.5))
    assert isinstance(out, Pass) and "a larger pool would sit empty" in out.detail
    busy = window_from(
        startup_available_gpu_mem_gb="15x10", token_usage="0.97x10", num_queue_reqs="40x10"
    )
    out = evaluate(MEM_FRACTION_TOO_LOW, busy, config=ServerConfig(mem_fraction_static=0.5))
    assert isinstance(out, Finding)


def test_mem_fraction_too_low_hands_a_large_chunks_reserve_back_to_the_pool():
    # 0.5.3+: SGLang's own fraction reserves 1.5 MB per chunk token; at 16384 on an L40S that
    # is 24 GB kept free, which no raise of the fraction may take: the chunk goes back to
    # SGLang's default for the card, and SGLang's fraction rises by itself at the restart
    base = ServerConfig(
        version="0.5.9", gpu_model="NVIDIA L40S", tp_size=1, cuda_graph_max_bs=32,
        chunked_prefill_size=16384, model_path="meta-llama/Llama-3.1-8B-Instruct",
    )  # fmt: skip
    own = estimate_mem_fraction_static(base, gpu_memory_gb(base))
    assert own is not None and 0.43 < own < 0.46  # torch's 44.39 GiB, not the 48 GB sold
    config = replace(base, mem_fraction_static=own)
    busy = window_from(
        startup_available_gpu_mem_gb="23.8x20", token_usage="0.95x20", num_queue_reqs="700x20",
        num_running_reqs="15x20",
    )  # fmt: skip
    out = evaluate(MEM_FRACTION_TOO_LOW, busy, config=config)
    assert isinstance(out, Finding)
    assert out.action.text == "--chunked-prefill-size 16384 -> 4096"
    assert "leave --mem-fraction-static unset" in out.action.note
    assert "the KV pool binds" in out.evidence
    # a hand-set fraction is not recomputed by SGLang: no chunk change then
    hand = replace(base, mem_fraction_static=0.6)
    assert not isinstance(evaluate(MEM_FRACTION_TOO_LOW, busy, config=hand), Finding)
