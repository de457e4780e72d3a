"""crash_diagnosed: every crash a log ends in is named, from real logs through `check --log`'s
replay, and never with a tuning flag where no tuning flag fixes it."""

import dataclasses
from argparse import Namespace
from pathlib import Path

from helpers import evaluate, rule_input, window_from
from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.advice import Finding, NoData, Pass, Severity
from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.next_change import Step
from sglang_tuner.rule import apply_rule
from sglang_tuner.rules.crashes import CRASH_DIAGNOSED
from sglang_tuner.sources.log.log_samples import log_samples

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "logs"
SETTINGS = log_settings(Namespace(interval=None, window=300.0))
# Excerpts of real logs, kept here as quoted (the corpus beside them is reshuffled into a holdout).
# RLinf/RLinf#92: an RTX 5090 paste whose newlines were lost (cut mid-word, as posted).
RTX5090_PTXAS = [
    '38) ^^^^^^^^^^^^ (SGLangWorker pid=38138) File "/opt/conda/lib/python3.11/site-p'
    'ackages/sglang/srt/model_executor/model_runner.py", line 233, in **init** (SGLan'
    "gWorker pid=38138) self.initialize(min_per_gpu_memory) (SGLangWorker pid=38138) "
    'File "/opt/conda/lib/python3.11/site-packages/sglang/srt/model_executor/model_ru'
    'nner.py", line 314, in initialize (SGLangWorker pid=38138) self.init_cuda_graphs'
    '() (SGLangWorker pid=38138) File "/opt/conda/lib/python3.11/site-packages/sglang'
    '/srt/model_executor/model_runner.py", line 1373, in init_cuda_graphs (SGLangWork'
    "er pid=38138) self.cuda_graph_runner = CudaGraphRunner(self) (SGLangWorker pid=3"
    '8138) ^^^^^^^^^^^^^^^^^^^^^ (SGLangWorker pid=38138) File "/opt/conda/lib/python'
    '3.11/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 338, in'
    " **init** (SGLangWorker pid=38138) raise Exception( (SGLangWorker pid=38138) Exc"
    "eption: Capture cuda graph failed: Internal Triton PTX codegen error: (SGLangWor"
    "ker pid=38138) ptxas fatal : Value 'sm_1",
    "20' is not defined for option 'gpu-name' (SGLangWorker pid=38138) (SGLangWorker "
    "pid=38138) Possible solutions: (SGLangWorker pid=38138) 1. set --mem-fraction-st"
    "atic to a smaller value (e.g., 0.8 or 0.7) (SGLangWorker pid=38138) 2. set --cud"
    "a-graph-max-bs to a smaller value (e.g., 16) (SGLangWorker pid=38138) 3. disable"
    " t",
]
# LMCache/LMCache#869: a decode, then a ValueError no SGLang release prints.
LMCACHE = [
    "[2025-06-26 02:16:20 TP0] Decode batch. #running-req: 1, #token: 2102, token usa"
    "ge: 0.51, cuda graph: True, gen throughput (token/s): 93.51, #queue-req: 0",
    "[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 262'
    "0, in run_scheduler_process",
    "    scheduler.event_loop_overlap()",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/_contextlib.py", lin'
    "e 116, in decorate_context",
    "    return func(*args, **kwargs)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 745'
    ", in event_loop_overlap",
    "    batch = self.get_next_batch_to_run()",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 142'
    "5, in get_next_batch_to_run",
    "    new_batch = self.get_new_batch_prefill()",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 152'
    "9, in get_new_batch_prefill",
    "    req.init_next_round_input(",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/schedule_batch.py", lin'
    "e 661, in init_next_round_input",
    "    tree_cache.match_prefix_lmcache(",
    '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py", line '
    "254, in match_prefix_lmcache",
    '    raise ValueError("Failed to allocate token prealloc indices")',
    "ValueError: Failed to allocate token prealloc indices",
]


def _next_change(lines: list[str], name: str = "gpu-a") -> Step:
    ev = replay(SETTINGS, _spec(name), log_samples(lines, 5.0))
    step = ev.plans[name].next
    assert step is not None
    return step


def _spec(name: str):  # noqa: ANN202
    from sglang_tuner.model.target_spec import TargetSpec

    return TargetSpec(name, f"log:{name}")


def _log(path: str) -> list[str]:
    return (LOGS / path).read_text(encoding="utf-8", errors="replace").splitlines()


def test_a_toolchain_crash_is_named_not_a_tuning_problem_with_no_flag():
    # RTX 5090, a paste whose newlines were lost: the capture failed because ptxas has no sm_120
    step = _next_change(RTX5090_PTXAS)
    assert step.rule == "crash_diagnosed" and step.severity is Severity.CRITICAL
    assert step.action.text.startswith("not a tuning problem, toolchain or architecture")
    assert "ptxas fatal" in step.action.text
    assert step.action.flags() == {} and step.action.flag is None


def test_an_nccl_crash_is_named_not_a_tuning_problem_with_no_flag():
    step = _next_change(_log("crashes/v0.3_nccl_watchdog_issue1693.log"))
    assert step.rule == "crash_diagnosed"
    assert step.action.text.startswith("not a tuning problem, NCCL/driver")
    assert "DistBackendError" in step.action.text and step.action.flag is None


def test_an_unknown_exception_is_an_unclassified_crash_with_its_phase_and_line():
    step = _next_change(LMCACHE)
    assert step.rule == "crash_diagnosed" and step.action.flag is None
    assert step.action.text.startswith(
        "unclassified crash during prefill: ValueError: Failed to allocate token prealloc indices"
    )


CONFIG_CRASH = [
    "[2026-03-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
    "mem_fraction_static=0.85, cuda_graph_max_bs=64)",
    "[2026-03-01 10:00:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/srt/managers/scheduler.py", line 2011, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    "ValueError: --cuda-graph-prefill-max-context exceeds the request-to-token pool capacity: "
    "requested size 65536 > 32768",
    "[2026-03-01 10:00:21] Received sigquit from a child process. It usually means the child "
    "failed.",
]


def test_a_configuration_error_names_the_flag_and_what_sglang_said_with_no_value():
    step = _next_change(CONFIG_CRASH)
    assert step.rule == "crash_diagnosed" and step.action.flag is None
    assert step.action.text.startswith(
        "configuration error: SGLang refused --cuda-graph-prefill-max-context: ValueError: "
        "--cuda-graph-prefill-max-context exceeds the request-to-token pool capacity"
    )


def test_a_crash_another_rule_fixes_is_left_to_it():
    # SGLang's own pool ran out: kv_pool_exhausted names it and gives the fix
    step = _next_change(_log("crashes/v0.5.23_kv_pool_prefill_assembled.log"))
    assert step.rule == "kv_pool_exhausted"


def _report(kind: str = "driver", cls: str = "not_tuning", ts: float = 50.0) -> CrashReport:
    return CrashReport(ts, cls, kind, "decode", "RuntimeError: NCCL error: unhandled system error")


def _judge(reports: tuple[CrashReport, ...], **series: str):  # noqa: ANN202
    view = window_from(**(series or {"other_crash_events": "0x10 1"}))
    return apply_rule(
        CRASH_DIAGNOSED, dataclasses.replace(rule_input(CRASH_DIAGNOSED, view), crashes=reports)
    )


def test_a_crash_in_the_window_is_named_once_with_how_many_there_were():
    outcome = _judge((_report(ts=10.0), _report("toolchain", ts=45.0)))
    assert isinstance(outcome, Finding)
    assert outcome.evidence.startswith(
        "the log ends a process in a crash (2 in the window, the latest named): not a tuning "
        "problem, toolchain or architecture"
    )


def test_a_kind_another_rule_counts_is_named_only_when_that_rule_saw_none():
    handled = _report("prefill_oom", "crash")
    counted = _judge((handled,), other_crash_events="0x11", prefill_oom_events="0x10 1")
    assert isinstance(counted, Pass)  # prefill_oom fires on it
    uncounted = _judge((handled,), other_crash_events="0x10 1", prefill_oom_events="0x11")
    assert isinstance(uncounted, Finding)
    assert uncounted.action.text.startswith("crash during decode, out of memory in prefill")


def test_a_crash_before_the_window_or_none_at_all_passes_and_no_log_is_no_data():
    assert isinstance(_judge((_report(ts=-100.0),)), Pass)
    assert isinstance(_judge(()), Pass)
    assert isinstance(evaluate(CRASH_DIAGNOSED, window_from(token_usage="0.5x10")), NoData)


def test_a_crash_without_an_exception_line_says_where_its_traceback_ends():
    cut = CrashReport(50.0, "unclassified", "unclassified", "prefill", "", frame="common.py in f")
    outcome = _judge((cut,))
    assert isinstance(outcome, Finding) and outcome.confidence.value == "medium"
    assert outcome.action.text.startswith(
        "unclassified crash during prefill: no exception line in the log; its traceback ends in "
        "common.py in f"
    )


def test_a_cut_traceback_says_its_exception_is_missing_and_what_its_phase_usually_holds():
    cut = CrashReport(50.0, "unclassified", "unclassified", "prefill", "", frame="common.py in f")
    text = _judge((cut,)).action.text
    assert "frames but not its last line" in text and "--chunked-prefill-size" in text
    assert "Read the traceback before this line" not in text  # there is no such line


def _capture_failed(server_args: str) -> list[str]:
    return [
        f"[2026-03-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1{server_args})",
        "[2026-03-01 10:00:20 TP0] Capture cuda graph bs [1, 2, 4, 8]",
        "[2026-03-01 10:00:21 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 436, in capture',
        "    ) = self.capture_one_batch_size(bs, forward)",
        "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream "
        "is capturing",
    ]


def test_a_capture_failure_not_for_memory_drops_torch_compile_first_as_sglang_lists():
    # SGLang's capture message: smaller fraction, smaller graphs (memory), then "disable torch
    # compile", then --disable-cuda-graph; only the last two act on a failure not for memory
    step = _next_change(_capture_failed(", enable_torch_compile=True"))
    assert step.rule == "crash_diagnosed"
    assert step.action.text.startswith("crash during capture, CUDA-graph capture failed, not for")
    assert "Not out of memory" in step.action.text
    assert (step.action.flag, step.action.current, step.action.suggested) == (
        "--enable-torch-compile", "true", "false"
    )  # fmt: skip


def test_a_capture_failure_not_for_memory_names_no_memory_flag_and_no_value():
    for args, compile_said in ((", enable_torch_compile=False", False), ("", True)):
        step = _next_change(_capture_failed(args))
        assert step.rule == "crash_diagnosed" and step.action.flag is None
        assert "--disable-cuda-graph" in step.action.text and "bug in SGLang" in step.action.text
        assert ("launch line has --enable-torch-compile" in step.action.text) is compile_said
        assert "--mem-fraction-static 0." not in step.action.text


def test_an_error_in_sglangs_serving_code_is_said_as_a_bug_with_no_flag():
    outcome = _judge(
        (CrashReport(50.0, "crash", "serving_failure", "serving", "AssertionError: x"),)
    )
    assert isinstance(outcome, Finding) and outcome.action.flag is None
    assert "Not out of memory" in outcome.action.text and "a bug in SGLang" in outcome.action.text


def test_a_scheduler_check_that_fails_while_loading_is_not_said_as_serving():
    outcome = _judge((CrashReport(50.0, "crash", "serving_failure", "load", "AssertionError: x"),))
    assert isinstance(outcome, Finding)
    assert "crash during load, a check or an error in SGLang's scheduler" in outcome.evidence
    assert "serving" not in outcome.evidence.split("AssertionError")[0]


def test_sglangs_pool_too_small_check_is_no_room_for_the_pool_not_a_load_failure():
    # tp_worker.py (0.3.4-0.5.23) asserts max_total_num_tokens leaves a request room
    lines = [
        "[2026-03-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
        "mem_fraction_static=0.5)",
        "[2026-03-01 10:00:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/managers/tp_worker.py", line 147, in __init__',
        "    assert (",
        "AssertionError: Memory pool size is too small",
    ]
    step = _next_change(lines)
    assert step.rule == "startup_not_enough_memory"
    assert step.action.flag == "--mem-fraction-static" and float(step.action.suggested) > 0.5


def test_a_refused_request_the_log_ends_in_is_said_as_a_hint():
    outcome = _judge((_report("request"),))
    assert isinstance(outcome, Finding) and outcome.severity is Severity.INFO
    assert outcome.action.text.startswith("not a tuning problem, a request refused")


def test_an_oom_of_an_unknown_phase_says_what_each_phase_would_ask_with_no_value():
    line = "tvm.error.InternalError: CUDA out of memory"
    oom = CrashReport(50.0, "crash", "oom", "unknown", line)
    outcome = _judge((oom,))
    assert isinstance(outcome, Finding) and outcome.action.flag is None
    assert outcome.action.text.startswith(
        "crash during an unknown phase, out of memory: tvm.error.InternalError: CUDA out of "
        "memory. The log does not say which of SGLang's memory users ran out"
    )


# A CUDA OOM raised in the serving loop's forward thread, prefill or decode not said (0.4.x
# tp_worker_overlap_thread.py, as sgl-project/sglang threads show it; paths shortened).
SERVING_OOM = [
    "Traceback (most recent call last):",
    '  File "/env/sglang/srt/managers/tp_worker_overlap_thread.py", line 111, in '
    "forward_thread_func",
    "    with torch.get_device_module(self.device).stream(self.forward_stream):",
    '  File "/env/torch/cuda/__init__.py", line 618, in _set_stream_by_id',
    "    torch._C._cuda_setStream(",
    "RuntimeError: CUDA error: out of memory",
]


def test_an_oom_while_serving_gets_the_guides_step_for_either_phase():
    step = _next_change(SERVING_OOM)
    assert step.rule == "crash_diagnosed"
    # the current fraction is unknown (no launch line): lower, with no value that could be a raise
    assert step.action.flag == "--mem-fraction-static" and step.action.suggested is None
    assert step.action.text.startswith("lower --mem-fraction-static below what runs now")
    assert "crash during serving, out of memory" in step.action.note
    assert step.action.expected.startswith("no more out-of-memory crashes while serving")
    # an OOM whose traceback shows a process still loading stays without a value
    loading = [SERVING_OOM[0], '  File "/env/sglang/srt/model_executor/model_runner.py", '
               "line 233, in load_model", SERVING_OOM[-1]]  # fmt: skip
    assert _next_change(loading).action.suggested is None


# SGLang's piecewise CUDA graph failure (its runner prints the workaround, then the scheduler's
# traceback follows from every rank).
PIECEWISE = [
    "[2026-06-10 13:08:30] server_args=ServerArgs(model_path='m', tp_size=2)",
    "[2026-06-10 13:08:34 TP0] Piecewise CUDA Graph failed with error: 'Ctx' object has no "
    "attribute 'num_tokens'",
    "Piecewise CUDA Graph is enabled by default as an experimental feature.",
    "To work around this error, add --disable-piecewise-cuda-graph to your launch command.",
    "[2026-06-10 13:08:34 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/srt/managers/scheduler.py", line 2011, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    "AttributeError: 'Ctx' object has no attribute 'num_tokens'",
]


def test_a_crash_sglang_printed_a_workaround_for_gets_that_flag():
    step = _next_change(PIECEWISE)
    assert step.rule == "crash_diagnosed"
    assert step.action.flags() == {"--disable-piecewise-cuda-graph": "true"}
    assert "SGLang's own message gives the workaround" in step.action.text
    assert "may cost speed" in step.action.note


def test_a_workaround_printed_long_before_another_crash_is_not_its_fix():
    later = [
        line.replace("13:08:34 TP0] Scheduler", "13:20:00 TP0] Scheduler") for line in PIECEWISE
    ]
    step = _next_change(later)
    assert step.rule == "crash_diagnosed" and step.action.flag is None


def test_an_oom_while_loading_the_weights_names_no_memory_flag():
    message = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."
    outcome = _judge((CrashReport(50.0, "crash", "oom", "load", message),))
    assert isinstance(outcome, Finding) and outcome.action.flag is None
    assert "weights did not fit while loading" in outcome.action.text
    assert "1.00 GiB. The weights" in outcome.action.text  # one full stop between sentences
