"""What a crash's last exception line says: the catalogued SGLang message it prints, else a
generic family any framework prints (an OOM from torch, tvm, triton or flashinfer; a CUDA-graph
capture failure with any cause; a toolchain or driver error; a Python programming error), else
unclassified.

Also finds the final exception of a traceback whose newlines were lost in a paste.
"""

import re
from dataclasses import replace
from functools import lru_cache

from sglang_tuner.sources.log.messages.catalogue import Message, lookup
from sglang_tuner.sources.log.messages.classes import (
    CONFIG,
    CRASH,
    FAILURES,
    NOT_TUNING,
    Verdict,
)
from sglang_tuner.sources.log.messages.patterns import Pattern

UNCLASSIFIED = "unclassified"
# Crash kinds a message names itself; any other crash message that holds an OOM is an OOM.
_NAMED_CRASHES = frozenset(
    {"kv_pool_exhausted", "startup_not_enough_memory", "cuda_graph_capture_oom"}
    | {"prefill_oom", "decode_oom"}
)


# Generic families, first match wins (searched in the line as printed; linear alternations).
# The note PyTorch adds after every CUDA error's message (c10's CUDA check): "CUDA kernel errors
# might be asynchronously reported ...", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
# "Compile with `TORCH_USE_CUDA_DSA` ...": the error is a kernel's or the driver's, whichever of
# its lines a paste kept.
CUDA_NOTE = r"CUDA kernel errors might be asynchronously|CUDA_LAUNCH_BLOCKING|TORCH_USE_CUDA_DSA"
_FAMILIES: tuple[tuple[str, str, str, str, re.Pattern[str]], ...] = (
    (  # before "oom": the kernel's "Out of memory: Killed process" is the host's RAM
        "killed",
        NOT_TUNING,
        "killed",
        "",
        re.compile(
            r"^Killed$|Killed process \d|oom[-_]kill|OOMKilled|exit code 137|\bSIGKILL\b"
            r"|signal 9\b"
        ),
    ),
    (
        "oom",
        CRASH,
        "oom",
        "",
        re.compile(
            r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
            r"|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory|hipErrorOutOfMemory",
            re.IGNORECASE,
        ),
    ),
    (
        "capture",
        CRASH,
        "capture_failure",
        "capture",
        re.compile(
            r"Capture [\w -]*?graph failed|graph capture failed|stream is capturing"
            r"|during CUDA graph capture|cudaErrorStreamCapture",
            re.IGNORECASE,
        ),
    ),
    (
        "toolchain",
        NOT_TUNING,
        "toolchain",
        "",
        re.compile(
            r"ptxas|\bsm_\d+|no kernel image is available|not compiled for|undefined symbol"
            r"|ModuleNotFoundError|ImportError|CUDA driver version is insufficient"
            r"|unsupported (?:GPU|architecture)|compute capability|nvcc|triton\.compiler"
            r"|CompilationError|JIT compil",
            re.IGNORECASE,
        ),
    ),
    (
        "driver",
        NOT_TUNING,
        "driver",
        "",
        re.compile(
            r"NCCL|DistBackendError|ProcessGroup|Connection (?:refused|reset)|Broken pipe"
            r"|timed out|[Ww]atchdog|illegal memory access|device-side assert|ECC error"
            r"|uncorrectable|cudaErrorLaunchFailure|CUDA error: unspecified launch failure"
            r"|peer access|RDMA|ibv_|CUDA error:|cudaError|CUDA driver|" + CUDA_NOTE,
        ),
    ),
    (
        "native",
        NOT_TUNING,
        "native",
        "",
        re.compile(
            r"Segmentation fault|Bus error|Illegal instruction|core dumped|^Aborted"
            r"|Fatal Python error|terminate called after throwing|\bSIGSEGV\b|\bSIGABRT\b"
        ),
    ),
)
# Python's own exceptions for code that is wrong, not for a state it met: no flag, memory or load
# raises them where the code is right (a missing key or attribute, a wrong type, an unmet assert,
# a method left unimplemented). Uncatalogued, they are a bug in the code the traceback ends in, or
# a model, flag or version combination that code does not handle. ValueError and RuntimeError are
# not here: SGLang and torch raise them for states (a request too long, a CUDA error).
PROGRAMMING_ERRORS = frozenset(
    "AssertionError AttributeError KeyError IndexError TypeError NameError UnboundLocalError"
    " ZeroDivisionError NotImplementedError RecursionError StopIteration".split()
)
SOFTWARE = "software"
# The start of a Python exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...",
# "tvm.error.InternalError: ...", a bare "Exception: ...".
EXCEPTION_NAME = (
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|Exception|Error)"
)
EXCEPTION = re.compile(rf"(?<![\w.])({EXCEPTION_NAME})(?::\s|:?$)")
# A traceback's frame as Python prints it: its head, and the function after it.
FRAME_HEAD = r'File "[^"\n]{1,1024}", line \d{1,7}'
FRAME_FUNC = r"[\w<>.]{1,256}"
_FRAME_END = re.compile(rf"{FRAME_HEAD}(?:, in {FRAME_FUNC})?")


def final_exception(text: str) -> str:
    """The exception a one-line traceback ends in (everything from the exception's name on
    after its last frame), or "" when `text` holds none."""
    ends = [frame.end() for frame in _FRAME_END.finditer(text)]
    tail = text[ends[-1] :] if ends else text
    found = EXCEPTION.search(tail)
    return tail[found.start() :].strip() if found else ""


def is_exception_line(text: str) -> bool:
    """True for a Python exception line ("ValueError: ...", "Exception: ...", a bare
    "NotImplementedError" however the line ends: a CRLF's carriage return is no text)."""
    text = text.rstrip()
    found = EXCEPTION.search(text)
    return found is not None and not text[: found.start()].strip(" \t")


@lru_cache(maxsize=1024)
def diagnose(text: str) -> Verdict:
    """The class of a crash's last exception line (each TP rank prints the same one: cached)."""
    message = lookup(text)
    oom = _OOM.search(text) is not None
    if message is not None and message.call in FAILURES:
        verdict = message.verdict
        source = f"catalogue: {message.call} in {message.module} ({message.versions})"
        named = verdict.cls == CRASH and verdict.kind in _NAMED_CRASHES
        if _cause_elsewhere(message, text):
            return Verdict(UNCLASSIFIED, phase=verdict.phase, rule=f"{source}; a later line")
        if verdict.cls in (CRASH, CONFIG, NOT_TUNING) and (named or not oom):
            return _cause(replace(verdict, rule=source), text)
    for family, cls, kind, phase, pattern in _FAMILIES:
        if pattern.search(text):
            return _cause(Verdict(cls, kind, phase, rule=f"fallback: {family}"), text)
    name = exception_name(text)
    if name in PROGRAMMING_ERRORS:
        return Verdict(NOT_TUNING, SOFTWARE, rule=f"fallback: {SOFTWARE} ({name})")
    return Verdict(UNCLASSIFIED)


def exception_name(text: str) -> str:
    """The class name of the first exception a line names, without its module
    ("builtins.KeyError: 'x'" -> "KeyError"), or "" for none."""
    found = EXCEPTION.search(text)
    return found.group(1).rsplit(".", 1)[-1] if found else ""


def _cause_elsewhere(message: Message, text: str) -> bool:
    """True for a later line of "Capture cuda graph failed: {cause}" (its possible solutions)
    without that first line: the cause, out of memory or not, is there, not in `text`."""
    if not message.continues or message.verdict.kind != "capture_failure":
        return False
    first = Pattern.parse(message.continues)  # or another release's wording of it
    return not (first.matches(text) or _CAPTURE.search(text))


def _cause(said: Verdict, text: str) -> Verdict:
    """A capture failure whose message names a toolchain cause (a kernel that does not compile
    for this GPU: `ptxas`, `sm_120`) is that cause, in the capture phase: no flag fixes it."""
    if said.kind == "capture_failure" and _TOOLCHAIN.search(text):
        return Verdict(NOT_TUNING, "toolchain", said.phase, rule=f"{said.rule}; cause: toolchain")
    return said


# A capture failure's toolchain cause (see `_cause`); any framework's OOM (see `diagnose`).
_TOOLCHAIN = next(pattern for family, *_, pattern in _FAMILIES if family == "toolchain")
_OOM = next(pattern for family, *_, pattern in _FAMILIES if family == "oom")
_CAPTURE = next(pattern for family, *_, pattern in _FAMILIES if family == "capture")
