"""Target state: scrapes, log lines, /server_info and DCGM reads into one server's window."""

from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import (
    DECODE_OOM_EVENTS,
    GPU_FB_FREE_GB,
    KV_POOL_EXHAUSTED_EVENTS,
    NUM_QUEUE_REQS,
    PREFILL_OOM_EVENTS,
    RESTARTS,
    RETRACTIONS_PER_MINUTE,
)
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.target_state import TargetState

SPEC = TargetSpec("gpu-a", "http://gpu-a:30000", gpu_model="NVIDIA H100 80GB HBM3")


def _up(ts: float, **values: float) -> ScrapeResult:
    return ScrapeResult("gpu-a", ts, 0.01, snapshot=Snapshot("gpu-a", ts, values))


def _down(ts: float, reason: str = "conn_refused") -> ScrapeResult:
    return ScrapeResult("gpu-a", ts, 0.01, error_reason=reason, error="refused")


def test_ingest_metrics_win_over_the_log_which_fills_what_they_lack():
    state = TargetState(SPEC, 10)
    state.ingest(_up(5.0, num_queue_reqs=3.0), {NUM_QUEUE_REQS: 99.0, RETRACTIONS_PER_MINUTE: 2.0})
    view = state.window.view(5.0, 60.0)
    assert view.last(NUM_QUEUE_REQS) == 3.0
    assert view.last(RETRACTIONS_PER_MINUTE) == 2.0
    assert state.scrapes_total == 1 and state.last_success_ts == 5.0


def test_ingest_reads_nan_and_infinite_values_as_missing_and_the_target_as_up():
    state = TargetState(SPEC, 10)
    state.ingest(
        _up(5.0, num_queue_reqs=float("inf"), token_usage=float("nan"), gen_throughput=-1e999)
    )
    state.ingest(_up(10.0, num_queue_reqs=2.0, token_usage=0.5, gen_throughput=float("-inf")))
    view = state.window.view(10.0, 60.0)
    assert view.values(NUM_QUEUE_REQS) == [2.0] and view.values("token_usage") == [0.5]
    assert view.values("gen_throughput") == []
    assert state.last is not None and state.last.is_up
    assert state.last.snapshot is not None and "gen_throughput" not in state.last.snapshot.values


def test_ingest_failed_scrape_counts_its_reason_and_keeps_crash_lines_only():
    state = TargetState(SPEC, 10)
    state.ingest(_down(5.0), {RETRACTIONS_PER_MINUTE: 4.0})
    assert len(state.window) == 0  # nothing worth keeping from a down server without crashes
    state.ingest(_down(10.0), {PREFILL_OOM_EVENTS: 1.0, DECODE_OOM_EVENTS: 0.0})
    assert state.window.view(10.0, 60.0).total(PREFILL_OOM_EVENTS) == 1.0
    assert state.failures == {"conn_refused": 2}
    assert state.last_success_ts is None


def test_ingest_restart_asks_for_server_info_again():
    state = TargetState(SPEC, 10)
    state.apply_server_info(ServerConfig(version="0.5.23"), None)
    assert not state.needs_server_info
    state.ingest(_up(5.0, **{RESTARTS: 1.0}))
    assert state.needs_server_info


def test_ingest_adds_dcgm_free_memory_to_every_snapshot():
    state = TargetState(SPEC, 10)
    state.apply_dcgm({GPU_FB_FREE_GB: 7.25, "gpu_model": "NVIDIA H200"})
    state.ingest(_up(5.0, num_queue_reqs=0.0))
    assert state.window.view(5.0, 60.0).last(GPU_FB_FREE_GB) == 7.25
    state.apply_server_info(ServerConfig(version="0.5.23"), None)
    assert state.config is not None and state.config.gpu_model == "NVIDIA H200"


def test_apply_server_info_uses_the_configured_gpu_model_and_keeps_the_last_good_config():
    state = TargetState(SPEC, 10)
    state.apply_server_info(ServerConfig(version="0.5.23", mem_fraction_static=0.85), None)
    assert state.config is not None and state.config.gpu_model == SPEC.gpu_model
    state.apply_server_info(None, "401 Unauthorized: set api_key_file")
    assert state.config is not None and state.config.mem_fraction_static == 0.85
    assert state.config_error == "401 Unauthorized: set api_key_file"
    assert state.needs_server_info


def _served(state: TargetState, start: float, end: float, **values: float) -> None:
    t = start
    while t <= end:
        state.ingest(_up(t, **values))
        t += 5.0


def test_apply_server_info_new_tuning_flags_after_a_restart_start_a_fresh_window():
    state = TargetState(SPEC, 100)
    state.apply_server_info(ServerConfig(schedule_conservativeness=1.0), None)
    _served(state, 5.0, 100.0, num_queue_reqs=3.0)
    assert state.apply_server_info(ServerConfig(schedule_conservativeness=1.0), None) is None
    state.ingest(_down(105.0))
    state.ingest(_up(140.0, **{RESTARTS: 1.0, "num_queue_reqs": 9.0}))  # a new process
    change = state.apply_server_info(ServerConfig(schedule_conservativeness=0.3), None)
    assert change is not None and change.kind == "flags"
    assert (change.before, change.after, change.at) == (
        {"--schedule-conservativeness": "1"}, {"--schedule-conservativeness": "0.3"}, 140.0,
    )  # fmt: skip
    assert change.before_window.signals["num_queue_reqs"].samples == 20
    # the old process's samples are gone, and the new one's first: its rates were taken
    # against the old process's counters
    assert len(state.window) == 0
    state.ingest(_up(145.0, num_queue_reqs=8.0))
    assert state.window.view(145.0, 600.0).values("num_queue_reqs") == [8.0]  # only the new


def test_new_flags_forget_the_old_flags_crashes_with_their_samples():
    from sglang_tuner.model.crash_report import CrashReport

    # a prefill OOM at 104 s under the old chunk: the change to a smaller one answers it, so
    # the crash leaves with the old process's samples (crash_diagnosed once read it as a
    # crash no rule knows, the count that names it being gone with the window)
    state = TargetState(SPEC, 100)
    state.apply_server_info(ServerConfig(chunked_prefill_size=4096), None)
    _served(state, 5.0, 100.0, num_queue_reqs=3.0)
    state.note_crashes((CrashReport(104.0, "crash", "prefill_oom", "prefill", "x"),))
    state.ingest(_down(105.0))
    state.ingest(_up(140.0, **{RESTARTS: 1.0}))
    change = state.apply_server_info(ServerConfig(chunked_prefill_size=2048), None)
    assert change is not None and change.kind == "flags"
    assert state.crash_reports == ()
    # one after the restart is the new flags' own
    state.note_crashes((CrashReport(150.0, "crash", "prefill_oom", "prefill", "y"),))
    assert [r.message for r in state.crash_reports] == ["y"]


def test_a_restart_with_the_same_flags_is_recorded_not_judged():
    state = TargetState(SPEC, 100)
    state.apply_server_info(ServerConfig(schedule_conservativeness=1.0), None)
    _served(state, 5.0, 100.0, num_queue_reqs=3.0)
    state.ingest(_up(105.0, **{RESTARTS: 1.0}))
    change = state.apply_server_info(ServerConfig(schedule_conservativeness=1.0), None)
    assert change is not None and (change.kind, change.before, change.after) == ("restart", {}, {})
    assert len(state.window) == 21  # nothing forgotten: the same configuration
    _served(state, 110.0, 600.0, num_queue_reqs=3.0)
    assert state.changes.changes[-1].verdict is None


def test_a_crash_marks_the_value_it_blames_as_failing():
    state = TargetState(SPEC, 10)
    state.apply_server_info(ServerConfig(chunked_prefill_size=8192, max_running_requests=256), None)
    state.ingest(_down(50.0), {PREFILL_OOM_EVENTS: 1.0})
    failed = state.history.failing["chunked_prefill_size"]
    assert (failed.value, failed.crash, failed.ts) == (8192, PREFILL_OOM_EVENTS, 50.0)
    assert "max_running_requests" not in state.history.failing  # a prefill OOM blames the chunk
    assert state.history.crashes_with("--chunked-prefill-size", 8192) is failed
    assert state.history.crashes_with("--chunked-prefill-size", 16384) is failed
    assert state.history.crashes_with("--chunked-prefill-size", 4096) is None


def test_sglangs_own_pool_running_out_holds_a_smaller_pool_and_a_larger_batch():
    state = TargetState(SPEC, 10)
    state.apply_server_info(ServerConfig(mem_fraction_static=0.85, max_running_requests=256), None)
    state.ingest(_down(50.0), {KV_POOL_EXHAUSTED_EVENTS: 1.0})
    assert state.history.crashes_with("--mem-fraction-static", 0.8) is not None  # smaller pool
    assert state.history.crashes_with("--mem-fraction-static", 0.88) is None
    assert state.history.crashes_with("--max-running-requests", 300) is not None
    assert state.history.crashes_with("--max-running-requests", 192) is None
    assert len(state.window) == 1  # kept while down: a crash loop is when it matters


def test_flag_values_that_served_five_minutes_without_a_crash_are_safe():
    state = TargetState(SPEC, 100)
    state.apply_server_info(ServerConfig(cuda_graph_max_bs=256, mem_fraction_static=0.85), None)
    for k in range(61):
        state.ingest(_up(k * 5.0, num_queue_reqs=1.0))
        if k == 59:
            assert "cuda_graph_max_bs" not in state.history.safe  # 295 s: not yet
    assert state.history.safe["cuda_graph_max_bs"].value == 256
    assert state.history.safe["mem_fraction_static"].value == 0.85


def test_a_flag_change_is_judged_once_the_warm_after_window_is_in():
    state = TargetState(SPEC, 200, window_seconds=300.0, warmup_seconds=60.0)
    state.apply_server_info(ServerConfig(schedule_conservativeness=3.0), None)
    busy = {"num_running_reqs": 300.0, "num_queue_reqs": 400.0, "token_usage": 0.6}
    _served(state, 5.0, 300.0, gen_throughput=4000.0, **busy)
    state.ingest(_up(330.0, **{RESTARTS: 1.0}, **busy))
    asked = {"--schedule-conservativeness": ("0.7", "scheduler_too_conservative")}
    change = state.apply_server_info(ServerConfig(schedule_conservativeness=0.7), None, asked)
    assert change is not None and change.rule == "scheduler_too_conservative"
    # warm-up, then as long as the before window (the 5 min before the restart: 30 s to 300 s)
    assert change.due == 330.0 + 60.0 + 270.0
    _served(state, 335.0, 655.0, gen_throughput=4800.0, **busy | {"token_usage": 0.9})
    assert state.changes.changes[-1].verdict is None  # not yet complete
    _served(state, 660.0, 660.0, gen_throughput=4800.0, **busy | {"token_usage": 0.9})
    judged = state.changes.changes[-1]
    assert judged.verdict is not None and judged.verdict.verdict == "helped"
    assert judged.after_window is not None and judged.after_window.start >= 390.0


def test_target_state_metrics_off_is_judged_from_the_log_and_says_where_signals_came_from():
    from sglang_tuner.model import signals as sig
    from sglang_tuner.model.scrape import ScrapeResult
    from sglang_tuner.model.target_spec import TargetSpec
    from sglang_tuner.target_state import TargetState

    state = TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 10)
    off = ScrapeResult("gpu-a", 5.0, 0.01, error_reason="http_404_metrics_disabled", error="404")
    state.ingest(off, {sig.NUM_QUEUE_REQS: 3.0, sig.TOKEN_USAGE: 0.4, sig.PREFILL_OOM_EVENTS: 0.0})
    assert state.last is not None and state.last.is_up  # the log stands in for /metrics
    assert state.last.error_reason == "http_404_metrics_disabled"  # still said, for the rule
    assert state.latest_values[sig.NUM_QUEUE_REQS] == 3.0
    assert state.signal_sources[sig.TOKEN_USAGE] == "log"
    # a 404 with no log load is a server with metrics off and nothing else to read
    bare = TargetState(TargetSpec("gpu-b", "http://gpu-b:30000"), 10)
    bare.ingest(off, {})
    assert bare.last is not None and not bare.last.is_up


def test_note_crashes_keeps_the_newest_crashes_in_words():
    from sglang_tuner.model.crash_report import CrashReport
    from sglang_tuner.target_state import CRASH_REPORTS_KEPT

    state = TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 10)
    state.note_crashes(())
    assert state.crash_reports == ()
    reports = [CrashReport(float(t), "not_tuning", "driver", "decode", "x") for t in range(20)]
    for report in reports:
        state.note_crashes((report,))
    assert state.crash_reports == tuple(reports[-CRASH_REPORTS_KEPT:])
