"""Read SGLang log lines of every version into counts (reference §9): pure, no file, no clock.

`LogScanner` keeps what must survive between polls (startup facts, the open traceback, the
current crash); `scan_lines` is the one-shot form. `feed` takes lines as a tool wrote them
(`prefix.py` takes the wrapping off); `read_line` takes SGLang's own line. Most lines are
`Decode batch` lines, so they take the shortest path: a prefix test, and the line kept as its
scheduler's latest; only the latest line of each scheduler (DP rank) is parsed, at `take()`,
the way SGLang's own gauges are refreshed at each log point. `Prefill batch` lines add their
new and cached tokens. SGLang 0.1.x's batch lines (no label on the decode line, `new fill
batch.` for a prefill, `_OLD_BATCH`) are read into the same counts.

Only a line in SGLang's own position is a signal: its message right after SGLang's
`[time ranks] ` prefix, or at the start of a line in a log that has shown no prefix. A prompt
echoed by `--log-requests` (`Receive: obj=...`), or a line of a multi-line one, is never a
retraction, a batch or a launch line.
"""

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sglang_tuner.sources.log.crash import CrashDiagnosis, CrashKind, CrashTracker, Phase
from sglang_tuner.sources.log.prefix import REQUEST_LOG, pasted_lines, unwrap
from sglang_tuner.sources.log.server_args import has_server_args, parse_server_args, summary_values
from sglang_tuner.sources.log.startup import StartupMemory

# Retraction, by version: "decode out of memory happened, " (0.1.6-0.2.13), "Decode out of
# memory happened. " (0.2.14-0.4.6), "KV cache pool is full. Retract requests. " (0.4.7+), "Testing
# retraction. " (SGLANG_TEST_RETRACT); then "#retracted_reqs: N" in every version.
_RETRACT = re.compile(
    r"(?:KV cache pool is full\. Retract requests\.|[Dd]ecode out of memory happened[.,]"
    r"|Testing retraction\.) #retracted_reqs: (\d+)"
)
# "Decode batch. " (<= 0.5.3), "Decode batch [N], " (0.5.4), "Decode batch, " (0.5.4.post1+)
_BATCH_ENDS = frozenset({". ", ", ", " ["})
# and "Prefill batch(mixed #running-req: N). " (0.2.14-0.3.5, --enable-mixed-chunk)
_PREFILL_ENDS = _BATCH_ENDS | {"(m"}
_MIXED = "(mixed #running-req: "
# SGLang 0.1.x printed its messages bare (logging format "%(message)s", no time, no rank):
# 0.1.3-0.1.16 (srt/managers/router/model_rpc.py), every 20 (from 0.1.16: 40) decode steps,
#   "#running-req: N, #token: N, token usage: F, [gen throughput (token/s): F, ]#queue-req: N"
#   (no label; the throughput from 0.1.16), and at each prefill "new fill batch. #seq: N.
#   #cached_token: N. #new_token: N. #remaining_req: N. #running_req: N[. tree_cache_hit_rate:
#   F%.]" (the hit rate, cumulative since the start, from 0.1.11);
# 0.1.17 (srt/managers/controller/tp_worker.py): "[gpu_id=N] Prefil batch. " (sic), then the
#   fields of 0.1.18's "Prefill batch"; 0.1.17-0.2.13 open each line with "[gpu_id=N] " (from
#   0.2.7 "[gpu=N] "), the GPU of the scheduler's first TP rank, the only one that prints them.
_OLD_BATCH = ("#running-req: ", "new fill batch. ", "Prefil batch. ")
_FILL_TOKENS = re.compile(r"#cached_token: (\d+)\. #new_token: (\d+)")
# the fill line's fields under the names the later lines give them
_FILL_FIELDS = {
    "#seq": "#new-seq",
    "#cached_token": "#cached-token",
    "#new_token": "#new-token",
    "#remaining_req": "#queue-req",  # the queue once this batch is taken from it
    "#running_req": "#running-req",
    "tree_cache_hit_rate": "cache hit rate",
}
# A batch line of any version (the clock of a log without time: one tick a batch line)
_BATCH_WORDS = re.compile(r"(?:Decode|Prefill?|new fill) batch|(?:^|\] )#running-req: ")
_GRAPH_LABELS = frozenset({"cuda", "cpu", "npu", "musa"})
# 0.1.17+ "max_total_num_tokens=" (not a message's self.max_…); 0.1.3-0.1.16 "Rank 0:
# max_total_num_token=N, max_prefill_num_token=N, context_len=N, ..."
_MAX_TOKENS = re.compile(r"(?:Rank \d+: )?(?<![.\w])max_total_num_tokens?=(\d+)")
_AVAILABLE = re.compile(r"\bavailable_gpu_mem=([0-9.]+) GB")
# "Capture cuda graph end. Time elapsed: 4.00 s. [mem usage=0.36 GB. ]avail mem=2.1 GB": the free
# memory after the graphs, which is what SGLang's summary line calls available_gpu_mem (0.4.7+),
# read before it and in the versions whose summary does not print it.
_AVAIL_MEM = re.compile(r"\bavail mem=([0-9.]+) ?GB")
# "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.94. Raise
# --mem-fraction-static above 0.942 (minimum viable = ...)": the fraction the weights need.
_REQUIRED = re.compile(r"Raise --mem-fraction-static above ([0-9.]*[0-9])")
_UNDER = re.compile(
    r"(?:under --mem-fraction-static=|Current value: (?:self\.server_args\.)?mem_fraction_static=)"
    r"(-?[0-9.]*[0-9])"  # negative where SGLang's own formula found no room at all
)
_PROCESS_START = re.compile(r"server_args=|Init torch distributed begin")
_CAPTURE_BEGIN = re.compile(r"Capture [\w -]*?graph begin", re.IGNORECASE)
_CAPTURE_END = re.compile(r"Capture [\w -]*?graph end", re.IGNORECASE)
# configure_logger's prefix: "[2025-06-01 10:00:00(.123) DP0 TP0] "; before 0.4 time only.
_PREFIX = re.compile(
    r"\[(?:(\d{4})-(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:[.,]\d+)?((?: [A-Z_]+\d+)*)\] "
)
_DP = re.compile(r" DP(\d+)")
_PREFIX_CHARS = 96  # SGLang's prefix ends within this many characters ("[... DP12 TP15 EP15] ")
_PREFILL_TOKENS = re.compile(r"#new-token: (\d+), #cached-token: (\d+)")
# The key of a batch line's load fields, every version: "#token" / "#full token" and
# "token usage" / "full token usage" (hybrid SWA and SSM pools name the full pool first).
_USED = ("#token", "#full token")
_USAGE = ("token usage", "full token usage")
_TP = re.compile(r" TP(\d+)")
# Lines worth a closer look besides batch lines: a cheap filter before the rare-line regexes.
_KEYWORDS = re.compile(
    r"emory|retracted_reqs|xception|Traceback|raph|atchdog|NCCL|DistBackendError|sigquit"
    r"|max_total_num_token|server_args=|Init torch distributed|No space left"
    r"|OUT_OF_MEMORY|ALLOC_FAILED|Try to allocate|va(?:li|il)able tokens|available_size|leak"
    # later lines of a pool OOM's and a capture failure's messages (one literal per word: an
    # alternative that opens with a group costs the whole search 4x)
    r"|evictable_size|ossible solutions|Open an issue"
    r"|rror|fatal|File \"|Load weight|KV Cache is allocated|profiled value"  # crash.py's
    r"|egmentation fault|core dumped|Killed|Abort|panicked at|terminate called|Illegal instr"
    r"|CUDA_(?:LAUNCH|DSA)"  # PyTorch's note after a CUDA error (CUDA_LAUNCH_BLOCKING, …_DSA)
)


@dataclass(frozen=True, slots=True)
class BatchLoad:
    """The load one scheduler (DP rank) reported in its latest batch line: each field that the
    line holds (None where a fork or a user's excerpt dropped it)."""

    running: int | None
    queued: int | None
    used_tokens: int | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None  # decode tokens/s (Decode batch lines only)


@dataclass(frozen=True, slots=True)
class LogCounts:
    """What a batch of log lines said: events since the last take, and the startup facts."""

    retracted_reqs: int = 0
    decode_lines: int = 0  # Decode batch lines that state the graph flag (not speculative ones)
    decode_without_graph: int = 0
    max_total_num_tokens: int | None = None  # from the last startup summary seen
    available_gpu_mem_gb: float | None = None
    cuda_graph_capture_oom: int = 0
    prefill_oom: int = 0
    decode_oom: int = 0
    kv_pool_exhausted: int = 0
    startup_not_enough_memory: int = 0
    allocator_bug: int = 0
    other_crash: int = 0
    mem_fraction_required: float | None = None  # a failed start's "raise above Y", since take
    # The launch arguments and startup summary, when a process started since the take.
    server_args: Mapping[str, Any] | None = None
    # Per scheduler (DP rank, "" without DP): the load of its latest batch line since the take.
    load: Mapping[str, BatchLoad] = field(default_factory=dict)
    prefill_lines: int = 0
    prefill_new_tokens: int = 0  # tokens computed by prefill batches
    prefill_full_lines: int = 0  # of them, with #new-token within 10 % of the largest seen
    prefill_sized_lines: int = 0  # of them, judged so (this process's third such line on)
    prefill_cached_tokens: int = 0  # tokens served from the prefix cache
    crashes: tuple[CrashDiagnosis, ...] = ()  # each crash since the take, said in words
    # the latest process's startup lines: weights, KV pool, free memory (startup.py)
    startup_memory: Mapping[str, float] = field(default_factory=dict)
    # the largest #running-req of the Decode lines that said "cuda graph: False"
    eager_batch_max: int | None = None


class LogScanner:
    """Reads lines; `take()` returns what they said since the previous take."""

    def __init__(self) -> None:
        self.crash = CrashTracker()
        self.startup = StartupMemory()
        self.max_total_num_tokens: int | None = None
        self.available_gpu_mem_gb: float | None = None
        self._capture_free_gb: float | None = None  # the free memory this start's graphs left
        self._retracted = self._decode_lines = self._without_graph = 0
        self._eager_max: int | None = None  # the largest batch a graph-less Decode line ran
        self._latest: dict[str, str] = {}  # DP rank -> its latest batch line since the take
        self._server_args: dict[str, Any] = {}  # the latest launch line's, and its summary's
        self._new_args = False
        self._required: float | None = None
        self._prefills = self._new_tokens = self._cached_tokens = 0
        self._full = self._sized = 0  # prefill lines at the largest #new-token, and judged
        self._largest, self._prefills_seen = 0, 0  # over this process's prefill lines
        # every TP rank prints a retraction: deduplicated within one log second
        self._retract_second: tuple[str | None, ...] = ()
        self._retract_seen: dict[tuple[str, str, str], dict[str, int]] = {}
        self._prefixed = False  # a line with SGLang's prefix was read: unprefixed ones are not
        self._gpus = False  # a "[gpu_id=N] " line was read: its schedulers are told by GPU

    def feed(self, lines: Iterable[str]) -> None:
        """Read lines in order, as a tool wrote them (its wrapping is taken off)."""
        read = self.read_line
        for line in pasted_lines(lines):
            # "[pod/...] ": kubectl logs --prefix; "][": Python logging's bracketed layout
            if line[:1] == "[" and line[1:2] != "p" and line.find("][", 0, 48) < 0:
                read(line)  # as most are: SGLang's own line (or wrapped in brackets, see below)
            else:
                text, _, stream = unwrap(line)
                read(text, stream)

    def take(self) -> LogCounts:
        """The counts since the previous take; startup facts are kept, events reset."""
        events, self.crash.events = self.crash.events, Counter()
        counts = LogCounts(
            self._retracted,
            self._decode_lines,
            self._without_graph,
            self.max_total_num_tokens,
            self.available_gpu_mem_gb,
            **{kind.value: events[kind] for kind in CrashKind},
            mem_fraction_required=self._required,
            server_args=dict(self._server_args) if self._new_args else None,
            load={rank: load for rank, line in self._latest.items() if (load := batch_load(line))},
            prefill_lines=self._prefills,
            prefill_new_tokens=self._new_tokens,
            prefill_full_lines=self._full,
            prefill_sized_lines=self._sized,
            prefill_cached_tokens=self._cached_tokens,
            crashes=self.crash.take_diagnoses(),
            startup_memory=self.startup.facts(),
            eager_batch_max=self._eager_max,
        )
        self._retracted = self._decode_lines = self._without_graph = 0
        self._eager_max = None
        self._prefills = self._new_tokens = self._cached_tokens = 0
        self._full = self._sized = 0
        self._latest = {}
        self._new_args, self._required = False, None
        return counts

    def finish(self) -> None:
        """The input ended for good (a whole file): close the open traceback and crash."""
        self.crash.finish()

    def read_line(self, line: str, stream: str = "") -> None:
        """One line of SGLang's (its own prefix kept) from `stream` (a container or unit, ""
        for one process); the common lines return first."""
        crash = self.crash
        if crash.record is not None:
            if not (_PREFIX.search(line) or is_batch_line(line)):
                if "--mem-fraction-static" in line:  # the exception's own words
                    self._fraction_failed(line)
                crash.record_line(line)
                return
            crash.close_record()
        if line[:1] == "[" and 0 < (end := line.find("] ")) < _PREFIX_CHARS:
            at = end + 2
            # a second bracket: 0.1.x's "[gpu=0] ", or SGLang's prefix behind a wrapper's
            # ("[2025-03-11 16:44:27] [2025-03-11 01:44:27 TP0] ", "[pod/sglang-0/sglang] ")
            if line[at : at + 1] == "[":
                self._gpus = self._gpus or line.startswith("[gpu", at)
                at = _after_bracket(line, at)
            if not self._prefixed:  # from then on, an unprefixed line is no signal
                self._prefixed = line[1:2].isdigit()
                self._gpus = self._gpus or line.startswith("[gpu")
        else:  # never a signal in a log with prefixes (a traceback's line, a prompt's)
            at = -1 if self._prefixed else 0
        if (
            at >= 0
            and line.startswith("Decode batch", at)
            and line[at + 12 : at + 14] in _BATCH_ENDS
        ):
            self._decode(line, stream)
        elif (
            at >= 0
            and line.startswith("Prefill batch", at)
            and line[at + 13 : at + 15] in _PREFILL_ENDS
        ):
            self._prefill(line, at, stream)
        elif at >= 0 and line.startswith(_OLD_BATCH, at):  # 0.1.x
            if line[at] == "#":  # the decode step's line, without a label
                self._decode(line, stream)
            else:
                self._prefill(line, at, stream)
        elif _KEYWORDS.search(line) and not (at >= 0 and self._signal(line, at, stream)):
            if "--mem-fraction-static" in line:
                self._fraction_failed(line)
            if at >= 0 and self.startup.read(line):  # the pool's tokens before any summary
                self.max_total_num_tokens = self.startup.kv_tokens or self.max_total_num_tokens
            self.crash.line(line, line_seconds(line))

    def _decode(self, line: str, stream: str) -> None:
        """A Decode batch line: the phase, and the CUDA graph flag (absent <= 0.4.6.post3)."""
        crash = self.crash  # an unprefixed crash line after serving has no known time
        crash.phase, crash.last_batch, crash.last_ts = Phase.SERVING, CrashKind.DECODE_OOM, None
        at = line.find(" graph: ")  # "cuda graph: True" (a regex costs twice as much here)
        # A speculative decode line ("accept len: ...") may run without graph replay at any
        # batch (the draft/verify path, an adaptive threshold): no graph size explains it, so
        # it is not counted as a batch outside the graphs.
        if at >= 0 and line[line.rfind(" ", 0, at) + 1 : at] in _GRAPH_LABELS:
            without = line.startswith("F", at + 8)
            if not (without and "accept len" in line):
                self._decode_lines += 1
                self._without_graph += without
                if without and (load := batch_load(line)) and load.running is not None:
                    self._eager_max = max(self._eager_max or 0, load.running)
        rank = _gpu(line) if self._gpus else _dp_rank(line)
        self._latest[f"{stream}/{rank}" if stream else rank] = line

    def _batch_size(self, new: int) -> None:
        """A prefill batch's new tokens against the largest this process printed: SGLang's
        `PrefillAdder` stops adding at the first budget spent (the pool's, scaled by
        --schedule-conservativeness; --max-prefill-tokens; --chunked-prefill-size), and only the
        two token budgets cut batches at one size whatever the prompts are. Judged from this
        process's third line on, or from its second where it repeats the first's size exactly
        (an excerpt of two lines: prompts that sum to the same count twice are a budget's cut)."""
        repeated = self._prefills_seen == 1 and new == self._largest  # the same size again
        self._largest = max(self._largest, new)
        self._prefills_seen += 1
        if (self._prefills_seen >= 3 or repeated) and self._largest >= 512:
            self._sized += 1
            self._full += new >= 0.9 * self._largest

    def _prefill(self, line: str, at: int, stream: str) -> None:
        """A Prefill batch line (0.1.x: a fill batch line): its tokens, and its load where no
        decode line follows."""
        crash = self.crash
        crash.phase, crash.last_batch, crash.last_ts = Phase.SERVING, CrashKind.PREFILL_OOM, None
        self._prefills += 1
        new = None
        if tokens := _PREFILL_TOKENS.search(line, at):
            new, cached = int(tokens.group(1)), int(tokens.group(2))
        elif tokens := _FILL_TOKENS.search(line, at):  # 0.1.x: cached first
            new, cached = int(tokens.group(2)), int(tokens.group(1))
        if new is not None:
            self._new_tokens += new
            self._cached_tokens += cached
            self._batch_size(new)
        rank = _scheduler(line, stream, self._gpus)
        latest = self._latest.get(rank)
        # a decode line's load is the fuller: kept over a prefill's ("Prefill batch", 0.1.17's
        # "Prefil batch", 0.1.x's "new fill batch" all hold "il batch")
        if latest is None or "il batch" in latest:
            self._latest[rank] = line

    def _signal(self, line: str, at: int, stream: str) -> bool:
        """A rare signal whose message starts at `at`: retractions, startup and capture markers
        (True: read; False: crash evidence, or nothing)."""
        if line.startswith(REQUEST_LOG, at):
            return True  # the client's text, whatever it says
        if match := _RETRACT.match(line, at):
            self._retract(line, int(match.group(1)), stream)
        elif match := _MAX_TOKENS.match(line, at):
            available = _AVAILABLE.search(line)  # absent before v0.4.7
            self.max_total_num_tokens = int(match.group(1))
            # else what this start's capture left (the same reading, taken before the summary)
            free = float(available.group(1)) if available else self._capture_free_gb
            self.available_gpu_mem_gb, self._capture_free_gb = free, None
            self._server_args.update(summary_values(line))
            self._new_args = True
            self.crash.process_start(Phase.SERVING)
        elif line.startswith("server_args=", at) and has_server_args(line):
            self._server_args, self._new_args = parse_server_args(line), True
            self._largest = self._prefills_seen = 0  # a new process: its own budgets
            self.crash.process_start(Phase.STARTUP)
        elif _PROCESS_START.match(line, at):
            self.crash.process_start(Phase.STARTUP)
        elif _CAPTURE_BEGIN.match(line, at):
            self.crash.phase, self.crash.last_batch = Phase.CAPTURE, None
        elif _CAPTURE_END.match(line, at):
            self.crash.phase = Phase.STARTUP
            if left := _AVAIL_MEM.search(line, at):  # the last capture's (a draft model's after)
                self.available_gpu_mem_gb = self._capture_free_gb = float(left.group(1))
        else:
            return False
        return True

    def _fraction_failed(self, line: str) -> None:
        """A start that found no room for the KV cache: the fraction it ran with, and the one
        SGLang asks for (both read as the server's own words)."""
        if required := _REQUIRED.search(line):
            self._required = float(required.group(1))
        if under := _UNDER.search(line):
            self._server_args["mem_fraction_static"] = float(under.group(1))
            self._new_args = True

    def _retract(self, line: str, count: int, stream: str) -> None:
        """Every TP rank of a scheduler prints the same retraction: count it once per rank set."""
        prefix = _PREFIX.search(line)
        if prefix is None:
            self._retracted += count
            return
        second, ranks = prefix.group(1, 2, 3, 4, 5, 6), prefix.group(7)
        if second != self._retract_second:
            self._retract_second, self._retract_seen = second, {}
        key = (stream, _rank(_DP, ranks), line[prefix.end() :])
        by_tp = self._retract_seen.setdefault(key, {})
        before, tp = max(by_tp.values(), default=0), _rank(_TP, ranks)
        by_tp[tp] = by_tp.get(tp, 0) + 1
        if by_tp[tp] > before:  # the same rank again is a new retraction
            self._retracted += count


def _after_bracket(line: str, at: int) -> int:
    """Where the text after a bracket opening at `at` starts (`at` if it does not close)."""
    close = line.find("] ", at, at + _PREFIX_CHARS)
    return close + 2 if close > 0 else at


def _scheduler(line: str, stream: str, gpus: bool) -> str:
    """The scheduler a batch line is from: its process's stream and its DP rank (with `gpus`,
    the GPU its 0.1.17-0.2.13 line names)."""
    rank = _gpu(line) if gpus else _dp_rank(line)
    return f"{stream}/{rank}" if stream else rank


def is_batch_line(text: str) -> bool:
    """Whether `text` is a decode or prefill batch line of any SGLang version."""
    return ("batch" in text or "#running-req" in text) and _BATCH_WORDS.search(text) is not None


def _dp_rank(line: str) -> str:
    """The DP rank in a line's prefix ("" without one): each DP rank is its own scheduler."""
    end = line.find("] ")
    at = line.find(" DP", 0, end) if end > 0 else -1
    if at < 0:
        return ""
    stop = at + 3
    while stop < end and line[stop].isdigit():
        stop += 1
    return line[at + 3 : stop]


def _gpu(line: str) -> str:
    """0.1.17-0.2.13's scheduler: "gpuN" for a line that opens with "[gpu_id=N] " or "[gpu=N] "
    (also behind a wrapper's bracket), else its DP rank."""
    at = line.find("[gpu", 0, 2 * _PREFIX_CHARS)
    if at < 0:
        return _dp_rank(line)
    close = line.find("]", at)
    equals = line.find("=", at, close) if close > 0 else -1
    return "gpu" + line[equals + 1 : close] if equals > 0 else ""


def batch_fields(line: str) -> dict[str, str]:
    """Every `key: value` field of a Decode or Prefill batch line, any version (reference §9.2,
    §9.3): `{"#running-req": "233", "token usage": "0.82", "cuda graph": "True", ...}`."""
    at = line.find(" batch")
    if at < 0:  # 0.1.3-0.1.16's decode line has no label
        at = line.find("#running-req: ")
        return _fields(line[at:], ", ") if at >= 0 else {}
    rest = line[at + 6 :].lstrip(".,[]0123456789 ")  # ". ", ", ", " [N], " (0.5.4)
    if rest.startswith(_MIXED):  # the decode requests run in this batch
        running, _, rest = rest[len(_MIXED) :].partition("). ")
        return {"#running-req": running, **_fields(rest, ", ")}
    if rest.startswith("#seq: "):  # 0.1.x's fill line: ". " between its fields
        return {_FILL_FIELDS.get(key, key): value for key, value in _fields(rest, ". ").items()}
    return _fields(rest, ", ")


def _fields(text: str, separator: str) -> dict[str, str]:
    """The `key: value` pieces of `text` between `separator`s."""
    fields = {}
    for piece in text.split(separator):
        key, sep, value = piece.partition(": ")
        if sep:
            fields[key.strip()] = value.strip().rstrip(",.")
    return fields


_NO_LOAD = BatchLoad(None, None)  # a batch line that holds none of the load fields


def batch_load(line: str) -> BatchLoad | None:
    """The load a batch line reports, field by field: every field SGLang prints is read where it
    stands, and one that is missing (a fork's shorter line, a user's cut) leaves only itself
    unknown. None when the line holds no load field at all."""
    fields = batch_fields(line)
    load = BatchLoad(
        _count(_number(fields, ("#running-req",))),
        _count(_number(fields, ("#queue-req",))),
        _count(_number(fields, _USED)),
        _number(fields, _USAGE),
        _number(fields, ("gen throughput (token/s)",)),
    )
    return None if load == _NO_LOAD else load


def _count(value: float | None) -> int | None:
    """A count field's value (None: absent, or not a whole number)."""
    return None if value is None or not value.is_integer() or value < 0 else int(value)


def _number(fields: Mapping[str, str], keys: tuple[str, ...]) -> float | None:
    """The first of `keys` present in `fields`, as a number (None: absent or not a number)."""
    for key in keys:
        if key in fields:
            try:
                return float(fields[key])
            except ValueError:
                return None
    return None


def _rank(pattern: re.Pattern[str], ranks: str) -> str:
    """One rank index of a prefix ("" when that parallelism is off)."""
    match = pattern.search(ranks)
    return match.group(1) if match else ""


def line_seconds(line: str) -> float | None:
    """The log time of a prefixed line in seconds (days since year 1 when dated), else None."""
    prefix = _PREFIX.search(line)
    if prefix is None:
        return None
    year, month, day, hour, minute, second = prefix.group(1, 2, 3, 4, 5, 6)
    days = date(int(year), int(month), int(day)).toordinal() if year else 0
    return days * 86400.0 + int(hour) * 3600 + int(minute) * 60 + int(second)


def scan_lines(lines: Iterable[str]) -> LogCounts:
    """Everything `lines` say, read as a whole log."""
    scanner = LogScanner()
    scanner.feed(lines)
    scanner.finish()
    return scanner.take()
