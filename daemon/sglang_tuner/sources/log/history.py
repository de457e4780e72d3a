"""A whole log read as history: one sample of signals every `interval_seconds` of the log's own
time, as a scrape would have taken them while the server ran.

The time of a sample is the log's (its `[YYYY-MM-DD HH:MM:SS ...]` prefixes, read as UTC, which
is how SGLang's `configure_logger` prints local time: only differences matter here). A log
without prefixes (lines pasted without them) advances one second per batch line: SGLang prints a
`Decode batch` line about every 40 decode steps. The flags come from the launch line
(`server_args=ServerArgs(...)`) and the startup summary, as `/server_info` would give them. A gap
in the log (the server idle or down) is
not filled with empty samples: the next sample is taken where the lines resume.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.sources.log.follow import to_signals
from sglang_tuner.sources.log.lines import LogScanner, line_seconds
from sglang_tuner.sources.server_info import parse_server_info

_EPOCH = date(1970, 1, 1).toordinal() * 86400.0  # line_seconds counts from year 1
_STAMP = 20  # "[2025-06-01 10:00:00": the part of a prefix that changes once a second


@dataclass(frozen=True, slots=True)
class LogSample:
    """The signals of one interval of a log, at the interval's end (Unix seconds)."""

    ts: float
    values: dict[str, float]
    lines: int  # lines read in the interval
    config: ServerConfig | None = None  # a process started: its launch arguments


class _Clock:
    """The log time of each line: parsed once per second of prefixes, else one tick a batch."""

    def __init__(self) -> None:
        self.now: float | None = None
        self._stamp = ""
        self._ticks = 0.0
        self.timed = False  # a prefixed line was seen

    def at(self, line: str) -> float | None:
        stamp = line[:_STAMP]
        if stamp == self._stamp:
            return self.now
        seconds = line_seconds(line) if line.startswith("[") else None
        if seconds is not None:
            self._stamp, self.timed = stamp, True
            self.now = seconds - _EPOCH if seconds > 86400.0 else seconds
        elif not self.timed and ("Decode batch" in line or "Prefill batch" in line):
            self._ticks += 1.0
            self.now = self._ticks
        return self.now


def log_samples(lines: Iterable[str], interval_seconds: float) -> Iterator[LogSample]:
    """The log's samples, oldest first; the last one ends at the log's last line."""
    scanner, clock = LogScanner(), _Clock()
    read = scanner.read_line
    end: float | None = None  # the end of the interval being read
    count = 0
    for line in lines:
        now = clock.at(line)
        if now is not None:
            if end is None:
                end = now + interval_seconds
            elif now >= end:
                yield _sample(scanner, end, interval_seconds, count)
                count = 0
                # a gap: the next interval starts at this line, not at the old end
                end = (
                    end + interval_seconds
                    if now < end + interval_seconds
                    else now + interval_seconds
                )
        read(line)
        count += 1
    scanner.finish()
    if count:
        yield _sample(scanner, clock.now if clock.now is not None else 0.0, interval_seconds, count)


def _sample(scanner: LogScanner, ts: float, interval_seconds: float, lines: int) -> LogSample:
    scanner.crash.flush_stale()  # other ranks' copies of a traceback had their interval
    counts = scanner.take()
    config = None if counts.server_args is None else parse_server_info(counts.server_args)
    return LogSample(ts, to_signals(counts, interval_seconds), lines, config)
