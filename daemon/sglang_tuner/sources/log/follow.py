"""Follow an SGLang log file like `tail -F` and turn its lines into signals (reference §9).

Parsing is pure and lives in `lines.py` (lines) and `crash.py` (crash kinds); this module only
handles the file and maps counts to signals. Its `ScannedLog` is the one poll (lines -> scanner
-> signals) that a file and a pipe (`command.py`) share.
"""

import math
import os
import stat
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO

from sglang_tuner.model import signals as s
from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.sources.log.crash import CrashKind
from sglang_tuner.sources.log.drain import MAX_LINE_BYTES, Drain, LineCutter, decode_lines
from sglang_tuner.sources.log.lines import LogCounts, LogScanner, scan_lines
from sglang_tuner.sources.server_info import parse_server_info

__all__ = [
    "LogCounts",
    "LogFollower",
    "ScannedLog",
    "crash_reports",
    "last_startup_lines",
    "load_signals",
    "scan_lines",
    "to_signals",
]

_STARTUP_MARK = b"max_total_num_tokens="
_LAUNCH_MARK = b"server_args=ServerArgs("
# A process's weights begin loading: where its startup block starts when the launch line is
# not in the file (rotated away, or a wrapper that drops it)
_WEIGHTS_MARK = b"Load weight "
_MARKS = (_LAUNCH_MARK, _STARTUP_MARK, _WEIGHTS_MARK)
MAX_READ_BYTES = 8 * 1024 * 1024  # of lines per poll; the rest is read at the next poll
# Read per poll at most, the skipped rest of lines too long included: a 200 MB line is passed
# over in one poll, never held (a line is cut at MAX_LINE_BYTES as it is read).
MAX_SCAN_BYTES = 256 * 1024 * 1024
# A file is read this much at a time (a pipe gives what arrived): 15x faster through a long
# line than 64 KiB reads, and still a bounded piece.
CHUNK_BYTES = 1024 * 1024
CRASH_SIGNALS: dict[CrashKind, str] = {
    CrashKind.CUDA_GRAPH_CAPTURE_OOM: s.CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    CrashKind.PREFILL_OOM: s.PREFILL_OOM_EVENTS,
    CrashKind.DECODE_OOM: s.DECODE_OOM_EVENTS,
    CrashKind.KV_POOL_EXHAUSTED: s.KV_POOL_EXHAUSTED_EVENTS,
    CrashKind.STARTUP_NOT_ENOUGH_MEMORY: s.STARTUP_NOT_ENOUGH_MEMORY_EVENTS,
    CrashKind.ALLOCATOR_BUG: s.ALLOCATOR_BUG_EVENTS,
    CrashKind.OTHER_CRASH: s.OTHER_CRASH_EVENTS,
}
# `StartupMemory.facts()` names (startup.py) -> the signal each is
STARTUP_SIGNALS: dict[str, str] = {
    "before_load_gb": s.STARTUP_FREE_BEFORE_LOAD_GB,
    "after_load_gb": s.STARTUP_FREE_AFTER_LOAD_GB,
    "weights_gb": s.STARTUP_WEIGHTS_GB,
    "kv_pool_gb": s.STARTUP_KV_POOL_GB,
    "after_pool_gb": s.STARTUP_FREE_AFTER_POOL_GB,
}


def to_signals(counts: LogCounts, seconds: float | None) -> dict[str, float]:
    """Signals for the lines read over `seconds` (None: the first poll, no rate)."""
    values = {signal: float(getattr(counts, kind.value)) for kind, signal in CRASH_SIGNALS.items()}
    if seconds is not None and seconds > 0:
        values[s.RETRACTIONS_PER_MINUTE] = counts.retracted_reqs * 60.0 / seconds
    if counts.decode_lines:
        values[s.CUDA_GRAPH_FALSE_RATIO] = counts.decode_without_graph / counts.decode_lines
    if counts.eager_batch_max is not None:
        values[s.EAGER_BATCH_MAX] = float(counts.eager_batch_max)
    if counts.max_total_num_tokens is not None:
        values[s.MAX_TOTAL_NUM_TOKENS] = float(counts.max_total_num_tokens)
    if counts.available_gpu_mem_gb is not None:
        values[s.STARTUP_AVAILABLE_GPU_MEM_GB] = counts.available_gpu_mem_gb
    if counts.mem_fraction_required is not None:
        values[s.MEM_FRACTION_REQUIRED] = counts.mem_fraction_required
    for fact, value in counts.startup_memory.items():
        if fact in STARTUP_SIGNALS:
            values[STARTUP_SIGNALS[fact]] = value
    values.update(load_signals(counts, seconds))
    return values


def crash_reports(counts: LogCounts, ts: float) -> tuple[CrashReport, ...]:
    """The crashes these counts said in words, as reports read at `ts`: the diagnoses travel
    beside the signals (which are numbers), to the rule that names each crash."""
    return tuple(
        CrashReport(
            ts,
            d.cls,
            d.kind,
            d.phase,
            d.message,
            d.flag,
            d.source,
            d.frame,
            d.workaround_flag,
            d.workaround_value,
        )
        for d in counts.crashes
    )


def load_signals(counts: LogCounts, seconds: float | None) -> dict[str, float]:
    """The scheduler gauges from each DP rank's latest batch line, combined across ranks as the
    metrics are (`model/signals.py`), and the prefill tokens' cache hits and rate."""
    values: dict[str, float] = {}
    loads = list(counts.load.values())
    if loads:
        # A sum across ranks is only told where every rank's line holds the field.
        running = [load.running for load in loads if load.running is not None]
        if len(running) == len(loads):
            values[s.NUM_RUNNING_REQS] = float(sum(running))
            values[s.NUM_RUNNING_REQS_MAX_RANK] = float(max(running))
        queued = [load.queued for load in loads if load.queued is not None]
        if len(queued) == len(loads):
            values[s.NUM_QUEUE_REQS] = float(sum(queued))
        values[s.NUM_DP_RANKS] = float(len(loads))
        usage = [load.token_usage for load in loads if load.token_usage is not None]
        if usage:
            values[s.TOKEN_USAGE] = sum(usage) / len(usage)
        used = [load.used_tokens for load in loads if load.used_tokens is not None]
        if used:
            values[s.NUM_USED_TOKENS] = float(sum(used))
        throughput = [load.gen_throughput for load in loads if load.gen_throughput is not None]
        if throughput:
            values[s.GEN_THROUGHPUT] = sum(throughput)
    prompt = counts.prefill_new_tokens + counts.prefill_cached_tokens
    if prompt:
        values[s.PREFIX_CACHE_HIT_RATIO] = counts.prefill_cached_tokens / prompt
    if seconds is not None and seconds > 0 and counts.prefill_lines:
        values[s.PROMPT_TOKENS_RATE] = prompt / seconds
    if counts.prefill_sized_lines:
        values[s.PREFILL_FULL_RATIO] = counts.prefill_full_lines / counts.prefill_sized_lines
    return values


def launch_config(counts: LogCounts) -> ServerConfig | None:
    """The flags a process started with, from its `server_args=ServerArgs(...)` line and startup
    summary, when these counts hold a new one: what `/server_info` would say, for a server that
    crashes before it answers."""
    return None if counts.server_args is None else parse_server_info(counts.server_args)


def last_startup_lines(
    handle: BinaryIO, chunk_bytes: int = CHUNK_BYTES, end: int | None = None
) -> list[str]:
    """The last launch line (`server_args=ServerArgs(...)`) and the last startup summary line
    (`max_total_num_tokens=…`) from here to the end of `handle` (or to offset `end`), in file
    order, each cut at MAX_LINE_BYTES: read a chunk at a time, no line is held longer. Where the
    summary follows the launch line within STARTUP_BLOCK_BYTES, every line between them too."""
    found: dict[bytes, tuple[int, bytes]] = {}
    carry, offset, skipping = b"", 0, False  # offset: where `carry` starts in the file
    left = math.inf if end is None else end - handle.tell()
    while left > 0 and (chunk := handle.read(int(min(chunk_bytes, left)))):
        left -= len(chunk)
        if skipping:  # the rest of a line too long, up to its newline
            end = chunk.find(b"\n")
            if end < 0:
                offset += len(chunk)
                continue
            offset, chunk, skipping = offset + end + 1, chunk[end + 1 :], False
        data = carry + chunk
        cut = data.rfind(b"\n")
        if cut >= 0:
            _note_marks(data[:cut], offset, found)
            offset, data = offset + cut + 1, data[cut + 1 :]
        if len(data) > MAX_LINE_BYTES:  # an unfinished line too long: its head, the rest skipped
            _note_marks(data[:MAX_LINE_BYTES], offset, found)
            offset, data, skipping = offset + len(data), b"", True
        carry = data
    _note_marks(carry, offset, found)
    block = _startup_block(handle, found)
    if block is not None:
        return block
    return [line.decode("utf-8", errors="replace") for _, line in sorted(found.values())]


# The startup of one process, launch line to summary, read whole when it is at most this long:
# the weights', KV pool's and CUDA graphs' lines between them are the memory facts
# (`startup.py`) a daemon that attaches to a running server would otherwise never see.
STARTUP_BLOCK_BYTES = 1024 * 1024


def _startup_block(handle: BinaryIO, found: dict[bytes, tuple[int, bytes]]) -> list[str] | None:
    """Every line from the last launch line (else the last weights line) to the startup
    summary after it, each cut at MAX_LINE_BYTES (None: either is missing, out of order, or the
    span is too long)."""
    launch, summary = found.get(_LAUNCH_MARK), found.get(_STARTUP_MARK)
    weights = found.get(_WEIGHTS_MARK)
    if launch is None and weights is not None:
        launch = weights
    if launch is None or summary is None or not 0 <= summary[0] - launch[0] <= STARTUP_BLOCK_BYTES:
        return None
    handle.seek(launch[0])
    data = handle.read(summary[0] - launch[0] + len(summary[1]))
    lines = data.split(b"\n")
    return [line[:MAX_LINE_BYTES].decode("utf-8", errors="replace") for line in lines if line]


def _note_marks(data: bytes, offset: int, found: dict[bytes, tuple[int, bytes]]) -> None:
    """Record the last line of `data` holding each mark (cut at MAX_LINE_BYTES), with its
    offset in the file."""
    for mark in _MARKS:
        at = data.rfind(mark)
        if at < 0:
            continue
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = min(end if end >= 0 else len(data), start + MAX_LINE_BYTES)
        found[mark] = (offset + start, data[start:end])


class ScannedLog(ABC):
    """A log read a poll at a time, whichever way its lines arrive (a file here, a pipe in
    `command.py`): each poll's lines go through one scanner and come out as signals. A subclass
    says how to read the lines that arrived since the last poll (`_read_lines`)."""

    def __init__(self) -> None:
        self._scanner = LogScanner()  # startup facts and an unfinished crash persist across polls
        self._last_poll: float | None = None
        self.launched: ServerConfig | None = None  # the latest process's flags (launch line)
        self.crashes: tuple[CrashReport, ...] = ()  # the crashes the latest poll read

    def poll(self, now: float) -> dict[str, float]:
        """Signals for the lines that arrived since the last poll; {} while there is no log to
        read (the crashes they held, said in words: `crashes`)."""
        self.crashes = ()
        lines = self._read_lines()
        if lines is None:
            return {}
        self._scanner.feed(lines)
        # Other ranks' copies of a traceback get one poll to arrive; then the crash is decided.
        self._scanner.crash.flush_stale()
        counts = self._scanner.take()
        self.launched = launch_config(counts) or self.launched
        self.crashes = crash_reports(counts, now)
        seconds = None if self._last_poll is None else now - self._last_poll
        self._last_poll = now
        return to_signals(counts, seconds)

    @abstractmethod
    def _read_lines(self) -> list[str] | None:
        """The complete lines that arrived since the last poll; None while there is no log."""

    @property
    def dropped_lines(self) -> int:
        """Lines dropped unread (a pipe's buffer was full: the scrapes fell behind its writer)."""
        return 0

    @property
    def lines_cut(self) -> int:
        """Lines cut at MAX_LINE_BYTES (the rest of each skipped)."""
        return 0

    @abstractmethod
    def close(self) -> None:
        """Stop reading."""


class LogFollower(ScannedLog):
    """Follows one log file across rotation and truncation, like `tail -F`; a named pipe is
    drained by a thread instead (opening one waits for its writer, and a pipe read once per
    scrape holds its writer up). A line longer than MAX_LINE_BYTES is cut there and counted.
    `poll` gives {} while the file does not exist."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        self._file: BinaryIO | None = None
        self._inode: int | None = None
        self._cutter = LineCutter()  # holds an incomplete last line
        self._fifo: Drain | None = None  # the path is a named pipe

    @property
    def lines_cut(self) -> int:
        """Lines cut at the length limit so far."""
        return self._cutter.lines_cut + (self._fifo.lines_cut if self._fifo else 0)

    @property
    def dropped_lines(self) -> int:
        """Lines a named pipe dropped unread (its buffer was full); a file drops none."""
        return self._fifo.dropped_lines if self._fifo else 0

    def close(self) -> None:
        """Close the file (stop draining the named pipe)."""
        if self._fifo is not None:
            self._fifo.close()
            self._fifo = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read_lines(self) -> list[str] | None:
        """New complete lines, handling first open, rotation and truncation."""
        if self._file is None and self._fifo is None and not self._open(initial=True):
            return None
        if self._fifo is not None:
            return self._fifo.take()
        assert self._file is not None
        state = self._file_state(self._file)
        if state == "truncated":
            self._file.seek(0)
            self._cutter.reset()
        lines = self._read_new(self._file)
        if state == "rotated":  # the old file is finished: follow the new one from its start
            self.close()
            self._cutter.reset()
            if self._open(initial=False):
                assert self._file is not None
                lines += self._read_new(self._file)
        return lines

    def _open(self, *, initial: bool) -> bool:
        """Open the file; the first time, read the latest launch line and startup summary and
        start at the end. A named pipe is handed to a draining thread."""
        try:
            if stat.S_ISFIFO(os.stat(self.path).st_mode):
                path = self.path
                self._fifo = Drain(lambda: os.open(path, os.O_RDONLY), str(path), reopen=True)
                return True
            handle = open(self.path, "rb")  # kept open across polls
        except OSError:
            return False
        found = os.fstat(handle.fileno())
        self._file, self._inode = handle, found.st_ino
        if initial:  # up to the end as it is now: what is written meanwhile is new, and read
            self._scanner.feed(last_startup_lines(handle, end=found.st_size))
            handle.seek(found.st_size)
        return True

    def _file_state(self, handle: BinaryIO) -> str:
        """`rotated` (the path names another file), `truncated` (shrank below us) or `same`."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return "same"  # rotated away and not yet recreated: keep reading the old one
        if stat.st_ino != self._inode:
            return "rotated"
        return "truncated" if stat.st_size < handle.tell() else "same"

    def _read_new(self, handle: BinaryIO) -> list[str]:
        """New complete lines, read a chunk at a time, each cut at MAX_LINE_BYTES as it is read
        (the rest skipped, never held); at most MAX_READ_BYTES of lines and MAX_SCAN_BYTES read
        per poll, the rest at the next. A partial last line waits for its end."""
        lines: list[bytes] = []
        kept = scanned = 0
        while kept < MAX_READ_BYTES and scanned < MAX_SCAN_BYTES:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                break
            scanned += len(chunk)
            new = self._cutter.feed(chunk)
            kept += sum(map(len, new))
            lines += new
        return decode_lines(lines)
