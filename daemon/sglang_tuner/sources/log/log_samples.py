"""A whole log read as history: one sample of signals every `interval_seconds` of the log's own
time, as a scrape would have taken them while the server ran.

Each line's time is the one its wrapper stamped (`kubectl logs --timestamps`, CRI, docker -t,
journalctl, JSON lines: `prefix.py`), else SGLang's own `[YYYY-MM-DD HH:MM:SS ...]` prefix, read
as UTC (SGLang prints local time: only differences matter here). A time-only prefix
(`[15:54:17]`, before SGLang 0.4) is dated from the log's other dates, else from the end the
caller gives (a file's modification time), counting the days past each midnight; with neither,
its times count from the first line's day. A log with no time at all (lines pasted without
prefixes, or SGLang 0.1.x-0.2.13's, which printed none) is judged by line order: one second per
batch line of any version (SGLang prints a decode batch line about every 40 decode steps),
ending at the given end. A log listed newest first (a log viewer's order, `journalctl -r`) is
read oldest first (`reading_order.py`): a file from its end, a stream held whole. The flags come
from the launch line (`server_args=ServerArgs(...)`) and the startup summary, as `/server_info`
would give them. A gap in the log (the server idle or down) is not filled with empty samples:
the next sample is taken where the lines resume.
"""

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from itertools import chain, islice

from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.sources.log.follow import crash_reports, to_signals
from sglang_tuner.sources.log.lines import LogScanner, is_batch_line, line_seconds
from sglang_tuner.sources.log.prefix import unwrap_lines
from sglang_tuner.sources.log.reading_order import order_of, put_back
from sglang_tuner.sources.server_info import parse_server_info

_EPOCH = date(1970, 1, 1).toordinal() * 86400.0  # line_seconds counts from year 1
_STAMP = 20  # "[2025-06-01 10:00:00": the part of a prefix that changes once a second
_DAY = 86400.0
_Line = tuple[str, float | None, str]  # SGLang's text, its wrapper's time, its stream
HEAD_LINES = 5000  # read ahead to learn how the log tells time before its first sample


@dataclass(frozen=True, slots=True)
class LogSample:
    """The signals of one interval of a log, at the interval's end (Unix seconds)."""

    ts: float
    values: dict[str, float]
    lines: int  # lines read in the interval
    config: ServerConfig | None = None  # a process started: its launch arguments
    crashes: tuple[CrashReport, ...] = ()  # the crashes of the interval, said in words


class _Clock:
    """The log time of each line: its wrapper's stamp, else SGLang's prefix (parsed once per
    second of prefixes), else one tick a batch line after `start`."""

    def __init__(self, day: float | None, start: float) -> None:
        self.now: float | None = None
        self.start = start  # where line order starts, for a log without time
        self.day = day  # Unix seconds of the midnight a time-only stamp is read on
        self._stamp = ""
        self._ticks = 0.0
        self.timed = False  # a line with a time was seen

    def at(self, text: str, ts: float | None) -> float | None:
        if ts is not None:
            self.timed, self.now, self.day = True, ts, ts - ts % _DAY
            return ts
        stamp = text[:_STAMP]
        if stamp == self._stamp:
            return self.now
        seconds = line_seconds(text) if text.startswith("[") else None
        if seconds is not None:
            self._stamp, self.timed = stamp, True
            self.now = self._dated(seconds - _EPOCH) if seconds > _DAY else self._on_day(seconds)
        elif not self.timed and is_batch_line(text):
            self._ticks += 1.0
            self.now = self.start + self._ticks
        return self.now

    def _dated(self, ts: float) -> float:
        self.day = ts - ts % _DAY
        return ts

    def _on_day(self, seconds: float) -> float:
        """A time of day on the current day, or the next once it runs backwards by half a day
        (midnight passed)."""
        if self.day is None:
            self.day = 0.0
        ts = self.day + seconds
        if self.now is not None and ts < self.now - _DAY / 2:
            self.day += _DAY
            ts += _DAY
        return ts


class LogHistory:
    """A log's samples (`samples()`), and then how its time was read (`note`), how many lines
    and how much log time it held.

    `end_ts`: where the log ends when it does not say, `end_from` what that time is (the
    file's modification time, or when standard input was read); `total_bytes`: the log's size,
    to place a long log without time; `last_first`: the same log's lines from its last to its
    first (a file read from its end), read instead of holding a log listed newest first whole.
    """

    def __init__(
        self,
        lines: Iterable[str],
        interval_seconds: float,
        end_ts: float | None = None,
        total_bytes: int | None = None,
        end_from: str = "the end given",
        last_first: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self._source = iter(lines)
        self._last_first = last_first
        self.interval_seconds = interval_seconds
        self.end_ts = end_ts
        self.total_bytes = total_bytes
        self.end_from = end_from
        self.lines = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.note: str | None = None  # how the time was read, when not from full stamps

    def samples(self) -> Iterator[LogSample]:
        """The log's samples, oldest first; the last one ends at the log's last line."""
        year = time.gmtime(self.end_ts).tm_year if self.end_ts is not None else None
        head = list(unwrap_lines(islice(self._source, HEAD_LINES), year))
        rest: Iterable[_Line] = unwrap_lines(self._source, year)
        order = order_of(head, _line_time, _line_text)
        if order is not None:  # listed newest first: put back from its last line
            if self._last_first is not None:
                last_first = _unwrapped_last_first(self._last_first(), year)
            else:  # a stream read once: held whole
                last_first = reversed([*head, *rest])
            lines = put_back(last_first, _line_time, order.by_entries)
            head, rest = list(islice(lines, HEAD_LINES)), lines
        clock = self._clock(head)
        if order is not None:
            self.note = order.note if self.note is None else f"{order.note}; {self.note}"
        scanner = LogScanner()
        read, interval = scanner.read_line, self.interval_seconds
        end: float | None = None  # the end of the interval being read
        count = 0
        for text, ts, stream in chain(head, rest):
            now = clock.at(text, ts)
            if now is not None:
                if end is None:
                    end, self.first_ts = now + interval, now
                elif now >= end:
                    yield _sample(scanner, end, interval, count)
                    count = 0
                    # a gap: the next interval starts at this line, not at the old end
                    end = end + interval if now < end + interval else now + interval
            read(text, stream)
            count += 1
            self.lines += 1
        scanner.finish()
        self.last_ts = clock.now if clock.now is not None else clock.start
        if count:
            yield _sample(scanner, self.last_ts, interval, count)

    def _clock(self, head: list[_Line]) -> _Clock:
        """A clock for the log whose first lines are `head`, and the note on how it reads time."""
        dated = [s for text, ts, _ in head if (s := _dated_seconds(text, ts)) is not None]
        times = [s for text, ts, _ in head if ts is None and (s := _time_of_day(text)) is not None]
        if dated:
            return _Clock(dated[0] - dated[0] % _DAY, 0.0)
        if times:
            return _Clock(self._day_for(times[0]), 0.0)
        start = 0.0
        if self.end_ts is not None:
            start = self.end_ts - self._ticks(head)
        self.note = "no timestamps: judged by line order (one second per batch line)"
        if self.end_ts is not None:
            self.note += f", ending at {self._end()}"
        return _Clock(None, start)

    def _day_for(self, first: float) -> float | None:
        """The day of a log with time-only stamps, the first of them `first` seconds into it:
        the end's day (the day before if the first stamp is later in the day than the end)."""
        if self.end_ts is None:
            self.note = "time-only stamps and no date: times count from the first line's day"
            return None
        day = self.end_ts - self.end_ts % _DAY
        day -= _DAY if first > self.end_ts - day else 0.0
        when = time.strftime("%Y-%m-%d", time.gmtime(day))
        self.note = f"time-only stamps dated {when}, the day of {self._end()}"
        return day

    def _end(self) -> str:
        assert self.end_ts is not None
        return (
            f"{self.end_from} ({time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(self.end_ts))})"
        )

    def _ticks(self, head: list[_Line]) -> float:
        """The batch lines of a log without time: counted in `head`, scaled to the whole log's
        size when the head is not all of it."""
        ticks = float(sum(1 for t, _, _ in head if is_batch_line(t)))
        if len(head) < HEAD_LINES or not self.total_bytes:
            return ticks
        head_bytes = sum(len(text) + 1 for text, _, _ in head) or 1
        return ticks * max(1.0, self.total_bytes / head_bytes)


def log_samples(
    lines: Iterable[str], interval_seconds: float, end_ts: float | None = None
) -> Iterator[LogSample]:
    """The log's samples, oldest first (`LogHistory(...).samples()`)."""
    return LogHistory(lines, interval_seconds, end_ts).samples()


def _dated_seconds(text: str, ts: float | None) -> float | None:
    """Unix seconds of a line with a full date (its wrapper's or SGLang's), else None."""
    if ts is not None:
        return ts
    seconds = line_seconds(text) if text.startswith("[") else None
    return seconds - _EPOCH if seconds is not None and seconds > _DAY else None


_BLOCK = 4096  # raw lines read back at a time, unwrapped in the order they were listed


def _unwrapped_last_first(raw: Iterable[str], year: int | None) -> Iterator[_Line]:
    """`unwrap_lines` of a log given from its last line to its first, from its last to its
    first: each block of lines is unwrapped in the order it was listed (a paste's pieces and a
    joined line's parts come in the order they were written), then given back reversed."""
    source = iter(raw)
    while block := list(islice(source, _BLOCK)):
        block.reverse()
        yield from reversed(list(unwrap_lines(block, year)))


def _line_time(line: _Line) -> float | None:
    """A line's time, dated or of the day (None: it shows none)."""
    text, ts, _ = line
    dated = _dated_seconds(text, ts)
    return dated if dated is not None else _time_of_day(text)


def _line_text(line: _Line) -> str:
    return line[0]


def _time_of_day(text: str) -> float | None:
    """Seconds into the day of a time-only SGLang prefix, else None."""
    seconds = line_seconds(text) if text.startswith("[") else None
    return seconds if seconds is not None and seconds <= _DAY else None


def _sample(scanner: LogScanner, ts: float, interval_seconds: float, lines: int) -> LogSample:
    scanner.crash.flush_stale()  # other ranks' copies of a traceback had their interval
    counts = scanner.take()
    config = None if counts.server_args is None else parse_server_info(counts.server_args)
    signals = to_signals(counts, interval_seconds)
    return LogSample(ts, signals, lines, config, crash_reports(counts, ts))
