"""A log's bytes read as they come, off the event loop, into a bounded buffer of lines.

A pipe (`sglang … | sglang-tuner run`, a `log_command`, a named pipe as `log_file`) is drained
continuously by a thread of its own, so the server writing it never waits on us: read once per
scrape, a 64 KiB pipe filled in a few seconds and blocked SGLang's own log writes for up to
4.9 s. What the scrapes do not take in time is dropped oldest first, and counted. A line longer
than MAX_LINE_BYTES is cut there, the rest of it skipped, and counted: one line is never held
whole (a 200 MB line once took 665 MiB and 14 s of the loop).
"""

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 * 1024  # SGLang's longest own line, the launch line, is ~10 KB
MAX_BUFFER_BYTES = 16 * 1024 * 1024  # unread lines held; past it the oldest go
CHUNK_BYTES = 64 * 1024
REPORT_SECONDS = 60.0  # drops and cuts are logged at most this often


def decode_lines(lines: Iterable[bytes]) -> list[str]:
    """Lines as text, split further where a line holds a carriage return or another line
    boundary (a progress bar redraws its line with "\\r"), as `str.splitlines` splits."""
    return [part for line in lines for part in line.decode("utf-8", errors="replace").splitlines()]


class LineCutter:
    """Bytes in, complete lines out, none longer than MAX_LINE_BYTES (cut, and counted)."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.lines_cut = 0
        self._pending = bytearray()
        self._skipping = False  # the rest of a cut line, up to its newline

    def reset(self) -> None:
        """Forget the unfinished line (the file was truncated or rotated)."""
        self._pending.clear()
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes (the pending start of a line first)."""
        lines: list[bytes] = []
        start, size = 0, len(data)
        while start < size:
            end = data.find(b"\n", start)
            self._add_part(data, start, size if end == -1 else end, lines)
            if end == -1:
                break
            if self._skipping:  # the cut line ends here; its head went out when it was cut
                self._skipping = False
            else:
                lines.append(bytes(self._pending))
            self._pending.clear()
            start = end + 1
        return lines

    def _add_part(self, data: bytes, start: int, stop: int, lines: list[bytes]) -> None:
        """data[start:stop], part of one line, to the pending line: cut there (its head given
        out, the rest skipped) when the line grows past the limit."""
        if self._skipping:
            return
        room = self.max_line_bytes - len(self._pending)
        if stop - start <= room:
            self._pending += data[start:stop]
            return
        self._pending += data[start : start + room]
        lines.append(bytes(self._pending))
        self._pending.clear()
        self.lines_cut += 1
        self._skipping = True


class Drain:
    """A thread reading one file descriptor into a bounded buffer of lines, until end of file.

    `opener` gives a descriptor the drain owns and closes (called in the thread: opening a
    named pipe waits for its writer; a pipe someone else holds is read through `os.dup` of it,
    so that their closing it never hands its number to another file under our reads); with
    `reopen` the thread opens it again at each end of file (a named pipe's next writer). `take`
    hands over the lines read so far, decoded.
    """

    def __init__(self, opener: Callable[[], int], name: str, *, reopen: bool = False) -> None:
        self.name = name
        self.dropped_lines = 0
        self.eof = False
        self._opener, self._reopen = opener, reopen
        self._cutter = LineCutter()
        self._lines: deque[bytes] = deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._closed = False
        self._reported = (0, 0, -REPORT_SECONDS)  # drops, cuts, when
        self._thread = threading.Thread(target=self._run, name=f"log {name}", daemon=True)
        self._thread.start()

    @property
    def lines_cut(self) -> int:
        """Lines cut at MAX_LINE_BYTES so far."""
        return self._cutter.lines_cut

    def take(self) -> list[str]:
        """The lines read since the last take, oldest first."""
        with self._lock:
            lines, self._lines, self._bytes = self._lines, deque(), 0
        self._report()
        return decode_lines(lines)

    @property
    def done(self) -> bool:
        """The stream ended and every line of it was taken."""
        return self.eof and not self._lines

    def close(self) -> None:
        """Stop reading (the thread ends at its next read; a descriptor it opened it closes)."""
        self._closed = True

    def _run(self) -> None:
        while not self._closed:
            try:
                fd = self._opener()
            except OSError as exc:
                logger.warning("log %s cannot be opened: %s", self.name, exc.strerror)
                break
            self._read_all(fd)
            if not self._reopen:
                break
        self.eof = True

    def _read_all(self, fd: int) -> None:
        try:
            os.set_blocking(fd, True)
            while not self._closed:
                chunk = os.read(fd, CHUNK_BYTES)
                if not chunk:
                    break
                self._add(self._cutter.feed(chunk))
        except OSError:
            pass  # a read error: the end of this stream
        finally:
            os.close(fd)

    def _add(self, lines: list[bytes]) -> None:
        if not lines:
            return
        with self._lock:
            self._lines.extend(lines)
            self._bytes += sum(len(line) for line in lines)
            while self._bytes > MAX_BUFFER_BYTES:
                self._bytes -= len(self._lines.popleft())
                self.dropped_lines += 1

    def _report(self) -> None:
        """Log new drops and cuts, at most every REPORT_SECONDS."""
        drops, cuts, when = self._reported
        now = time.monotonic()
        if (self.dropped_lines, self.lines_cut) == (drops, cuts) or now - when < REPORT_SECONDS:
            return
        self._reported = (self.dropped_lines, self.lines_cut, now)
        logger.warning(
            "log %s: %d line(s) dropped unread (more than %d MiB waiting), %d cut at %d KiB, "
            "since start", self.name, self.dropped_lines, MAX_BUFFER_BYTES >> 20, self.lines_cut,
            MAX_LINE_BYTES >> 10,
        )  # fmt: skip
