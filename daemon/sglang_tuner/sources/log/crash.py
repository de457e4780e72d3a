"""Classify SGLang crashes from the log: which kind of failure, counted once per crash.

A crash shows up as a multi-line traceback record ("Scheduler hit an exception: Traceback ...")
that every TP rank prints, often with a sigquit line and NCCL noise around it. The kind comes
from the record's own text first (KV-pool and startup messages, CUDA OOM text, the frames it ran
through), then from where the server was (capturing CUDA graphs, starting, serving), and only
last from the batch the scheduler logged last. One crash is one "burst": the records and fatal
lines within `BURST_SECONDS` of each other (log time), ended early by a process start or a
startup summary. A burst counts each specific kind once (so the same exception from eight TP
ranks is one event); `other_crash` counts once, and only for a burst with no specific kind.

What the hand-written readers do not recognise is read from the crash's last exception line by
the message catalogue (`messages/`): every message SGLang 0.4-0.5 can raise, classified, then
generic families (an OOM from any framework, a capture failure with any cause, toolchain and
driver errors, a Python programming error: a bug, or a checkpoint the model's code does not
handle where the weights load). Each burst leaves one `CrashDiagnosis`: its class, kind, phase
and last exception line, "unclassified" where nothing knew it. A traceback without SGLang's
header is a crash when its exception is one (a refused request or a programming error is not),
or when the log ends with it. A line that is a catalogued failure on its own (an excerpt's: a
multi-line message's later line, a message pasted without its exception's name) ends a log in
that crash; a pool OOM's and a failed pool sizing's lines, which SGLang prints only as it
fails, count their kind wherever no line named the crash yet.
"""

import re
from collections import Counter
from dataclasses import dataclass, field, replace

from sglang_tuner.model.strenum import StrEnum
from sglang_tuner.sources.log.messages.catalogue import Message, catalogue, lookup
from sglang_tuner.sources.log.messages.classes import CONFIG, CRASH, FAILURES, NOT_TUNING, Verdict
from sglang_tuner.sources.log.messages.exceptions import (
    CUDA_NOTE,
    SOFTWARE,
    UNCLASSIFIED,
    diagnose,
    final_exception,
    is_exception_line,
)

MESSAGE_CHARS = 400  # of a diagnosis's exception line (a CUDA OOM's runs to 600)
BURST_SECONDS = 60.0  # TP ranks print the same traceback within about a second of each other


class CrashKind(StrEnum):
    """The closed set of crash kinds; each value is a `LogCounts` field and a signal stem."""

    CUDA_GRAPH_CAPTURE_OOM = "cuda_graph_capture_oom"
    PREFILL_OOM = "prefill_oom"
    DECODE_OOM = "decode_oom"
    KV_POOL_EXHAUSTED = "kv_pool_exhausted"
    STARTUP_NOT_ENOUGH_MEMORY = "startup_not_enough_memory"
    ALLOCATOR_BUG = "allocator_bug"
    OTHER_CRASH = "other_crash"


class Phase(StrEnum):
    """Where the server was when the last lines were written."""

    UNKNOWN = "unknown"  # nothing seen yet (e.g. the follower started mid-file)
    STARTUP = "startup"  # a process started and has not printed its startup summary
    CAPTURE = "capture"  # between "Capture ... graph begin" and "... end"
    SERVING = "serving"


_NOT_ENOUGH = re.compile(
    r"Not enough memory\. Please try to increase --mem-fraction-static"
    r"|the profiled value -\d"  # 0.4.x: the weights left a negative pool (its crash follows)
    r"|leaves no room for the full KV pool"  # hybrid SWA pools (0.5.23)
    r"|Loaded weights leave no GPU memory for the KV cache"  # 2026 builds (DeepSeek-V4 era)
)
# The allocator's own leak check (scheduler_runtime_checker): "token_to_kv_pool_allocator memory
# leak detected!", "KV cache pool leak detected!", a mamba slot leak.
_LEAK = re.compile(r"leak detected", re.IGNORECASE)
# A pool OOM's own numbers (mem_cache allocation): "Try to allocate 148 tokens." then
# "Avaliable tokens: 2048" (SGLang's spelling) or "...available_size()=2048".
_WANT = re.compile(r"Try to allocate (\d+) tokens")
_HAVE = re.compile(r"Ava(?:li|il)able tokens: (\d+)|\.available_size\(\)=(\d+)")
_KV_POOL = re.compile(
    r"(?:Prefill|Decode) out of memory\. (?:Try to lower your batch size|This should never happen)"
    r"|alloc_req_slots runs out of memory"
    r"|Out of memory\. Please set a smaller number for `--max-running-requests`"  # <= 0.4.3
    r"|No space left for only one request"
)
_CUDA_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY"
    r"|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED"
)
_CAPTURE_FAILED = re.compile(r"Capture [\w -]*?graph failed")
_FATAL = re.compile(
    r"\b[A-Za-z]+ hit an exception:|\bException in [A-Za-z_]+:"
    r"|[Ww]atchdog timeout \(self\.watchdog_timeout=(?![^)]*soft=True)"
    r"|Watchdog caught collective operation timeout|NCCL error|DistBackendError"
    r"|Received sigquit from a child process"
)
_HEAD = re.compile(
    r"\b[A-Za-z]+ hit an exception:|\bException in [A-Za-z_]+:|Traceback \(most recent call last\):"
)
_FRAME = re.compile(r'File "(?:[^"]*[/\\])?([^"/\\]+)", line \d+, in (\w+)')

# Frame functions by phase, every version (0.1-0.2: forward_fill_batch, forward_prefill_batch,
# forward_decode_batch; 0.5.23: the eager runner's _execute_*, cuda_graph_setup's capture_*).
_CAPTURE_FUNCS = frozenset(
    "capture capture_one_batch_size graph_capture init_cuda_graphs init_device_graphs"
    " init_all_cuda_graphs init_piecewise_cuda_graphs capture_cuda_graphs capture_decode_graph"
    " capture_prefill_graph".split()
)
_PREFILL_FUNCS = frozenset(
    "forward_extend _execute_extend _execute_extend_cp forward_split_prefill forward_prefill_batch"
    " forward_fill_batch prepare_for_extend get_new_batch_prefill process_batch_result_prefill"
    " forward_target_extend".split()
)
_DECODE_FUNCS = frozenset(
    "forward_decode _execute_decode forward_decode_batch prepare_for_decode update_running_batch"
    " process_batch_result_decode forward_draft_extend_after_decode".split()
)
# Frames of a process still starting: loading weights, sizing the pools (a CUDA OOM there is an
# init OOM, no prefill or decode ran; sgl-project/sglang threads of H20 and 24 GB cards).
_INIT_FUNCS = frozenset(
    "init_tp_model_worker init_model_worker init_memory_pool load_model load_weights"
    " init_torch_distributed _create_buffers initialize".split()
)
_POOL_FUNCS = frozenset({"init_memory_pool", "_create_buffers", "profile_max_num_token"})
# Frames of the serving loop, which run forward passes (0.4-0.5 scheduler.py's event loops and
# run_batch, tp_worker.py's forward_batch_generation, 0.4's tp_worker_overlap_thread.py): a
# crash under them happened while serving, prefill or decode not said.
_SERVING_FUNCS = frozenset(
    "event_loop_normal event_loop_overlap run_batch forward_batch_generation"
    " forward_thread_func forward_thread_func_".split()
)
# Startup lines that say which stage a starting process is in (every version 0.4-0.5).
_STAGES = (
    ("Load weight begin", "load"),
    ("Load weight end", "pool_sizing"),
    ("KV Cache is allocated", "capture"),
    ("Memory pool end", "capture"),
)
# What a catalogued or generic class counts as, where it is one of the kinds the rules know.
_COUNTED = {
    (NOT_TUNING, "allocator_bug"): "allocator_bug",
    (CRASH, "kv_pool_exhausted"): "kv_pool_exhausted",
    (CRASH, "startup_not_enough_memory"): "startup_not_enough_memory",
}
_PREFILL_GRAPH_FILES = frozenset({"piecewise_cuda_graph_runner.py", "prefill_cuda_graph_runner.py"})


def frame_phase(filename: str, func: str) -> CrashKind | None:
    """What one traceback frame says: capture, prefill or decode (as the OOM kind), or None."""
    if func in _CAPTURE_FUNCS or (func == "__init__" and filename.endswith("graph_runner.py")):
        return CrashKind.CUDA_GRAPH_CAPTURE_OOM
    if func in _PREFILL_FUNCS:
        return CrashKind.PREFILL_OOM
    if func in _DECODE_FUNCS or (func in ("verify", "draft") and "eagle" in filename):
        return CrashKind.DECODE_OOM
    if func in ("replay", "execute") and filename.endswith("graph_runner.py"):
        prefill = filename in _PREFILL_GRAPH_FILES
        return CrashKind.PREFILL_OOM if prefill else CrashKind.DECODE_OOM
    return None


@dataclass(frozen=True, slots=True)
class CrashDiagnosis:
    """One crash, said in words: its class (crash, config_error, not_tuning, unclassified),
    kind, phase (load, pool_sizing, capture, prefill, decode, serving, startup, unknown), the
    last exception line, the flag a configuration error names, what classified it, and the
    workaround SGLang's own message gave for it, where it printed one."""

    cls: str
    kind: str
    phase: str
    message: str
    flag: str = ""
    source: str = ""
    frame: str = ""  # where the traceback ends ("file in function"), when no line says why
    workaround_flag: str = ""  # SGLang's own workaround printed with the crash (`workaround`)
    workaround_value: str = ""


@dataclass(slots=True)
class _Record:
    """One traceback record being read: what its frames and lines said so far."""

    ts: float | None
    fatal: bool  # the header says the process dies ("... hit an exception:")
    capture: bool = False
    init: bool = False  # a frame of the process starting (weights, pools)
    phase: CrashKind | None = None  # the innermost prefill/decode frame
    specific: bool = False  # a specific kind was counted from this record
    stale: bool = False  # already open at the previous `flush_stale`
    stage: str = ""  # load or pool_sizing, from the frames of a starting process
    last: str = ""  # the last exception line
    frame: str = ""  # the innermost frame so far ("file in function")
    request: bool = False  # raised serving a request (the HTTP server's): the server lives on


@dataclass(slots=True)
class _Burst:
    """The lines of one crash across ranks."""

    start: float | None
    kinds: set[CrashKind] = field(default_factory=set)
    fatal: bool = False  # fatal evidence seen (other_crash unless a specific kind shows up)
    stale: bool = False  # already open at the previous `flush_stale`
    said: CrashDiagnosis | None = None  # what its records and lines said (`_say`)
    strong: bool = False  # `said` comes from an exception line, not a fatal line around it
    phase: str = ""  # the phase its records' frames name


class CrashTracker:
    """Reads crash evidence line by line and counts one event per crash and kind."""

    def __init__(self) -> None:
        self.phase = Phase.UNKNOWN
        self._last_batch: CrashKind | None = None  # PREFILL_OOM or DECODE_OOM
        self.events: Counter[CrashKind] = Counter()
        self.record: _Record | None = None
        self._burst: _Burst | None = None
        self.last_ts: float | None = None  # of the last crash line; None after other lines
        self._pool_oom: list[int | None] | None = None  # [wanted, free] after a pool OOM line
        self._unplaced_oom = False  # a CUDA OOM seen before anything said where the server was
        self.stage = ""  # a starting process's stage, from its startup lines
        self.diagnoses: list[CrashDiagnosis] = []  # one per ended burst, since the take
        self._pending: CrashDiagnosis | None = None  # a bare traceback nothing has run after
        self._request = False  # the line before a traceback said it serves a request
        self._loose = ""  # the last exception line seen outside a traceback (an excerpt's)
        self._last_words = ""  # a process's end said outside a traceback, nothing run since
        self._workaround: tuple[str, str, float | None] | None = None  # flag, value, log time

    @property
    def last_batch(self) -> CrashKind | None:
        """PREFILL_OOM or DECODE_OOM after a batch line: a batch ran, so a bare traceback
        before it did not end the process."""
        return self._last_batch

    @last_batch.setter
    def last_batch(self, kind: CrashKind | None) -> None:
        if kind is not None:
            self._pending, self._last_words = None, ""
        self._last_batch = kind

    def take_diagnoses(self) -> tuple[CrashDiagnosis, ...]:
        """The diagnoses of the bursts that ended since the previous take."""
        taken, self.diagnoses = tuple(self.diagnoses), []
        return taken

    def finish(self) -> None:
        """The log ended: a bare traceback nothing ran after was the process's end."""
        self.close_record()
        pending, self._pending = self._pending, None
        words, self._last_words = self._last_words, ""
        if pending is None and words and self._burst is None:
            said = diagnose(words)  # the log's last words: an exception or the process dying
            if said.cls == UNCLASSIFIED or said.kind == SOFTWARE or _is_crash(said):
                pending = self._diagnosis(said, words, None)
        if pending is not None:
            burst = self._burst_at(self.last_ts)
            burst.fatal = True
            burst.said = burst.said or pending
        self.end_burst()

    def process_start(self, phase: Phase) -> None:
        """A new process (STARTUP) or its startup summary (SERVING): the previous crash is over."""
        self._pool_oom, self._unplaced_oom = None, False
        self.close_record()
        self.end_burst()
        self.phase, self.last_batch, self.last_ts = phase, None, None
        self.stage, self._pending = ("load" if phase is Phase.STARTUP else ""), None
        self._loose, self._workaround, self._last_words = "", None, ""

    def line(self, text: str, ts: float | None) -> None:
        """A line outside a traceback record that passed the keyword filter."""
        self.last_ts = ts if ts is not None else self.last_ts
        if _HEAD.search(text):  # a bare traceback is fatal only if its text says so
            fatal = _FATAL.search(text) is not None
            self.record = _Record(self.last_ts, fatal, request=self._request)
        elif self.record is None and _FRAME.search(text):  # an excerpt cut inside a traceback
            self.record = _Record(self.last_ts, fatal=False)
        elif self.record is None and is_exception_line(_bare(text)):
            self._loose = self._last_words = _bare(text)
        elif self.record is None and _DEATH.search(_bare(text)):
            self._last_words = _bare(text)
        elif self.record is None and _catalogued_crash(_bare(text)):
            # an SGLang failure printed without its exception's name: a pasted message, or a
            # later line of a multi-line one ("Try to allocate 4 tokens.", "Possible solutions")
            self._loose = self._last_words = _bare(text)
        elif self.record is None and _CUDA_NOTE.search(text):
            # after a CUDA error: the error's own line, where the paste kept it, says more
            self._loose = self._loose or _bare(text)
            self._last_words = self._last_words or _bare(text)
        elif self.record is None and _CAUSE_LINE.search(text):  # a CUDA error said on its own
            if diagnose(_bare(text)).cls != UNCLASSIFIED:
                self._loose = _bare(text)
        self._request = _REQUEST.search(text) is not None
        if "--" in text:
            self._note_workaround(text, self.last_ts)
        for marker, stage in _STAGES:
            if marker in text:
                self.stage = stage
        if self.record is not None and 'File "' in text:  # a traceback pasted on one line
            self._joined(text)
            return
        self._evidence(text)

    def _joined(self, text: str) -> None:
        """A whole traceback on one line: each frame, then its final exception."""
        for frame in _FRAME.finditer(text):
            self._frame(frame.group(1), frame.group(2))
        last = final_exception(text)
        if self.record is not None and last:
            self.record.last = last
        self._evidence(last or text)

    def record_line(self, text: str) -> None:
        """A continuation line of the open record (a frame, code, or the exception)."""
        record = self.record
        assert record is not None
        frame = _FRAME.search(text) if 'File "' in text else None
        if frame is None:
            if "--" in text:
                self._note_workaround(text, record.ts)
            if is_exception_line(text) or _RAISED.match(text):
                record.last = text.strip()
            self._evidence(text)
            return
        record.request = record.request or _REQUEST.search(text) is not None
        self._frame(frame.group(1), frame.group(2))

    def _frame(self, filename: str, func: str) -> None:
        """What one frame of the open record says."""
        record = self.record
        assert record is not None
        record.frame = f"{filename} in {func}"
        if func in _INIT_FUNCS or func in _POOL_FUNCS:
            record.init = True
            record.stage = "pool_sizing" if func in _POOL_FUNCS else record.stage or "load"
            self._unplaced_oom = False  # an init OOM: no kind of ours
        elif func in _SERVING_FUNCS and not record.init:
            record.stage = record.stage or "serving"
        said = frame_phase(filename, func)
        if said is not None and self._unplaced_oom:  # the traceback after the OOM line says
            self._unplaced_oom = False
            self._count(said)
        if said is CrashKind.CUDA_GRAPH_CAPTURE_OOM:
            record.capture = True
        elif said is not None:
            record.phase = said  # later frames are deeper: the innermost one wins

    def close_record(self) -> None:
        """The record ended: its last exception says what it was (the catalogue, then generic
        families); a fatal one with no specific kind is some other crash."""
        record, self.record = self.record, None
        if record is None:
            return
        if self._burst is not None:  # the frames of a traceback that follows a crash line
            self._burst.phase = self._burst.phase or self._frames_phase(record)
        said = diagnose(record.last) if record.last else Verdict(UNCLASSIFIED)
        fatal = record.fatal or _is_crash(said)
        if not (fatal or record.specific):
            if not record.request:  # a crash if nothing runs after it (the log ends in it)
                self._pending = self._diagnosis(said, record.last, record)
            return
        burst = self._burst_at(record.ts)
        burst.phase = burst.phase or self._frames_phase(record)
        self._say(burst, self._diagnosis(said, record.last, record), strong=bool(record.last))
        counted = _COUNTED.get((said.cls, said.kind))
        if counted is not None and not record.specific:
            self._count(CrashKind(counted))
        elif not record.specific:
            burst.fatal = True

    def end_burst(self) -> None:
        """Count the pending `other_crash` of the current burst, if it had no specific kind,
        and keep its diagnosis."""
        burst, self._burst = self._burst, None
        if burst is None or not (burst.fatal or burst.kinds):
            return
        if not burst.kinds:
            self.events[CrashKind.OTHER_CRASH] += 1
        self.diagnoses.append(self._with_workaround(self._said_of(burst), burst.start))

    def _with_workaround(self, said: CrashDiagnosis, start: float | None) -> CrashDiagnosis:
        """The diagnosis with the workaround SGLang printed around its crash (within the burst's
        span of log time, or anywhere in a log without times)."""
        seen = self._workaround
        if seen is None:
            return said
        flag, value, ts = seen
        if ts is not None and start is not None and abs(ts - start) > BURST_SECONDS:
            return said
        return replace(said, workaround_flag=flag, workaround_value=value)

    def _note_workaround(self, text: str, ts: float | None) -> None:
        """Keep the change a line gives as SGLang's workaround, if it gives one."""
        if (said := workaround(text)) is not None:
            self._workaround = (*said, ts)

    def _said_of(self, burst: _Burst) -> CrashDiagnosis:
        """A burst's diagnosis: the kind the hand-written readers counted wins."""
        said = burst.said or self._diagnosis(Verdict(UNCLASSIFIED), "", None)
        if burst.phase and said.phase in _VAGUE_PHASES:
            said = replace(said, phase=burst.phase)
        known = sorted(kind.value for kind in burst.kinds)
        if not known or (said.cls, said.kind) in _COUNTED or said.kind in known:
            return said
        cls = NOT_TUNING if known[0] == CrashKind.ALLOCATOR_BUG.value else CRASH
        return CrashDiagnosis(
            cls, known[0], said.phase, said.message, source="log reader", frame=said.frame
        )

    def _diagnosis(self, said: Verdict, message: str, record: _Record | None) -> CrashDiagnosis:
        """A diagnosis, its phase from the message's class, else from where the server was."""
        if not message and self._loose:  # the excerpt's only exception line
            message = self._loose
            said = diagnose(message) if said.cls == UNCLASSIFIED else said
        phase = said.phase or self._where(record)
        said = _software_where(said, phase, record.frame if record is not None else "")
        kind = said.kind or ("" if said.cls == CONFIG else UNCLASSIFIED)
        message = _bare(message)[:MESSAGE_CHARS]
        # where the traceback ends, where no line says why, or where a programming error was
        # raised (its line names no cause: the place is the lead)
        placed = not message or said.kind == SOFTWARE or said.rule.endswith((_LOADING, _ARGS))
        frame = record.frame if record is not None and placed else ""
        return CrashDiagnosis(said.cls, kind, phase, message, said.flag, said.rule, frame)

    def _say(self, burst: _Burst, said: CrashDiagnosis, strong: bool) -> None:
        """Keep `said` as the burst's diagnosis where it says more than what it has: an
        exception line over a fatal line around it, anything over unclassified, and an
        unclassified traceback's frames over a line that names none (a parent's sigquit only
        says that a child failed; the child's traceback says where)."""
        old = burst.said
        unplaced = (
            old is not None
            and old.cls == UNCLASSIFIED
            and not old.frame
            and (not old.message or bool(_SIGQUIT.search(old.message)))
        )
        if (
            old is None
            or (strong and not burst.strong)
            or (old.cls == UNCLASSIFIED and said.cls != UNCLASSIFIED and strong >= burst.strong)
            or (unplaced and bool(said.frame) and strong >= burst.strong)
        ):
            burst.said, burst.strong = said, strong or burst.strong

    @staticmethod
    def _frames_phase(record: _Record) -> str:
        """The phase a record's frames name ("" when they name none)."""
        if record.capture:
            return "capture"
        if record.phase is not None:
            return _PHASE_NAMES[record.phase]
        return record.stage

    def _where(self, record: _Record | None) -> str:
        """The phase a crash happened in: its frames, else the server's phase (a serving-loop
        frame alone yields to the batch the server ran last)."""
        named = self._frames_phase(record) if record is not None else ""
        if named and not (named == "serving" and self.last_batch is not None):
            return named
        if self.phase is Phase.CAPTURE:
            return "capture"
        if self.phase is Phase.STARTUP:
            return self.stage or "startup"
        if self.last_batch is not None:
            return _PHASE_NAMES[self.last_batch]
        return "serving" if self.phase is Phase.SERVING else "unknown"

    def flush_stale(self) -> None:
        """End what was already open at the previous call (one poll's grace for other ranks)."""
        if self.record is not None:
            if self.record.stale:
                self.close_record()
            else:
                self.record.stale = True
        if self._burst is not None:
            if self._burst.stale:
                self.end_burst()
            else:
                self._burst.stale = True

    def _evidence(self, text: str) -> None:
        """Count what one line proves, in order of specificity."""
        if self._pool_oom is not None and self._pool_numbers(text):
            return
        kind = _specific_kind(text)
        if kind is None and not (self._burst is not None and self._burst.kinds):
            kind = _catalogued_kind(text)  # a line of a message whose crash no line named yet
        if kind is CrashKind.KV_POOL_EXHAUSTED:
            self._pool_oom = [None, None]
        oom = kind is None and _CUDA_OOM.search(text) is not None
        if oom:
            kind = self._oom_kind()
        if kind is not None:
            self._count(kind, text)
            if kind is CrashKind.KV_POOL_EXHAUSTED:  # its numbers on the same line (newlines lost)
                self._pool_numbers(text)
        elif oom or _CAPTURE_FAILED.search(text) or _FATAL.search(text):
            self._mark_fatal(text)
        elif self.record is None and _FATAL_LINE.search(text):  # ptxas, NCCL, ... on their own
            if _is_crash(diagnose(_bare(text))):
                self._mark_fatal(text)

    def _pool_numbers(self, text: str) -> bool:
        """A pool OOM's numbers, one line each or both on one (a paste whose newlines were
        lost); free tokens covering the request make it an allocator bug (the pool did not run
        out: its allocator failed). True when the line held one."""
        pool = self._pool_oom
        assert pool is not None
        want, have = _WANT.search(text), _HAVE.search(text)
        if want is None and have is None:
            return False
        if want is not None:
            pool[0] = int(want.group(1))
        if have is not None:
            pool[1] = int(have.group(1) or have.group(2))
        wanted, free = pool
        if wanted is not None and free is not None:
            self._pool_oom = None
            if free >= wanted:
                self._reclassify(CrashKind.KV_POOL_EXHAUSTED, CrashKind.ALLOCATOR_BUG)
        return True

    def _reclassify(self, was: CrashKind, kind: CrashKind) -> None:
        """The crash counted as `was` is `kind` after all."""
        burst = self._burst
        if burst is None or was not in burst.kinds:
            return
        burst.kinds.discard(was)
        if burst.said is not None and burst.said.kind == was.value:
            burst.said = replace(burst.said, cls=NOT_TUNING, kind=kind.value)
        if self.events[was] > 0:  # not yet taken: the crash is counted as its true kind only
            self.events[was] -= 1
        if kind not in burst.kinds:
            burst.kinds.add(kind)
            self.events[kind] += 1

    def _oom_kind(self) -> CrashKind | None:
        """A CUDA OOM's kind: frames first, then the server's phase, then the last batch."""
        record = self.record
        if record is not None and record.capture:
            return CrashKind.CUDA_GRAPH_CAPTURE_OOM
        if record is not None and record.phase is not None:
            return record.phase
        if record is not None and record.init:
            return None  # an init OOM: weights or pools, before any forward pass
        if self.phase is Phase.CAPTURE:
            return CrashKind.CUDA_GRAPH_CAPTURE_OOM
        if self.phase is Phase.STARTUP:
            return None  # loading weights or sizing the pool: some other crash
        if self.phase is Phase.UNKNOWN and self.last_batch is None:
            # nothing says whether it served yet: the traceback that follows may (its frames),
            # else it stays some other crash (an init OOM is no prefill OOM)
            self._unplaced_oom = True
            return None
        return self.last_batch or CrashKind.PREFILL_OOM  # a process's first forward is a prefill

    def _count(self, kind: CrashKind, text: str = "") -> None:
        """One specific kind, once per burst (`text`: the line that proved it)."""
        burst = self._burst_at(self.record.ts if self.record else self.last_ts)
        if self.record is not None:
            self.record.specific = True
        if kind not in burst.kinds:
            burst.kinds.add(kind)
            self.events[kind] += 1
        if text:
            phase = _PHASE_NAMES.get(kind) or self._where(self.record)
            cls = NOT_TUNING if kind is CrashKind.ALLOCATOR_BUG else CRASH
            said = CrashDiagnosis(cls, kind.value, phase, _bare(text), source="log reader")
            self._say(burst, said, strong=True)

    def _mark_fatal(self, text: str) -> None:
        """Fatal evidence without a specific kind (decided when the burst ends); a line outside
        a traceback is said as what it is (a sigquit only says that a child failed)."""
        if self.record is not None:
            self.record.fatal = True
            return
        burst = self._burst_at(self.last_ts)
        burst.fatal = True
        said = Verdict(UNCLASSIFIED) if _SIGQUIT.search(text) else diagnose(_bare(text))
        self._say(burst, self._diagnosis(said, text.strip(), None), strong=False)

    def _burst_at(self, ts: float | None) -> _Burst:
        """The burst a line at `ts` belongs to; a new one past the span."""
        burst = self._burst
        if burst is not None and ts is not None and burst.start is not None:
            if abs(ts - burst.start) > BURST_SECONDS:
                self.end_burst()
                burst = None
        if burst is None:
            burst = self._burst = _Burst(ts)
        elif burst.start is None:
            burst.start = ts
        return burst


# Inside a traceback, an exception whose class name ends in none of the words `EXCEPTION_NAME`
# knows (SGLang's `UpdateRejected`): CamelCase, at column 0 where frames are indented.
_RAISED = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+: \S")
_SIGQUIT = re.compile(r"sigquit|SIGQUIT")
_LINE_PREFIX = re.compile(r"^\[[^\]]{1,60}\]:? ")
_VAGUE_PHASES = frozenset({"unknown", "startup", "serving"})
_PHASE_NAMES = {
    CrashKind.PREFILL_OOM: "prefill",
    CrashKind.DECODE_OOM: "decode",
    CrashKind.CUDA_GRAPH_CAPTURE_OOM: "capture",
    CrashKind.STARTUP_NOT_ENOUGH_MEMORY: "pool_sizing",
}
# A traceback raised while serving one request (the HTTP stack's frames, uvicorn's header).
_REQUEST = re.compile(r"Exception in ASGI application|[/\\](?:fastapi|starlette|uvicorn)[/\\]")
# A cause printed outside any traceback, before it (a CUDA kernel's error, the compiler's): the
# crash's own words where its traceback has no exception line.
_CAUSE_LINE = re.compile(
    r"illegal memory access|CUDA [Ee]rror|out of memory|ptxas|NCCL (?:error|WARN)"
    r"|device-side assert"
)
_CUDA_NOTE = re.compile(CUDA_NOTE)  # after a CUDA error: a paste cut after the error keeps it
# A process dying in words that are no Python exception: the kernel's signals as the shell says
# them, the interpreter's and C++ runtime's aborts, a Rust panic (the router, the gateway). Only
# a cheap gate for the log's last words: what they are is `diagnose`'s (the killed and native
# families of messages/exceptions.py).
_DEATH = re.compile(
    r"^(?:Segmentation fault|Bus error|Aborted|Killed|Illegal instruction)(?: \(core dumped\))?$"
    r"|core dumped|^Fatal Python error:|\bpanicked at\b|^terminate called after throwing"
)
# A fatal line printed outside any traceback: a toolchain or driver error said on its own.
_FATAL_LINE = re.compile(r"\bfatal\b|\bFATAL\b|ptxas|\bNCCL\b.*\b(?:error|Error|failure)")


# SGLang's own workaround for an error it prints: "To work around this error, add
# --disable-piecewise-cuda-graph to your launch command", "Please use `--attention-backend
# flashinfer`", "Please add `--is-embedding` when launching the server" (35 of the catalogue's
# messages name one). A numbered list of possible solutions names none: it is not one change.
_WORKAROUND = re.compile(
    r"(?:[Ww]ork ?around[^.]{0,60}?|[Pp]lease |[Yy]ou (?:can|may|should) |[Tt]ry )"
    r"(?:add|set|use|pass|adding|setting|using|passing) `?(--[a-z0-9][a-z0-9-]{1,64})"
    r"(?:[ =]([\w.+-]{1,40}))?"
)
# A word after the flag that is the sentence going on, not the flag's value.
_NOT_VALUES = frozenset(
    "to when or and instead if in for with the a an as flag option argument on at while so that "
    "is be by of from".split()
)
# Switches: a flag of these families takes no value (it is set by naming it).
_SWITCH = re.compile(r"--(?:disable|enable|is|skip|trust|no)-")


def workaround(text: str) -> tuple[str, str] | None:
    """The change a line gives as SGLang's workaround: (flag, value), "true" for a switch; None
    where it gives none, or names a flag with no value it could be set to ("a smaller number")."""
    match = _WORKAROUND.search(text)
    if match is None:
        return None
    flag, value = match.group(1), (match.group(2) or "").rstrip(".")
    if value.lower() in _NOT_VALUES or value.startswith("-") and not value[1:2].isdigit():
        value = ""
    if _SWITCH.match(flag):
        return flag, "true"
    return (flag, value) if value else None


def _bare(text: str) -> str:
    """A line without SGLang's `[time ranks] ` prefix (or torch's `[rank0]: `), stripped."""
    return _LINE_PREFIX.sub("", text.strip(), count=1).strip()


def _is_crash(said: Verdict) -> bool:
    """A class that ends the process (a refused request, an unknown exception and a programming
    error do not by themselves: a request handler's KeyError is served past; the scheduler's
    dies with its "hit an exception" header, or as the log's last words)."""
    if said.cls == NOT_TUNING:
        return said.kind not in ("request", SOFTWARE)
    return said.cls in (CRASH, CONFIG)


_LOADING = "; raised loading the model"
_ARGS = "; raised checking the launch flags"


def _software_where(said: Verdict, phase: str, frame: str) -> Verdict:
    """A programming error (`exceptions.PROGRAMMING_ERRORS`) named by where it was raised: in
    `server_args.py`, whose checks are asserts on the launch flags, a configuration error (no
    flag named); while the weights load (the load phase's frames: `load_model`,
    `load_weights`, a model's `__init__`), the checkpoint or its quantization is one the model's
    code does not handle (a weight name it has no parameter for, a config field it lacks)."""
    if said.cls != NOT_TUNING or said.kind != SOFTWARE:
        return said
    if frame.startswith("server_args.py "):
        return Verdict(CONFIG, rule=f"{said.rule}{_ARGS}")
    if phase == "load":
        return replace(said, kind="model", rule=f"{said.rule}{_LOADING}")
    return said


def _specific_kind(text: str) -> CrashKind | None:
    """Kinds SGLang names in its own words (no phase guessing needed)."""
    if _LEAK.search(text):
        return CrashKind.ALLOCATOR_BUG
    if _NOT_ENOUGH.search(text):
        return CrashKind.STARTUP_NOT_ENOUGH_MEMORY
    if _KV_POOL.search(text):
        return CrashKind.KV_POOL_EXHAUSTED
    if _CAPTURE_FAILED.search(text) and _CUDA_OOM.search(text):
        return CrashKind.CUDA_GRAPH_CAPTURE_OOM
    return None


def _catalogued_kind(text: str) -> CrashKind | None:
    """A kind SGLang prints only as it fails, from any line of any release's message of that
    kind (`_OWN_KINDS`, the catalogue), where the hand-written readers know none."""
    message = _failure_alone(text) if _OWN_WORDS.search(text) else None
    return _OWN_KINDS.get((message.verdict.cls, message.verdict.kind)) if message else None


def _failure_alone(text: str) -> Message | None:
    """The catalogued failure (raised, asserted or logged as failing) a line outside any
    traceback prints as the line itself: its literal text at least half the line's, and no
    failure of another class printing the same text. A short message found inside a longer
    line ("'{*}' object has no attribute '{*}'" inside another message that quotes the error
    it caught) says nothing of that line."""
    message = lookup(text)
    if message is None or message.call not in FAILURES or message.text in catalogue().ambiguous:
        return None
    return message if 2 * message.pattern.literal_chars >= len(text) else None


# Kinds SGLang prints only as it fails: every line of such a message, logged or raised, is the
# crash (a pool OOM's "Out of memory. Try to lower your batch size." of 0.5.3+, its "Try to
# allocate N tokens." and "...available_size()=N" lines on their own). Only lines with a word
# of theirs are looked up (the catalogue's probe costs a dict lookup per character).
_OWN_KINDS = {
    (CRASH, "kv_pool_exhausted"): CrashKind.KV_POOL_EXHAUSTED,
    (CRASH, "startup_not_enough_memory"): CrashKind.STARTUP_NOT_ENOUGH_MEMORY,
}
_OWN_WORDS = re.compile(r"emory|tokens|_size|space|pool", re.IGNORECASE)


def _catalogued_crash(text: str) -> bool:
    """True for a line that is an SGLang message raised or asserted as the process fails (any
    line of it, its exception's name not printed) whose class ends the process, or one it logs
    only as it fails (`_OWN_KINDS`)."""
    message = _failure_alone(text)
    if message is None:
        return False
    verdict = message.verdict
    if message.call == "error":  # logged: many are printed and served past
        return (verdict.cls, verdict.kind) in _OWN_KINDS
    return _is_crash(verdict)
