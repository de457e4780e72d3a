"""A log shown newest first, put back in the order it was written.

Log viewers list the newest line first, by default or on request: Grafana's logs panel and
Explore ("Newest first"), Kibana's Discover (sorted on the time, newest first), a cloud
console's log list sorted descending, `journalctl -r`.
Pasted from one, a log reads backwards: its windows run back in time, and a crash's traceback
ends before it starts, so the exception that ended the server comes first and reads as old news.

A log is newest first where its times run backwards: of the steps between the distinct times its
lines show, at least `_BACKWARD_STEPS` go back and the backward ones outnumber the forward ones
`_BACKWARD_SHARE` to 1, and its last time is older than its first (several processes interleaved
step back and forth, but their times still move forward). With fewer steps than that to tell (an
excerpt, a log without times), where its tracebacks run backwards: more of them end in
`Traceback (most recent call last):` under their first frame than start with it.

Put back in order by entries or by lines: a viewer that keeps a multi-line entry whole (a
traceback logged in one record) shows each entry's lines in order, only the entries reversed;
one that stores a line a record (a container runtime's, journald's) reverses every line. An
entry is a line with a time and the lines without one after it; the log is read by entries
where more of its tracebacks run forward than backwards, by lines otherwise. Either way it is
put back from its last line to its first as they come (`put_back`): a file read from its end
is never held whole.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

Line = TypeVar("Line")
_BACKWARD_STEPS = 2
_BACKWARD_SHARE = 3
_HEADER = "Traceback (most recent call last):"


@dataclass(frozen=True, slots=True)
class Order:
    """How a log listed newest first is put back: `why` said once, `by_entries` where its
    viewer kept each multi-line record whole."""

    why: str
    by_entries: bool

    @property
    def note(self) -> str:
        how = "read entry by entry, oldest first" if self.by_entries else "read oldest first"
        return f"{self.why}: {how}"


def order_of(
    lines: Sequence[Line], time_of: Callable[[Line], float | None], text_of: Callable[[Line], str]
) -> Order | None:
    """How `lines` (a log's first lines, as listed) are put back, None where they are in the
    order they were written: `time_of` gives a line's time (None: it shows none), `text_of`
    its text."""
    steps = _steps([t for line in lines if (t := time_of(line)) is not None])
    forward, backward = _tracebacks(lines, text_of)
    if steps[0] + steps[1] >= _BACKWARD_STEPS:
        if not _runs_backwards(*steps):
            return None
        why = "newest first (its times run backwards)"
    elif backward > forward:
        why = "newest first (its tracebacks end where they start)"
    else:
        return None
    return Order(why, by_entries=forward > backward)


def put_back(
    last_first: Iterable[Line], time_of: Callable[[Line], float | None], by_entries: bool
) -> Iterator[Line]:
    """The lines of a log listed newest first, given from its last line to its first (a file
    read from its end, or the list reversed), in the order they were written: as they come, or
    by entries, each entry's lines in their own order (an entry: a line with a time and the
    lines without one after it, as listed)."""
    if not by_entries:
        yield from last_first
        return
    held: list[Line] = []  # an entry's lines without a time, read before the line that has one
    for line in last_first:
        if time_of(line) is None:
            held.append(line)
            continue
        yield line
        yield from reversed(held)
        held.clear()
    yield from reversed(held)  # lines before the first with a time: their entry began earlier


def _steps(times: list[float]) -> tuple[int, int, float]:
    """(forward, backward, net): the steps between distinct times in line order, and how far
    the last time is past the first."""
    ups = downs = 0
    for before, after in zip(times, times[1:], strict=False):
        if after > before:
            ups += 1
        elif after < before:
            downs += 1
    return ups, downs, (times[-1] - times[0]) if times else 0.0


def _runs_backwards(ups: int, downs: int, net: float) -> bool:
    """Whether the times go back more than forward (`_BACKWARD_*`) and end before they start."""
    return downs >= _BACKWARD_STEPS and downs >= _BACKWARD_SHARE * ups and net < 0


def _tracebacks(lines: Sequence[Line], text_of: Callable[[Line], str]) -> tuple[int, int]:
    """(forward, backward): the traceback headers followed by a frame, and those under one."""
    forward = backward = 0
    texts = [text_of(line).strip() for line in lines]
    for i, text in enumerate(texts):
        if not text.endswith(_HEADER):
            continue
        if i + 1 < len(texts) and texts[i + 1].startswith('File "'):
            forward += 1
        elif i > 0 and texts[i - 1].startswith('File "'):
            backward += 1
    return forward, backward
