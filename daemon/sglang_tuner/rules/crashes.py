"""Crashes the log tells apart, each with its own fix (sources/log/crash.py reads them), and
every other crash named from the log's words (`crash_diagnosed`).

A CUDA-graph capture OOM asks for fewer graphs; SGLang's own pool running out ("Try to lower your
batch size") asks for a smaller batch and never for a smaller pool; "Not enough memory. Please
try to increase --mem-fraction-static" asks for the opposite of every other OOM fix.
"""

import math
from dataclasses import replace

from sglang_tuner.model.advice import (
    Action,
    Confidence,
    Finding,
    NoData,
    Outcome,
    Pass,
    Prediction,
    Severity,
)
from sglang_tuner.model.crash_report import (
    CONFIG_ERROR,
    CRASH,
    NOT_TUNING,
    UNCLASSIFIED,
    CrashReport,
)
from sglang_tuner.model.flags import MEM_FRACTION_STATIC as MEM_FLAG
from sglang_tuner.model.signals import (
    ALLOCATOR_BUG_EVENTS,
    CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    DECODE_OOM_EVENTS,
    KV_POOL_EXHAUSTED_EVENTS,
    MEM_FRACTION_REQUIRED,
    NUM_RUNNING_REQS_MAX_RANK,
    OTHER_CRASH_EVENTS,
    PREFILL_OOM_EVENTS,
    RESTARTS,
    STARTUP_NOT_ENOUGH_MEMORY_EVENTS,
)
from sglang_tuner.predict.crash_fix import crash_fix, reported
from sglang_tuner.predict.server_model import CRASHES
from sglang_tuner.rule import Rule, RuleInput, flag_action, with_expected, with_note
from sglang_tuner.rules.cuda_graph import graph_flag
from sglang_tuner.rules.memory import MEM_FRACTION_TOO_HIGH, lower_mem_fraction
from sglang_tuner.rules.oom import ONE_CRASH, crash_check, lower_max_running
from sglang_tuner.rules.sglang.defaults import default_chunked_prefill_size, default_graph_max_bs
from sglang_tuner.rules.sglang.graph_sizes import captured_batch_sizes
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb

MEMORY_ISSUES = "Troubleshooting / Memory Issues / Reduce Memory Pressure"
_NO_LOG = (
    "crashes are read from the SGLang log only: set the target's log_file "
    "(CUDA-graph capture, KV pool and startup memory errors)"
)
SHRINKS_THE_POOL = (
    f"do not lower {MEM_FLAG}: it shrinks the pool that ran out (the GPU itself had room)"
)


def _crashed_value(inp: RuleInput, field: str, too_low: bool = False) -> float | None:
    """The value the server crashed with (`too_low`: one that failed as too small): the flag
    history's, else today's config."""
    failed = (inp.history.failing_low if too_low else inp.history.failing).get(field)
    if failed is not None and not isinstance(failed.value, str):
        return float(failed.value)
    value = getattr(inp.config, field, None) if inp.config is not None else None
    return None if value is None else float(value)


def _safe_value(inp: RuleInput, field: str) -> float | None:
    """The last value of `field` that served SAFE_AFTER_SECONDS without a crash."""
    safe = inp.history.safe.get(field)
    return None if safe is None or isinstance(safe.value, str) else float(safe.value)


# -- CUDA-graph capture OOM -------------------------------------------------------------------
def _lower_graph_bs(inp: RuleInput) -> Action:
    """Back to the last max bs that served without a crash, else the captured size at or below
    half of the one that failed (graph buffers grow with the largest captured batch)."""
    config = inp.config
    version = config.version if config else None
    flag = graph_flag(version)
    crashed = _crashed_value(inp, "cuda_graph_max_bs")
    if crashed is None:
        tp = config.tp_size if config else None
        crashed_int = default_graph_max_bs(version, gpu_memory_gb(config), tp)
        crashed = None if crashed_int is None else float(crashed_int)
    if crashed is None:
        return Action(f"{flag}: lower it (about half)", flag, note="current value unknown")
    safe = _safe_value(inp, "cuda_graph_max_bs")
    if safe is not None and safe < crashed:
        action = flag_action(flag, int(crashed), int(safe), inp)
        expected = f"startup captures graphs up to {safe:g} again, as it did without crashing"
        return with_expected(action, expected)
    half = max(1, int(crashed * inp.thresholds["graph_bs_step_ratio"]))
    sizes = captured_batch_sizes(version, half, gpu_memory_gb=gpu_memory_gb(config)) or (half,)
    suggested = max([s for s in sizes if s <= half] or [half])
    action = flag_action(flag, int(crashed), suggested, inp)
    expected = (
        f"graph buffers about {suggested / crashed:.0%} of those that ran out of memory at "
        f"capture; decode batches above {suggested} per rank run without a graph"
    )
    return with_expected(action, expected)


def _capture_oom(inp: RuleInput, count: float) -> tuple[str, Action]:
    """Out-of-memory errors while capturing CUDA graphs at startup: fewer graphs."""
    evidence = f"{count:.0f} out-of-memory error(s) while capturing CUDA graphs at startup"
    # Sure from the value it crashed with; SGLang's default for this GPU is an assumption.
    sure = _crashed_value(inp, "cuda_graph_max_bs") is not None
    basis = evidence if sure else f"{evidence}; the value it crashed with is assumed"
    action = crash_fix(inp, _lower_graph_bs(inp), CUDA_GRAPH_CAPTURE_OOM_EVENTS, basis, sure)
    return evidence, action


def _check_capture_oom(inp: RuleInput) -> Outcome:
    """Any out-of-memory while capturing CUDA graphs at startup, in the window."""
    return crash_check(inp, CUDA_GRAPH_CAPTURE_OOM_EVENTS, _NO_LOG, _capture_oom)


CUDA_GRAPH_CAPTURE_OOM = Rule(
    id="cuda_graph_capture_oom",
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.CRITICAL,
    summary="The server ran out of memory capturing CUDA graphs at startup.",
    action="Lower --cuda-graph-max-bs: back to the last value that served, else about half.",
    source=MEMORY_ISSUES + " (Reduce --cuda-graph-max-bs)",
    check=_check_capture_oom,
    signals=(CUDA_GRAPH_CAPTURE_OOM_EVENTS,),
    thresholds={"oom_events": 1.0, "graph_bs_step_ratio": 0.5},
    provenance={
        "oom_events": ONE_CRASH,
        "graph_bs_step_ratio": "ours: the guide says 'reduce' without a number; graph memory "
        "grows with the largest captured batch, so half of it roughly halves that memory",
    },
    needs_up=False,
    needs_window=False,
    stability=True,
)


# -- SGLang's own pool ran out ----------------------------------------------------------------
def _kv_pool(inp: RuleInput, count: float) -> tuple[str, Action]:
    """SGLang's own pool ran out: a smaller batch, never a smaller pool."""
    evidence = f"{count:.0f} crash(es): SGLang's KV or request pool ran out"
    action = lower_max_running(inp)
    sure = reported(action)  # else it may already be that low
    basis = f"{evidence}; fewer requests hold fewer KV tokens"
    action = crash_fix(inp, action, KV_POOL_EXHAUSTED_EVENTS, basis, sure)
    return evidence, with_note(action, SHRINKS_THE_POOL)


def _check_kv_pool(inp: RuleInput) -> Outcome:
    """Any 'Prefill/Decode out of memory. Try to lower your batch size' (or the request-slot
    spellings) in the window: the scheduler's KV or request pool was exhausted."""
    return crash_check(inp, KV_POOL_EXHAUSTED_EVENTS, _NO_LOG, _kv_pool)


KV_POOL_EXHAUSTED = Rule(
    id="kv_pool_exhausted",
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.CRITICAL,
    summary="SGLang's own KV or request pool ran out and the server crashed.",
    action="Lower --max-running-requests (SGLang: 'Try to lower your batch size'); never lower "
    "--mem-fraction-static for this.",
    source="Hyperparameter Tuning / Avoid Out-of-Memory Errors (OOM During Decoding); SGLang's "
    "message 'Try to lower your batch size'",
    check=_check_kv_pool,
    signals=(KV_POOL_EXHAUSTED_EVENTS, NUM_RUNNING_REQS_MAX_RANK),
    thresholds={"oom_events": 1.0, "max_running_step_ratio": 0.25},
    provenance={
        "oom_events": ONE_CRASH,
        "max_running_step_ratio": "ours: as decode_oom, a quarter below the p90 batch that crashed",
    },
    needs_up=False,
    needs_window=False,
    stability=True,
)


# -- SGLang's allocator failed: a bug, not a capacity problem ----------------------------------
_A_BUG = (
    "an allocator bug or leak: no flag change is known to stop it (sgl-project/sglang#4602, "
    "#6888, #13125 were fixed in code)"
)


def _report_it(_inp: RuleInput) -> Action:
    return Action(
        "not a tuning problem: SGLang's allocator lost track of its memory (a bug or a leak). "
        "Upgrade SGLang; where --page-size is above 1, try --page-size 1; report it upstream "
        "with this log",
        expected="no flag change: capping the batch or the pool would only hide the bug",
        prediction=Prediction(CRASHES, None, basis=_A_BUG),
    )


def _allocator_bug(inp: RuleInput, count: float) -> tuple[str, Action]:
    """The allocator failed with room to spare: report it, change no flag."""
    evidence = (
        f"{count:.0f} crash(es) where SGLang's allocator failed with room to spare: a leak check "
        "fired, or the free tokens it printed covered the request"
    )
    return evidence, _report_it(inp)


def _check_allocator_bug(inp: RuleInput) -> Outcome:
    """A leak check failed, or a pool OOM's own numbers show free tokens covering the request:
    in the public threads these were allocator bugs (sgl-project/sglang#4602, #6888, #13125)."""
    return crash_check(inp, ALLOCATOR_BUG_EVENTS, _NO_LOG, _allocator_bug, "bug_events")


ALLOCATOR_BUG = Rule(
    id="allocator_bug",
    severity=Severity.CRITICAL,
    summary="SGLang's memory allocator failed although memory was free: a bug, not tuning.",
    action="Upgrade SGLang, try --page-size 1, and report it; change no capacity flag for it.",
    source="ours: in public SGLang threads these crashes were allocator bugs or leaks, fixed in "
    "code (sgl-project/sglang#4602, #6888, #13125), never by a smaller batch",
    check=_check_allocator_bug,
    signals=(ALLOCATOR_BUG_EVENTS,),
    thresholds={"bug_events": 1.0},
    provenance={"bug_events": ONE_CRASH},
    needs_up=False,
    needs_window=False,
    stability=True,
    ours=True,
)


# -- Not enough memory at startup -------------------------------------------------------------
def _ceiling(inp: RuleInput) -> tuple[float, str]:
    """The highest fraction to suggest: the cap, or below a fraction this server already ran
    out of GPU memory with (a CUDA OOM), whichever is lower; and what it is."""
    cap = inp.thresholds["mem_fraction_max"]
    oom = inp.history.failing.get("mem_fraction_static")
    if oom is not None and not isinstance(oom.value, str) and oom.value - 0.01 < cap:
        return round(
            float(oom.value) - 0.01, 2
        ), f"below {oom.value:g}, which ran out of GPU memory"
    return cap, f"{cap:g}"


def _no_fit(inp: RuleInput, what: str) -> Action:
    """No fraction between what failed low and what may not be passed can work: the levers that
    free memory at a given fraction instead, and no flag value."""
    graphs = graph_flag(inp.config.version if inp.config else None)
    return Action(
        f"{what}: the model does not fit this way, no {MEM_FLAG} between them can work; free "
        f"memory another way: a shorter --context-length, smaller CUDA graphs ({graphs}), a "
        "smaller draft model or none (speculative decoding), FP8 weights (--quantization fp8), "
        "or more GPUs (--tp-size)"
    )


# What to look up where the value a start failed with is unknown (SGLang's own words name it).
LOOK_UP_FRACTION = (
    "read mem_fraction_static from the log's 'Current value' line or from /server_info"
)


def _raise_above(inp: RuleInput, required: float) -> Action:
    """SGLang said which fraction the weights need: the next hundredth above it, capped."""
    ceiling, why = _ceiling(inp)
    suggested = round(math.floor(required * 100 + 1e-9) / 100 + 0.01, 2)
    if suggested > ceiling + 1e-9:
        return _no_fit(inp, f"the weights need {MEM_FLAG} above {required:g}, past {why}")
    crashed = _crashed_value(inp, "mem_fraction_static", too_low=True)
    action = flag_action(MEM_FLAG, crashed, suggested, inp)
    action = with_note(
        action,
        "SGLang computes the fraction from the memory free when it loaded: if another process "
        "holds memory on this GPU, free it instead",
    )
    return with_expected(action, f"the server starts: SGLang asked for above {required:g}")


def _reserve_ate_the_card(inp: RuleInput, fraction: float) -> Action:
    """SGLang's own fraction came out at or below zero: its memory settings (0.5.3+) reserve
    512 MB + 1.5 MB per token of the chunked prefill size, and a chunk sized for a large card
    takes more than a small card has. Its default chunk for this GPU sizes the reserve to
    fit; unknown, the chunk is what to lower."""
    config = inp.config
    chunk = config.chunked_prefill_size if config is not None else None
    version = config.version if config is not None else None
    total = gpu_memory_gb(config)
    default = default_chunked_prefill_size(version, total)
    reserve = f"{0.5 + 1.5 * max(chunk or 0, 2048) / 1024:.1f} GB" if chunk else "its reserve"
    why = (
        f"SGLang's own {MEM_FLAG} came out at {fraction:g}: its memory settings reserve 512 MB + "
        f"1.5 MB per --chunked-prefill-size token for activations ({reserve}"
        + (f" of a {total:g} GB GPU)" if total else ")")
    )
    if chunk and default and chunk > default:
        action = flag_action("--chunked-prefill-size", chunk, default, inp)
        expected = f"the server starts: {why}; at {default}, SGLang's default here, it fits"
        return with_expected(action, expected)
    return Action(
        f"{why}: lower --chunked-prefill-size, or set {MEM_FLAG} explicitly", None, None, None,
        "the chunk or the GPU's memory is unknown",
    )  # fmt: skip


def _raise_for_the_pool(inp: RuleInput) -> Action:
    """SGLang's own "raise above Y" when it said it; else raise by a fixed step (a failed start
    costs a full model load), capped; past the cap the model does not fit this way."""
    th = inp.thresholds
    required = inp.view.max(MEM_FRACTION_REQUIRED)
    if required is not None:
        return _raise_above(inp, required)
    crashed = _crashed_value(inp, "mem_fraction_static", too_low=True)
    if crashed is not None and crashed <= 0:
        return _reserve_ate_the_card(inp, crashed)
    ceiling, why = _ceiling(inp)
    if crashed is not None and crashed >= ceiling - 1e-9:
        return _no_fit(
            inp,
            f"{MEM_FLAG} {crashed:g} left no room for a KV pool and it may go no higher ({why})",
        )
    if crashed is None:  # no machine value: a step from an unknown value is not a value
        step = th["mem_fraction_step"]
        text = f"{MEM_FLAG}: {step:g} above the value it failed with ({LOOK_UP_FRACTION})"
        return Action(text, MEM_FLAG, None, None, "the value it failed with is unknown")
    suggested = min(ceiling, round(crashed + th["mem_fraction_step"], 2))
    action = flag_action(MEM_FLAG, crashed, suggested, inp)
    total = gpu_memory_gb(inp.config)
    room = f"about {(suggested - crashed) * total:.1f} GB more" if total else "more memory"
    return with_expected(action, f"the server starts: {room} for weights and the KV pool")


def _startup_memory(inp: RuleInput, count: float) -> tuple[str, Action]:
    """Too little memory left for the KV pool at startup: a higher fraction."""
    evidence = f"{count:.0f} failed start(s): 'Not enough memory' for the KV cache pool"
    required = inp.view.max(MEM_FRACTION_REQUIRED)
    # Sure where SGLang said which fraction the pool needs; a fixed step may still fall short.
    if required is not None:
        sure, basis = True, f"{evidence}; SGLang asked for a fraction above {required:g}"
    else:
        sure, basis = False, f"{evidence}; a fixed step: SGLang did not say how much it needs"
    action = crash_fix(inp, _raise_for_the_pool(inp), STARTUP_NOT_ENOUGH_MEMORY_EVENTS, basis, sure)
    return evidence, action


def _check_startup_memory(inp: RuleInput) -> Outcome:
    """'Not enough memory. Please try to increase --mem-fraction-static' in the window."""
    return crash_check(inp, STARTUP_NOT_ENOUGH_MEMORY_EVENTS, _NO_LOG, _startup_memory)


STARTUP_NOT_ENOUGH_MEMORY = Rule(
    id="startup_not_enough_memory",
    verifies=(RESTARTS,),  # a crash fix is judged by the crashes
    severity=Severity.CRITICAL,
    summary="The server failed to start: too little memory was left for the KV cache pool.",
    action="Raise --mem-fraction-static by 0.05 (SGLang's own advice), up to 0.95.",
    source="ours: SGLang's own startup error says 'Not enough memory. Please try to increase "
    "--mem-fraction-static'",
    check=_check_startup_memory,
    signals=(STARTUP_NOT_ENOUGH_MEMORY_EVENTS, MEM_FRACTION_REQUIRED),
    thresholds={"oom_events": 1.0, "mem_fraction_step": 0.05, "mem_fraction_max": 0.95},
    provenance={
        "oom_events": ONE_CRASH,
        "mem_fraction_step": "ours: five of the guide's 0.01 steps, since every failed start "
        "costs a full model load",
        "mem_fraction_max": "ours: as mem_fraction_too_low, past 0.95 activations have no room",
    },
    needs_up=False,
    needs_window=False,
    stability=True,
    ours=True,
)


# -- Any other crash, named from the log's words -----------------------------------------------
# Crash kinds another rule acts on, with the signal that counts them: while it counts one in
# the window, that rule names the crash (and gives its fix).
_HANDLED: dict[str, str] = {
    "cuda_graph_capture_oom": CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    "kv_pool_exhausted": KV_POOL_EXHAUSTED_EVENTS,
    "startup_not_enough_memory": STARTUP_NOT_ENOUGH_MEMORY_EVENTS,
    "allocator_bug": ALLOCATOR_BUG_EVENTS,
    "prefill_oom": PREFILL_OOM_EVENTS,
    "decode_oom": DECODE_OOM_EVENTS,
}
# What each kind of the message catalogue is, in words (sources/log/messages/classes.py).
_KINDS: dict[str, str] = {
    "allocator_bug": "allocator bug (SGLang lost track of its memory)",
    "toolchain": "toolchain or architecture (this build or its kernels do not support the GPU)",
    "driver": "NCCL/driver (a GPU, its driver, a CUDA kernel or the links between ranks failed)",
    "model": "model or quantization incompatibility (this build cannot run this checkpoint)",
    "request": "a request refused",
    "killed": "the process was killed from outside (the host's OOM killer, a container's memory "
    "limit, or a signal)",
    "native": "a crash below Python (a library or kernel segfaulted or aborted)",
    "software": "a programming error in the code the server ran (a bug, or a model, flag or "
    "version combination that code does not handle)",
    "oom": "out of memory",
    "capture_failure": "CUDA-graph capture failed, not for memory",
    "load_failure": "loading the model failed",
    "serving_failure": "a check or an error in SGLang's scheduler failed",
    "cuda_graph_capture_oom": "out of memory capturing CUDA graphs",
    "kv_pool_exhausted": "SGLang's KV pool ran out",
    "startup_not_enough_memory": "no room for the KV pool at startup",
    "prefill_oom": "out of memory in prefill",
    "decode_oom": "out of memory in decode",
}
_PHASES = {"pool_sizing": "pool sizing", "unknown": "an unknown phase"}
# What to do about a crash that is not out of memory, by its kind (capture failures: see
# `_capture_failed`).
_FAILED_DO = {
    "serving_failure": "Not out of memory: a check or an error in SGLang's own serving code, a "
    "bug in SGLang (or in a feature it was launched with) that no tuning flag is known to "
    "stop: upgrade SGLang, and report it upstream with this traceback and the request that "
    "triggered it, if the log shows one",
    "load_failure": "Not out of memory: starting the model failed in SGLang's own code, not a "
    "tuning problem: check the checkpoint, its format and quantization, and the launch flags "
    "against this SGLang version; a failed check inside SGLang is a bug to report upstream",
}
# What a traceback cut before its exception usually holds, by the phase its frames name.
_PHASE_CAUSES = {
    "capture": "capture failures are often out of memory, which SGLang's message then answers "
    "with a smaller --cuda-graph-max-bs or --mem-fraction-static; others are a kernel that "
    "cannot be captured; ",
    "prefill": "a crash in prefill is often out of memory, answered by a smaller "
    "--chunked-prefill-size; ",
    "decode": "a crash in decode is often out of memory, answered by a smaller batch "
    "(--max-running-requests) or --mem-fraction-static; ",
}
_NOT_TUNING_DO = {
    "allocator_bug": "upgrade SGLang and report it upstream with this log",
    "toolchain": "use an SGLang build (or kernels) made for this GPU and CUDA version",
    "driver": "check the driver, NCCL and the links between the GPUs (nvidia-smi, "
    "NCCL_DEBUG=INFO); a CUDA error inside one kernel is that kernel's bug: upgrade SGLang and "
    "report it with this log",
    "model": "use a checkpoint or quantization this SGLang version supports, or upgrade it",
    "request": "the client's request was refused; the server itself needs no change",
    "killed": "check the host's memory (dmesg for the OOM killer), the container's memory limit "
    "and whatever sends signals (a supervisor, a deploy): no SGLang flag stops it",
    "native": "upgrade SGLang, torch and the GPU driver, and report it upstream with this log "
    "(a core dump, `faulthandler`'s trace); no tuning flag stops it",
    "software": "upgrade SGLang (and the package the traceback ends in) and report it upstream "
    "with this traceback; no tuning flag is known to stop it. If the launch flags, the model or "
    "the version changed just before, that change is the suspect: undo it to serve meanwhile",
}


def _unhandled(inp: RuleInput) -> list[CrashReport]:
    """The log's crashes in the window that no other rule names (its kind's count is 0)."""
    since = inp.now - inp.view.window_seconds
    return [
        r
        for r in inp.crashes
        if since < r.ts <= inp.now
        and not (r.kind in _HANDLED and (inp.view.total(_HANDLED[r.kind]) or 0.0) > 0)
    ]


def _line(report: CrashReport) -> str:
    """The crash's last exception line (and where it was raised, where the reader kept it),
    else where its traceback ends."""
    if report.message and report.frame:
        return f"{report.message} (raised in {report.frame})"
    if report.message:
        return report.message
    if report.frame:
        return f"no exception line in the log; its traceback ends in {report.frame}"
    return "no exception line in the log"


def crash_named(report: CrashReport) -> str:
    """The crash in words: its class, kind, phase and its last exception line."""
    phase = _PHASES.get(report.phase, report.phase or "an unknown phase")
    if report.cls == NOT_TUNING:
        return f"not a tuning problem, {_KINDS.get(report.kind, report.kind)}: {_line(report)}"
    if report.cls == CONFIG_ERROR:
        flag = report.flag or "a launch flag"
        return f"configuration error: SGLang refused {flag}: {_line(report)}"
    if report.cls == CRASH and report.kind in _KINDS:
        return f"crash during {phase}, {_KINDS[report.kind]}: {_line(report)}"
    return f"unclassified crash during {phase}: {_line(report)}"


def _sglangs_workaround(report: CrashReport, said: str) -> Action:
    """The change SGLang's own message printed as the workaround for this crash."""
    flag, value = report.workaround_flag, report.workaround_value
    return Action(
        f"{said}. SGLang's own message gives the workaround: {flag}"
        + ("" if value == "true" else f" {value}"),
        flag,
        None,
        value,
        note="a workaround SGLang printed, not a tuning: it may cost speed (e.g. a graph or "
        "kernel path turned off); an upgrade may fix the error itself",
        expected="the server starts and serves past this error, as SGLang's message says",
        prediction=Prediction(CRASHES, None, basis="SGLang's own printed workaround"),
    )


def _what_to_do(report: CrashReport, inp: RuleInput) -> Action:
    """A crash no tuning rule knows is named, with what to check; a flag only where SGLang's
    own message printed it as the workaround, or the guide's own step for an OOM while
    serving whatever its phase."""
    said = crash_named(report).rstrip(". ")  # a sentence follows it
    if report.workaround_flag:
        return _sglangs_workaround(report, said)
    if report.cls == NOT_TUNING:
        do = _NOT_TUNING_DO.get(report.kind, "no flag change is known to stop it")
        return Action(
            f"{said}. {do[:1].upper()}{do[1:]}",
            expected="no flag change: no tuning flag stops this crash",
            prediction=Prediction(CRASHES, None, basis="not a tuning problem"),
        )
    if report.cls == CONFIG_ERROR:
        where = report.flag or "the flag the message names"
        how = "SGLang's message says how"
        if not report.flag and report.frame:  # a bare assert: its code line names the flags
            where, how = "the launch flags", f"the line the traceback shows in {report.frame}"
            how += " is the check they failed"
        return Action(
            f"{said}. Correct {where} in the launch command ({how})",
            expected="the server starts: it refused its flags before serving",
        )
    if report.kind == "capture_failure":
        return _capture_failed(inp, said)
    if report.kind in _FAILED_DO:
        return Action(
            f"{said}. {_FAILED_DO[report.kind]}",
            expected="no flag change: no tuning flag is known to stop this crash",
            prediction=Prediction(CRASHES, None, basis="not out of memory: no flag sizes it"),
        )
    if report.kind == "oom" and report.phase == "serving":
        return _general_oom(inp, said)
    if report.kind == "oom" and report.phase == "load":
        return Action(
            f"{said}. The weights did not fit while loading, before any KV pool or graph was "
            "sized, so no SGLang memory flag stops it: more GPUs (--tp-size), quantized weights, "
            "or a GPU no other process holds memory on (nvidia-smi)",
            expected="no flag change: the weights alone do not fit on this GPU as launched",
        )
    if report.kind == "oom":
        return Action(
            f"{said}. The log does not say which of SGLang's memory users ran out, so no flag "
            "value: a capture OOM asks for smaller CUDA graphs, a prefill OOM for a smaller "
            "--chunked-prefill-size, a decode OOM for a smaller batch; while loading, the "
            "weights do not fit (more GPUs or quantized weights)",
            expected="no flag change until the phase is known",
        )
    if not report.message:
        return Action(
            f"{said}. The log holds the traceback's frames but not its last line, the exception "
            f"that names the cause (cut from the excerpt?): {_PHASE_CAUSES.get(report.phase, '')}"
            "send the traceback to its end to name it; no flag value until then",
            expected="no flag change until the cause is known",
        )
    return Action(
        f"{said}. Read the traceback before this line: no tuning rule knows this crash, so no "
        "flag value is suggested",
        expected="no flag change until the cause is known",
    )


def _capture_failed(inp: RuleInput, said: str) -> Action:
    """A CUDA-graph capture that failed, not for memory. SGLang's own capture message
    (cuda_graph_runner.py, 0.4-0.5) lists four remedies: a smaller --mem-fraction-static and a
    smaller --cuda-graph-max-bs, which make room (no use here), then "disable torch compile by
    not using --enable-torch-compile" and "--disable-cuda-graph (Not recommended. Huge
    performance loss)"."""
    head = (
        f"{said}. Not out of memory, so the memory half of SGLang's own list of remedies (a "
        "smaller --mem-fraction-static or --cuda-graph-max-bs) does not apply: a kernel or a "
        "check on the captured path failed, most often a bug in SGLang or its kernels (upgrade "
        "SGLang; report it upstream with this traceback)"
    )
    basis = "SGLang's own remedies for a failed capture (cuda_graph_runner.py)"
    compile_on = inp.config.enable_torch_compile if inp.config is not None else None
    if compile_on:
        return Action(
            f"{head}. The server runs with torch.compile, which SGLang's list says to drop "
            "first: launch it without --enable-torch-compile",
            "--enable-torch-compile",
            "true",
            "false",
            note="decode may be slower at small batches without torch.compile",
            expected="the graphs capture without torch.compile's compiled kernels, and the "
            "server starts",
            prediction=Prediction(CRASHES, None, basis=basis),
        )
    compile_said = (
        ""
        if compile_on is False
        else "if the launch line has --enable-torch-compile, launch "
        "without it (SGLang's next remedy); "
    )
    return Action(
        f"{head}. To serve meanwhile: {compile_said}--disable-cuda-graph starts the server "
        "without graphs, at a large cost in decode speed (SGLang: 'Huge performance loss'), so "
        "no flag value is suggested",
        expected="no flag change: no tuning flag makes a kernel capturable",
        prediction=Prediction(CRASHES, None, basis=basis),
    )


def _general_oom(inp: RuleInput, said: str) -> Action:
    """The guide's step for an OOM in prefill or decode alike (Avoid Out-of-Memory Errors: "reduce
    --mem-fraction-static to 0.8 or 0.7 ... helps prevent OOM errors during both prefill and
    decoding"): the log shows the serving loop ran out, not which pass."""
    ladder = {**MEM_FRACTION_TOO_HIGH.thresholds, **inp.thresholds}  # its 0.8 / 0.7 steps
    action = lower_mem_fraction(replace(inp, thresholds=ladder))
    action = with_note(action, f"{said}: the log does not say prefill or decode")
    return with_expected(
        action, "no more out-of-memory crashes while serving: a smaller KV pool leaves the "
        "forward passes room (the guide's step for either phase); fewer requests fit at once",
    )  # fmt: skip


def _check_crash_diagnosed(inp: RuleInput) -> Outcome:
    """Any crash in the window that no other crash rule names: said as what the log's message
    catalogue and generic families make of it; a flag value only where SGLang printed one as
    the crash's workaround."""
    reports = _unhandled(inp)
    if not reports:
        if inp.view.present(OTHER_CRASH_EVENTS) == 0 and not inp.crashes:
            return NoData(_NO_LOG, inp.view.window_seconds)
        return Pass(0.0, inp.view.count)
    latest = reports[-1]
    others = f" ({len(reports)} in the window, the latest named)" if len(reports) > 1 else ""
    evidence = f"the log ends a process in a crash{others}: {crash_named(latest)}"
    sure = latest.cls != UNCLASSIFIED
    confidence = Confidence.HIGH if sure else Confidence.MEDIUM
    # a refused request the log ends in is said, but the server itself did not fail
    refused = latest.cls == NOT_TUNING and latest.kind == "request"
    return Finding(evidence, _what_to_do(latest, inp), confidence, 1.0, max(1, inp.view.count),
                   Severity.INFO if refused else None)  # fmt: skip


CRASH_DIAGNOSED = Rule(
    id="crash_diagnosed",
    verifies=(RESTARTS,),
    severity=Severity.CRITICAL,
    summary="The server crashed of something no tuning rule fixes: the crash named from the log.",
    action="Act on what the crash is: not a tuning problem (its kind), a configuration error "
    "(the flag it names), or an unclassified crash (its phase and last line); a flag value only "
    "where SGLang's own message printed it as the workaround, or for an out-of-memory crash "
    "while serving (prefill or decode not said) the guide's step for both: a lower "
    "--mem-fraction-static; a capture that failed not for memory, SGLang's own remedy that acts "
    "on it (--enable-torch-compile off where it is on).",
    source="ours: every crash a log ends in gets a name, from SGLang's message catalogue "
    "(0.4.0-0.5.23) and the generic families (docs/log-messages.md)",
    check=_check_crash_diagnosed,
    signals=(OTHER_CRASH_EVENTS,),
    needs_up=False,
    needs_window=False,
    stability=True,
    ours=True,
)
