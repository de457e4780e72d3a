"""Crash kinds read from real and source-assembled SGLang logs (fixtures/sglang/logs/crashes)."""

from dataclasses import fields
from pathlib import Path

import pytest
from sglang_tuner.sources.log.crash import CrashKind, frame_phase, workaround
from sglang_tuner.sources.log.lines import LogCounts, LogScanner, scan_lines

CRASHES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "crashes"
KINDS = [kind.value for kind in CrashKind]

EXPECTED = {  # fixture: the non-zero crash counts (see the README beside the fixtures)
    "v0.3_nccl_watchdog_issue1693": {"other_crash": 1},
    "v0.4.3_startup_not_enough_memory_issue4330": {"startup_not_enough_memory": 1},
    # 2048 tokens free, 148 asked for: the thread found a paged-allocator bug (page size 64)
    "v0.4.4_kv_pool_decode_issue4602": {"allocator_bug": 1},
    "v0.4.5_cuda_graph_capture_oom_issue5285": {"cuda_graph_capture_oom": 1},
    "v0.4.8_watchdog_timeout_issue7553": {"other_crash": 1},
    "v0.5.2_kv_pool_req_slots_issue10408": {"kv_pool_exhausted": 1},
    "v0.5.3_capture_failed_not_memory_issue11218": {"other_crash": 1},
    "v0.5_peer_gpu_memory_error_qwen3vl1961": {"other_crash": 1},
    "v0.5.9_prefill_oom_assembled": {"prefill_oom": 1},
    "v0.5.23_decode_oom_assembled": {"decode_oom": 1},
    "v0.5.23_cuda_graph_capture_oom_assembled": {"cuda_graph_capture_oom": 1},
    "v0.5.23_kv_pool_prefill_assembled": {"kv_pool_exhausted": 1},
    "v0.5.23_startup_not_enough_memory_assembled": {"startup_not_enough_memory": 1},
    "newest_capture_failed_engram_issue39173": {"other_crash": 1},
    "v0.4.3_retraction_tp_ranks_issue4184": {},
    "v0.1.26_retraction_lowercase_assembled": {},
}


def crash_counts(counts: LogCounts) -> dict[str, int]:
    """The non-zero crash fields."""
    return {kind: getattr(counts, kind) for kind in KINDS if getattr(counts, kind)}


def read(name: str) -> list[str]:
    """A fixture's lines."""
    return (CRASHES / f"{name}.log").read_text().splitlines()


def test_crash_fixtures_all_have_an_expectation() -> None:
    assert sorted(p.stem for p in CRASHES.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_scan_lines_classifies_each_crash_fixture(name: str) -> None:
    assert crash_counts(scan_lines(read(name))) == EXPECTED[name]


def test_scan_lines_retraction_fixtures_count_each_retraction_once() -> None:
    assert scan_lines(read("v0.4.3_retraction_tp_ranks_issue4184")).retracted_reqs == 2
    assert scan_lines(read("v0.1.26_retraction_lowercase_assembled")).retracted_reqs == 3


def test_scan_lines_mixed_log_counts_every_crash_once() -> None:
    restart = "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m')"  # between crashes
    names = list(EXPECTED)
    counts = scan_lines([line for name in names for line in [*read(name), restart]])
    expected = {kind: sum(EXPECTED[n].get(kind, 0) for n in names) for kind in KINDS}
    assert crash_counts(counts) == {k: v for k, v in expected.items() if v}
    assert counts.retracted_reqs == 5


PREFIX = "[2026-03-01 12:00:{sec:02d} TP{tp}] "
DECODE = "Decode batch, #running-req: 90, #token: 9000, token usage: 0.40, cuda graph: True, "
DECODE += "gen throughput (token/s): 900.00, #queue-req: 0"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def traceback(tp: int, *frames: tuple[str, str], sec: int = 1) -> list[str]:
    """A scheduler traceback through `frames` (file, function), ending in a CUDA OOM."""
    head = PREFIX.format(sec=sec, tp=tp) + "Scheduler hit an exception: Traceback (most recent"
    body = [f'  File "/sgl/python/sglang/srt/{f}", line 1, in {fn}\n    x()' for f, fn in frames]
    return [head + " call last):", *"\n".join(body).splitlines(), OOM, ""]


CAPTURE = (
    ("model_executor/model_runner.py", "init_cuda_graphs"),
    ("model_executor/cuda_graph_runner.py", "capture"),
    ("model_executor/cuda_graph_runner.py", "capture_one_batch_size"),
    ("models/llama.py", "forward"),
)


def test_scan_lines_oom_inside_capture_after_a_decode_line_is_capture() -> None:
    lines = [PREFIX.format(sec=0, tp=0) + DECODE, *traceback(0, *CAPTURE)]
    assert crash_counts(scan_lines(lines)) == {"cuda_graph_capture_oom": 1}


def test_scan_lines_frameless_oom_after_capture_begin_is_capture() -> None:
    begin = "Capture cuda graph begin. This can take up to several minutes. avail mem=6.00 GB"
    lines = [PREFIX.format(sec=0, tp=0) + DECODE, PREFIX.format(sec=1, tp=0) + begin, OOM]
    assert crash_counts(scan_lines(lines)) == {"cuda_graph_capture_oom": 1}


def test_scan_lines_prefill_frames_win_over_the_last_decode_line() -> None:
    frames = (("managers/scheduler.py", "run_batch"), ("model_executor/x.py", "forward_extend"))
    lines = [PREFIX.format(sec=0, tp=0) + DECODE, *traceback(0, *frames)]
    assert crash_counts(scan_lines(lines)) == {"prefill_oom": 1}


def test_scan_lines_decode_graph_replay_is_decode() -> None:
    frames = (("model_executor/model_runner.py", "forward"), ("cuda_graph_runner.py", "replay"))
    assert crash_counts(scan_lines(traceback(0, *frames))) == {"decode_oom": 1}


def test_scan_lines_same_oom_from_eight_tp_ranks_is_one_event() -> None:
    frames = (("model_executor/model_runner.py", "forward_decode"),)
    lines = [line for tp in range(8) for line in traceback(tp, *frames)]
    assert crash_counts(scan_lines(lines)) == {"decode_oom": 1}


def test_scan_lines_two_crashes_with_a_restart_between_are_two_events() -> None:
    frames = (("model_executor/model_runner.py", "forward_decode"),)
    restart = PREFIX.format(sec=3, tp=0) + "Init torch distributed begin."
    lines = [*traceback(0, *frames), restart, *traceback(0, *frames, sec=40)]
    assert crash_counts(scan_lines(lines)) == {"decode_oom": 2}


def test_scan_lines_crashes_further_apart_than_the_burst_are_two_events() -> None:
    frames = (("model_executor/model_runner.py", "forward_extend"),)
    later = [line.replace("12:00:", "12:05:") for line in traceback(0, *frames)]
    assert crash_counts(scan_lines([*traceback(0, *frames), *later])) == {"prefill_oom": 2}


def test_scan_lines_sigquit_and_nccl_noise_do_not_add_other_crash() -> None:
    sigquit = "[2026-03-01 12:00:01] Received sigquit from a child process. It usually means ..."
    nccl = "[rank3]:[E301 12:00:02.1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective"
    frames = (("model_executor/model_runner.py", "forward_extend"),)
    lines = [sigquit, *traceback(1, *frames), nccl + " operation timeout: WorkNCCL(...)"]
    assert crash_counts(scan_lines(lines)) == {"prefill_oom": 1}


def test_scan_lines_soft_watchdog_is_not_a_crash() -> None:
    soft = "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)"
    hard = "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"
    assert crash_counts(scan_lines([PREFIX.format(sec=0, tp=0) + soft])) == {}
    assert crash_counts(scan_lines([PREFIX.format(sec=0, tp=0) + hard])) == {"other_crash": 1}


def test_scan_lines_bare_traceback_without_memory_error_is_not_a_crash() -> None:
    lines = ["ERROR:    Exception in ASGI application", "Traceback (most recent call last):"]
    lines += ['  File "/x/fastapi/routing.py", line 3, in app', "ValueError: bad request"]
    assert crash_counts(scan_lines(lines)) == {}


def test_scan_lines_oom_while_loading_weights_is_other_crash() -> None:
    start = PREFIX.format(sec=0, tp=0) + "Load weight begin. avail mem=79.00 GB"
    init = PREFIX.format(sec=0, tp=0) + "Init torch distributed begin."
    frames = (("model_executor/model_runner.py", "load_model"),)
    assert crash_counts(scan_lines([init, start, *traceback(0, *frames)])) == {"other_crash": 1}


def test_scan_lines_bare_oom_while_starting_is_other_crash() -> None:
    init = PREFIX.format(sec=0, tp=0) + "Init torch distributed begin."
    assert crash_counts(scan_lines([init, OOM])) == {"other_crash": 1}


def test_log_scanner_keeps_batch_lines_counted_inside_an_open_record() -> None:
    scanner = LogScanner()
    scanner.feed(["Traceback (most recent call last):", PREFIX.format(sec=0, tp=0) + DECODE])
    assert scanner.take().decode_lines == 1


@pytest.mark.parametrize(
    ("filename", "func", "kind"),
    [
        ("cuda_graph_runner.py", "__init__", CrashKind.CUDA_GRAPH_CAPTURE_OOM),
        ("decode_cuda_graph_runner.py", "capture_one_batch_size", CrashKind.CUDA_GRAPH_CAPTURE_OOM),
        ("eager_runner.py", "_execute_extend", CrashKind.PREFILL_OOM),
        ("piecewise_cuda_graph_runner.py", "replay", CrashKind.PREFILL_OOM),
        ("eager_runner.py", "_execute_decode", CrashKind.DECODE_OOM),
        ("eagle_worker.py", "verify", CrashKind.DECODE_OOM),
        ("tp_worker.py", "forward_decode_batch", CrashKind.DECODE_OOM),
        ("scheduler.py", "event_loop_overlap", None),
    ],
)
def test_frame_phase_reads_the_runner_and_function(
    filename: str, func: str, kind: CrashKind | None
) -> None:
    assert frame_phase(filename, func) is kind


def test_log_counts_has_a_field_per_crash_kind() -> None:
    assert set(KINDS) <= {field.name for field in fields(LogCounts)}


POOL_OOM = "RuntimeError: Decode out of memory. Try to lower your batch size."


def test_pool_oom_with_free_tokens_covering_the_request_is_an_allocator_bug() -> None:
    bug = scan_lines([POOL_OOM, "Try to allocate 148 tokens.", "Avaliable tokens: 2048"])
    assert crash_counts(bug) == {"allocator_bug": 1}
    real = scan_lines([POOL_OOM, "Try to allocate 4096 tokens.", "Avaliable tokens: 12"])
    assert crash_counts(real) == {"kv_pool_exhausted": 1}
    spelled = scan_lines(
        [
            POOL_OOM,
            "Try to allocate 8 tokens.",
            "self.token_to_kv_pool_allocator.available_size()=9",
        ]
    )
    assert crash_counts(spelled) == {"allocator_bug": 1}


def test_a_failed_leak_check_is_an_allocator_bug_not_a_startup_summary() -> None:
    line = (
        "ValueError: token_to_kv_pool_allocator memory leak detected! available_size=3189424, "
        "protected_size=0, self.max_total_num_tokens=3185200"
    )
    counts = scan_lines([line])
    assert crash_counts(counts) == {"allocator_bug": 1}
    assert counts.max_total_num_tokens is None  # `self.max_total_num_tokens=` is no summary


def test_a_cuda_oom_while_loading_is_no_prefill_oom() -> None:
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB.",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/managers/scheduler.py", line 437, in __init__',
        '  File "/sglang/srt/managers/scheduler.py", line 718, in init_model_worker',
    ]
    assert "prefill_oom" not in crash_counts(scan_lines(lines))


def test_a_cuda_oom_placed_by_the_traceback_that_follows_it() -> None:
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/model_runner.py", line 1, in forward_extend',
    ]
    assert crash_counts(scan_lines(lines)) == {"prefill_oom": 1}


def test_loaded_weights_leave_no_memory_reads_the_fraction_sglang_asks_for() -> None:
    counts = scan_lines(
        [
            "ValueError: Loaded weights leave no GPU memory for the KV cache under "
            "--mem-fraction-static=0.94. Raise --mem-fraction-static above 0.942 (minimum "
            "viable = 1 - available/pre = 0.9411)."
        ]
    )
    assert crash_counts(counts) == {"startup_not_enough_memory": 1}
    assert counts.mem_fraction_required == 0.942
    assert counts.server_args == {"mem_fraction_static": 0.94}


# -- what no hand-written reader knows: the message catalogue and the generic families ------
def said(lines: list[str]) -> list[tuple[str, str, str]]:
    """(class, kind, phase) of each crash the lines hold."""
    return [(d.cls, d.kind, d.phase) for d in scan_lines(lines).crashes]


def test_headerless_traceback_ending_in_a_capture_failure_is_a_capture_crash() -> None:
    lines = ["Traceback (most recent call last):"]
    lines += ['  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 3, in capture']
    lines += ["Exception: Capture cuda graph failed: Triton Error [CUDA]: invalid argument"]
    counts = scan_lines(lines)
    assert crash_counts(counts) == {"other_crash": 1}
    assert said(lines) == [("crash", "capture_failure", "capture")]
    assert counts.crashes[0].message.startswith("Exception: Capture cuda graph failed: Triton")


def test_a_traceback_pasted_on_one_line_is_read_frame_by_frame() -> None:
    line = PREFIX.format(sec=0, tp=0) + "Scheduler hit an exception: Traceback (most recent call "
    line += 'last):   File "/sgl/srt/model_executor/cuda_graph_runner.py", line 9, in capture  '
    line += "  x()  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    assert crash_counts(scan_lines([line])) == {"cuda_graph_capture_oom": 1}
    assert said([line]) == [("crash", "cuda_graph_capture_oom", "capture")]


def test_another_frameworks_oom_at_the_end_of_a_serving_log_is_said_as_an_oom() -> None:
    lines = [PREFIX.format(sec=0, tp=0) + DECODE, "Traceback (most recent call last):"]
    lines += ['  File "/venv/tvm/runtime.py", line 3, in f', "tvm.error.InternalError: CUDA out of"]
    lines[-1] += " memory"
    assert crash_counts(scan_lines(lines)) == {"decode_oom": 1}
    assert said(lines) == [("crash", "decode_oom", "decode")]


def test_toolchain_error_on_its_own_line_is_a_crash_that_no_flag_fixes() -> None:
    ptxas = "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'"
    assert crash_counts(scan_lines([ptxas])) == {"other_crash": 1}
    assert said([ptxas]) == [("not_tuning", "toolchain", "unknown")]


def test_nccl_error_at_startup_is_a_driver_problem_in_the_load_phase() -> None:
    init = PREFIX.format(sec=0, tp=0) + "Init torch distributed begin."
    lines = [init, PREFIX.format(sec=1, tp=0) + "Scheduler hit an exception: Traceback (most "]
    lines[-1] += "recent call last):"
    lines += ['  File "/sgl/srt/model_executor/model_runner.py", line 3, in init_torch_distributed']
    lines += ["torch.distributed.DistBackendError: NCCL error: unhandled system error"]
    assert said(lines) == [("not_tuning", "driver", "load")]


def test_an_unclassified_crash_says_its_last_exception_line_and_phase() -> None:
    lines = [PREFIX.format(sec=0, tp=0) + DECODE]
    lines += [PREFIX.format(sec=1, tp=0) + "Scheduler hit an exception: Traceback (most recent"]
    lines[-1] += " call last):"
    lines += ['  File "/sgl/srt/managers/scheduler.py", line 3, in event_loop_normal']
    lines += ["ValueError: bad value 3"]
    counts = scan_lines(lines)
    assert crash_counts(counts) == {"other_crash": 1}
    (crash,) = counts.crashes
    assert (crash.cls, crash.phase) == ("unclassified", "decode")
    assert crash.message == "ValueError: bad value 3"


def test_a_bare_traceback_the_log_ends_with_is_a_crash_one_followed_by_batches_is_not() -> None:
    tb = ["Traceback (most recent call last):", '  File "/x/y.py", line 3, in f', "ValueError: a"]
    assert said(tb) == [("unclassified", "unclassified", "unknown")]
    assert said([*tb, PREFIX.format(sec=5, tp=0) + DECODE]) == []
    # a programming error without SGLang's header is no crash by itself either: a request
    # handler's KeyError is served past
    tb[-1] = "KeyError: 'a'"
    assert said(tb) == [("not_tuning", "software", "unknown")]
    assert said([*tb, PREFIX.format(sec=5, tp=0) + DECODE]) == []


def _scheduler_traceback(frames: list[tuple[str, str]], last: str) -> list[str]:
    """A scheduler's fatal traceback through `frames` (file under sglang/srt, function)."""
    head = PREFIX.format(sec=1, tp=0) + "Scheduler hit an exception: Traceback (most recent call"
    lines = [head + " last):"]
    for path, func in frames:
        lines.append(f'  File "/sgl-workspace/sglang/python/sglang/srt/{path}", line 9, in {func}')
        lines.append("    pass")
    return [*lines, last]


def test_a_programming_error_is_no_tuning_problem_and_says_where_it_was_raised() -> None:
    frames = [("managers/scheduler.py", "event_loop_overlap")]
    frames += [("managers/scheduler.py", "update_running_batch")]
    frames += [("mem_cache/allocator.py", "available_size")]
    counts = scan_lines(_scheduler_traceback(frames, "NotImplementedError"))
    assert crash_counts(counts) == {"other_crash": 1}
    (crash,) = counts.crashes
    assert (crash.cls, crash.kind, crash.phase) == ("not_tuning", "software", "decode")
    assert (crash.message, crash.frame) == ("NotImplementedError", "allocator.py in available_size")


def test_a_programming_error_while_the_weights_load_is_a_checkpoint_the_code_cannot_read() -> None:
    frames = [
        ("managers/scheduler.py", "__init__"),
        ("model_executor/model_runner.py", "load_model"),
    ]
    frames += [("model_loader/loader.py", "load_model"), ("models/llama.py", "load_weights")]
    lines = _scheduler_traceback(frames, "KeyError: 'model.layers.55.mlp.gate_up_proj.input_scale'")
    (crash,) = scan_lines(lines).crashes
    assert (crash.cls, crash.kind, crash.phase) == ("not_tuning", "model", "load")
    assert crash.frame == "llama.py in load_weights"


def test_a_programming_error_in_the_launch_flags_checks_is_a_configuration_error() -> None:
    frames = [("server_args.py", "__post_init__"), ("server_args.py", "check_server_args")]
    (crash,) = scan_lines(_scheduler_traceback(frames, "AssertionError")).crashes
    assert crash.cls == "config_error"


def test_an_excerpt_cut_inside_a_traceback_keeps_the_phase_its_frames_name() -> None:
    frames = ['  File "/sgl/srt/model_executor/model_runner.py", line 3, in forward_extend']
    sigquit = "[2026-03-01 12:00:01] Received sigquit from a child process. It usually means ..."
    head = PREFIX.format(sec=1, tp=0) + "Scheduler hit an exception: Traceback (most recent call"
    (crash,) = scan_lines([sigquit, head + " last):", *frames]).crashes
    assert (crash.cls, crash.phase) == ("unclassified", "prefill")
    # the parent's sigquit only says a child failed: the child's traceback says where
    assert (crash.message, crash.frame) == ("", "model_runner.py in forward_extend")


def test_a_sigquit_with_no_traceback_after_it_is_said_as_it_stands() -> None:
    sigquit = "[2026-03-01 12:00:01] Received sigquit from a child process. It usually means ..."
    (crash,) = scan_lines([sigquit]).crashes
    assert crash.message.startswith("Received sigquit from a child process")


def test_a_catalogued_leak_message_without_the_hand_written_words_is_an_allocator_bug() -> None:
    head = PREFIX.format(sec=1, tp=0) + "Scheduler hit an exception: Traceback (most recent call"
    lines = [head + " last):", '  File "/sgl/srt/mem_cache/radix_cache.py", line 3, in evict']
    lines += ["AssertionError: evict device leaf: full_lock_ref mismatch with x.id=3 "]
    lines[-1] += "x.full_lock_ref=0 x.mamba_lock_ref=1"  # SGLang 0.5.x's radix cache
    assert crash_counts(scan_lines(lines)) == {"allocator_bug": 1}
    assert said(lines) == [("not_tuning", "allocator_bug", "unknown")]


def test_a_negative_profiled_pool_is_a_start_with_no_room_for_the_kv_cache() -> None:
    line = PREFIX.format(sec=0, tp=0) + "max_total_tokens=131072 is larger than the profiled "
    assert crash_counts(scan_lines([line + "value -561981. Use the profiled value instead."])) == {
        "startup_not_enough_memory": 1
    }
    assert crash_counts(scan_lines([line + "value 96000. Use the profiled value instead."])) == {}


def test_a_log_that_ends_inside_a_bare_traceback_ends_in_a_crash() -> None:
    begin = PREFIX.format(sec=0, tp=0) + "Capture cuda graph begin. This can take up to several"
    lines = [begin + " minutes.", PREFIX.format(sec=0, tp=0) + "Traceback (most recent call last):"]
    lines += ['  File "/sgl/srt/layers/attention/flashinfer_backend.py", line 3, in update']
    assert crash_counts(scan_lines(lines)) == {"other_crash": 1}
    assert said(lines) == [("unclassified", "unclassified", "capture")]


def test_a_cuda_error_printed_before_a_traceback_without_its_exception_line_names_the_crash():
    lines = [
        "CUDA Error: an illegal memory access was encountered (700) /flashinfer/prefill.cuh: 2349",
        "[2026-03-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 619, in event_loop_normal',
    ]
    (said,) = scan_lines(lines).crashes
    assert (said.cls, said.kind) == ("not_tuning", "driver")
    assert said.message.startswith("CUDA Error: an illegal memory access was encountered")


def test_a_traceback_cut_before_its_exception_line_says_where_it_ends():
    lines = [
        "[2026-03-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 619, in event_loop_normal',
        '  File "/sgl/srt/mem_cache/common.py", line 412, in alloc_paged_token_slots_extend',
    ]
    (said,) = scan_lines(lines).crashes
    assert (said.cls, said.message) == ("unclassified", "")
    assert said.frame == "common.py in alloc_paged_token_slots_extend"


@pytest.mark.parametrize(
    ("line", "change"),
    [
        (
            "To work around this error, add --disable-piecewise-cuda-graph to your launch command.",
            ("--disable-piecewise-cuda-graph", "true"),
        ),
        (
            "Cross attention is not supported in the triton attention backend. Please use "
            "`--attention-backend flashinfer`.",
            ("--attention-backend", "flashinfer"),
        ),
        (
            "Multi-item scoring requires chunked prefill to be disabled. Please set "
            "--chunked-prefill-size -1 when using --multi-item-scoring-delimiter.",
            ("--chunked-prefill-size", "-1"),
        ),
        ("Please add `--is-embedding` when launching the server", ("--is-embedding", "true")),
        # a direction, not a value; a numbered list of possible solutions; no workaround at all
        ("Out of memory. Please set a smaller number for `--max-running-requests`.", None),
        ("Possible solutions: 1. set --mem-fraction-static to a smaller value (e.g., 0.8)", None),
        ("Please set --tokenizer-metrics-custom-labels-header when setting --x.", None),
        ("RuntimeError: --cuda-graph-max-bs must be positive", None),
    ],
)
def test_sglangs_own_workaround_is_read_as_one_change_with_its_value(line, change):
    assert workaround(line) == change


@pytest.mark.parametrize(
    ("last", "cls"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "not_tuning"),
        ("ValueError: something nobody catalogued", "unclassified"),
        ("Segmentation fault (core dumped)", "not_tuning"),
        ("Killed", "not_tuning"),
        ("Fatal Python error: Aborted", "not_tuning"),
        ("thread 'main' panicked at src/lib.rs:12:5:", "unclassified"),
        ("terminate called after throwing an instance of 'c10::Error'", "not_tuning"),
    ],
)
def test_a_log_that_ends_in_last_words_outside_a_traceback_ends_in_a_crash(
    last: str, cls: str
) -> None:
    lines = [PREFIX.format(sec=1, tp=0) + DECODE, last]
    (crash,) = scan_lines(lines).crashes
    assert (crash.cls, crash.phase, crash.message) == (cls, "decode", last)
    # the same words with batches run after them ended nothing
    assert scan_lines([*lines, PREFIX.format(sec=9, tp=0) + DECODE]).crashes == ()


def test_a_line_that_only_mentions_a_kill_is_no_last_words() -> None:
    lines = [PREFIX.format(sec=1, tp=0) + DECODE, "Killed process group cleanup done"]
    assert scan_lines(lines).crashes == ()


_CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
_CUDA_NOTE = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]


def test_pytorchs_note_after_a_cuda_error_is_the_crash_where_a_paste_kept_only_it() -> None:
    """PyTorch adds the same three lines after every CUDA error's message: a paste of a log's
    end that kept them and not the error's own line still ends in a CUDA error (a kernel's or
    the driver's), and where it kept the error's line, that line names the crash."""
    for kept in (_CUDA_NOTE[-2:], _CUDA_NOTE[-1:]):
        lines = [PREFIX.format(sec=1, tp=0) + DECODE, *kept]
        (crash,) = scan_lines(lines).crashes
        assert (crash.cls, crash.kind, crash.phase) == ("not_tuning", "driver", "decode")
        assert crash.message == kept[0]
    lines = [PREFIX.format(sec=1, tp=0) + DECODE, _CUDA_ERROR, *_CUDA_NOTE]
    (crash,) = scan_lines(lines).crashes
    assert (crash.kind, crash.message) == ("driver", _CUDA_ERROR)
    # the note with batches run after it ended nothing
    assert scan_lines([*lines, PREFIX.format(sec=9, tp=0) + DECODE]).crashes == ()
