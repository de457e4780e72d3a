"""Per-target ring-buffer windows over canonical signals, and the aggregates tuning rules use.

"Frequently" is defined here, once (`frequently`): a condition held in at least
`frequently_ratio` of the window's considered samples (those where every signal the condition
reads is present and the gate, if any, holds).
"""

import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window_histogram import is_bucket_signal

Row = Mapping[str, float]
NAN = math.nan
_EVERY_ROW, _MISSING = object(), object()  # keys of a view's memo beside signal names


# Not frozen, for speed: built 60,000 times a round at 10,000 targets, and a frozen dataclass's
# __init__ takes four times as long. Never changed once built (nothing assigns to its fields).
@dataclass(slots=True)
class Frequency:
    """How often a condition held over a window: the share, out of how many samples, and verdict."""

    ratio: float
    considered: int
    held: bool  # "frequently": considered > 0 and ratio >= frequently_ratio


def frequently(
    view: "WindowView",
    condition: Callable[[Row], bool],
    signals: Iterable[str],
    frequently_ratio: float,
    gate: Callable[[Row], bool] | None = None,
) -> Frequency:
    """The one definition of "frequently": `condition` held in >= `frequently_ratio` of the
    samples carrying every one of `signals` (and passing `gate`)."""
    rows = [r for r in view.rows(signals) if gate is None or gate(r)]
    return frequency_of(sum(1 for r in rows if condition(r)), len(rows), frequently_ratio)


def frequency_of(held: int, considered: int, frequently_ratio: float) -> Frequency:
    """`held` of `considered` samples showed the condition: frequently or not (the one place
    the comparison is made)."""
    ratio = held / considered if considered else 0.0
    return Frequency(ratio, considered, considered > 0 and ratio >= frequently_ratio)


def capacity_for(window_seconds: float, interval_seconds: float) -> int:
    """Ring size holding `window_seconds` of samples taken every `interval_seconds`, plus slack."""
    return max(2, math.ceil(window_seconds / interval_seconds) + 2)


class Window:
    """Fixed-size ring of (ts, signal values); O(1) append, memory bounded by `capacity`."""

    __slots__ = ("capacity", "_ts", "_columns", "_next", "_size")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ts = array("d", [NAN]) * capacity
        self._columns: dict[str, array[float]] = {}
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, snapshot: Snapshot) -> None:
        """Store one snapshot, overwriting the oldest sample when the ring is full."""
        i = self._next
        self._ts[i] = snapshot.ts
        values = snapshot.values
        for name, column in self._columns.items():
            column[i] = values.get(name, NAN)
        for name in values.keys() - self._columns.keys():
            # a carried histogram's counts are whole numbers: 4 bytes each hold them exactly
            column = array("f" if is_bucket_signal(name) else "d", [NAN]) * self.capacity
            column[i] = values[name]
            self._columns[name] = column
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def keep_since(self, ts: float) -> None:
        """Forget the samples older than `ts` (a server restarted with new flags at `ts`)."""
        latest = max((t for t in self._ts if t == t), default=ts)
        view = self.view(latest, latest - ts + 1.0)
        kept = [(t, k) for k, t in enumerate(view.ts) if t >= ts]
        self.clear()
        for t, k in kept:
            values = {n: col[k] for n, col in view.columns.items() if col[k] == col[k]}
            self.append(Snapshot("", t, values))

    def resized(self, capacity: int) -> "Window":
        """A window of `capacity` holding the newest samples of this one (a new scrape interval
        or rule window on reload)."""
        out = Window(capacity)
        view = self.view(math.inf, math.inf)
        for k, t in enumerate(view.ts[-capacity:], start=max(0, len(view.ts) - capacity)):
            values = {n: col[k] for n, col in view.columns.items() if col[k] == col[k]}
            out.append(Snapshot("", t, values))
        return out

    def clear(self) -> None:
        """Forget every sample (after a server restart with new flags, say)."""
        self._columns.clear()
        self._next = 0
        self._size = 0

    def view(self, now: float, window_seconds: float) -> "WindowView":
        """Samples with `now - window_seconds < ts <= now`, oldest first."""
        start = (self._next - self._size) % self.capacity
        order = [(start + k) % self.capacity for k in range(self._size)]
        since = -math.inf if window_seconds == math.inf else now - window_seconds  # inf - inf: nan
        idx = [i for i in order if since < self._ts[i] <= now]
        ts = [self._ts[i] for i in idx]
        columns = {name: [col[i] for i in idx] for name, col in self._columns.items()}
        return WindowView(ts, columns, window_seconds)


@dataclass(frozen=True, slots=True)
class WindowView:
    """An immutable copy of a window's live part; every aggregate skips missing (NaN) values."""

    ts: Sequence[float]
    columns: Mapping[str, Sequence[float]]
    window_seconds: float
    # Rules share one view; several read the same rows and values, so compute them once.
    _memo: dict[object, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def count(self) -> int:
        """Number of samples (scrapes) in the view."""
        return len(self.ts)

    @property
    def span_seconds(self) -> float:
        """Time between the oldest and newest sample."""
        return self.ts[-1] - self.ts[0] if self.ts else 0.0

    def values(self, signal: str) -> list[float]:
        """The signal's present values, oldest first (callers must not modify the list)."""
        found = self._memo.get(signal)
        if found is None:
            found = self._memo[signal] = [v for v in self.columns.get(signal, ()) if v == v]
        return found

    def cached(self, key: object, compute: Callable[[], Any]) -> Any:
        """`compute()`, once per view and `key` (an aggregate several readers ask for)."""
        found = self._memo.get(key, _MISSING)
        if found is _MISSING:
            found = self._memo[key] = compute()
        return found

    def present(self, signal: str) -> int:
        """How many samples carry the signal."""
        return len(self.values(signal))

    def rows(self, signals: Iterable[str]) -> list[dict[str, float]]:
        """Samples where every one of `signals` is present, as dicts of each sample's present
        values (shared between callers: read only)."""
        names = tuple(signals)
        found = self._memo.get(names)
        if found is None:
            found = self._memo[names] = self._rows(names)
        return found

    def _rows(self, names: tuple[str, ...]) -> list[dict[str, float]]:
        if any(name not in self.columns for name in names):
            return []
        every = self._every_row()
        missing = set().union(*(self._missing(name) for name in names))
        if not missing:
            return every  # the common case: no copy, no new dict
        return [row for i, row in enumerate(every) if i not in missing]

    def _every_row(self) -> list[dict[str, float]]:
        """One dict per sample with all of its present values, built once per view: rules
        ask for rows of a few signals each, a dozen times per judgement, and building a dict
        per sample for each of them was a sixth of judging."""
        found = self._memo.get(_EVERY_ROW)
        if found is None:
            # a carried histogram's buckets are no signal a rule reads (`window_histogram`)
            names = tuple(n for n in self.columns if not is_bucket_signal(n))
            # the columns have the view's length: zip needs no length check
            columns = zip(*(self.columns[n] for n in names), strict=False)
            found = [dict(zip(names, vals, strict=False)) for vals in columns]
            for name in names:
                for i in self._missing(name):
                    del found[i][name]
            self._memo[_EVERY_ROW] = found
        return found

    def _missing(self, signal: str) -> list[int]:
        """The samples where `signal` is missing (NaN)."""
        key = (_MISSING, signal)
        found = self._memo.get(key)
        if found is None:
            # `v != v` is True only for NaN: cheaper than math.isnan per value
            column = self.columns.get(signal, ())
            found = self._memo[key] = [i for i, v in enumerate(column) if v != v]  # noqa: PLR0124
        return found

    def fraction(
        self,
        predicate: Callable[[Row], bool],
        signals: Iterable[str],
        gate: Callable[[Row], bool] | None = None,
    ) -> tuple[float, int]:
        """(share of considered samples where `predicate` held, number considered).

        A sample is considered when all `signals` are present and `gate` (if any) holds.
        """
        rows = [r for r in self.rows(signals) if gate is None or gate(r)]
        if not rows:
            return 0.0, 0
        return sum(1 for r in rows if predicate(r)) / len(rows), len(rows)

    def quantile(self, signal: str, q: float) -> float | None:
        """Nearest-rank quantile of the signal's present values, or None when absent."""
        vals = sorted(self.values(signal))
        if not vals:
            return None
        return vals[min(len(vals) - 1, max(0, math.ceil(q * len(vals)) - 1))]

    def mean(self, signal: str) -> float | None:
        """Mean of present values, or None."""
        vals = self.values(signal)
        return sum(vals) / len(vals) if vals else None

    def total(self, signal: str) -> float | None:
        """Sum of present values (e.g. events per snapshot), or None."""
        vals = self.values(signal)
        return sum(vals) if vals else None

    def max(self, signal: str) -> float | None:
        """Largest present value, or None."""
        vals = self.values(signal)
        return max(vals) if vals else None

    def min(self, signal: str) -> float | None:
        """Smallest present value, or None."""
        vals = self.values(signal)
        return min(vals) if vals else None

    def last(self, signal: str) -> float | None:
        """Most recent present value, or None."""
        vals = self.values(signal)
        return vals[-1] if vals else None
