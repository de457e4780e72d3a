"""Follow an SGLang log file like `tail -F` and turn its lines into signals (reference §9).

Parsing (`scan_lines`) is pure and separate from the file handling (`LogFollower`).
"""

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from sglang_tuner import signals as s

# <= v0.4.6 "Decode out of memory happened.", v0.4.7+ "KV cache pool is full. Retract requests.",
# SGLANG_TEST_RETRACT "Testing retraction."; then "#retracted_reqs: N" in every version.
_RETRACT_RE = re.compile(
    r"(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\."
    r"|Testing retraction\.) #retracted_reqs: (\d+)"
)
_DECODE_RE = re.compile(r"Decode batch(?: \[\d+\])?[.,] ")
_PREFILL_RE = re.compile(r"Prefill batch(?: \[\d+\])?[.,] ")
# A raw PyTorch OOM names no phase: it belongs to the batch the scheduler logged last.
_TORCH_OOM_RE = re.compile(r"torch\.(?:cuda\.)?OutOfMemoryError: CUDA out of memory")
_GRAPH_RE = re.compile(r"\b(?:cuda|cpu|npu|musa) graph: (True|False)")
_PREFILL_OOM_RE = re.compile(r"Prefill out of memory\. Try to lower")
_DECODE_OOM_RE = re.compile(
    r"Decode out of memory\. Try to lower|alloc_req_slots runs out of memory"
)
_MAX_TOKENS_RE = re.compile(r"\bmax_total_num_tokens=(\d+)")
_AVAILABLE_RE = re.compile(r"\bavailable_gpu_mem=([0-9.]+) GB")
_STARTUP_MARK = b"max_total_num_tokens="
MAX_READ_BYTES = 8 * 1024 * 1024  # per poll; the rest is read at the next poll


@dataclass(frozen=True, slots=True)
class LogCounts:
    """What a batch of log lines said."""

    retracted_reqs: int = 0
    prefill_oom: int = 0
    decode_oom: int = 0
    decode_lines: int = 0  # Decode batch lines that state the graph flag
    decode_without_graph: int = 0
    max_total_num_tokens: int | None = None  # from the last startup summary seen
    available_gpu_mem_gb: float | None = None
    # "prefill" or "decode": the phase a raw PyTorch OOM belongs to (parser state, not an event)
    last_batch: str | None = field(default=None, compare=False)


def scan_lines(lines: Iterable[str], counts: LogCounts | None = None) -> LogCounts:
    """Add the events of `lines` to `counts`."""
    result = counts or LogCounts()
    for line in lines:
        result = _scan_line(line, result)
    return result


def _scan_line(line: str, c: LogCounts) -> LogCounts:
    """One line's contribution."""
    if match := _RETRACT_RE.search(line):
        return replace(c, retracted_reqs=c.retracted_reqs + int(match.group(1)))
    if _PREFILL_RE.search(line):
        return replace(c, last_batch="prefill")
    if _TORCH_OOM_RE.search(line):
        # No batch since startup: the first forward of a process is a prefill.
        if c.last_batch in ("prefill", None):
            return replace(c, prefill_oom=c.prefill_oom + 1)
        return replace(c, decode_oom=c.decode_oom + 1)
    if _DECODE_RE.search(line):
        c = replace(c, last_batch="decode")
        graph = _GRAPH_RE.search(line)
        if graph is None:  # <= v0.4.6.post3 prints no graph flag
            return c
        off = int(graph.group(1) == "False")
        return replace(
            c, decode_lines=c.decode_lines + 1, decode_without_graph=c.decode_without_graph + off
        )
    if _PREFILL_OOM_RE.search(line):
        return replace(c, prefill_oom=c.prefill_oom + 1)
    if _DECODE_OOM_RE.search(line):
        return replace(c, decode_oom=c.decode_oom + 1)
    if match := _MAX_TOKENS_RE.search(line):
        available = _AVAILABLE_RE.search(line)  # absent before v0.4.7
        return replace(
            c,
            last_batch=None,  # a new process
            max_total_num_tokens=int(match.group(1)),
            available_gpu_mem_gb=float(available.group(1)) if available else None,
        )
    return c


def to_signals(counts: LogCounts, seconds: float | None) -> dict[str, float]:
    """Signals for the lines read over `seconds` (None: the first poll, no rate)."""
    values: dict[str, float] = {
        s.PREFILL_OOM_EVENTS: float(counts.prefill_oom),
        s.DECODE_OOM_EVENTS: float(counts.decode_oom),
    }
    if seconds is not None and seconds > 0:
        values[s.RETRACTIONS_PER_MINUTE] = counts.retracted_reqs * 60.0 / seconds
    if counts.decode_lines:
        values[s.CUDA_GRAPH_FALSE_RATIO] = counts.decode_without_graph / counts.decode_lines
    if counts.max_total_num_tokens is not None:
        values[s.MAX_TOTAL_NUM_TOKENS] = float(counts.max_total_num_tokens)
    if counts.available_gpu_mem_gb is not None:
        values[s.STARTUP_AVAILABLE_GPU_MEM_GB] = counts.available_gpu_mem_gb
    return values


def last_startup_line(handle: BinaryIO, chunk_bytes: int = MAX_READ_BYTES) -> str | None:
    """The last startup summary line (`max_total_num_tokens=…`) from here to the end of `handle`."""
    found: bytes | None = None
    carry = b""
    while chunk := handle.read(chunk_bytes):
        complete, _, carry = (carry + chunk).rpartition(b"\n")
        found = _last_marked_line(complete) or found
    found = _last_marked_line(carry) or found
    return found.decode("utf-8", errors="replace") if found else None


def _last_marked_line(data: bytes) -> bytes | None:
    """The last line of `data` holding the startup mark."""
    at = data.rfind(_STARTUP_MARK)
    if at < 0:
        return None
    end = data.find(b"\n", at)
    return data[data.rfind(b"\n", 0, at) + 1 : end if end >= 0 else len(data)]


class LogFollower:
    """Follows one log file across rotation and truncation, like `tail -F`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: BinaryIO | None = None
        self._inode: int | None = None
        self._pending = b""  # an incomplete last line
        self._startup = LogCounts()  # startup facts persist across polls
        self._last_poll: float | None = None

    def poll(self, now: float) -> dict[str, float]:
        """Signals for the lines appended since the last poll; {} while the file does not exist."""
        lines = self._read_new_lines()
        if lines is None:
            return {}
        counts = scan_lines(lines, self._startup)
        self._startup = LogCounts(
            max_total_num_tokens=counts.max_total_num_tokens,
            available_gpu_mem_gb=counts.available_gpu_mem_gb,
            last_batch=counts.last_batch,
        )
        seconds = None if self._last_poll is None else now - self._last_poll
        self._last_poll = now
        return to_signals(counts, seconds)

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read_new_lines(self) -> list[str] | None:
        """New complete lines, handling first open, rotation and truncation."""
        if self._file is None and not self._open(initial=True):
            return None
        assert self._file is not None
        state = self._file_state(self._file)
        if state == "truncated":
            self._file.seek(0)
            self._pending = b""
        lines = self._split(self._file.read(MAX_READ_BYTES))
        if state == "rotated":  # the old file is finished: follow the new one from its start
            self.close()
            self._pending = b""
            if self._open(initial=False):
                assert self._file is not None
                lines += self._split(self._file.read(MAX_READ_BYTES))
        return lines

    def _open(self, *, initial: bool) -> bool:
        """Open the file; the first time, read the startup summary and start at the end."""
        try:
            handle = open(self.path, "rb")  # kept open across polls
        except OSError:
            return False
        self._file, self._inode = handle, os.fstat(handle.fileno()).st_ino
        if initial:
            line = last_startup_line(handle)
            if line is not None:
                self._startup = scan_lines([line])
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

    def _split(self, data: bytes) -> list[str]:
        """Complete lines of pending + data; keeps the trailing partial line for later."""
        head, sep, self._pending = (self._pending + data).rpartition(b"\n")
        return head.decode("utf-8", errors="replace").splitlines() if sep else []
